"""How the cells of each eval ended, per worker count: statuses, ceiling hits, salvage, and how
long the queue governor held them before they started."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from .. import _semconv as sc
from ..model import Cell, CellStatus
from .rates import ceiling_hit

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
    """Status counts, ceiling hits, salvaged findings and degraded cells per eval and worker count."""
    groups: dict[tuple[str, int | None], list[Cell]] = defaultdict(list)
    for c in cells:
        groups[(c.eval_name, c.workers)].append(c)
    out = []
    for (eval_name, workers), members in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1] or 0)):
        statuses = Counter(c.status.value for c in members)
        waits = [(c, w) for c in members if (w := c.admission_s or 0.0) > 0]
        rules = Counter(
            str(c.attributes[sc.CELL_QUEUE_RULE]) for c, _ in waits if sc.CELL_QUEUE_RULE in c.attributes
        )
        out.append(
            DeadlineOutcome(
                eval_name=eval_name,
                workers=workers,
                cells=len(members),
                statuses={s.value: statuses.get(s.value, 0) for s in CellStatus},
                ceiling_hits=sum(ceiling_hit(c) for c in members),
                salvaged_findings=sum(c.salvaged_findings for c in members),
                degraded=sum(c.degraded for c in members),
                queued=len(waits),
                longest_wait_s=max((w for _, w in waits), default=None),
                waits_past_deadline=sum(1 for c, w in waits if c.deadline_s is not None and w > c.deadline_s),
                held_by=rules.most_common(1)[0][0] if rules else None,
            )
        )
    return out
