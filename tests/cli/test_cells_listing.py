"""`spark-otel cells`' whole output on a small store worked out by hand: every title, header and
row of the table, the energy note and hint, the filters and their order, and the whole --json.

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
from tests.support.printed import read_back

from spark_otel import _semconv as sc
from spark_otel.cli import main
from spark_otel.model import CellStatus
from spark_otel.store import Store

HEADER = [
    "eval",
    "cell",
    "engine",
    "workers",
    "status",
    "prompt tok",
    "output tok",
    "elapsed s",
    "tok/s",
    "energy J",
    "salvaged findings",
    "started (UTC)",
]
MODEL_HEADER = [*HEADER[:7], "elapsed model s", *HEADER[8:]]
# T0 (1,700,000,000 s) is 2023-11-14 22:13:20 UTC; each cell starts that many seconds later.
M1 = ["modelled", "m1", "nemo", "2", "ok", "", "700", "10.0", "70.00", "-", "0", "2023-11-14 22:15:20"]
B1 = ["other", "b1", "nemo", "2", "error", "80", "50", "10.0", "5.00", "-", "0", "2023-11-14 22:15:00"]
A2 = [
    *["golden", "a2", "qwen", "1", "deadline (degraded)", "", "", "10.0", "-", "~1,000.0", "2"],
    "2023-11-14 22:13:50",
]
A1 = [
    "golden",
    "a1",
    "qwen",
    "2",
    "ok",
    "1200",
    "400",
    "20.0",
    "20.00",
    "~2,000.0",
    "3",
    "2023-11-14 22:13:20",
]
ENERGY_NOTE = (
    "energy J: the cell's share of the box's GPU energy over its lifetime, split by tokens among the "
    "cells in flight (~: integrated from power, no energy counter); - where no GPU readings cover it"
)
NO_READINGS = (
    "energy: no GPU readings in the store cover these cells; measure with "
    "`spark-otel receive --engine NAME=URL --gpu auto --interval 1`"
)
MIXED_CLOCKS = " (model time, 100x, for the cells recorded under a model clock)"


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
    cells_store: str, capsys: pytest.CaptureFixture[str], india_local_time: None
) -> None:
    assert main(["cells", "--store", cells_store]) == 0
    assert read_back(capsys.readouterr().out) == [
        "4 most recent cells" + MIXED_CLOCKS,
        MODEL_HEADER,
        M1,
        B1,
        A2,
        A1,
        ENERGY_NOTE,
    ]


def test_limit_engine_and_eval_each_narrow_the_list_and_the_hint_reads_only_the_cells_listed(
    cells_store: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["cells", "--store", cells_store, "-n", "2"]) == 0
    assert read_back(capsys.readouterr().out) == [
        "2 most recent cells" + MIXED_CLOCKS,
        MODEL_HEADER,
        M1,
        B1,
        ENERGY_NOTE,
        NO_READINGS,
    ]
    assert main(["cells", "--store", cells_store, "--engine", "qwen"]) == 0
    assert read_back(capsys.readouterr().out) == ["2 most recent cells", HEADER, A2, A1, ENERGY_NOTE]
    # The golden eval's cells have energy; b1 has none, so the hint is printed for it alone.
    assert main(["cells", "--store", cells_store, "--eval", "other"]) == 0
    assert read_back(capsys.readouterr().out) == ["1 most recent cells", HEADER, B1, ENERGY_NOTE, NO_READINGS]


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
