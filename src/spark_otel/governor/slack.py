"""The deadline-slack control law, pure: the box's protected cells in, admit or hold out.

A candidate cell (on any engine of the box) is admitted only while every protected cell (each
ceiling-bound cell in flight, and the next cell of a ceiling-bound eval between two of its
cells) stays projected to finish under its ceiling with a margin, *after* the admission:

    remaining  = expected length - tokens so far        (at least 10% of the tokens so far, once
                                                          a cell outruns every length seen)
    rate after = live rate x factor ** (1 + unseen)     (factor: what one more neighbour leaves of
                                                          the rate; unseen: cells admitted too
                                                          recently to show in the live rate yet)
    drain      = how long the candidate and every other cell in flight are expected to run yet
    in drain   = min(remaining, rate after x drain)
    finish     = elapsed + in drain / rate after + (remaining - in drain) / rate alone
    margin     = (ceiling - finish) / ceiling

Drain-aware: a hold takes effect as soon as the neighbours in flight end, so an admission costs a
protected cell only the neighbours' remaining time at the slower rate, not the rest of its own
length; after the drain the cell decodes at ``rate alone`` (the best rate its eval's cells ended
at, at least the live rate). Where a neighbour's length is unknown (its eval has no completed
cell yet, or it outran them all) the drain is unbounded and the whole remainder is projected at
the rate after the admission.

The expected length is the ``max_tokens`` the cell declared (a bound: a deadline is lost to the
long cells, and an eval's cells vary several-fold), else the longest of its eval's completed
cells; with neither the length is unknown, and a protected cell with an unknown length, or no
live rate (it never streamed, its figures are older than the lease, or it stalled), holds every
admission: what cannot be projected is protected as a static rule of 0 would protect it, and the
reason says so.

Hysteresis, so the width does not oscillate: the law holds once the tightest margin falls below
`SlackParams.hold_margin`; after it had admitted a cell, such a hold arms the hysteresis, and it
admits again only after the tightest margin stayed at or above the wider
`SlackParams.admit_margin` for `SlackParams.sustain_s` real seconds, or at once when the cell it
held for is no longer protected (it ended: the next one is a fresh projection, not a noisy rate
crossing back). It never cancels a running cell: a hold only keeps the candidate waiting.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum

__all__ = [
    "Hysteresis",
    "Projection",
    "Protected",
    "SlackParams",
    "SlackReason",
    "SlackVerdict",
    "decide",
    "over_budget",
]

LATE_FLOOR = 0.1
"""A cell past every length seen is taken to need at least this share of its tokens so far more."""


class SlackReason(StrEnum):
    NOTHING_PROTECTED = "nothing to protect"
    SLACK = "slack"
    TIGHT = "projection under the margin"
    SETTLING = "waiting for sustained slack"
    LENGTH_UNKNOWN = "length unknown"
    RATE_UNKNOWN = "rate unknown"
    BUDGET = "over its slowdown budget"
    KNEE = "at the engine's throughput knee"
    """Nothing to protect, and the engine as wide as its learned knee (`knee`): more width would
    add latency, not throughput."""

    @property
    def admits(self) -> bool:
        return self in (SlackReason.NOTHING_PROTECTED, SlackReason.SLACK)


@dataclass(frozen=True, slots=True)
class SlackParams:
    """The law's parameters (why each default: docs/governor.md, "The deadline-slack control law")."""

    hold_margin: float = 0.10
    """Hold once a projected finish comes within this share of its ceiling."""
    admit_margin: float = 0.20
    """Admit again only when every projection clears this share of its ceiling..."""
    sustain_s: float = 3.0
    """...for this many real seconds without a break."""
    prior_factor: float = 0.7
    """What one more neighbour leaves of a cell's rate, before anything was measured or learned."""


@dataclass(frozen=True, slots=True)
class Protected:
    """A ceiling-bound cell the candidate's admission could slow, as the box shows it now."""

    cell_id: str | None
    engine: str
    eval_name: str
    deadline_s: float | None
    """Its ceiling, model s; None for a cell protected only by its slowdown budget."""
    elapsed_s: float
    """Model seconds since admission (0 for the next cell of an eval between cells)."""
    tokens: int | None
    rate: float | None
    """Live decode rate, model tok/s; None when unknown or stale."""
    expected_tokens: float | None
    """Its eval's longest completed cell, else its declared ``max_tokens``; None: unknown."""
    unseen: int = 0
    """Neighbours admitted too recently to show in ``rate`` yet."""
    drain_s: float = math.inf
    """Model seconds the candidate and every other cell in flight are expected to run yet (inf:
    some length unknown): how long the rate after the admission lasts."""
    alone_rate: float | None = None
    """The best rate its eval's cells ended at, model tok/s: the rate once the neighbours drain."""
    budget: float | None = None
    """Its eval's slowdown budget: the rate after the admission stays at least ``1 - budget`` of
    its best rate (``alone_rate``, else its live rate)."""

    @property
    def key(self) -> tuple[str | None, str, str]:
        return (self.cell_id, self.engine, self.eval_name)

    @property
    def name(self) -> str:
        """The cell id; the next cell of its eval for one between two cells."""
        return self.cell_id if self.cell_id is not None else f"next cell of {self.eval_name}"


@dataclass(frozen=True, slots=True)
class Projection:
    cell_id: str | None
    engine: str
    finish_s: float
    """Projected elapsed at its end, model s (inf: a stalled rate)."""
    margin: float
    """(ceiling - finish) / ceiling."""
    rate_used: float
    """The rate projected after the admission, model tok/s."""


@dataclass(frozen=True, slots=True)
class SlackVerdict:
    reason: SlackReason
    protected: Protected | None = None
    """The cell that decided: the tightest, or the one that could not be projected."""
    projection: Projection | None = None

    @property
    def admit(self) -> bool:
        return self.reason.admits

    def describe(self) -> str:
        if self.protected is None:
            return f"adaptive: {self.reason}"
        who = f"{self.protected.name} ({self.protected.eval_name} on {self.protected.engine})"
        if self.projection is None:
            return f"adaptive: {self.reason}, protecting {who}"
        p = self.projection
        if self.reason is SlackReason.BUDGET:
            best = max(self.protected.alone_rate or 0.0, self.protected.rate or 0.0)
            return (
                f"adaptive: {self.reason}, protecting {who}: {p.rate_used:.1f} tok/s after the "
                f"admission against its best {best:.1f} (budget {self.protected.budget:.0%} slower)"
            )
        ceiling = (
            f"{self.protected.deadline_s:.0f} s" if self.protected.deadline_s is not None else "no ceiling"
        )
        return (
            f"adaptive: {self.reason}, protecting {who}: projected {p.finish_s:.0f} s of "
            f"{ceiling} (margin {p.margin:.0%}) at {p.rate_used:.1f} tok/s"
        )


@dataclass(frozen=True, slots=True)
class Hysteresis:
    """The law's memory between decisions (per candidate engine, per process)."""

    holding: bool = False
    slack_since_s: float | None = None
    held_for: tuple[str | None, str, str] | None = None
    """The protected cell (`Protected.key`) the hold began for: once it is gone, the hold is."""
    admitted: bool = False
    """Something was admitted since the memory was last cleared: only a hold after an admission
    arms the hysteresis (before one, nothing can oscillate)."""


def project(cell: Protected, factor: float) -> Projection | SlackReason:
    """``cell``'s projected finish after one more neighbour, or why it cannot be projected."""
    if cell.expected_tokens is None and cell.deadline_s is not None:
        return SlackReason.LENGTH_UNKNOWN
    if cell.rate is None or not cell.rate > 0:
        return SlackReason.RATE_UNKNOWN
    done = cell.tokens or 0
    expected = cell.expected_tokens if cell.expected_tokens is not None else done
    remaining = max(expected - done, LATE_FLOOR * done)
    rate = cell.rate * factor ** (1 + cell.unseen)
    if not rate > 0:
        finish = math.inf
    elif math.isfinite(cell.drain_s):
        in_drain = min(remaining, rate * cell.drain_s)
        alone = max(rate, cell.alone_rate or 0.0, cell.rate)
        finish = cell.elapsed_s + in_drain / rate + (remaining - in_drain) / alone
    else:
        finish = cell.elapsed_s + remaining / rate
    margin = (cell.deadline_s - finish) / cell.deadline_s if cell.deadline_s is not None else math.inf
    return Projection(cell.cell_id, cell.engine, finish, margin, rate)


def over_budget(cell: Protected, projection: Projection) -> bool:
    """Whether the admission would slow ``cell`` past its eval's slowdown budget: the rate after
    it under ``1 - budget`` of the best rate its eval's cells ended at (else its live rate)."""
    if cell.budget is None:
        return False
    best = max(cell.alone_rate or 0.0, cell.rate or 0.0)
    return projection.rate_used < (1.0 - cell.budget) * best


def _screen(
    protected: Sequence[Protected], factor: Callable[[Protected], float]
) -> SlackVerdict | tuple[Protected, Projection] | None:
    """A hold for a cell that cannot be projected or would go over its slowdown budget; else the
    tightest projection (None: only budget cells, none of them streaming)."""
    tightest: tuple[Protected, Projection] | None = None
    for cell in protected:
        out = project(cell, factor(cell))
        if isinstance(out, SlackReason):
            if cell.deadline_s is None:
                continue  # budget only, and no rate to hold it to: nothing to protect it by
            return SlackVerdict(out, cell)
        if over_budget(cell, out):
            return SlackVerdict(SlackReason.BUDGET, cell, out)
        if tightest is None or out.margin < tightest[1].margin:
            tightest = (cell, out)
    return tightest


def decide(  # noqa: PLR0911  (one return per outcome reads plainer than a chain of flags)
    protected: Sequence[Protected],
    factor: Callable[[Protected], float],
    memory: Hysteresis,
    now_s: float,
    params: SlackParams = SlackParams(),
) -> tuple[SlackVerdict, Hysteresis]:
    """Admit or hold a candidate beside ``protected``; ``factor(cell)``: what the admission leaves
    of that cell's rate. Returns the verdict and the memory for the next decision."""
    if not protected:
        return SlackVerdict(SlackReason.NOTHING_PROTECTED), Hysteresis()
    if memory.held_for is not None and memory.held_for not in {c.key for c in protected}:
        memory = Hysteresis()  # the cell it held for ended: judge the box afresh
    screened = _screen(protected, factor)
    if isinstance(screened, SlackVerdict):
        return screened, memory  # a fact missing or a budget, not a margin crossed: no hysteresis
    tightest = screened
    if tightest is None:  # only budget cells, none of them streaming
        return SlackVerdict(SlackReason.NOTHING_PROTECTED), memory
    cell, p = tightest
    if p.margin < params.hold_margin:
        if memory.holding:
            return SlackVerdict(SlackReason.TIGHT, cell, p), replace(memory, slack_since_s=None)
        return SlackVerdict(SlackReason.TIGHT, cell, p), Hysteresis(
            holding=memory.admitted, held_for=cell.key, admitted=memory.admitted
        )
    if not memory.holding:
        return SlackVerdict(SlackReason.SLACK, cell, p), replace(memory, admitted=True)
    if p.margin < params.admit_margin:
        return SlackVerdict(SlackReason.SETTLING, cell, p), replace(memory, slack_since_s=None)
    since = memory.slack_since_s if memory.slack_since_s is not None else now_s
    if now_s - since >= params.sustain_s:
        return SlackVerdict(SlackReason.SLACK, cell, p), Hysteresis(held_for=memory.held_for, admitted=True)
    return SlackVerdict(SlackReason.SETTLING, cell, p), replace(memory, slack_since_s=since)
