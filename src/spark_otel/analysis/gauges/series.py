"""Gauge samples grouped into series, and each series read over load intervals: the median of
its samples inside an interval, or for a counter its increase per second."""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from statistics import median

from ... import _semconv as sc
from ..._clock import NS_PER_S
from ...model import AttributeValue, MetricSample
from .catalog import KEYS, SPECS, Spec
from .grades import IntervalReading, LoadInterval

__all__ = ["Reading", "Series", "at", "cumulative", "group", "read_series"]


@dataclass
class Series:
    """One gauge series: a catalog metric, the attribute values that key it, its samples in time order."""

    spec: Spec
    key: tuple[AttributeValue | None, ...]
    attributes: dict[str, AttributeValue]
    unit: str
    times: list[int]
    values: list[float]

    @property
    def engine(self) -> str | None:
        value = self.attributes.get(sc.ENGINE)
        return None if value is None else str(value)

    @property
    def label(self) -> str:
        attrs, what = self.attributes, self.spec.what
        if self.spec.family == "gpu":
            return f"GPU {attrs.get(sc.GPU_ID, '?')} {what}"
        if self.spec.family == "nsight":
            gpu = attrs.get(sc.GPU_ID)
            on_gpu = f" (GPU {gpu})" if gpu is not None else ""
            return f"Nsight {attrs.get(sc.NSIGHT_METRIC_NAME, '?')}{on_gpu}"
        return f"{self.engine or 'unknown engine'} {what}"


def group(samples: Iterable[MetricSample]) -> dict[tuple[str, tuple[AttributeValue | None, ...]], Series]:
    """Samples of the catalog's metrics by series, each in time order."""
    out: dict[tuple[str, tuple[AttributeValue | None, ...]], Series] = {}
    for sample in sorted(samples, key=lambda s: s.unix_ns):
        spec = SPECS.get(sample.name)
        if spec is None:
            continue
        keys = KEYS[spec.family]
        key = tuple(sample.attributes.get(k) for k in keys)
        series = out.get((spec.metric, key))
        if series is None:
            attrs = {k: v for k, v in zip(keys, key, strict=True) if v is not None}
            unit = spec.unit
            if spec.family == "nsight":
                unit = str(sample.attributes.get(sc.NSIGHT_METRIC_UNIT) or sample.unit)
            series = out[(spec.metric, key)] = Series(spec, key, attrs, unit, [], [])
        series.times.append(sample.unix_ns)
        series.values.append(sample.value)
    return out


def cumulative(values: Sequence[float]) -> list[float]:
    """A counter's running total across resets (a drop means it restarted from zero)."""
    total, out = 0.0, []
    for i, value in enumerate(values):
        if i:
            total += value - values[i - 1] if value >= values[i - 1] else value
        out.append(total)
    return out


def at(times: Sequence[int], totals: Sequence[float], t: int) -> float | None:
    """A counter's total at ``t`` by linear interpolation; None outside its samples."""
    if not times or t < times[0] or t > times[-1]:
        return None
    i = bisect_left(times, t)
    if times[i] == t:
        return totals[i]
    t0, t1 = times[i - 1], times[i]
    return totals[i - 1] + (totals[i] - totals[i - 1]) * (t - t0) / (t1 - t0)


def _counter_rate(times: Sequence[int], totals: Sequence[float], start: int, end: int) -> float | None:
    """Increase per second over ``[start, end]``: interpolated at both ends where the samples
    bracket it, else between the first and last samples inside it."""
    low, high = at(times, totals, start), at(times, totals, end)
    if low is not None and high is not None and end > start:
        return (high - low) * NS_PER_S / (end - start)
    i, j = bisect_left(times, start), bisect_right(times, end) - 1
    if j > i and times[j] > times[i]:
        return (totals[j] - totals[i]) * NS_PER_S / (times[j] - times[i])
    return None


@dataclass
class Reading:
    """A series' value over one interval, in its display unit."""

    interval: LoadInterval
    throughput: float
    value: float
    samples: int

    def result(self) -> IntervalReading:
        return IntervalReading(
            interval=self.interval.label, throughput=self.throughput, value=self.value, samples=self.samples
        )


def read_series(series: Series, intervals: Sequence[LoadInterval]) -> tuple[list[Reading], set[int]]:
    """The series' value over each interval it can be read in, and which samples lay inside."""
    engine = series.engine if series.spec.family in ("engine", "cells") else None
    totals = cumulative(series.values) if series.spec.counter else []
    out: list[Reading] = []
    inside: set[int] = set()
    for interval in intervals:
        throughput = interval.throughput
        if engine is not None and interval.engines:
            throughput = interval.engines.get(engine, 0.0)
        if not throughput > 0:
            continue
        i = bisect_left(series.times, interval.start_unix_ns)
        j = bisect_right(series.times, interval.end_unix_ns)
        inside.update(range(i, j))
        if series.spec.counter:
            value = _counter_rate(series.times, totals, interval.start_unix_ns, interval.end_unix_ns)
        else:
            value = median(series.values[i:j]) if j > i else None
        if value is not None:
            out.append(Reading(interval, throughput, value * series.spec.scale, j - i))
    return out, inside
