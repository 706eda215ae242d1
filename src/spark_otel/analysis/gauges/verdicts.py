"""Each gauge series against the load intervals: its range, elasticity and rank correlation, and
the verdict and reason they give under `Thresholds`, with the figures they rest on (the sentence
that names them is `views.gauges.evidence`)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ...model import MetricSample
from ..advisor.evidence import engine_url, probe_command
from ..stats import elasticity, rank_correlation
from .catalog import CATALOG, HINTS, KEYS, MEASURE_STREAMS
from .grades import (
    InstrumentsReport,
    InstrumentVerdict,
    IntervalSource,
    LoadInterval,
    Thresholds,
    Verdict,
    VerdictReason,
)
from .series import Reading, Series, group, read_series

__all__ = ["instrument_verdicts"]


# -- verdicts ----------------------------------------------------------------------------------------
class _Sums:
    """Running sums over points sorted by throughput, so any run's elasticity and fit cost O(1)
    and the knee search over thousands of receiver bins stays linear."""

    def __init__(self, points: Sequence[tuple[float, float]]) -> None:
        self.acc = [(0.0, 0.0, 0.0, 0.0, 0.0)]
        for t, g in points:
            st, sg, stt, stg, sgg = self.acc[-1]
            self.acc.append((st + t, sg + g, stt + t * t, stg + t * g, sgg + g * g))

    def _run(self, start: int, stop: int) -> tuple[int, float, float, float, float, float]:
        low, high = self.acc[start], self.acc[stop]
        st, sg, stt, stg, sgg = (b - a for a, b in zip(low, high, strict=True))
        return stop - start, st, sg, stt, stg, sgg

    def elasticity(self, start: int, stop: int) -> float | None:
        """`elasticity` of ``points[start:stop]``."""
        n, st, sg, stt, stg, _ = self._run(start, stop)
        sxx = stt - st * st / n if n else 0.0
        if n < 2 or sxx <= 1e-12 * stt or sg == 0:
            return None
        return (stg - st * sg / n) / sxx * st / sg

    def misfit(self, k: int, stop: int) -> float:
        """Squared error of a line through ``points[:k + 1]`` and a constant over ``points[k:stop]``."""
        n, st, sg, stt, stg, sgg = self._run(0, k + 1)
        sxx, sxy, syy = stt - st * st / n, stg - st * sg / n, sgg - sg * sg / n
        line = syy - sxy * sxy / sxx if sxx > 0 else syy
        n, _, sg, _, _, sgg = self._run(k, stop)
        return line + sgg - sg * sg / n


def _knee(points: Sequence[tuple[float, float]], th: Thresholds) -> int | None:
    """Where the gauge stops tracking load (points sorted by throughput): an index below which it
    tracks and above which it is flat, each part spanning ``saturation_span``; of several, the one
    a line then a constant fit best. None when there is none."""
    sums = _Sums(points)
    candidates: list[tuple[float, int, float]] = []
    for k in range(1, len(points) - 1):
        if points[-1][0] < th.saturation_span * points[k][0]:
            break  # the flat part only shrinks from here
        if points[k][0] < th.saturation_span * points[0][0]:
            continue
        e_up = sums.elasticity(k, len(points))
        if e_up is None or abs(e_up) >= th.flat_elasticity:
            continue
        e_low = sums.elasticity(0, k + 1)
        if e_low is not None and abs(e_low) >= th.tracks_elasticity:
            candidates.append((sums.misfit(k, len(points)), k, e_low))
    for _, k, e_low in sorted(candidates):
        lower = points[: k + 1]
        rho = rank_correlation([p[0] for p in lower], [p[1] for p in lower])
        if rho is not None and abs(rho) >= th.tracks_rank_correlation and (e_low > 0) == (rho > 0):
            return k
    return None


def _measure(series: Series, intervals: Sequence[LoadInterval], urls: Mapping[str, str]) -> str:
    engine = series.engine
    if engine is None:
        engine = next((name for i in intervals for name in i.engines), "NAME")
    return probe_command(engine, engine_url(engine, urls), MEASURE_STREAMS)


@dataclass(frozen=True)
class _Read:
    """A series read over the intervals: what every verdict step looks at."""

    series: Series
    readings: list[Reading]
    raw: list[float]
    """The samples inside the intervals, in the series' unit as stored."""
    engine: str | None
    """The engine an engine or cells gauge pairs with (None for the GPU's and Nsight's)."""

    @property
    def tps(self) -> list[float]:
        return [r.throughput for r in self.readings]

    @property
    def vals(self) -> list[float]:
        return [r.value for r in self.readings]


def _verdict(
    series: Series,
    intervals: Sequence[LoadInterval],
    th: Thresholds,
    urls: Mapping[str, str],
) -> InstrumentVerdict:
    """One series graded: the first step that decides gives the verdict, its reason and figures."""
    readings, inside = read_series(series, intervals)
    read = _Read(
        series,
        readings,
        [series.values[i] for i in sorted(inside)],
        series.engine if series.spec.family in ("engine", "cells") else None,
    )
    fields = _figures(read)
    decided = _unsupported(read) or _short_of_load(read, intervals, th)
    if decided is not None:
        verdict, reason, more = decided
    else:
        verdict, reason, more = _graded(read, th)
    if verdict is Verdict.NOT_ENOUGH_LOAD_RANGE:
        more = {**more, "measure": _measure(series, intervals, urls)}
    return InstrumentVerdict(verdict=verdict, reason=reason, **(fields | more))


_Decision = tuple[Verdict, VerdictReason, dict[str, Any]]


def _figures(read: _Read) -> dict[str, Any]:
    """Every figure a verdict shows, whatever it is: the defaults of the ones only some verdicts have."""
    series, raw, tps, vals = read.series, read.raw, read.tps, read.vals
    counts: dict[float, int] = defaultdict(int)
    for value in raw:
        counts[value] += 1
    modal = max(counts.items(), key=lambda kv: kv[1]) if counts else None
    return {
        "instrument": series.label,
        "metric": series.spec.metric,
        "attributes": series.attributes,
        "unit": series.unit,
        "engine": read.engine,
        "other_engines": [],
        "n_readings": len(series.values),
        "n_intervals": len(read.readings),
        "n_samples": len(raw),
        "zero_samples": sum(1 for v in raw if v == 0),
        "constant_samples": modal[1] if modal else 0,
        "constant_value": modal[0] * series.spec.scale if modal else None,
        "throughput_min": min(tps) if tps else None,
        "throughput_max": max(tps) if tps else None,
        "gauge_min": min(vals) if vals else None,
        "gauge_max": max(vals) if vals else None,
        "relative_range": None,
        "elasticity": None,
        "rank_correlation": None,
        "knee_throughput": None,
        "knee_value": None,
        "flat_min": None,
        "flat_max": None,
        "measure": None,
        "readings": [r.result() for r in read.readings],
    }


def _unsupported(read: _Read) -> _Decision | None:
    """A gauge its source never reported, or one that reads nothing but 0."""
    if not read.series.values:
        return Verdict.UNSUPPORTED, VerdictReason.NO_READINGS, {}
    if (read.raw and all(v == 0 for v in read.raw)) or (read.vals and all(v == 0 for v in read.vals)):
        reason = VerdictReason.DOES_NOT_MOVE if read.series.spec.counter else VerdictReason.READS_ZERO
        return Verdict.UNSUPPORTED, reason, {}
    return None


def _short_of_load(read: _Read, intervals: Sequence[LoadInterval], th: Thresholds) -> _Decision | None:
    """Too few intervals, or too narrow a throughput range, to tell a flat gauge from a moving one."""
    n = len(read.readings)
    if n < th.min_intervals:
        if n:
            return Verdict.NOT_ENOUGH_LOAD_RANGE, VerdictReason.FEW_INTERVALS, {}
        engine = read.engine
        if engine is not None and not any(engine in i.engines for i in intervals if i.engines):
            others = sorted({name for i in intervals for name in i.engines})
            return Verdict.NOT_ENOUGH_LOAD_RANGE, VerdictReason.ENGINE_NOT_MEASURED, {"other_engines": others}
        return Verdict.NOT_ENOUGH_LOAD_RANGE, VerdictReason.OUTSIDE_INTERVALS, {}
    if max(read.tps) / min(read.tps) < th.min_load_ratio:
        return Verdict.NOT_ENOUGH_LOAD_RANGE, VerdictReason.NARROW_LOAD, {}
    return None


def _graded(read: _Read, th: Thresholds) -> _Decision:
    """A gauge read over enough load: pinned, saturating, tracking, or moving some other way."""
    tps, vals = read.tps, read.vals
    mean = sum(vals) / len(vals)
    rel = (max(vals) - min(vals)) / abs(mean) if mean else None
    e = elasticity(tps, vals)
    rho = rank_correlation(tps, vals)
    stats: dict[str, Any] = {"relative_range": rel, "elasticity": e, "rank_correlation": rho}
    if rel is not None and rel < th.pinned_range:
        return Verdict.NOT_LOAD, VerdictReason.PINNED, stats
    points = sorted(zip(tps, vals, strict=True))
    k = _knee(points, th)
    if k is not None:
        flat = [p[1] for p in points[k:]]
        knee = {"knee_throughput": points[k][0], "knee_value": points[k][1], "flat_min": min(flat)}
        return Verdict.SATURATES, VerdictReason.KNEE, stats | knee | {"flat_max": max(flat)}
    if (
        e is not None
        and rho is not None
        and abs(e) >= th.tracks_elasticity
        and abs(rho) >= th.tracks_rank_correlation
        and (e > 0) == (rho > 0)
    ):
        return Verdict.TRACKS_LOAD, VerdictReason.TRACKS, stats
    if rho is None or abs(rho) < th.tracks_rank_correlation:
        return Verdict.NOT_LOAD, VerdictReason.OUT_OF_STEP, stats
    return Verdict.NOT_LOAD, VerdictReason.MOVES_SLOWLY, stats


def instrument_verdicts(
    intervals: Sequence[LoadInterval],
    samples: Iterable[MetricSample],
    *,
    interval_source: IntervalSource | None = None,
    engine_urls: Mapping[str, str] | None = None,
    throughput_metric: str | None = None,
    thresholds: Thresholds | None = None,
) -> InstrumentsReport:
    """Every gauge series in ``samples`` against ``intervals``, with its verdict and evidence.

    ``throughput_metric``: the metric the intervals' throughput was read from (the engines'
    generation counter, for receiver intervals); it is left out rather than graded against
    itself. ``engine_urls`` fill in the probe command a verdict suggests.
    """
    th = thresholds or Thresholds()
    urls = engine_urls or {}
    loaded = sorted((i for i in intervals if i.throughput > 0), key=lambda i: (i.start_unix_ns, i.label))
    groups = group(s for s in samples if s.name != throughput_metric)
    notes: list[str] = []
    if throughput_metric is not None:
        notes.append(f"{throughput_metric} is these intervals' throughput: not graded against itself")
    families = {series.spec.family for series in groups.values()}
    for family, hint in HINTS.items():
        if family not in families and not (family == "engine" and throughput_metric is not None):
            notes.append(hint)
    # An expected quantity that its source never reported (None, never zero) is unsupported.
    for spec in CATALOG:
        if not (spec.expected or spec.group) or spec.metric == throughput_metric:
            continue
        seen = {
            s.key
            for s in groups.values()
            if s.spec.family == spec.family and (spec.group is None or s.spec.group == spec.group)
        }
        for key in seen:
            if (spec.metric, key) not in groups:
                attrs = {k: v for k, v in zip(KEYS[spec.family], key, strict=True) if v is not None}
                groups[(spec.metric, key)] = Series(spec, key, attrs, spec.unit, [], [])
    # As Appendix F reads: the GPU's gauges, Nsight's, then each engine's and its cells', together.
    place = {"gpu": 0, "nsight": 1, "engine": 2, "cells": 2}
    order = {spec.metric: i for i, spec in enumerate(CATALOG)}
    ordered = sorted(
        groups.values(), key=lambda s: (place[s.spec.family], [str(k) for k in s.key], order[s.spec.metric])
    )
    verdicts = [_verdict(series, loaded, th, urls) for series in ordered]
    return InstrumentsReport(
        interval_source=interval_source,
        intervals=loaded,
        throughput_min=min((i.throughput for i in loaded), default=None),
        throughput_max=max((i.throughput for i in loaded), default=None),
        thresholds=th,
        instruments=verdicts,
        notes=notes,
    )
