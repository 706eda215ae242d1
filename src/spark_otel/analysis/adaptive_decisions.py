"""What the adaptive governor decided, from the finished cells' spans: per eval, the cells it
admitted at once and those it held, how long and why, which protected cell each hold was for,
and the margins and rates its admissions rested on.

The facts are the ``spark_otel.cell.adaptive.*`` attributes the governor sets on each cell span
(`spark_otel.governor.admission.Admission.span_attributes`): the verdict the cell was admitted on
(reason, protected cell, projected finish, margin, rate used) and the law's last hold of it
(reason, protected cell). A hold's length is the law's own share of the cell's wait
(``spark_otel.cell.adaptive.held_s``, model s); a cell recorded before that attribute existed
counts its whole queue wait (``spark_otel.cell.queue_wait_s``), any part a static rule held it
included. Every figure carries the count of cells it rests on. Pure: cells in, facts out.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence

from .. import _semconv as sc
from ..model import AttributeValue, Cell
from ._result import Result
from .stats import percentile

__all__ = [
    "AdaptiveDecisions",
    "CellDecision",
    "EvalDecisions",
    "HoldCount",
    "Spread",
    "adaptive_decisions",
    "cell_decision",
]


class Spread(Result):
    """Smallest, median and largest of ``n`` values; None each where ``n`` is 0."""

    n: int
    low: float | None = None
    median: float | None = None
    high: float | None = None


class HoldCount(Result):
    """Holds sharing one key (a reason, or the protected cell they were for): how many cells,
    and their holds (`CellDecision.hold_s`) added up (model s)."""

    key: str
    cells: int
    hold_s: float


class CellDecision(Result):
    """One finished cell the adaptive governor decided on."""

    uid: str
    eval_name: str
    cell_id: str
    engine: str | None
    end_unix_ns: int
    reason: str | None
    """Why the law admitted it (``slack``, ``nothing to protect``); None: it ran ungoverned after a
    hold (the governor failed open) or an older runner recorded only the hold."""
    protected: str | None
    """The protected cell its admission was judged against (the tightest)."""
    projected_finish_s: float | None
    """That cell's projected elapsed at its end after the admission, model s."""
    margin: float | None
    """(ceiling - projected finish) / ceiling of that cell, at admission."""
    rate_used: float | None
    """That cell's rate the projection used, after the admission, tok/s."""
    waited_s: float
    """Model seconds the cell waited before it started (0: admitted at once)."""
    hold_s: float = 0.0
    """Model seconds of that wait the law held it (``spark_otel.cell.adaptive.held_s``); for a
    cell recorded without it, held by the law, its whole wait."""
    holds: int | None = None
    """How many times the law began holding it; None: not recorded (an older runner)."""
    held_reason: str | None
    """Why the law last held it; None: the law never held it."""
    held_for: str | None
    """The protected cell its last hold named."""
    queue_rule: str | None
    """What held it last (a static rule, or the law's words)."""

    @property
    def held(self) -> bool:
        return self.held_reason is not None

    @property
    def at_once(self) -> bool:
        return self.waited_s <= 0 and not self.held


class EvalDecisions(Result):
    """One eval's cells the adaptive governor decided on."""

    eval_name: str
    engines: list[str]
    cells: int
    """Cells of the eval the law decided (each figure below counts among them)."""
    at_once: int
    """Admitted with no wait."""
    held: int
    """Held by the law at least once before they started."""
    waited_for_rules: int
    """Waited, but never on the law: a static rule or the queue held them."""
    hold_s: float
    """The held cells' holds (`CellDecision.hold_s`) added up, model s."""
    longest: CellDecision | None
    """The cell the law held longest."""
    reasons: list[HoldCount]
    """Held cells by the law's last reason, most first."""
    held_for: list[HoldCount]
    """Held cells by the protected cell their last hold named, most first."""
    admitted_on: list[HoldCount]
    """All its cells by the reason they were admitted on (``hold_s``: their waits), most first."""
    margin: Spread
    """Margins the admissions rested on (cells admitted with a projection)."""
    rate_used: Spread
    """Rates, tok/s, those projections used."""


class AdaptiveDecisions(Result):
    """The adaptive governor's decisions over a set of cells, per eval and in all."""

    cells_seen: int
    """Cells looked at, decided or not."""
    cells: int
    """Of them, cells the law decided."""
    held: int
    hold_s: float
    longest: CellDecision | None
    evals: list[EvalDecisions]

    @property
    def any(self) -> bool:
        return self.cells > 0


def _number(value: AttributeValue | None) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _text(value: AttributeValue | None) -> str | None:
    return value if isinstance(value, str) and value else None


def cell_decision(cell: Cell) -> CellDecision | None:
    """The adaptive governor's decision on ``cell``; None where the law did not decide it (no
    governor, static rules only, or a cell recorded before adaptive governing existed)."""
    a = cell.attributes
    reason, held = _text(a.get(sc.CELL_ADAPTIVE_REASON)), _text(a.get(sc.CELL_ADAPTIVE_HELD_REASON))
    if reason is None and held is None:
        return None
    waited = max(cell.admission_s or 0.0, 0.0)
    return CellDecision(
        uid=cell.uid,
        eval_name=cell.eval_name,
        cell_id=cell.cell_id,
        engine=cell.engine,
        end_unix_ns=cell.end_unix_ns,
        reason=reason,
        protected=_text(a.get(sc.CELL_ADAPTIVE_PROTECTED)),
        projected_finish_s=_number(a.get(sc.CELL_ADAPTIVE_FINISH_S)),
        margin=_number(a.get(sc.CELL_ADAPTIVE_MARGIN)),
        rate_used=_number(a.get(sc.CELL_ADAPTIVE_RATE)),
        waited_s=waited,
        hold_s=_hold_s(a.get(sc.CELL_ADAPTIVE_HELD_S), waited, held is not None),
        holds=_count(a.get(sc.CELL_ADAPTIVE_HOLDS)),
        held_reason=held,
        held_for=_text(a.get(sc.CELL_ADAPTIVE_HELD_FOR)),
        queue_rule=_text(a.get(sc.CELL_QUEUE_RULE)),
    )


def _hold_s(recorded: AttributeValue | None, waited: float, held: bool) -> float:
    """The law's share of the wait where the span records it (never past the wait), else the
    whole wait of a cell the law held."""
    value = _number(recorded)
    if value is not None and math.isfinite(value):
        return min(max(value, 0.0), waited)
    return waited if held else 0.0


def _count(value: AttributeValue | None) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _spread(values: Sequence[float]) -> Spread:
    if not values:
        return Spread(n=0)
    return Spread(n=len(values), low=min(values), median=percentile(values, 0.5), high=max(values))


def _counts(pairs: Iterable[tuple[str, float]]) -> list[HoldCount]:
    cells: dict[str, int] = defaultdict(int)
    seconds: dict[str, float] = defaultdict(float)
    for key, waited in pairs:
        cells[key] += 1
        seconds[key] += waited
    return [
        HoldCount(key=k, cells=cells[k], hold_s=seconds[k])
        for k in sorted(cells, key=lambda k: (-cells[k], -seconds[k], k))
    ]


def _longest(decisions: Iterable[CellDecision]) -> CellDecision | None:
    held = [d for d in decisions if d.held]
    return max(held, key=lambda d: (d.hold_s, -d.end_unix_ns)) if held else None


def _eval(name: str, decisions: list[CellDecision]) -> EvalDecisions:
    held = [d for d in decisions if d.held]
    projected = [d for d in decisions if d.margin is not None]
    return EvalDecisions(
        eval_name=name,
        engines=sorted({d.engine for d in decisions if d.engine is not None}),
        cells=len(decisions),
        at_once=sum(1 for d in decisions if d.at_once),
        held=len(held),
        waited_for_rules=sum(1 for d in decisions if not d.held and d.waited_s > 0),
        hold_s=sum(d.hold_s for d in held),
        longest=_longest(held),
        reasons=_counts((d.held_reason or "", d.hold_s) for d in held),
        held_for=_counts((d.held_for or "-", d.hold_s) for d in held),
        admitted_on=_counts((d.reason or "-", d.waited_s) for d in decisions),
        margin=_spread([d.margin for d in projected if d.margin is not None]),
        rate_used=_spread([d.rate_used for d in projected if d.rate_used is not None]),
    )


def adaptive_decisions(cells: Iterable[Cell]) -> AdaptiveDecisions:
    """The adaptive governor's decisions on ``cells``, per eval (by name) and in all."""
    seen = 0
    by_eval: dict[str, list[CellDecision]] = defaultdict(list)
    for cell in cells:
        seen += 1
        decision = cell_decision(cell)
        if decision is not None:
            by_eval[decision.eval_name].append(decision)
    evals = [_eval(name, by_eval[name]) for name in sorted(by_eval)]
    longest = _longest(e.longest for e in evals if e.longest is not None)
    return AdaptiveDecisions(
        cells_seen=seen,
        cells=sum(e.cells for e in evals),
        held=sum(e.held for e in evals),
        hold_s=sum(e.hold_s for e in evals),
        longest=longest,
        evals=evals,
    )
