"""Act 5 of the demo, side by side: the same two evals ungoverned, under the static rules, and
under the deadline-slack law with no rules file, as a table, the adaptive arm's one-line answer,
and their JSON. The figures come from `demo.governed.RunFigures`, read here through
`GovernedRun` (views sit below the demo)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from .tables import fmt_number

__all__ = ["GovernedRun", "adaptive_answer", "governed_runs_json", "governed_runs_table"]


class GovernedRun(Protocol):
    """One run of Act 5, as the demo measured it from the store (model seconds)."""

    @property
    def label(self) -> str: ...
    @property
    def serial_cells(self) -> int: ...
    @property
    def serial_median(self) -> float | None: ...
    @property
    def beside_cells(self) -> int: ...
    @property
    def beside_median(self) -> float | None: ...
    @property
    def cost(self) -> float | None: ...
    @property
    def ceiling_hits(self) -> int: ...
    @property
    def serial_longest_s(self) -> float: ...
    @property
    def load_cells(self) -> int: ...
    @property
    def load_wall_s(self) -> float: ...
    @property
    def load_peak(self) -> int: ...
    @property
    def load_waited_max_s(self) -> float: ...
    @property
    def both_wall_s(self) -> float: ...
    def as_dict(self) -> dict[str, Any]: ...


COLUMNS = [
    "run",
    "serial cells",
    "at the ceiling",
    "longest serial cell s",
    "beside",
    "serial tok/s",
    "cost %",
    "nemotron cells",
    "most at once",
    "longest queue wait s",
    "nemotron wall s",
    "both evals' wall s",
]
NOTES = {
    "at the ceiling": "serial cells that reached their ceiling, of the serial cells",
    "longest serial cell s": "the longest serial cell's wall time, of the serial cells",
    "beside": "serial cells that ran at least 90% of their time while the nemotron eval ran",
    "cost %": "1 - serial tok/s (of the cells beside it, else of all) over its Act 4 baseline alone",
    "nemotron wall s": "from the nemotron eval's first cell asking to its last cell's end, over its cells",
}


def _pct(value: float | None) -> str:
    return "-" if value is None else str(round(value * 100))


def governed_runs_table(runs: Sequence[GovernedRun]) -> tuple[list[str], list[list[Any]], dict[str, str]]:
    """Columns, one row per run (in the demo's order), and the notes its terms need."""
    rows = [
        [
            run.label,
            run.serial_cells,
            f"{run.ceiling_hits} of {run.serial_cells}",
            fmt_number(run.serial_longest_s, 0),
            run.beside_cells,
            fmt_number(run.beside_median if run.beside_cells else run.serial_median),
            _pct(run.cost),
            run.load_cells,
            run.load_peak,
            fmt_number(run.load_waited_max_s, 0),
            fmt_number(run.load_wall_s, 0),
            fmt_number(run.both_wall_s, 0),
        ]
        for run in runs
    ]
    return list(COLUMNS), rows, dict(NOTES)


def adaptive_answer(open_run: GovernedRun, static: GovernedRun, adaptive: GovernedRun) -> str:
    """The third arm in one line: the serial eval's ceiling hits and longest cell against the
    ungoverned run, the nemotron eval's wall against the static rules', each with its n."""
    text = (
        f"adaptive, with no rules file: {adaptive.ceiling_hits} of {adaptive.serial_cells} serial cells "
        f"at the ceiling against {open_run.ceiling_hits} of {open_run.serial_cells} without rules, the "
        f"longest {adaptive.serial_longest_s:.0f} model s against {open_run.serial_longest_s:.0f}; the "
        f"nemotron eval's wall {adaptive.load_wall_s:.0f} model s (n={adaptive.load_cells} cells) against "
        f"{static.load_wall_s:.0f} with the rules (n={static.load_cells})"
    )
    if adaptive.load_cells and static.load_cells and static.load_wall_s > 0:
        change = 1.0 - adaptive.load_wall_s / static.load_wall_s
        text += f", {abs(round(change * 100))}% {'shorter' if change >= 0 else 'longer'}"
    return text


def governed_runs_json(runs: Sequence[GovernedRun]) -> list[dict[str, Any]]:
    """Each run's figures, in the demo's order (``label`` names it)."""
    return [run.as_dict() for run in runs]
