"""The instruments analysis's settings and results: the thresholds, load intervals, verdicts."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ...model import AttributeValue
from .._rows import Result

__all__ = [
    "InstrumentVerdict",
    "InstrumentsReport",
    "IntervalReading",
    "IntervalSource",
    "LoadInterval",
    "Thresholds",
    "Verdict",
]

Verdict = Literal["tracks load", "not load", "unsupported", "saturates", "not enough load range"]
IntervalSource = Literal["probe", "receiver", "evals"]


class Thresholds(Result):
    """Where each verdict starts (the package docstring says why these defaults)."""

    min_intervals: int = Field(default=3, ge=2)
    min_load_ratio: float = Field(default=2.0, gt=1)
    tracks_elasticity: float = Field(default=0.5, gt=0)
    tracks_rank_correlation: float = Field(default=0.8, gt=0, le=1)
    pinned_range: float = Field(default=0.05, ge=0)
    flat_elasticity: float = Field(default=0.1, ge=0)
    saturation_span: float = Field(default=1.5, gt=1)


class LoadInterval(Result):
    """A stretch of time with a measured token throughput: a probe level, an eval run, a bin of
    engine scrapes. ``engines``: the throughput per engine where known (engine gauges pair with
    their own); ``throughput`` is the box's."""

    label: str
    source: IntervalSource
    start_unix_ns: int
    end_unix_ns: int
    throughput: float = Field(description="tok/s on the box over the interval")
    engines: dict[str, float] = Field(default_factory=dict, description="tok/s per engine")
    time_scale: float = Field(default=1.0, description="model-time scale the interval was measured under")


class IntervalReading(Result):
    """One gauge over one interval, in the gauge's display unit."""

    interval: str
    throughput: float
    value: float
    samples: int


class InstrumentVerdict(Result):
    """One gauge series: how it moved with throughput, its verdict and the evidence for it."""

    instrument: str
    metric: str
    attributes: dict[str, AttributeValue]
    unit: str
    verdict: Verdict
    evidence: str
    n_intervals: int = Field(description="intervals with a reading")
    n_samples: int = Field(description="samples inside the intervals")
    zero_samples: int
    constant_samples: int = Field(description="samples reading the most common value")
    constant_value: float | None = Field(description="that value, in the display unit")
    throughput_min: float | None
    throughput_max: float | None
    gauge_min: float | None
    gauge_max: float | None
    relative_range: float | None = Field(description="(max - min) / mean of the per-interval values")
    elasticity: float | None = Field(description="slope of gauge on throughput, times their means' ratio")
    rank_correlation: float | None = Field(description="Spearman, per-interval values against throughput")
    knee_throughput: float | None = Field(description="saturates: tok/s above which it is flat")
    measure: str | None = Field(description="the command that would measure it, when the data cannot")
    readings: list[IntervalReading]


class InstrumentsReport(Result):
    """Every gauge series against one set of load intervals."""

    interval_source: IntervalSource | None
    intervals: list[LoadInterval]
    throughput_min: float | None
    throughput_max: float | None
    thresholds: Thresholds
    instruments: list[InstrumentVerdict]
    notes: list[str]
