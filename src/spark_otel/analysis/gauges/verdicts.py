"""Each gauge series against the load intervals: its range, elasticity and rank correlation, the
verdict they give under `Thresholds`, and the evidence text that names them."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ...model import MetricSample
from ..advisor.evidence import engine_url, probe_command
from ..stats import elasticity, rank_correlation
from .catalog import CATALOG, HINTS, KEYS, MEASURE_STREAMS
from .grades import InstrumentsReport, InstrumentVerdict, IntervalSource, LoadInterval, Thresholds, Verdict
from .series import Series, group, read_series

__all__ = ["fmt_value", "instrument_verdicts"]


# -- formatting --------------------------------------------------------------------------------------
def fmt_value(value: float) -> str:
    """A gauge value to about three significant digits: 2,405, 96.0, 3.10, 0.0421."""
    magnitude = abs(value)
    if magnitude >= 100:
        return f"{value:,.0f}"
    if magnitude >= 10:
        return f"{value:.1f}"
    if magnitude >= 1 or magnitude == 0:
        return f"{value:.2f}"
    return f"{value:.3g}"


def _with_unit(value: float, unit: str) -> str:
    text = fmt_value(value)
    return f"{text}%" if unit == "%" else f"{text} {unit}".rstrip()


def _span(low: float, high: float, unit: str) -> str:
    if fmt_value(low) == fmt_value(high):
        return _with_unit(low, unit)
    return f"{fmt_value(low)} to {_with_unit(high, unit)}"


def _tok(low: float, high: float) -> str:
    if f"{low:,.1f}" == f"{high:,.1f}":
        return f"{low:,.1f} tok/s"
    return f"{low:,.1f} to {high:,.1f} tok/s"


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


def _verdict(
    series: Series,
    intervals: Sequence[LoadInterval],
    th: Thresholds,
    urls: Mapping[str, str],
) -> InstrumentVerdict:
    readings, inside = read_series(series, intervals)
    scale, unit = series.spec.scale, series.unit
    raw = [series.values[i] for i in sorted(inside)]
    counts: dict[float, int] = defaultdict(int)
    for value in raw:
        counts[value] += 1
    modal = max(counts.items(), key=lambda kv: kv[1]) if counts else None
    n = len(readings)
    tps = [r.throughput for r in readings]
    vals = [r.value for r in readings]
    fields: dict[str, Any] = {
        "instrument": series.label,
        "metric": series.spec.metric,
        "attributes": series.attributes,
        "unit": unit,
        "n_intervals": n,
        "n_samples": len(raw),
        "zero_samples": sum(1 for v in raw if v == 0),
        "constant_samples": modal[1] if modal else 0,
        "constant_value": modal[0] * scale if modal else None,
        "throughput_min": min(tps) if tps else None,
        "throughput_max": max(tps) if tps else None,
        "gauge_min": min(vals) if vals else None,
        "gauge_max": max(vals) if vals else None,
        "relative_range": None,
        "elasticity": None,
        "rank_correlation": None,
        "knee_throughput": None,
        "measure": None,
        "readings": [r.result() for r in readings],
    }

    def done(verdict: Verdict, evidence: str, **more: Any) -> InstrumentVerdict:
        return InstrumentVerdict(verdict=verdict, evidence=evidence, **(fields | more))

    box = [i.throughput for i in intervals]
    loaded = f"{len(box)} loaded intervals ({_tok(min(box), max(box))})" if box else "no loaded interval"
    if not series.values:
        return done(
            "unsupported", f"no readings in {loaded}: its source recorded other quantities but not this one"
        )
    if (raw and all(v == 0 for v in raw)) or (vals and all(v == 0 for v in vals)):
        what = "does not move" if series.spec.counter else "reads 0"
        over_n = f"{n} intervals ({_tok(min(tps), max(tps))})" if tps else loaded
        return done("unsupported", f"{what} in all {len(raw)} samples over {over_n}")
    measure = _measure(series, intervals, urls)
    engine = series.engine if series.spec.family in ("engine", "cells") else None
    if n < th.min_intervals:
        if n:
            where = f"readings in {n} interval{'s' if n != 1 else ''} ({_tok(min(tps), max(tps))}: "
            where += f"{_span(min(vals), max(vals), unit)})"
        elif engine is not None and not any(engine in i.engines for i in intervals if i.engines):
            others = sorted({name for i in intervals for name in i.engines})
            where = f"no interval measured {engine}'s throughput (the {loaded} are on {', '.join(others)})"
        else:
            where = f"none of its {len(series.values)} readings lie in {loaded}"
        return done(
            "not enough load range",
            f"{where}; {th.min_intervals} at different loads are needed: measure with `{measure}`",
            measure=measure,
        )
    t_low, t_high = min(tps), max(tps)
    ratio = t_high / t_low
    over = f"{n} intervals, {_tok(t_low, t_high)} ({ratio:.1f}x)"
    reads = _span(min(vals), max(vals), unit)
    if ratio < th.min_load_ratio:
        return done(
            "not enough load range",
            f"{over}: throughput moved less than {th.min_load_ratio:g}x, too little to tell a flat gauge "
            f"from a moving one (it read {reads}): measure with `{measure}`",
            measure=measure,
        )
    mean = sum(vals) / n
    rel = (max(vals) - min(vals)) / abs(mean) if mean else None
    e = elasticity(tps, vals)
    rho = rank_correlation(tps, vals)
    stats = {"relative_range": rel, "elasticity": e, "rank_correlation": rho}
    e_text = "-" if e is None else f"{e:.2f}"
    rho_text = "-" if rho is None else f"{rho:.2f}"
    numbers = f"elasticity {e_text}, rank correlation {rho_text}"
    if rel is not None and rel < th.pinned_range:
        return done(
            "not load",
            f"{over}: pinned at {reads} (moves {rel:.1%}) while throughput moved {ratio:.1f}x ({numbers})",
            **stats,
        )
    points = sorted(zip(tps, vals, strict=True))
    k = _knee(points, th)
    if k is not None:
        knee_t, knee_v = points[k]
        direction = "rises" if points[0][1] < knee_v else "falls"
        flat = [p[1] for p in points[k:]]
        return done(
            "saturates",
            f"{over}: {direction} with throughput to {_with_unit(knee_v, unit)} at {knee_t:,.1f} tok/s, then "
            f"flat to {t_high:,.1f} tok/s ({_span(min(flat), max(flat), unit)} above the knee; "
            f"{numbers} overall)",
            knee_throughput=knee_t,
            **stats,
        )
    tracks = (
        e is not None
        and rho is not None
        and abs(e) >= th.tracks_elasticity
        and abs(rho) >= th.tracks_rank_correlation
        and (e > 0) == (rho > 0)
    )
    if tracks:
        assert e is not None
        direction = "rises with throughput" if e > 0 else "falls as throughput rises"
        return done("tracks load", f"{over}: reads {reads}, {direction} ({numbers})", **stats)
    if rho is None or abs(rho) < th.tracks_rank_correlation:
        why = (
            f"out of step with throughput (rank correlation {rho_text} < {th.tracks_rank_correlation:g}; "
            f"elasticity {e_text})"
        )
    else:
        why = (
            f"moves {abs(e or 0):.2f}x as fast as throughput "
            f"(elasticity {e_text} < {th.tracks_elasticity:g}; rank correlation {rho_text})"
        )
    return done("not load", f"{over}: reads {reads}, {why}", **stats)


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
