"""`spark-otel timeouts` on the article's store (Appendix D), and `cells --budget` on a store of
live cells: tables, --json, and what each says when the data cannot answer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.support.article import D_EVAL

from spark_otel.cli import main
from spark_otel.model import Cell
from spark_otel.store import Store

NEMOTRON = "nemotron-cards eval, 4 workers on nemotron"


def test_timeouts_names_the_nemotron_eval_for_the_serial_evals_three_timeouts(
    article_store: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["timeouts", "--store", article_store, "--eval", D_EVAL]) == 0
    out = capsys.readouterr().out
    title = f"{D_EVAL}: 3 cells hit their ceiling; baseline 11.51 tok/s (median of 113 cells that "
    assert title + "overlapped no other load)" in " ".join(out.split())
    for cell_id in ("B #454 security run2", "F #11 correctness run1", "F #11 correctness run2"):
        assert cell_id in out
    assert out.count(f"slowed by {NEMOTRON}") == 3
    assert "46% of baseline" in out
    assert main(["timeouts", "--store", article_store, "--eval", D_EVAL, "--json"]) == 0
    verdicts = json.loads(capsys.readouterr().out)
    assert [v["kind"] for v in verdicts] == ["slowed"] * 3
    assert {v["ceiling_s"] for v in verdicts} == {1800.0}


def test_timeouts_of_an_unknown_eval_is_an_error_and_a_store_without_any_says_so(
    article_store: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["timeouts", "--store", article_store, "--eval", "nope"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"spark-otel: error: {article_store}: no cells of eval 'nope'; it holds ")
    assert len(err.splitlines()) == 1
    path = tmp_path / "s.sqlite"
    with Store(path) as store:
        store.write_cells([Cell(uid="c", eval_name="e", cell_id="1", start_unix_ns=0, end_unix_ns=10**9)])
    assert main(["timeouts", "--store", str(path)]) == 0
    assert capsys.readouterr().out == "no cell of 1 evals hit its ceiling (1 cells read)\n"


def test_cells_budget_shows_each_phase_and_says_when_nothing_is_split(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "s.sqlite"
    split = Cell(
        uid="a", eval_name="review", cell_id="B#1", start_unix_ns=0, end_unix_ns=100 * 10**9,
        first_token_s=30.0, decode_s=60.0, unsplit_s=0.0, other_s=10.0,
        attributes={"spark_otel.cell.queue_wait_s": 25.0},
    )  # fmt: skip
    old = Cell(uid="b", eval_name="review", cell_id="B#2", start_unix_ns=0, end_unix_ns=10**9)
    with Store(path) as store:
        store.write_cells([split, old])
    assert main(["cells", "--store", str(path), "--budget"]) == 0
    out = capsys.readouterr().out
    assert "the wait for first tokens is not split: no engine server span was joined" in out
    # wall 125 s: admission 25 (20%), first token 30 (24%), decode 60 (48%), other 10 (8%)
    for figure in ("125.0", "25.0 s (20%)", "30.0 s (24%)", "60.0 s (48%)", "0.0 s (0%)", "10.0 s (8%)"):
        assert figure in out
    assert "1 (+1 unsplit)" in out
    assert "admission: held by the queue governor before the cell started" in out
    assert main(["cells", "--store", str(path), "--budget", "--json"]) == 0
    body = json.loads(capsys.readouterr().out)
    assert body["evals"][0]["seconds"] == {
        "admission": 25.0,
        "first_token": 30.0,
        "decode": 60.0,
        "unsplit": 0.0,
        "other": 10.0,
    }
    assert body["evals"][0]["unsplit_cells"] == 1
    with Store(path) as store:
        store.write_cells([old.model_copy(update={"uid": "c"})])
    only_old = tmp_path / "old.sqlite"
    with Store(only_old) as store:
        store.write_cells([old])
    assert main(["cells", "--store", str(only_old), "--budget"]) == 0
    assert capsys.readouterr().out.startswith("none of the 1 cells read has a time budget")


def test_the_json_is_the_row_analysiss_verdicts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Over columns, with the governor's wait read from the cut-off cells' records: the row path's
    # verdicts, a queued cell among them.
    from tests.support.article import appendix_d_cells, appendix_d_loads

    from spark_otel import _semconv as sc
    from spark_otel.analysis.timeouts import TimeoutKind, timeout_verdicts
    from spark_otel.report.inputs import cells_from_store
    from spark_otel.views.timeouts import verdict_json

    probes, others = appendix_d_loads()
    cells = appendix_d_cells() + others
    first = next(k for k, c in enumerate(cells) if c.deadline_hit)
    cells[first] = cells[first].model_copy(update={"attributes": {sc.CELL_QUEUE_WAIT_S: 900.0}})
    path = tmp_path / "box.sqlite"
    with Store(path) as store:
        store.write_cells(cells)
        store.write_windows(probes)
    with Store(path, read_only=True) as store:
        verdicts = timeout_verdicts(cells_from_store(store), store.windows())
    assert TimeoutKind.QUEUED in {v.kind for v in verdicts}
    assert main(["timeouts", "--store", str(path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == [verdict_json(v) for v in verdicts]
