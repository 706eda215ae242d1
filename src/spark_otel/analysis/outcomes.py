"""How the cells of each eval ended, per worker count: statuses, ceiling hits, salvage, and how
long the queue governor held them before they started."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from .. import _semconv as sc
from ..model import Cell, CellStatus

__all__ = ["DeadlineOutcome", "deadline_outcomes"]


@dataclass(frozen=True)
class DeadlineOutcome:
    """How the cells of one eval at one worker count ended."""

    eval_name: str
    workers: int | None
    cells: int
    statuses: dict[str, int]
    ceiling_hits: int
    salvaged_findings: int
    degraded: int
    queued: int = 0
    """Cells the governor held before they started (a queue wait above zero)."""
    longest_wait_s: float | None = None
    """The longest of those waits (model s); None when none waited."""
    waits_past_deadline: int = 0
    """Cells that waited longer than their own per-cell ceiling (allowed, reported)."""
    held_by: str | None = None
    """The rule that held the most of them."""


def deadline_outcomes(cells: Iterable[Cell]) -> list[DeadlineOutcome]:
    """Status counts, ceiling hits, salvaged findings and degraded cells per eval and worker count.

    One pass over the cells, each read once (a report's 100,000 cells: a pass per figure cost
    four times as long)."""
    groups: dict[tuple[str, int | None], _Tally] = {}
    for c in cells:
        key = (c.eval_name, c.workers)
        tally = groups.get(key)
        if tally is None:
            tally = groups[key] = _Tally()
        tally.add(c)
    return [
        tally.outcome(eval_name, workers)
        for (eval_name, workers), tally in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1] or 0))
    ]


class _Tally:
    """One group's running figures, as `deadline_outcomes` adds its cells in order."""

    __slots__ = ("cells", "degraded", "longest", "past_deadline", "queued", "rules", "salvaged", "statuses")

    def __init__(self) -> None:
        self.cells = self.salvaged = self.degraded = self.queued = self.past_deadline = 0
        self.statuses: Counter[CellStatus] = Counter()
        self.rules: Counter[str] = Counter()
        self.longest: float | None = None

    def add(self, c: Cell) -> None:
        self.cells += 1
        self.statuses[c.status] += 1
        self.salvaged += c.salvaged_findings
        self.degraded += c.status is CellStatus.DEADLINE and c.salvaged_findings > 0
        wait = c.admission_s or 0.0
        if wait > 0:
            self.queued += 1
            self.longest = wait if self.longest is None else max(self.longest, wait)
            self.past_deadline += c.deadline_s is not None and wait > c.deadline_s
            if sc.CELL_QUEUE_RULE in c.attributes:
                self.rules[str(c.attributes[sc.CELL_QUEUE_RULE])] += 1

    def outcome(self, eval_name: str, workers: int | None) -> DeadlineOutcome:
        return DeadlineOutcome(
            eval_name=eval_name,
            workers=workers,
            cells=self.cells,
            statuses={s.value: self.statuses.get(s, 0) for s in CellStatus},
            ceiling_hits=self.statuses.get(CellStatus.DEADLINE, 0),
            salvaged_findings=self.salvaged,
            degraded=self.degraded,
            queued=self.queued,
            longest_wait_s=self.longest,
            waits_past_deadline=self.past_deadline,
            held_by=self.rules.most_common(1)[0][0] if self.rules else None,
        )
