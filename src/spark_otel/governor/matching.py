"""Which cells each rule catches: the facts `rules check --store` and `lanes` show, so a person sees
that a rule in its general form governs the evals they mean (and no others) before relying on it.

A rule *catches* the cells it counts against its cap: a lane rule, every cell on its engine; a
limit, the cells it selects (eval, class, ceiling-bound or not); a cross-engine rule, the cells on
its engine that ran (or run, or wait) while it held. A cross-engine rule's *triggers* are the
cells on ``while_engine`` that make it hold (`decision.triggers`); it holds from a trigger's start
until ``eval_gap_s`` after its end, as the governor counts an eval present between two cells.

Cells are as the governor saw them at admission (`lanes`: the state file's rows) or would have
seen them (`rules check --store`: each recorded cell classed by `classing.profile` under the rules
checked, its recorded prompt size taken as declared, as a runner or integration passing it would).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .. import _semconv as sc
from .._clock import NS_PER_S
from ..records.rules_file import CrossEngineRule, LaneRule, LimitRule, RulesFile
from .classing import profile
from .decision import InFlight, limits, triggers

if TYPE_CHECKING:
    from ..model import Cell
    from ..store import Store
    from .state import LaneView

__all__ = ["Caught", "Seen", "StoreCatch", "caught", "caught_in_lanes", "caught_in_store", "seen_recorded"]

Rule = LaneRule | LimitRule | CrossEngineRule
_NOW = 2**63


@dataclass(frozen=True, slots=True)
class Seen:
    """A cell as admission sees it, with when it ran: ``end_ns`` None, running now (or waiting,
    ``waiting``: held back, not yet started); ``gap_ns``: how long after its end its eval still
    counts as present, in the cell's own clock."""

    cell: InFlight
    cell_id: str | None
    start_ns: int
    end_ns: int | None = None
    waiting: bool = False
    gap_ns: int = 0


@dataclass(frozen=True, slots=True)
class Caught:
    """One rule and the cells it catches."""

    rule: Rule
    held: list[Seen]
    """The cells it counts against its cap (a cross-engine rule: those while it held)."""
    triggers: list[Seen]
    """A cross-engine rule's: the cells that make it hold."""


@dataclass(frozen=True, slots=True)
class StoreCatch:
    """What each rule would have caught among a store's recent cells."""

    since_ns: int | None
    """The window's start: ``recent_s`` before the newest cell's start (None: an empty store)."""
    until_ns: int | None
    """The newest cell's start."""
    cells: int
    """The cells in the window on a named engine (the ones a governor could admit)."""
    no_engine: int
    """Cells in the window that name no engine: never governed, so caught by no rule."""
    caught: list[Caught]


def _while(trigger: Seen, cell: Seen) -> bool:
    """``cell`` ran (or runs, or waits) at some moment from ``trigger``'s start until its eval
    stopped counting as present."""
    trigger_end = trigger.end_ns + trigger.gap_ns if trigger.end_ns is not None else _NOW
    cell_end = cell.end_ns if cell.end_ns is not None else _NOW
    return cell.start_ns < trigger_end and trigger.start_ns < cell_end


def caught(rules: Sequence[Rule], cells: Sequence[Seen], *, present: Sequence[Seen] = ()) -> list[Caught]:
    """For each rule, in order, the cells it catches and (cross-engine) the cells that make it
    hold. ``present``: evals between two of their cells (within `RulesFile.eval_gap_s`), which
    make a cross-engine rule hold as their cells do; a waiting cell never does."""
    out = []
    for rule in rules:
        limited = [s for s in cells if limits(rule, s.cell)]
        if isinstance(rule, CrossEngineRule):
            firing = [s for s in (*cells, *present) if not s.waiting and triggers(rule, s.cell)]
            beside = [s for s in limited if any(_while(t, s) for t in firing)]
            out.append(Caught(rule, beside, firing))
        else:
            out.append(Caught(rule, limited, []))
    return out


def caught_in_lanes(rules: RulesFile, lanes: Sequence[LaneView]) -> list[Caught]:
    """Each rule's catch now: the cells in use and waiting, as each was classed at admission,
    and the evals present between two of their cells."""
    cells = [
        *(
            Seen(cell, cell_id, 0)
            for lane in lanes
            for cell, cell_id in zip(lane.in_use, lane.in_use_ids, strict=True)
        ),
        *(
            Seen(cell, cell_id, 0, waiting=True)
            for lane in lanes
            for (cell, _, _), cell_id in zip(lane.waiting, lane.waiting_ids, strict=True)
        ),
    ]
    present = [Seen(cell, None, 0) for lane in lanes for cell in lane.present]
    return caught(rules.rules, cells, present=present)


def seen_recorded(rules: RulesFile, cell: Cell) -> Seen | None:
    """A recorded cell as admission would have seen it under ``rules``: its class the one it was
    admitted as, if recorded, else classed from its ceiling, prompt size and eval family; None
    for a cell that names no engine (never governed)."""
    if cell.engine is None:
        return None
    declared = cell.attributes.get(sc.CELL_CLASS)
    p = profile(
        rules,
        engine=cell.engine,
        eval_name=cell.eval_name,
        deadline_s=cell.deadline_s,
        cell_class=declared if isinstance(declared, str) else None,
        prompt_tokens=cell.prompt_tokens,
    )
    scale = cell.attributes.get(sc.TIME_SCALE)
    speed = float(scale) if isinstance(scale, int | float) and scale > 0 else 1.0
    return Seen(
        InFlight(cell.engine, cell.eval_name, p.cell_class, cell.deadline_s is not None, p.ceiling_bound),
        cell.cell_id,
        cell.start_unix_ns,
        cell.end_unix_ns,
        gap_ns=int(rules.eval_gap_s * speed * NS_PER_S),
    )


def caught_in_store(rules: RulesFile, store: Store, *, recent_s: float) -> StoreCatch:
    """What each rule would have caught among the cells that started within ``recent_s`` before
    the store's newest cell (the newest, not now: a store of last week's run still answers)."""
    newest = store.cells(newest_first=True, limit=1)
    if not newest:
        return StoreCatch(None, None, 0, 0, caught(rules.rules, []))
    until = newest[0].start_unix_ns
    since = until - int(recent_s * NS_PER_S)
    recorded = store.cells(since_unix_ns=since)
    seen = [s for c in recorded if (s := seen_recorded(rules, c)) is not None]
    return StoreCatch(since, until, len(seen), len(recorded) - len(seen), caught(rules.rules, seen))
