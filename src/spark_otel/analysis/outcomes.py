"""How the cells of each eval ended, per worker count: statuses, ceiling hits, salvage."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

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


def deadline_outcomes(cells: Iterable[Cell]) -> list[DeadlineOutcome]:
    """Status counts, ceiling hits, salvaged findings and degraded cells per eval and worker count."""
    groups: dict[tuple[str, int | None], list[Cell]] = defaultdict(list)
    for c in cells:
        groups[(c.eval_name, c.workers)].append(c)
    out = []
    for (eval_name, workers), members in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1] or 0)):
        statuses = Counter(c.status.value for c in members)
        out.append(
            DeadlineOutcome(
                eval_name=eval_name,
                workers=workers,
                cells=len(members),
                statuses={s.value: statuses.get(s.value, 0) for s in CellStatus},
                ceiling_hits=sum(ceiling_hit(c) for c in members),
                salvaged_findings=sum(c.salvaged_findings for c in members),
                degraded=sum(c.degraded for c in members),
            )
        )
    return out
