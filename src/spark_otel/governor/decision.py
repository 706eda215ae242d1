"""The admission decision, pure: a candidate cell, what is in flight, and the rules in; the rule
that holds it back (or None) out. `admitted_in_order` applies it to a queue, oldest first."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ..records.rules_file import CrossEngineRule, LaneRule, LimitRule, RulesFile

__all__ = ["InFlight", "admitted_in_order", "holding_rule"]


@dataclass(frozen=True, slots=True)
class InFlight:
    """A cell in flight (or waiting, as a candidate): what the rules look at."""

    engine: str
    eval_name: str
    cell_class: str | None
    has_deadline: bool


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
        if limit.engine == candidate.engine and limit.selects(candidate.eval_name, candidate.cell_class):
            held = sum(1 for c in on_engine if limit.selects(c.eval_name, c.cell_class))
            if held >= limit.cells:
                return limit
    running = [*in_flight, *present]
    for cross in rules.cross_engine:
        if cross.engine != candidate.engine:
            continue
        if _triggers(cross, running) and len(on_engine) >= cross.cells:
            return cross
    return None


def _triggers(rule: CrossEngineRule, running: Iterable[InFlight]) -> bool:
    for c in running:
        if c.engine == rule.while_engine and (
            c.eval_name == rule.while_eval if rule.while_eval is not None else c.has_deadline
        ):
            return True
    return False


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
