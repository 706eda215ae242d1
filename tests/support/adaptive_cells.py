"""Finished cells the adaptive governor decided on, their attributes written by the governor's own
`Admission.span_attributes` from a verdict built here; and a small run of them (a serial
ceiling-bound eval on qwen, a batch eval on nemotron held for it, one batch cell that waited on a
static rule only) whose figures the tests work out by hand."""

from __future__ import annotations

from spark_otel.governor.admission import Admission
from spark_otel.governor.decision import InFlight
from spark_otel.governor.slack import Projection, Protected, SlackReason, SlackVerdict
from spark_otel.model import Cell

from .cells import cell

T0_NS = 1_800_000_000 * 1_000_000_000
"""When the run began, Unix ns: fixed, so printed times are the same on every run."""
CEILING_S = 1800.0


def protected(cell_id: str | None, *, eval_name: str = "serial", engine: str = "qwen") -> Protected:
    """A ceiling-bound cell (or, with no id, the next cell of its eval) as the law saw it."""
    return Protected(cell_id, engine, eval_name, CEILING_S, 300.0, 4000, 9.5, 12000.0)


def verdict(
    reason: SlackReason, who: Protected | None = None, *, finish_s: float = 0.0, rate: float = 0.0
) -> SlackVerdict:
    """The law's verdict; with ``finish_s``, the projection of ``who`` it rested on."""
    if who is None or not finish_s:
        return SlackVerdict(reason, who)
    margin = (CEILING_S - finish_s) / CEILING_S
    return SlackVerdict(reason, who, Projection(who.cell_id, who.engine, finish_s, margin, rate))


def decided(
    uid: str,
    start_s: float,
    end_s: float,
    *,
    eval_name: str,
    engine: str,
    admitted_on: SlackVerdict | None,
    held: SlackVerdict | None = None,
    waited_s: float = 0.0,
    rule: str | None = None,
    deadline_s: float | None = None,
    held_s: float | None = None,
    holds: int | None = None,
) -> Cell:
    """A finished cell whose span carries what the governor set on it for this admission; a held
    cell held by the law for its whole wait in one hold unless ``held_s`` and ``holds`` say."""
    flight = InFlight(engine, eval_name, None, deadline_s is not None, deadline_s=deadline_s)
    if held_s is None:
        held_s = waited_s if held is not None else 0.0
    if holds is None:
        holds = int(held is not None)
    admission = Admission(1, flight, waited_s, rule, admitted_on, held, held_s, holds)
    return cell(
        uid,
        start_s,
        end_s,
        1000,
        eval_name=eval_name,
        engine=engine,
        t0_ns=T0_NS,
        deadline_s=deadline_s,
        attributes=admission.span_attributes(),
    )


def decided_run() -> list[Cell]:
    """Two serial cells (nothing to protect) and six batch cells: b0 and b1 admitted at once into
    the slack (margins 30% and 20%, rates 8.0 and 6.5 tok/s); b2 held 120 s for serial-1, whose
    length was unknown, then admitted into its slack (25%, 7.25 tok/s); b3 held 45.5 s for serial-1
    waiting for sustained slack, then admitted with nothing to protect; b4 held 12.25 s for the next
    serial cell (projection under the margin), then run ungoverned (no admission verdict: the
    governor failed open); b5 waited 30 s on a static rule only."""
    serial_1, following = protected("serial-1"), protected(None)
    nothing = verdict(SlackReason.NOTHING_PROTECTED)
    tight = verdict(SlackReason.TIGHT, following, finish_s=1700.0, rate=5.0)
    return [
        decided("s0", 0, 400, eval_name="serial", engine="qwen", admitted_on=nothing, deadline_s=CEILING_S),
        decided("s1", 400, 900, eval_name="serial", engine="qwen", admitted_on=nothing, deadline_s=CEILING_S),
        decided(
            "b0", 10, 100, eval_name="batch", engine="nemotron",
            admitted_on=verdict(SlackReason.SLACK, serial_1, finish_s=1260.0, rate=8.0),
        ),
        decided(
            "b1", 20, 140, eval_name="batch", engine="nemotron",
            admitted_on=verdict(SlackReason.SLACK, serial_1, finish_s=1440.0, rate=6.5),
        ),
        decided(
            "b2", 530, 700, eval_name="batch", engine="nemotron",
            admitted_on=verdict(SlackReason.SLACK, serial_1, finish_s=1350.0, rate=7.25),
            held=verdict(SlackReason.LENGTH_UNKNOWN, serial_1), waited_s=120.0,
            rule="adaptive: length unknown",
        ),
        decided(
            "b3", 600, 780, eval_name="batch", engine="nemotron",
            admitted_on=verdict(SlackReason.NOTHING_PROTECTED),
            held=verdict(SlackReason.SETTLING, serial_1, finish_s=1500.0, rate=6.0), waited_s=45.5,
        ),
        decided(
            "b4", 910, 1000, eval_name="batch", engine="nemotron", admitted_on=None,
            held=tight, waited_s=12.25,
        ),
        decided(
            "b5", 905, 960, eval_name="batch", engine="nemotron",
            admitted_on=verdict(SlackReason.NOTHING_PROTECTED), waited_s=30.0,
            rule="nemotron lane at most 2 cells",
        ),
    ]  # fmt: skip
