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
from itertools import pairwise

from ...records.rate_curve import CurvePoint, RateCurve
from .advice_model import LaneShape

__all__ = ["choose_curves", "engine_url", "lane_shape", "probe_command"]

_PLACEHOLDER_URL = "URL"


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


def lane_shape(curve: RateCurve, flat_gain: float) -> LaneShape:
    """``falls`` after its peak, ``flattens`` (the next level gains less than ``flat_gain``),
    ``rising`` through the most streams measured, or ``single`` (one level: no shape yet); with
    the two levels that show it (`views.curves.lane_evidence` says it in words)."""
    pts = curve.points
    if len(pts) == 1:
        return LaneShape(kind="single", streams=pts[0].streams)
    peak = max(pts, key=lambda p: (p.aggregate_rate, -p.streams))
    after = [p for p in pts if p.streams > peak.streams]
    if after and after[0].aggregate_rate < peak.aggregate_rate:
        return LaneShape(kind="falls", streams=peak.streams, low=peak, high=after[0])
    for low, high in pairwise(pts):
        if _gain(low, high) < flat_gain:
            return LaneShape(kind="flattens", streams=low.streams, low=low, high=high)
    return LaneShape(kind="rising", streams=pts[-1].streams, low=pts[-2], high=pts[-1])


def _gain(low: CurvePoint, high: CurvePoint) -> float:
    return high.aggregate_rate / low.aggregate_rate - 1 if low.aggregate_rate > 0 else float("inf")


def engine_url(engine: str, urls: Mapping[str, str]) -> str:
    """The engine's address as the records know it, or a placeholder the user fills in."""
    return urls.get(engine, _PLACEHOLDER_URL)


def probe_command(engine: str, url: str, streams: Iterable[int]) -> str:
    """The probe that measures the levels ``streams`` on ``engine``."""
    levels = ",".join(str(s) for s in streams)
    return f"spark-otel probe --engine {engine}={url} --streams {levels}"
