"""A decode-rate curve over concurrency levels: per-stream and aggregate decode rate at each stream
count, as the probe measures it or the analyses read it off cells (`analysis.curve` builds them).

The advisor reads per-stream rates off it, interpolating linearly between measured stream counts;
it never extrapolates past the largest one. A curve says what it rests on: per point, how many
rates its median comes from and the 95% interval on that median; per curve, the model the engine
served, when it was measured, and whether another tenant decoded meanwhile (``under_load``).
"""

from __future__ import annotations

from bisect import bisect_left

from pydantic import BaseModel, ConfigDict, Field, field_validator

from .._exceptions import ConfigError

__all__ = ["CurvePoint", "RateCurve"]


class CurvePoint(BaseModel):
    """One level of the curve: ``streams`` concurrent streams, each decoding ``per_stream_rate``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    streams: int = Field(ge=1)
    per_stream_rate: float = Field(gt=0, description="median tok/s of one stream at this level")
    aggregate_rate: float = Field(ge=0, description="tok/s of all streams together")
    p10: float | None = None
    p90: float | None = None
    n: int | None = Field(default=None, description="rates the median rests on (streams or cells)")
    ci_low: float | None = Field(default=None, description="95% interval on the median: low end")
    ci_high: float | None = Field(default=None, description="95% interval on the median: high end")

    @property
    def interval(self) -> tuple[float, float] | None:
        """The 95% interval on ``per_stream_rate``, when the point has one."""
        return None if self.ci_low is None or self.ci_high is None else (self.ci_low, self.ci_high)


class RateCurve(BaseModel):
    """An engine's decode curve, points sorted by stream count (one point per count)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    engine: str
    points: list[CurvePoint]
    source: str = Field(default="probe", description='"probe" or "cells"')
    model: str | None = Field(default=None, description="the model the engine served")
    measured_unix_ns: int | None = Field(default=None, description="when: a probe's end, the cells' last")
    run: str | None = Field(default=None, description="the probe run its load windows name")
    under_load: str | None = Field(
        default=None, description="why the curve was measured beside other decoding; None when idle"
    )

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

    @property
    def measured_single_stream(self) -> bool:
        """Whether one stream alone was measured (not only inferred from the fewest measured)."""
        return self.points[0].streams == 1

    def per_stream_interval_at(self, n: float) -> tuple[float, float] | None:
        """The 95% interval on the per-stream rate at ``n`` streams, linear between measured
        points like the rate itself; None where a point it rests on has none."""
        pts = self.points
        if n > pts[-1].streams:
            raise ConfigError(
                f"{self.engine}: the curve was measured up to {pts[-1].streams} streams, not {n}"
            )
        i = bisect_left(self.streams, n)
        hi_pt = pts[min(i, len(pts) - 1)]
        lo_pt = hi_pt if n <= pts[0].streams or hi_pt.streams == n else pts[i - 1]
        lo, hi = lo_pt.interval, hi_pt.interval
        if lo is None or hi is None:
            return None
        frac = 0.0 if hi_pt is lo_pt else (n - lo_pt.streams) / (hi_pt.streams - lo_pt.streams)
        return lo[0] + (hi[0] - lo[0]) * frac, lo[1] + (hi[1] - lo[1]) * frac

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
