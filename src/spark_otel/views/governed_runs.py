"""Act 5 of the demo, side by side: the same two evals ungoverned, under the static rules, and
under the deadline-slack law with no rules file, as a table, the adaptive arm's one-line answer,
and their JSON. The figures come from `demo.governed.RunFigures`, read here through
`GovernedRun` (views sit below the demo)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
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


NOTES = {
    "serial cells beside nemotron": "those that ran at least 90% of their time while the nemotron eval ran",
    "serial tok/s": "the median of the cells beside the nemotron eval, else of all its cells",
    "serial eval's cost %": "1 - serial tok/s over its Act 4 baseline alone",
    "nemotron wall s": "from its first cell asking (its start less its queue wait) to its last cell's end",
}


def _pct(value: float | None) -> str:
    return "-" if value is None else str(round(value * 100))


def governed_runs_table(runs: Sequence[GovernedRun]) -> tuple[list[str], list[list[Any]], dict[str, str]]:
    """The runs side by side: a column per run (in the demo's order), a row per figure, the
    serial figures over the serial cells and the nemotron ones over its cells (each count its
    n); and what the figures that need it mean, by row."""
    figures: list[tuple[str, Callable[[GovernedRun], Any]]] = [
        ("serial cells", lambda r: r.serial_cells),
        ("serial cells at the ceiling", lambda r: f"{r.ceiling_hits} of {r.serial_cells}"),
        ("longest serial cell s", lambda r: fmt_number(r.serial_longest_s, 0)),
        ("serial cells beside nemotron", lambda r: r.beside_cells),
        ("serial tok/s", lambda r: fmt_number(r.beside_median if r.beside_cells else r.serial_median)),
        ("serial eval's cost %", lambda r: _pct(r.cost)),
        ("nemotron cells", lambda r: r.load_cells),
        ("nemotron most at once", lambda r: r.load_peak),
        ("nemotron longest queue wait s", lambda r: fmt_number(r.load_waited_max_s, 0)),
        ("nemotron wall s", lambda r: fmt_number(r.load_wall_s, 0)),
        ("both evals' wall s", lambda r: fmt_number(r.both_wall_s, 0)),
    ]
    columns = ["model time", *(run.label for run in runs)]
    rows = [[label, *(value(run) for run in runs)] for label, value in figures]
    return columns, rows, dict(NOTES)


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
