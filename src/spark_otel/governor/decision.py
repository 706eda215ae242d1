"""The admission decision, pure: a candidate cell, what is in flight, and the rules in; the rule
that holds it back (or None) out. `admitted_in_order` applies it to a queue, oldest first."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from ..records.rules_file import CrossEngineRule, LaneRule, LimitRule, RulesFile

__all__ = ["InFlight", "admitted_in_order", "holding_rule", "limits", "triggers"]


@dataclass(frozen=True, slots=True)
class InFlight:
    """A cell in flight (or waiting, as a candidate): what the rules look at."""

    engine: str
    eval_name: str
    cell_class: str | None
    has_deadline: bool
    ceiling_bound: bool | None = None
    """Ceiling-bound at admission (`classing.profile`); None (a row an older runner wrote):
    taken as ``has_deadline``, version 1's meaning."""
    deadline_s: float | None = field(default=None, compare=False)
    """The ceiling itself, model s: what the deadline-slack law protects (`slack`)."""
    max_tokens: int | None = field(default=None, compare=False)
    """The answer's declared cap: the law's expected length (a bound)."""
    slowdown_budget: float | None = field(default=None, compare=False)
    """How much slower than its eval's best rate the cell may be made to decode by a neighbour
    the law admits (0.10: at most 10%); None: no budget (`Governor.slowdown_budget`)."""

    @property
    def bound(self) -> bool:
        return self.has_deadline if self.ceiling_bound is None else self.ceiling_bound


def holding_rule(
    candidate: InFlight,
    in_flight: Sequence[InFlight],
    rules: RulesFile,
    *,
    present: Iterable[InFlight] = (),
) -> LaneRule | LimitRule | CrossEngineRule | None:
    """The first rule that would be broken by admitting ``candidate`` beside ``in_flight``;
    None when it may start. ``present`` adds evals that count as running on their engine
    between cells (within ``eval_gap_s`` of their last cell's end) for the cross-engine rules."""
    on_engine = [c for c in in_flight if c.engine == candidate.engine]
    for lane in rules.lane:
        if lane.engine == candidate.engine and len(on_engine) >= lane.cells:
            return lane
    for limit in rules.limit:
        if limit.engine == candidate.engine and _selects(limit, candidate):
            held = sum(1 for c in on_engine if _selects(limit, c))
            if held >= limit.cells:
                return limit
    running = [*in_flight, *present]
    for cross in rules.cross_engine:
        if cross.engine != candidate.engine:
            continue
        if _triggers(cross, running) and len(on_engine) >= cross.cells:
            return cross
    return None


def _selects(limit: LimitRule, cell: InFlight) -> bool:
    return limit.selects(cell.eval_name, cell.cell_class, cell.bound)


def triggers(rule: CrossEngineRule, cell: InFlight) -> bool:
    """Whether ``cell`` running makes ``rule`` hold: a cell of its ``while_eval``; a ceiling-bound
    cell (``while_ceiling_bound``); else (version 1) any cell with a ceiling."""
    if cell.engine != rule.while_engine:
        return False
    if rule.while_eval is not None:
        return cell.eval_name == rule.while_eval
    return cell.bound if rule.while_ceiling_bound else cell.has_deadline


def limits(rule: LaneRule | LimitRule | CrossEngineRule, cell: InFlight) -> bool:
    """Whether ``rule`` counts ``cell`` against its cap (the cells it may hold back)."""
    if cell.engine != rule.engine:
        return False
    return _selects(rule, cell) if isinstance(rule, LimitRule) else True


def _triggers(rule: CrossEngineRule, running: Iterable[InFlight]) -> bool:
    return any(triggers(rule, c) for c in running)


def admitted_in_order(
    waiting: Sequence[InFlight],
    in_flight: Sequence[InFlight],
    rules: RulesFile,
    *,
    present: Iterable[InFlight] = (),
) -> list[bool]:
    """Which of ``waiting`` (oldest first) may start now, each in turn taking its slot before
    the next is considered: FIFO per lane, so no later cell takes a slot an earlier one that
    the same rule held back is due, while a cell held back only by its own eval's limit does
    not hold back a later cell of another eval."""
    flying = list(in_flight)
    present = list(present)
    out = []
    for candidate in waiting:
        ok = holding_rule(candidate, flying, rules, present=present) is None
        out.append(ok)
        if ok:
            flying.append(candidate)
    return out
