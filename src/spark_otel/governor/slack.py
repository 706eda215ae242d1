"""The deadline-slack control law, pure: the box's protected cells in, admit or hold out.

A candidate cell (on any engine of the box) is admitted only while every protected cell (each
ceiling-bound cell in flight, and the next cell of a ceiling-bound eval between two of its
cells) stays projected to finish under its ceiling with a margin, *after* the admission:

    remaining  = expected length - tokens so far        (at least 10% of the tokens so far, once
                                                          a cell outruns every length seen)
    rate after = live rate x factor ** (1 + unseen)     (factor: what one more neighbour leaves of
                                                          the rate; unseen: cells admitted too
                                                          recently to show in the live rate yet)
    finish     = elapsed + remaining / rate after
    margin     = (ceiling - finish) / ceiling

The expected length is the longest of its eval's completed cells, else the ``max_tokens`` the
cell declared; with neither (no cell of the eval finished yet) the length is unknown, and a
protected cell with an unknown length, or no live rate (it never streamed, its figures are older
than the lease, or it stalled), holds every admission: what cannot be projected is protected as a
static rule of 0 would protect it, and the reason says so.

Hysteresis, so the width does not oscillate: admitting, the law holds once the tightest margin
falls below `SlackParams.hold_margin`; holding, it admits again only after the tightest margin
stayed at or above the wider `SlackParams.admit_margin` for `SlackParams.sustain_s` real seconds.
It never cancels a running cell: a hold only keeps the candidate waiting.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum

__all__ = ["Hysteresis", "Projection", "Protected", "SlackParams", "SlackReason", "SlackVerdict", "decide"]

LATE_FLOOR = 0.1
"""A cell past every length seen is taken to need at least this share of its tokens so far more."""


class SlackReason(StrEnum):
    NOTHING_PROTECTED = "nothing to protect"
    SLACK = "slack"
    TIGHT = "projection under the margin"
    SETTLING = "waiting for sustained slack"
    LENGTH_UNKNOWN = "length unknown"
    RATE_UNKNOWN = "rate unknown"

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
    deadline_s: float
    elapsed_s: float
    """Model seconds since admission (0 for the next cell of an eval between cells)."""
    tokens: int | None
    rate: float | None
    """Live decode rate, model tok/s; None when unknown or stale."""
    expected_tokens: float | None
    """Its eval's longest completed cell, else its declared ``max_tokens``; None: unknown."""
    unseen: int = 0
    """Neighbours admitted too recently to show in ``rate`` yet."""

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
        return (
            f"adaptive: {self.reason}, protecting {who}: projected {p.finish_s:.0f} s of "
            f"{self.protected.deadline_s:.0f} s (margin {p.margin:.0%}) at {p.rate_used:.1f} tok/s"
        )


@dataclass(frozen=True, slots=True)
class Hysteresis:
    """The law's memory between decisions (per candidate engine, per process)."""

    holding: bool = False
    slack_since_s: float | None = None


def project(cell: Protected, factor: float) -> Projection | SlackReason:
    """``cell``'s projected finish after one more neighbour, or why it cannot be projected."""
    if cell.expected_tokens is None:
        return SlackReason.LENGTH_UNKNOWN
    if cell.rate is None or not cell.rate > 0:
        return SlackReason.RATE_UNKNOWN
    done = cell.tokens or 0
    remaining = max(cell.expected_tokens - done, LATE_FLOOR * done)
    rate = cell.rate * factor ** (1 + cell.unseen)
    finish = cell.elapsed_s + remaining / rate if rate > 0 else math.inf
    margin = (cell.deadline_s - finish) / cell.deadline_s
    return Projection(cell.cell_id, cell.engine, finish, margin, rate)


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
    tightest: tuple[Protected, Projection] | None = None
    for cell in protected:
        out = project(cell, factor(cell))
        if isinstance(out, SlackReason):
            return SlackVerdict(out, cell), Hysteresis(holding=True)
        if tightest is None or out.margin < tightest[1].margin:
            tightest = (cell, out)
    assert tightest is not None
    cell, p = tightest
    if p.margin < params.hold_margin:
        return SlackVerdict(SlackReason.TIGHT, cell, p), Hysteresis(holding=True)
    if not memory.holding:
        return SlackVerdict(SlackReason.SLACK, cell, p), memory
    if p.margin < params.admit_margin:
        return SlackVerdict(SlackReason.SETTLING, cell, p), replace(memory, slack_since_s=None)
    since = memory.slack_since_s if memory.slack_since_s is not None else now_s
    if now_s - since >= params.sustain_s:
        return SlackVerdict(SlackReason.SLACK, cell, p), Hysteresis()
    return SlackVerdict(SlackReason.SETTLING, cell, p), Hysteresis(holding=True, slack_since_s=since)
