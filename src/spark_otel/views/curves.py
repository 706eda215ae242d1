"""A rate curve in words: which curve it is, when and how it was measured, and where its lane
stopped gaining. The advisor's rules, the answers, the report's plots and the rules file all
describe a curve this one way."""

from __future__ import annotations

from datetime import UTC, datetime

from .._clock import NS_PER_S
from ..analysis.advisor import LaneShape
from ..records.rate_curve import RateCurve

__all__ = ["describe_curve", "lane_evidence"]


def _when(unix_ns: int) -> str:
    return datetime.fromtimestamp(unix_ns / NS_PER_S, UTC).strftime("%Y-%m-%d %H:%M UTC")


def describe_curve(curve: RateCurve) -> str:
    """One phrase: which curve, when, measured idle or under load, at which levels."""
    levels = ", ".join(str(s) for s in curve.streams)
    if curve.source == "probe":
        what = f"probe {curve.run!r}" if curve.run else "probe"
    else:
        what = f"the {curve.engine} cells"
    state = f"under load ({curve.under_load})" if curve.under_load else "idle"
    plural = "s" if levels != "1" else ""
    when = f" of {_when(curve.measured_unix_ns)}" if curve.measured_unix_ns is not None else ""
    return f"{what}{when}, {state}, at {levels} stream{plural}"


def lane_evidence(shape: LaneShape) -> str:
    """Where the lane stopped gaining, naming the two levels that show it."""
    low, high = shape.low, shape.high
    if shape.kind == "single" or low is None or high is None:
        return f"one level measured ({shape.streams} stream{'s' if shape.streams > 1 else ''})"
    if shape.kind == "falls":
        return (
            f"aggregate peaks at {low.aggregate_rate:,.0f} tok/s at {low.streams} streams and falls to "
            f"{high.aggregate_rate:,.0f} at {high.streams}"
        )
    if shape.kind == "flattens":
        return (
            f"aggregate flattens: {low.aggregate_rate:,.0f} tok/s at {low.streams} streams, "
            f"{high.aggregate_rate:,.0f} at {high.streams} ({shape.gain:+.0%})"
        )
    return (
        f"aggregate still rising at {high.streams} streams, the most measured: {low.aggregate_rate:,.0f} "
        f"tok/s at {low.streams}, {high.aggregate_rate:,.0f} at {high.streams} ({shape.gain:+.0%})"
    )
