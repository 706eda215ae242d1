"""`spark-otel concurrency`'s whole output over small stores whose every figure is worked out by
hand: each table's title, header, rows and notes and the energy lines (snapshots, under
tests/snapshots/), the `--json` document, the refusals and the spinner's phases.

The other tests of the command read a few figures out of the article's store; a changed title,
column, placeholder or option that reached the wrong place went unseen. Times are printed in UTC
whatever the local zone, so the tests run in a zone that is not UTC.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from tests.support.cells import cell
from tests.support.energy_samples import T0, counter
from tests.support.printed import phases, stderr_on_a_terminal
from tests.support.snapshots import Snapshot

from spark_otel import _semconv as sc
from spark_otel.analysis.concurrency import concurrency
from spark_otel.cli import main
from spark_otel.model import CellStatus
from spark_otel.store import Store

MARCH_7 = 1_772_876_460 * 1_000_000_000  # 2026-03-07 09:41:00 UTC
OTHER_CELLS = "8.0x (other cells)"
MEASURE = "spark-otel receive --engine NAME=URL --gpu auto --interval 1"
_CONTROL = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")

# Local time 5:30 ahead of UTC (a POSIX zone, no tz database needed).
pytestmark = pytest.mark.usefixtures("india_local_time")


def _runs_store(path: Path) -> str:
    """Engine nem from 09:41 UTC: eval rev serially (r1 at 10 tok/s, r2 at 8), the same two cells
    at 2 workers (6 tok/s each), four other cells at 4 workers (two at 10 tok/s, a timeout and a
    failure), then a cell of eval bg without a worker count or tokens. Engine q: one cell of eval
    sim under a 100x model clock."""
    rev = {"eval_name": "rev", "engine": "nem", "t0_ns": MARCH_7}
    cells = [
        cell("r1", 0, 100, 1000, workers=1, **rev),
        cell("r2", 100, 200, 800, workers=1, **rev),
        cell("p1", 300, 400, 600, workers=2, cell_id="r1", **rev),
        cell("p2", 300, 400, 600, workers=2, cell_id="r2", **rev),
        cell("t1", 500, 550, 500, workers=4, **rev),
        cell("t2", 500, 550, 500, workers=4, **rev),
        cell("t3", 500, 550, 90, workers=4, status=CellStatus.DEADLINE, **rev),
        cell("t4", 500, 550, 0, workers=4, status=CellStatus.ERROR, **rev),
        cell("b1", 600, 700, None, eval_name="bg", engine="nem", t0_ns=MARCH_7),
        cell(
            "s1", 0, 30, 3000, eval_name="sim", engine="q", workers=1, t0_ns=MARCH_7,
            attributes={sc.TIME_SCALE: 100},
        ),
    ]  # fmt: skip
    with Store(path) as store:
        store.write_cells(cells)
    return str(path)


def test_every_table_of_every_engine_with_its_cells(tmp_path: Path, capsys, snapshot: Snapshot) -> None:
    """nem: 4,090 tokens over the 450 s some cell ran (0-200, 300-400, 500-550, 600-700): 9.1 tok/s.
    Speedups against the serial run's 100 s a cell: 50 s a cell at 2 workers (the same cells, a
    median of 6 against 9: 33 % slower each), 12.5 s at 4 (other cells, 10 against 9: -11 %)."""
    store = _runs_store(tmp_path / "runs.sqlite")
    assert main(["concurrency", "--store", store, "--cells"]) == 0
    snapshot(capsys.readouterr().out)


def test_one_eval_without_cells_lists_runs_only_and_json_is_the_analysis(
    tmp_path: Path, capsys, snapshot: Snapshot
) -> None:
    store = _runs_store(tmp_path / "runs.sqlite")
    assert main(["concurrency", "--store", store, "--eval", "bg"]) == 0
    snapshot(capsys.readouterr().out)
    assert (
        main(["concurrency", "--store", store, "--eval", "rev", "--engine", "nem", "--json", "--cells"]) == 0
    )
    with_cells = json.loads(capsys.readouterr().out)
    with Store(store, read_only=True) as opened:
        cells = opened.cells()
    analysis = concurrency(cells, eval_name="rev").model_dump(mode="json") | {"energy": None}
    assert with_cells == analysis
    assert len(with_cells["engines"][0]["cells"]) == 8
    # Without --cells, as in the tables, the same document less each engine's per-cell rows.
    assert main(["concurrency", "--store", store, "--eval", "rev", "--engine", "nem", "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    for engine in analysis["engines"]:
        del engine["cells"]
    assert printed == analysis
    (nem,) = printed["engines"]
    assert [(r["eval_name"], r["workers"], r["n_cells"]) for r in nem["runs"]] == [
        ("rev", 1, 2),
        ("rev", 2, 2),
        ("rev", 4, 4),
    ]
    assert [(s["workers"], s["speedup"], s["same_cells"]) for s in nem["speedups"]] == [
        (2, 2.0, True),
        (4, 8.0, False),
    ]


@pytest.mark.parametrize(
    ("argv", "scope"),
    [
        (["--eval", "nope"], " of eval 'nope'"),
        (["--engine", "vllm"], " on engine 'vllm'"),
        (["--eval", "rev", "--engine", "q"], " of eval 'rev' on engine 'q'"),
    ],
)
def test_a_selection_without_cells_is_one_error_line_naming_it(
    argv: list[str], scope: str, tmp_path: Path, capsys
) -> None:
    store = _runs_store(tmp_path / "runs.sqlite")
    for json_flag in ([], ["--json"]):
        assert main(["concurrency", "--store", store, *argv, *json_flag]) == 1
        captured = capsys.readouterr()
        assert captured.out == ""
        assert captured.err == (
            f"spark-otel: error: {store}: no cells{scope}; it holds 10 cells (`spark-otel cells`); "
            "evals: bg, rev, sim\n"
        )


def test_a_zero_merge_gap_is_taken(tmp_path: Path, capsys) -> None:
    """0 is the least gap allowed: every idle moment starts a new run."""
    store = _runs_store(tmp_path / "runs.sqlite")
    assert main(["concurrency", "--store", store, "--eval", "rev", "--merge-gap", "0", "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)["engines"][0]["runs"]) == 3
    assert main(["concurrency", "--store", store, "--merge-gap", "nan"]) == 2
    assert capsys.readouterr().err == (
        "spark-otel: error: --merge-gap must be a finite number >= 0 and <= 31,536,000, got nan\n"
    )


def test_the_spinner_names_each_phase_with_the_cells_it_reads(tmp_path: Path, capsys) -> None:
    store = _runs_store(tmp_path / "runs.sqlite")
    with stderr_on_a_terminal() as terminal:
        assert main(["concurrency", "--store", store, "--engine", "nem"]) == 0
    assert phases(terminal.getvalue()) == [
        "reading cells",
        f"reading cells from {store}",
        "reading GPU energy over 9 cells",
        "computing in-flight levels over 9 cells",
        "laying out the tables of 9 cells",
    ]
    capsys.readouterr()


def _energy_store(path: Path) -> str:
    """NVML's counter at a steady 40 W for 100 s. On qwen, eval a: a1 (400 tokens over 0-20 s)
    beside n1 of eval n on nem (400 tokens, a 100x model clock), a2 alone (200 tokens over
    40-60 s), and a cell 5 minutes before the readings."""
    cells = [
        cell("a1", 0, 20, 400, eval_name="a", engine="qwen", workers=1, t0_ns=T0),
        cell("a2", 40, 60, 200, eval_name="a", engine="qwen", workers=1, t0_ns=T0),
        cell(
            "n1", 0, 20, 400, eval_name="n", engine="nem", workers=1, t0_ns=T0,
            attributes={sc.TIME_SCALE: 100},
        ),
        cell("early", -300, -280, 100, eval_name="a", engine="qwen", workers=1, t0_ns=T0),
    ]  # fmt: skip
    with Store(path) as store:
        store.write_cells(cells)
        store.write_samples(counter(40.0, 100))
    return str(path)


def test_one_engines_cells_carry_their_share_of_the_whole_boxs_energy(
    tmp_path: Path, capsys, snapshot: Snapshot
) -> None:
    """a1 shares its 800 J with n1 on the other engine, 400 J each for 400 tokens: 1 J a token; a2
    draws its 800 J alone for 200 tokens: 4 J a token."""
    store = _energy_store(tmp_path / "e.sqlite")
    assert main(["concurrency", "--store", store, "--engine", "qwen", "--cells"]) == 0
    snapshot(capsys.readouterr().out)


def test_the_energy_table_of_every_engine_says_which_cells_ran_on_a_model_clock(
    tmp_path: Path, capsys, snapshot: Snapshot
) -> None:
    store = _energy_store(tmp_path / "e.sqlite")
    assert main(["concurrency", "--store", store]) == 0
    snapshot(capsys.readouterr().out)


def test_json_energy_is_the_selected_evals_share_of_the_box(tmp_path: Path, capsys) -> None:
    store = _energy_store(tmp_path / "e.sqlite")
    assert (
        main(["concurrency", "--store", store, "--eval", "a", "--engine", "qwen", "--json", "--cells"]) == 0
    )
    energy = json.loads(capsys.readouterr().out)["energy"]
    s = 1_000_000_000

    def share(uid: str, start: int, tokens: int, box: float | None, j: float | None) -> dict:
        return {
            "uid": uid,
            "eval_name": "a",
            "cell_id": uid,
            "engine": "qwen",
            "workers": 1,
            "start_unix_ns": T0 + start * s,
            "end_unix_ns": T0 + (start + 20) * s,
            "completion_tokens": tokens,
            "box_j": box,
            "share_j": j,
            "j_per_token": None if j is None else j / tokens,
        }

    assert energy == {
        "gpus": ["0"],
        "estimated": False,
        "covered_start_unix_ns": T0,
        "covered_end_unix_ns": T0 + 100 * s,
        "box_j": 1600.0,
        "attributed_j": 1600.0,
        "partial_j": 0.0,
        "idle_j": 800.0,
        "cells": [
            share("early", -300, 100, None, None),
            share("a1", 0, 400, 800.0, 400.0),
            share("a2", 40, 200, 800.0, 800.0),
        ],
        "evals": [
            {
                "eval_name": "a",
                "workers": 1,
                "n_cells": 3,
                "n_measured": 2,
                "output_tokens": 600,
                "energy_j": 1200.0,
                "j_per_token": 2.0,
                "j_per_cell": 600.0,
                "per_cell": {
                    "n": 2,
                    "median": 600.0,
                    "p10": 440.0,
                    "p90": 760.0,
                    "mean": 600.0,
                    "ci_low": 400.0,
                    "ci_high": 800.0,
                },
                "start_unix_ns": T0,
                "end_unix_ns": T0 + 60 * s,
            }
        ],
        "unmeasured": 1,
        "measure": MEASURE,
    }
    assert main(["concurrency", "--store", store, "--eval", "n", "--json", "--cells"]) == 0
    energy = json.loads(capsys.readouterr().out)["energy"]
    assert [c["uid"] for c in energy["cells"]] == ["n1"]  # a1 and a2 shared the box with it
    assert [(e["eval_name"], e["energy_j"]) for e in energy["evals"]] == [("n", 400.0)]
    # Each cell's energy only with --cells, as each cell's load; the rest the same.
    assert main(["concurrency", "--store", store, "--eval", "n", "--json"]) == 0
    without = json.loads(capsys.readouterr().out)["energy"]
    assert without == {k: v for k, v in energy.items() if k != "cells"}
