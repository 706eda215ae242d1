"""The gauge grading's settings and results: the thresholds, load intervals, and each gauge's
verdict with the reason for it and the figures it rests on (the sentence is `views.gauges`')."""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from pydantic import Field

from ...model import AttributeValue
from .._result import Result

__all__ = [
    "InstrumentVerdict",
    "InstrumentsReport",
    "IntervalReading",
    "IntervalSource",
    "LoadInterval",
    "Thresholds",
    "Verdict",
    "VerdictReason",
]


class Verdict(StrEnum):
    """What a gauge is good for, as Appendix F of the article grades the GB10's gauges."""

    TRACKS_LOAD = "tracks load"
    NOT_LOAD = "not load"
    UNSUPPORTED = "unsupported"
    SATURATES = "saturates"
    NOT_ENOUGH_LOAD_RANGE = "not enough load range"


class VerdictReason(StrEnum):
    """Why the verdict is what it is; each has its own sentence (`views.gauges.evidence`)."""

    NO_READINGS = "no readings"
    """unsupported: its source recorded other quantities, never this one"""
    READS_ZERO = "reads zero"
    """unsupported: every sample reads 0"""
    DOES_NOT_MOVE = "does not move"
    """unsupported: a counter that never increased"""
    FEW_INTERVALS = "few intervals"
    """not enough load range: readings in fewer intervals than `Thresholds.min_intervals`"""
    ENGINE_NOT_MEASURED = "engine not measured"
    """not enough load range: no interval measured the gauge's own engine's throughput"""
    OUTSIDE_INTERVALS = "outside the intervals"
    """not enough load range: none of its readings lie in a loaded interval"""
    NARROW_LOAD = "narrow load range"
    """not enough load range: throughput moved less than `Thresholds.min_load_ratio`"""
    PINNED = "pinned"
    """not load: its range is under `Thresholds.pinned_range` of its mean"""
    OUT_OF_STEP = "out of step"
    """not load: its rank correlation with throughput is under the threshold"""
    MOVES_SLOWLY = "moves slowly"
    """not load: in step, but its elasticity is under the threshold"""
    KNEE = "knee"
    """saturates: tracks throughput up to a knee, then flat"""
    TRACKS = "tracks"
    """tracks load: elasticity and rank correlation both past their thresholds, of one sign"""


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
    reason: VerdictReason
    engine: str | None = Field(description="the engine an engine or cells gauge belongs to")
    other_engines: list[str] = Field(
        description="engine not measured: the engines the loaded intervals measured instead"
    )
    n_readings: int = Field(description="the series' samples, inside the intervals or not")
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
    knee_value: float | None = Field(description="saturates: the gauge at the knee")
    flat_min: float | None = Field(description="saturates: the gauge's lowest above the knee")
    flat_max: float | None = Field(description="saturates: the gauge's highest above the knee")
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
