"""What a rule may rest on: which curve of an engine to trust, whether it measured one stream
alone, where its lane stopped gaining, and the command that measures what is missing.

The advisor answers only from evidence. A curve measured while another tenant decoded reads
the engine slower than it is, so a curve from an idle engine wins over the engine's own cells,
and both over a curve taken under load, which is used only when nothing better exists (and
says so). A worker count needs the single-stream rate it is compared with, measured. A lane is
capped only where its aggregate measurably fell or stopped gaining; one still rising at the
most streams measured is a reason to measure higher, not a cap.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from itertools import pairwise
from typing import Literal

from ..._clock import NS_PER_S
from ...records.rate_curve import CurvePoint, RateCurve

__all__ = [
    "LaneShape",
    "choose_curves",
    "describe_curve",
    "engine_url",
    "lane_shape",
    "probe_command",
]

_PLACEHOLDER_URL = "URL"


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


def _rank(curve: RateCurve) -> tuple[bool, int, int]:
    """Higher is better: first a curve a worker count may rest on (one stream and a second
    level measured), then an idle probe, the engine's cells, anything under load; the newest
    within each."""
    usable = curve.measured_single_stream and len(curve.points) >= 2
    if curve.under_load:
        tier = 0
    elif curve.source == "probe":
        tier = 2
    else:
        tier = 1
    return usable, tier, curve.measured_unix_ns or 0


def choose_curves(candidates: Iterable[RateCurve]) -> dict[str, RateCurve]:
    """The curve each engine's rules rest on, from every candidate (probe and cells curves)."""
    best: dict[str, RateCurve] = {}
    for curve in candidates:
        held = best.get(curve.engine)
        if held is None or _rank(curve) >= _rank(held):  # a later candidate of equal rank wins
            best[curve.engine] = curve
    return best


@dataclass(frozen=True)
class LaneShape:
    """Where an engine's aggregate stopped gaining, as the curve measured it."""

    kind: Literal["falls", "flattens", "rising", "single"]
    streams: int
    """falls/flattens: the level to cap at; rising/single: the most streams measured."""
    evidence: str


def lane_shape(curve: RateCurve, flat_gain: float) -> LaneShape:
    """``falls`` after its peak, ``flattens`` (the next level gains less than ``flat_gain``),
    ``rising`` through the most streams measured, or ``single`` (one level: no shape yet)."""
    pts = curve.points
    if len(pts) == 1:
        one = pts[0].streams
        return LaneShape("single", one, f"one level measured ({one} stream{'s' if one > 1 else ''})")
    peak = max(pts, key=lambda p: (p.aggregate_rate, -p.streams))
    after = [p for p in pts if p.streams > peak.streams]
    if after and after[0].aggregate_rate < peak.aggregate_rate:
        return LaneShape(
            "falls",
            peak.streams,
            f"aggregate peaks at {peak.aggregate_rate:,.0f} tok/s at {peak.streams} streams and falls to "
            f"{after[0].aggregate_rate:,.0f} at {after[0].streams}",
        )
    for low, high in pairwise(pts):
        gain = _gain(low, high)
        if gain < flat_gain:
            return LaneShape(
                "flattens",
                low.streams,
                f"aggregate flattens: {low.aggregate_rate:,.0f} tok/s at {low.streams} streams, "
                f"{high.aggregate_rate:,.0f} at {high.streams} ({gain:+.0%})",
            )
    top, below = pts[-1], pts[-2]
    return LaneShape(
        "rising",
        top.streams,
        f"aggregate still rising at {top.streams} streams, the most measured: {below.aggregate_rate:,.0f} "
        f"tok/s at {below.streams}, {top.aggregate_rate:,.0f} at {top.streams} ({_gain(below, top):+.0%})",
    )


def _gain(low: CurvePoint, high: CurvePoint) -> float:
    return high.aggregate_rate / low.aggregate_rate - 1 if low.aggregate_rate > 0 else float("inf")


def engine_url(engine: str, urls: Mapping[str, str]) -> str:
    """The engine's address as the records know it, or a placeholder the user fills in."""
    return urls.get(engine, _PLACEHOLDER_URL)


def probe_command(engine: str, url: str, streams: Iterable[int]) -> str:
    """The probe that measures the levels ``streams`` on ``engine``."""
    levels = ",".join(str(s) for s in streams)
    return f"spark-otel probe --engine {engine}={url} --streams {levels}"
