"""Table shapes of the time budget and the timeout verdicts, shared by ``cells --budget``,
``timeouts`` and the HTML report, so a phase has one name and one explanation wherever it is read."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..analysis.budget import CellBudget, EvalBudget

__all__ = ["PHASE_NOTES", "budget_table", "eval_budget_table", "phase_cell"]

PHASE_NOTES: dict[str, str] = {
    "admission": "held by the queue governor before the cell started (outside elapsed)",
    "queue": "the engine's queue, from its server spans: the share of the wait for first tokens "
    "the engine spent queued",
    "prefill": "the engine's prefill, from its server spans: the rest of the wait for first tokens",
    "first token": "waiting for the first token of a streamed request (engine queue, prefill, network)",
    "decode": "a streamed request past its first token: tokens flowing",
    "unsplit": "inside a request that was not streamed (the client cannot tell its prefill from its decode)",
    "other": "no request in flight: the runner's own work between requests",
    "scoring": "grading the answer and the runner's bookkeeping after it (an Inspect sample's scorers "
    "and log writing), a model-graded scorer's requests included",
}
"""The glossary of the budget columns (column name: what it holds)."""


def _column(phase: str) -> str:
    return phase.replace("_", " ")


def phase_cell(seconds: float | None, share: float | None) -> str:
    """``12.3 s (45%)``; "-" where the phase is not in the budget."""
    if seconds is None:
        return "-"
    return f"{seconds:,.1f} s" + (f" ({share:.0%})" if share is not None else "")


def _phases(budgets: Iterable[CellBudget | EvalBudget]) -> list[str]:
    from ..analysis.budget import BUDGET_PHASES

    present = {p for b in budgets for p in b.seconds}
    return [p for p in BUDGET_PHASES if p in present]


def budget_table(budgets: Sequence[CellBudget]) -> tuple[list[str], list[list[str]]]:
    """One row per cell: its wall time, then each phase present in any of them, seconds and share."""
    phases = _phases(budgets)
    columns = ["eval", "cell", "status", "wall s", *(_column(p) for p in phases)]
    rows = [
        [b.eval_name, b.cell_id, b.status, f"{b.wall_s:,.1f}"]
        + [phase_cell(b.seconds.get(p), b.share(p)) for p in phases]
        for b in budgets
    ]
    return columns, rows


def eval_budget_table(budgets: Sequence[EvalBudget]) -> tuple[list[str], list[list[str]]]:
    """One row per eval: the phases summed over its cells with a budget."""
    phases = _phases(budgets)
    columns = ["eval", "cells", "wall s", *(_column(p) for p in phases)]
    rows = [
        [
            b.eval_name,
            f"{b.n_cells}" + (f" (+{b.unsplit_cells} unsplit)" if b.unsplit_cells else ""),
            f"{b.wall_s:,.0f}",
        ]
        + [phase_cell(b.seconds.get(p), b.share(p)) for p in phases]
        for b in budgets
    ]
    return columns, rows
