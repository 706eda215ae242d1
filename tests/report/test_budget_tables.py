"""The budget and timeout tables, column by column: the same names and cells in ``cells --budget``,
``timeouts`` and the HTML report."""

from __future__ import annotations

import pytest

from spark_otel.analysis.budget import CellBudget, EvalBudget
from spark_otel.analysis.timeouts import TimeoutVerdict
from spark_otel.views.budget import (
    PHASE_NOTES,
    budget_table,
    eval_budget_table,
    phase_cell,
)
from spark_otel.views.timeouts import timeouts_table


def _cell(cell_id: str, wall_s: float, seconds: dict[str, float]) -> CellBudget:
    return CellBudget(
        uid=cell_id, eval_name="review", cell_id=cell_id, status="ok", elapsed_s=wall_s, wall_s=wall_s,
        seconds=seconds, sources={p: "client" for p in seconds}, requests=1, joined=0,
    )  # fmt: skip


def _eval(name: str, unsplit_cells: int, seconds: dict[str, float]) -> EvalBudget:
    return EvalBudget(
        eval_name=name, n_cells=3, unsplit_cells=unsplit_cells, requests=3, joined=0, wall_s=1234.5,
        seconds=seconds, sources={p: "client" for p in seconds},
    )  # fmt: skip


def _verdict(
    cell_id: str, tokens: int | None, rate: float | None, share: float | None, kind: str = "slowed"
) -> TimeoutVerdict:
    return TimeoutVerdict(
        uid=cell_id, eval_name="e", cell_id=cell_id, engine="qwen", start_unix_ns=1_764_000_000 * 10**9,
        elapsed_s=1800.4, ceiling_s=1800.0, completion_tokens=tokens, rate=rate, baseline_rate=10.0,
        baseline_n=4, share_of_baseline=share, share_cells=None, loads=["the probe"], admission_s=None,
        needed_at_baseline_s=None, rerun=None, kind=kind, unjudged=None,
    )  # fmt: skip


def test_a_phase_cell_is_seconds_with_its_share_or_a_dash_where_the_phase_is_absent() -> None:
    assert phase_cell(1234.56, 0.456) == "1,234.6 s (46%)"
    assert phase_cell(2.0, None) == "2.0 s"
    assert phase_cell(None, 0.5) == "-"


def test_the_cell_table_has_the_phases_present_in_any_cell_in_budget_order_spaced() -> None:
    a = _cell("A#1", 100.0, {"decode": 60.0, "first_token": 40.0})
    b = _cell("B#2", 50.0, {"admission": 10.0, "decode": 40.0})
    columns, rows = budget_table([a, b])
    assert columns == ["eval", "cell", "status", "wall s", "admission", "first token", "decode"]
    assert rows == [
        ["review", "A#1", "ok", "100.0", "-", "40.0 s (40%)", "60.0 s (60%)"],
        ["review", "B#2", "ok", "50.0", "10.0 s (20%)", "-", "40.0 s (80%)"],
    ]
    assert all(column in PHASE_NOTES for column in columns[4:])


def test_the_eval_table_counts_its_cells_and_the_ones_recorded_without_a_budget() -> None:
    split = _eval("review", 2, {"first_token": 234.5, "other": 1000.0})
    whole = _eval("cards", 0, {"other": 1234.5})
    columns, rows = eval_budget_table([split, whole])
    assert columns == ["eval", "cells", "wall s", "first token", "other"]
    assert rows == [
        ["review", "3 (+2 unsplit)", "1,234", "234.5 s (19%)", "1,000.0 s (81%)"],
        ["cards", "3", "1,234", "-", "1,234.5 s (100%)"],
    ]


@pytest.mark.usefixtures("india_local_time")
def test_the_timeouts_table_says_none_and_dash_where_a_figure_was_not_measured() -> None:
    """Start times in UTC whatever the local zone: the column says so."""
    columns, rows = timeouts_table(
        [_verdict("F#11", 12345, 6.857, 0.6857), _verdict("B#454", None, None, None, kind="long")]
    )
    assert columns == ["cell", "started (UTC)", "elapsed s", "output tok", "tok/s", "of baseline", "verdict"]
    assert rows == [
        [
            "F#11",
            "2025-11-24 16:00",
            "1,800",
            "12,345",
            "6.86",
            "69%",
            "slowed by the probe (ran at 69% of baseline)",
        ],
        [
            "B#454",
            "2025-11-24 16:00",
            "1,800",
            "none",
            "-",
            "-",
            "long by itself: ran at baseline speed, ceiling 1,800 s",
        ],
    ]
