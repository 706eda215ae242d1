"""A measured concurrency curve: per-stream and aggregate decode rate at each stream count.

The probe measures one (`spark-otel probe`, Appendix A of the article); `curve_from_concurrency`
builds one from real cells. The advisor reads per-stream rates off it, interpolating linearly
between measured stream counts; it never extrapolates past the largest one.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from .._exceptions import ConfigError, InputError

if TYPE_CHECKING:
    from .concurrency import ConcurrencyReport

__all__ = ["CurvePoint", "RateCurve", "curve_from_concurrency", "curves_from_documents"]


class CurvePoint(BaseModel):
    """One level of the curve: ``streams`` concurrent streams, each decoding ``per_stream_rate``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    streams: int = Field(ge=1)
    per_stream_rate: float = Field(gt=0, description="median tok/s of one stream at this level")
    aggregate_rate: float = Field(ge=0, description="tok/s of all streams together")
    p10: float | None = None
    p90: float | None = None


class RateCurve(BaseModel):
    """An engine's decode curve, points sorted by stream count (one point per count)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    engine: str
    points: list[CurvePoint]
    source: str = Field(default="probe", description='"probe" or "cells"')

    @field_validator("points")
    @classmethod
    def _sorted_unique(cls, points: list[CurvePoint]) -> list[CurvePoint]:
        if not points:
            raise ValueError("a rate curve needs at least one point")
        points = sorted(points, key=lambda p: p.streams)
        if len({p.streams for p in points}) != len(points):
            raise ValueError("a rate curve has one point per stream count")
        return points

    @property
    def streams(self) -> list[int]:
        return [p.streams for p in self.points]

    @property
    def max_streams(self) -> int:
        return self.points[-1].streams

    @property
    def single_stream_rate(self) -> float:
        """The per-stream rate at one stream (or at the fewest measured)."""
        return self.per_stream_rate_at(self.points[0].streams)

    @property
    def peak_aggregate_streams(self) -> int:
        """The stream count where aggregate throughput peaks: past it the engine thrashes."""
        return max(self.points, key=lambda p: (p.aggregate_rate, -p.streams)).streams

    def per_stream_rate_at(self, n: float) -> float:
        """Per-stream tok/s at ``n`` streams, linear between measured points.

        Below the fewest measured streams the first point's rate holds (fewer streams never
        decode slower); past the most measured there is no evidence, so it raises.
        """
        if n < 1:
            raise ConfigError(f"stream count {n} must be at least 1")
        pts = self.points
        if n <= pts[0].streams:
            return pts[0].per_stream_rate
        if n > pts[-1].streams:
            raise ConfigError(
                f"{self.engine}: the curve was measured up to {pts[-1].streams} streams, not {n}"
            )
        i = bisect_left(self.streams, n)
        hi = pts[i]
        if hi.streams == n:
            return hi.per_stream_rate
        lo = pts[i - 1]
        frac = (n - lo.streams) / (hi.streams - lo.streams)
        return lo.per_stream_rate + (hi.per_stream_rate - lo.per_stream_rate) * frac


def curve_from_concurrency(
    report: ConcurrencyReport, engine: str | None = None, *, min_cells: int = 3
) -> RateCurve:
    """An engine's curve from real cells: each in-flight level's median per-cell rate.

    ``engine`` may be omitted when the report holds one engine. The aggregate at a level is the
    level times the median per-cell rate (what that many such cells decode together). Levels
    with fewer than ``min_cells`` rated cells are left out (one cell that happened to overlap
    two others is an anecdote, not a point of the curve), unless no level has that many.
    """
    engines = {e.engine: e for e in report.engines}
    if engine is None:
        if len(engines) != 1:
            raise ConfigError(f"name an engine: the cells ran on {sorted(engines) or 'no engine'}")
        (engine,) = engines
    if engine not in engines:
        raise InputError(f"no recorded cells on engine {engine!r} (have: {', '.join(sorted(engines))})")
    rated = [(level, level.rate.median) for level in engines[engine].levels if level.rate.median]
    supported = [(level, median) for level, median in rated if level.rate.n >= min_cells] or rated
    points = [
        CurvePoint(
            streams=level.level,
            per_stream_rate=median,
            aggregate_rate=level.level * median,
            p10=level.rate.p10,
            p90=level.rate.p90,
        )
        for level, median in supported
    ]
    if not points:
        raise InputError(f"engine {engine!r}: no completed cells with token counts to build a curve from")
    return RateCurve(engine=engine, points=points, source="cells")


def curves_from_documents(documents: Iterable[Mapping[str, Any]]) -> tuple[list[RateCurve], list[str]]:
    """The ``curve`` of each stored probe document (``{"name", "body"}``, as
    ``Store.documents("probe")`` returns them), in their order, and a problem line for each
    document without a valid one. Only the curve is read, so every reader of a store (advise,
    report) sees the same curves whatever else a probe report holds."""
    curves: list[RateCurve] = []
    problems: list[str] = []
    for doc in documents:
        try:
            curves.append(RateCurve.model_validate(doc["body"]["curve"]))
        except (KeyError, TypeError, ValidationError) as exc:
            problems.append(f"probe document {doc.get('name')!r} has no valid curve: {exc}")
    return curves, problems
