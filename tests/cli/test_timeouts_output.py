"""`spark-otel timeouts`' whole output on a small store worked out by hand: one table per eval
with a cut-off cell, its title (baseline, or none; model time read off that eval's cells only),
every row, the --json, and the line for an eval that has no timeout.

The command's first tests run on the article's store and check figures in it; here each eval has
exactly one cut-off cell, so a title built from another cell of the group than the first, one
that reads a baseline that is not there, a model-time note taken from the other evals' cells, or
"eval NAME" lost from the no-timeout line, fails.

The store (from T0 = 2023-11-14 22:13:20 UTC): base ran b1 (100 tokens in 10 s) and b2 (200 in
10 s) alone, so its baseline is their median, 15 tok/s; its b3 was cut at its 100 s ceiling
with 500 tokens, 5 tok/s, a third of baseline (500 tokens need 33 s at 15 tok/s). lonely's one
cell, recorded under a 100x model clock, was cut with no tokens and no cell of lonely ran alone.
clean's one cell finished.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.support.printed import read_back

from spark_otel import _semconv as sc
from spark_otel.cli import main
from spark_otel.model import Cell, CellStatus
from spark_otel.store import Store

S = 1_000_000_000
T0 = 1_700_000_000 * S
COLUMNS = ["cell", "started (UTC)", "elapsed s", "output tok", "tok/s", "of baseline", "verdict"]
LONELY_VERDICT = (
    "no verdict: lonely has no baseline (no cell of it ran alone); run some of its cells with nothing "
    "else on the box, then `spark-otel timeouts --eval lonely`"
)

WRAPPED = " `spark-otel timeouts --eval lonely`"  # the verdict's last words, wrapped at 200 columns


def _cell(uid: str, eval_name: str, start_s: int, end_s: int, tokens: int | None, **fields: object) -> Cell:
    return Cell(
        uid=uid,
        eval_name=eval_name,
        cell_id=uid.upper(),
        engine="qwen",
        start_unix_ns=T0 + start_s * S,
        end_unix_ns=T0 + end_s * S,
        completion_tokens=tokens,
        **fields,
    )


@pytest.fixture
def timeouts_store(tmp_path: Path) -> str:
    path = tmp_path / "timeouts.sqlite"
    cut = {"status": CellStatus.DEADLINE, "deadline_s": 100.0}
    with Store(path) as store:
        store.write_cells(
            [
                _cell("b1", "base", 0, 10, 100),
                _cell("b2", "base", 20, 30, 200),
                _cell("b3", "base", 40, 140, 500, **cut),
                _cell("x1", "lonely", 1000, 1100, None, attributes={sc.TIME_SCALE: 100.0}, **cut),
                _cell("k1", "clean", 2000, 2010, 100),
            ]
        )
    return str(path)


def test_each_eval_with_a_timeout_gets_its_own_titled_table(
    timeouts_store: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["timeouts", "--store", timeouts_store]) == 0
    assert read_back(capsys.readouterr().out) == [
        "base: 1 cells hit their ceiling; baseline 15.00 tok/s (median of 2 cells that overlapped no "
        "other load)",
        COLUMNS,
        [
            *["B3", "2023-11-14 22:14", "100", "500", "5.00", "33%"],
            "slowed by other load (ran at 33% of baseline); needed at least 33 s at baseline, ceiling 100 s",
        ],
        "lonely: 1 cells hit their ceiling; no baseline (model time, 100x)",
        COLUMNS,
        ["X1", "2023-11-14 22:30", "100", "none", "-", "-", LONELY_VERDICT.removesuffix(WRAPPED)],
        ["", "", "", "", "", "", WRAPPED.strip()],
    ]


def test_timeouts_json_and_an_eval_that_hit_no_ceiling(
    timeouts_store: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["timeouts", "--store", timeouts_store, "--eval", "lonely", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == [
        {
            "uid": "x1", "eval_name": "lonely", "cell_id": "X1", "engine": "qwen",
            "start_unix_ns": T0 + 1000 * S, "elapsed_s": 100.0, "ceiling_s": 100.0,
            "completion_tokens": None, "rate": None, "baseline_rate": None, "baseline_n": 0,
            "share_of_baseline": None, "share_cells": None, "loads": [], "admission_s": None,
            "needed_at_baseline_s": None, "rerun": None, "kind": "unknown", "unjudged": "no baseline",
            "request_as_cell": False, "share_source": None, "verdict": LONELY_VERDICT,
        }
    ]  # fmt: skip
    assert main(["timeouts", "--store", timeouts_store, "--eval", "clean"]) == 0
    assert capsys.readouterr().out == "no cell of eval clean hit its ceiling (5 cells read)\n"
