"""`spark-otel cells`' whole output on a small store worked out by hand: every title, header and
row of the table, the energy note and hint, the filters and their order (snapshots), and the whole
--json.

The command's own tests check a cell id or one column; here every column is pinned, so a renamed
header, a lost filter (--eval, --engine, -n), the oldest cells listed instead of the newest, a
local time printed as UTC, a lost "(degraded)" or "~" mark, or the energy of cells not listed
counted for the hint, fails. The GPU drew a steady 100 W read as power only (no energy counter),
so each cell's energy is estimated ("~"): 20 s alone is 2,000 J, 10 s alone 1,000 J.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.support.energy_samples import cell, power
from tests.support.snapshots import Snapshot

from spark_otel import _semconv as sc
from spark_otel.cli import main
from spark_otel.model import CellStatus
from spark_otel.store import Store


def _store(path: Path) -> None:
    """Four cells, newest first: m1 (recorded under a 100x model clock, nemo), b1 (an error on
    nemo), a2 (cut off with no tokens but 2 findings salvaged: degraded) and a1 (3 findings); the
    GPU was read over the first 60 s, so only the golden eval's cells have energy."""
    cells = [
        cell("a1", 0, 20, 400, eval_name="golden").model_copy(
            update={"prompt_tokens": 1200, "salvaged_findings": 3}
        ),
        cell("a2", 30, 40, None, eval_name="golden", workers=1).model_copy(update={"salvaged_findings": 2}),
        cell("b1", 100, 110, 50, eval_name="other").model_copy(
            update={"engine": "nemo", "prompt_tokens": 80, "status": CellStatus.ERROR}
        ),
        cell("m1", 120, 130, 700, eval_name="modelled").model_copy(
            update={"engine": "nemo", "attributes": {sc.TIME_SCALE: 100.0}}
        ),
    ]
    with Store(path) as store:
        store.write_cells(cells)
        store.write_samples(power(100.0, 60))


@pytest.fixture
def cells_store(tmp_path: Path) -> str:
    path = tmp_path / "cells.sqlite"
    _store(path)
    return str(path)


def test_cells_print_every_column_of_every_cell_newest_first_in_utc(
    cells_store: str, capsys: pytest.CaptureFixture[str], india_local_time: None, snapshot: Snapshot
) -> None:
    assert main(["cells", "--store", cells_store]) == 0
    snapshot(capsys.readouterr().out)


def test_limit_engine_and_eval_each_narrow_the_list_and_the_hint_reads_only_the_cells_listed(
    cells_store: str, capsys: pytest.CaptureFixture[str], snapshot: Snapshot
) -> None:
    """-n 2 lists m1 and b1, neither covered by the GPU readings, so the hint follows; the golden
    eval's cells (--engine qwen) have energy, so no hint; b1 alone (--eval other) has none."""
    for name, argv in (("n2", ["-n", "2"]), ("qwen", ["--engine", "qwen"]), ("other", ["--eval", "other"])):
        assert main(["cells", "--store", cells_store, *argv]) == 0
        snapshot(capsys.readouterr().out, name)


def _json_cell(uid: str, start_s: int, end_s: int, **fields: object) -> dict[str, object]:
    start = 1_700_000_000_000_000_000 + start_s * 1_000_000_000
    return {
        "uid": uid,
        "eval_name": "golden",
        "cell_id": uid,
        "engine": "qwen",
        "start_unix_ns": start,
        "end_unix_ns": start + (end_s - start_s) * 1_000_000_000,
        "prompt_tokens": None,
        "completion_tokens": None,
        "status": "ok",
        "deadline_s": None,
        "deadline_hit": False,
        "workers": 2,
        "salvaged_findings": 0,
        "degraded": False,
        "source": "live",
        "trace_id": None,
        "first_token_s": None,
        "decode_s": None,
        "unsplit_s": None,
        "other_s": None,
        "attributes": {},
    } | fields


def test_cells_json_is_each_cell_with_its_elapsed_rate_and_energy_and_none_per_token_without_tokens(
    cells_store: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["cells", "--store", cells_store, "--eval", "golden", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == [
        _json_cell(
            "a2", 30, 40, status="deadline", deadline_hit=True, workers=1, salvaged_findings=2, degraded=True
        )
        | {
            "elapsed_s": 10.0,
            "decode_rate": None,
            "energy": {"box_j": 1000.0, "share_j": 1000.0, "j_per_token": None, "estimated": True},
        },
        _json_cell("a1", 0, 20, prompt_tokens=1200, completion_tokens=400, salvaged_findings=3)
        | {
            "elapsed_s": 20.0,
            "decode_rate": 20.0,  # 400 tokens in 20 s
            "energy": {"box_j": 2000.0, "share_j": 2000.0, "j_per_token": 5.0, "estimated": True},
        },
    ]


def test_a_limit_below_one_is_refused_by_name(cells_store: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["cells", "--store", cells_store, "-n", "0"]) == 2  # a usage error
    captured = capsys.readouterr()
    assert (captured.out, captured.err) == (
        "",
        "spark-otel: error: --limit must be a whole number >= 1 and <= 1,000,000,000, got 0\n",
    )
