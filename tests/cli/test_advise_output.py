"""`spark-otel advise`, whole: both tables and their notes (snapshots), the --write-rules file and
its line on stderr, and each refusal.

The store is small and built here so every figure the tables format can be checked against
the cells: engine q, probed at 1, 2, 4 and 8 streams (10, 9, 6 and 2.5 tok/s per stream; the
aggregate peaks at 4). Eval "cards" is prompt-heavy (5,000 prompt tokens, 100 out): four cells
of 20 s alone and four of 30 s two at a time, so its prefill contention is fitted from its own
cells: 30 / 20 = 1 + c (2 - 1), c = 0.50. Eval "gen" is generation-heavy (100 prompt tokens,
1,000 out at 10 tok/s): five serial cells of 100 to 140 s, past the 115 s ceiling given but for
the first, so 80% of them time out even at one worker ("80 (80)": a share times 100, not 101)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from tests.support.advise_store import CURVE, advise_store
from tests.support.cells import cell
from tests.support.printed import stderr_on_a_terminal
from tests.support.snapshots import Snapshot

from spark_otel import _semconv as sc
from spark_otel._clock import NS_PER_S
from spark_otel.analysis.advisor import Advice
from spark_otel.cli import main
from spark_otel.governor import load_rules
from spark_otel.model import CellStatus, Request
from spark_otel.store import Store
from spark_otel.views import rules_file as governor_advice
from spark_otel.views.rules_file import dump_rules, rules_from_advice

WRITTEN_NS = 1_800_000_000 * NS_PER_S  # 2027-01-15 08:00 UTC: the rules file's computed_at


@pytest.fixture
def small_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("COLUMNS", "96")  # the tables as printed fit a line of this file
    return advise_store(tmp_path / "small.sqlite")


def test_advise_prints_the_rules_and_the_worker_count_per_class(
    small_store: str, capsys: pytest.CaptureFixture[str], snapshot: Snapshot
) -> None:
    """The rules table (each rule and its evidence, wrapped at spaces), then the class table, too
    wide for 96 columns, as one "header  value" line per column, and the notes on its headers."""
    assert main(["advise", "--store", small_store, "--ceiling", "115"]) == 0
    out, err = capsys.readouterr()
    snapshot(out)
    assert err == ""


def test_advise_on_a_model_clock_says_so_in_each_title(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], snapshot: Snapshot
) -> None:
    """Cells recorded under a model clock 100x real: the ceiling is in model seconds, and each
    table's title says the figures are model time. Nothing else changes."""
    monkeypatch.setenv("COLUMNS", "96")
    store = advise_store(tmp_path / "model.sqlite", {sc.TIME_SCALE: 100.0})
    assert main(["advise", "--store", store, "--ceiling", "115", "--threshold", "0.5"]) == 0
    snapshot(capsys.readouterr().out)


@pytest.mark.parametrize("by_eval", [False, True], ids=["general", "by-eval"])
def test_advise_writes_the_rules_file_and_says_what_it_holds(
    by_eval: bool,
    small_store: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr(governor_advice, "real_wall_ns", lambda: WRITTEN_NS)
    with Store(small_store) as store:  # q's address, as a cell's requests reached it
        store.write_requests(
            [
                Request(
                    uid="r1",
                    cell_uid="a0",
                    engine="q",
                    operation="chat",
                    server_address="127.0.0.1",
                    server_port=8000,
                    start_unix_ns=0,
                    end_unix_ns=NS_PER_S,
                )
            ]
        )
    path = tmp_path / "rules.toml"
    command = ["advise", "--store", small_store, "--ceiling", "115", "--json", "--write-rules", str(path)]
    assert main([*command, *(["--by-eval"] if by_eval else [])]) == 0
    out, err = capsys.readouterr()
    form = "by eval" if by_eval else "general"
    assert err == f"wrote {path}: 3 rules (1 lane, 2 limit, 0 cross-engine; {form}), 0 not covered yet\n"
    text = path.read_text(encoding="utf-8")
    # What the command adds to the advice: when, from which store, each engine's model and address.
    general = "" if by_eval else "ceiling_bound_fraction = 0.75\nlong_context_prompt_tokens = 24000\n"
    assert (
        f"\nversion = {1 if by_eval else 2}\n"
        "computed_at = 2027-01-15 08:00:00+00:00\n"
        f'source = "{small_store}"\n'
        "ceiling_s = 115.0\n"
        "eval_gap_s = 2.0\n"
        "cross_engine = []\n"
        "unmeasured = []\n"
        f"{general}\n"
        '[engines.q]\nmodel = "qwen3.8-27b"\nurl = "http://127.0.0.1:8000"\n\n[[lane]]\n'
    ) in text
    # The rules themselves: the governor's own rendering of this advice (tests/governor pins it).
    data = json.loads(out)
    facts = [{k: v for k, v in r.items() if k not in ("rule", "evidence")} for r in data["rules"]]
    advice = Advice.model_validate(data | {"rules": facts})
    expected = rules_from_advice(
        advice, [CURVE], engine_urls={"q": "http://127.0.0.1:8000"}, source=small_store, by_eval=by_eval
    )
    assert text == dump_rules(expected)
    rules = load_rules(path)
    assert [r.describe() for r in rules.rules] == (
        [
            "q lane at most 4 cells",
            "cards prompt-heavy cells on q at most 4 at once",
            "gen generation-heavy cells on q at most 1 at once",
        ]
        if by_eval
        else [
            "q lane at most 4 cells",
            "prompt-heavy cells on q at most 4 at once",
            "generation-heavy cells on q at most 1 at once",
        ]
    )
    # The general form carries each eval family's history, by class: how the next run is classed.
    assert [(h.family, h.cell_class, h.n_cells, h.share, h.evals) for h in rules.history] == (
        []
        if by_eval
        else [("cards", "prompt-heavy", 8, 1.0, ["cards"]), ("gen", "generation-heavy", 5, 1.0, ["gen"])]
    )


def test_advise_says_why_it_cannot_write_the_rules_file(
    small_store: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["advise", "--store", small_store, "--write-rules", str(tmp_path)]) == 2  # before reading
    assert capsys.readouterr().err == (
        f"spark-otel: error: --write-rules {tmp_path}: is a directory; give a file name\n"
    )


def test_advise_refuses_a_store_without_cells(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "empty.sqlite"
    Store(path).close()
    assert main(["advise", "--store", str(path)]) == 1
    assert capsys.readouterr().err == (
        f"spark-otel: error: {path}: no cells; nothing is recorded there: instrument an eval "
        "(spark_otel.instrument(), with spark_otel.cell() per cell) or run `spark-otel backfill` first\n"
    )


def test_advise_for_an_engine_without_cells_names_every_engine_there_is(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A cell with no engine counts as the unknown engine's, in the list of engines there are."""
    path = tmp_path / "two.sqlite"
    with Store(path) as store:
        store.write_cells([cell("x", 0, 10, 100, engine="q"), cell("y", 0, 10, 100, engine=None)])
    assert main(["advise", "--store", str(path), "--engine", "nope"]) == 1
    assert capsys.readouterr().err == (
        f"spark-otel: error: {path}: no cells on engine 'nope' (engines: q, unknown); "
        "it holds 2 cells (`spark-otel cells`)\n"
    )


def test_advise_help_names_each_option_and_its_default(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], snapshot: Snapshot
) -> None:
    monkeypatch.setenv("COLUMNS", "96")
    monkeypatch.setenv("SPARK_OTEL_STORE", "/data/store.sqlite")
    with pytest.raises(SystemExit) as exited:
        main(["advise", "--help"])
    assert exited.value.code == 0
    snapshot(capsys.readouterr().out)


def test_advise_logs_each_note_of_the_analysis(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    """Cells that all failed give no curve: the analysis notes why, which --debug shows."""
    path = tmp_path / "failed.sqlite"
    with Store(path) as store:
        store.write_cells(
            [cell(uid, t, t + 10, None, status=CellStatus.ERROR) for uid, t in (("x", 0), ("y", 20))]
        )
    with caplog.at_level(logging.INFO, logger="spark_otel.cli.advise"):
        assert main(["advise", "--store", str(path), "--json"]) == 0
    assert [(r.levelno, r.getMessage()) for r in caplog.records if r.name == "spark_otel.cli.advise"] == [
        (
            logging.INFO,
            "advise: no curve from cells on q: engine 'q': no completed cells with token counts "
            "to build a curve from",
        )
    ]
    assert capsys.readouterr().err == ""


def test_advise_names_each_phase_on_a_terminal(small_store: str, capsys: pytest.CaptureFixture[str]) -> None:
    """The spinner's text, reading then computing; drawn on stderr only, so stdout is the JSON."""
    with stderr_on_a_terminal() as terminal:
        assert main(["advise", "--store", small_store, "--json"]) == 0
    drawn = terminal.getvalue()
    for text in (f"reading {small_store}", "computing the queue rules over 13 cells"):
        assert text in drawn  # a spinner's frames: where they fall depends on the clock
    assert json.loads(capsys.readouterr().out)["config"]["ceiling_s"] == 1800.0
