"""A probe level's figures from what its timing loop measured (the article's Appendix A).

Pure: the probe (`spark_otel.probe`) measures, this computes. Per-stream rate is a stream's own
completion tokens over its wall time; the probe aggregate is their sum over the level's wall;
the engine aggregate is the engine's generation-counter delta over the same wall, read at
quiescent points, so their ratio above 1 means another tenant decoded at the same time. The
client's CPU time per token is checked against a budget, because a probe that cannot keep up
would report its own lag as the engine's. Times arrive in real nanoseconds and figures leave in
model time (``time_scale`` times faster than real).
"""

from __future__ import annotations

from dataclasses import dataclass

from .._clock import NS_PER_S
from .._exceptions import InputError
from ..records.probe_report import ProbeLevel
from ..records.rate_curve import CurvePoint, RateCurve
from .stats import summarize

__all__ = [
    "CLIENT_CPU_BUDGET_CORE_FRACTION",
    "CLIENT_CPU_BUDGET_STEP_FRACTION",
    "UNDER_LOAD_RATIO",
    "GpuPoint",
    "LevelMeasurement",
    "StreamTiming",
    "curve_of",
    "level_warnings",
    "mean_power",
    "summarize_level",
    "under_load",
]

# The client's budget (anchors-benchmarking.md §7.4), so the probe cannot bias what it measures:
# it uses at most a quarter of a core, and consumes one decode step's chunks of all N streams
# within a tenth of the step (N x CPU per token <= 0.1 x inter-token latency, in real time).
CLIENT_CPU_BUDGET_CORE_FRACTION = 0.25
CLIENT_CPU_BUDGET_STEP_FRACTION = 0.1
UNDER_LOAD_RATIO = 1.05
"""Engine aggregate over probe aggregate past which a level ran beside another tenant (the
article's probe beside its serial eval read 2.00 at one stream; an idle engine reads 1.00)."""

GpuPoint = tuple[int, float | None, float | None]
"""A GPU reading: (unix ns in model time, power W, energy J); None where the source has none."""


@dataclass(slots=True)
class StreamTiming:
    """What one stream's timing loop saw (monotonic real ns); parsed after the loop, never in it."""

    start_ns: int
    end_ns: int = 0
    first_ns: int = 0
    events: int = 0
    completion_tokens: int | None = None
    error: str | None = None


@dataclass(slots=True)
class LevelMeasurement:
    """Everything one level's timing loop and quiescent reads collected."""

    streams: int
    repeat: int
    tokens: int
    streaming: bool
    results: list[StreamTiming]
    engine_generation_tokens: float | None
    """The engine's generation-counter delta between the quiescent reads; None without one."""
    requests_running_before: float | None
    requests_running_after: float | None
    quiescent: bool
    start_unix_ns: int
    end_unix_ns: int
    cpu_s: float
    power_w: float | None = None
    time_scale: float = 1.0
    """How many times faster than real time model time runs (the simulated box's speed)."""


def summarize_level(m: LevelMeasurement) -> ProbeLevel:
    """A level's figures from its raw measurement: rates in model time, counter deltas."""
    scale = m.time_scale
    ok = [r for r in m.results if r.error is None and r.completion_tokens is not None]
    errors = [r.error for r in m.results if r.error is not None]
    errors.extend(["timed out"] * (m.streams - len(m.results)))
    mismatched = [r.completion_tokens or 0 for r in ok if r.completion_tokens != m.tokens]
    probe_tokens = sum(r.completion_tokens or 0 for r in ok)
    rates = sorted(
        (r.completion_tokens or 0) / ((r.end_ns - r.start_ns) * scale / NS_PER_S)
        for r in ok
        if r.end_ns > r.start_ns
    )
    wall_s = real_wall_s = 0.0
    if ok:
        real_wall_s = (max(r.end_ns for r in ok) - min(r.start_ns for r in m.results)) / NS_PER_S
        wall_s = real_wall_s * scale
    ttfts = [(r.first_ns - r.start_ns) * scale / NS_PER_S for r in ok if r.first_ns and m.streaming]
    engine_tokens = m.engine_generation_tokens
    probe_rate = probe_tokens / wall_s if wall_s > 0 else None
    engine_rate = engine_tokens / wall_s if engine_tokens is not None and wall_s > 0 else None
    cpu_us = m.cpu_s * 1e6 / probe_tokens if probe_tokens else None
    rate_stats = summarize(rates)
    median = rate_stats.median
    core = m.cpu_s / real_wall_s if real_wall_s > 0 else None
    # One inter-token interval in real seconds is 1 / (model rate x time scale).
    step = cpu_us * 1e-6 * m.streams * median * scale if cpu_us and median else None
    over = (core is not None and core > CLIENT_CPU_BUDGET_CORE_FRACTION) or (
        step is not None and step > CLIENT_CPU_BUDGET_STEP_FRACTION
    )
    return ProbeLevel(
        streams=m.streams,
        repeat=m.repeat,
        start_unix_ns=m.start_unix_ns,
        end_unix_ns=m.end_unix_ns,
        wall_s=wall_s,
        tokens_expected=m.tokens,
        probe_tokens=probe_tokens,
        token_mismatches=len(mismatched),
        sse_events=sum(r.events for r in ok) if m.streaming else None,
        mismatched_counts=mismatched,
        errors=len(errors),
        error_messages=sorted({e for e in errors if e})[:5],
        stream_rates=rates,
        per_stream_median=median,
        per_stream_p10=rate_stats.p10,
        per_stream_p90=rate_stats.p90,
        probe_aggregate_rate=probe_rate,
        engine_generation_tokens=engine_tokens,
        engine_aggregate_rate=engine_rate,
        engine_probe_ratio=engine_rate / probe_rate if engine_rate is not None and probe_rate else None,
        requests_running_before=m.requests_running_before,
        requests_running_after=m.requests_running_after,
        quiescent=m.quiescent,
        ttft_s_median=summarize(ttfts).median,
        power_w=m.power_w,
        client_cpu_s=m.cpu_s,
        client_cpu_us_per_token=cpu_us,
        client_cpu_core_fraction=core,
        client_cpu_step_fraction=step,
        client_cpu_over_budget=over,
    )


def level_warnings(level: ProbeLevel) -> list[str]:
    """What a reader must know before trusting a level's figures."""
    out: list[str] = []
    n = level.streams
    if level.client_cpu_over_budget:
        out.append(
            f"level {n}: the client is past its CPU budget "
            f"({level.client_cpu_us_per_token or 0:.1f} us/token, "
            f"{level.client_cpu_core_fraction or 0:.0%} of a core, {level.client_cpu_step_fraction or 0:.0%} "
            f"of a decode step; budget {CLIENT_CPU_BUDGET_CORE_FRACTION:.0%} and "
            f"{CLIENT_CPU_BUDGET_STEP_FRACTION:.0%}): its own lag may read as the engine's"
        )
    if level.token_mismatches:
        out.append(
            f"level {n}: {level.token_mismatches} streams did not produce exactly "
            f"{level.tokens_expected} tokens (got {sorted(set(level.mismatched_counts))})"
        )
    if level.errors:
        first = level.error_messages[0] if level.error_messages else "unknown error"
        out.append(f"level {n}: {level.errors} of {n} streams failed: {first}")
    if not level.quiescent:
        out.append(
            f"level {n}: the engine's running count did not settle; the engine aggregate is approximate"
        )
    return out


def mean_power(
    before: GpuPoint | None,
    after: GpuPoint | None,
    samples: list[float],
    *,
    real_time: bool,
    time_scale: float = 1.0,
) -> float | None:
    """Mean power over a window: the energy-counter delta where both ends have one, else the mean
    of the power readings. ``real_time``: the energy counter runs in real time (a real GPU) while
    timestamps are model time (``time_scale`` times faster); the simulated box keeps energy in
    model time."""
    if before is None or after is None:
        return None
    (t0, p0, e0), (t1, p1, e1) = before, after
    seconds = (t1 - t0) / NS_PER_S
    if real_time:
        seconds /= time_scale
    if e0 is not None and e1 is not None and seconds > 0 and e1 >= e0:
        return (e1 - e0) / seconds
    points = [p for p in (p0, *samples, p1) if p is not None]
    return sum(points) / len(points) if points else None


def curve_of(
    engine: str,
    levels: list[ProbeLevel],
    *,
    model: str | None = None,
    run: str | None = None,
    measured_unix_ns: int | None = None,
) -> RateCurve:
    """One curve point per concurrency level: medians over the level's repeats, with the number
    of streams pooled and the 95% interval on their median. A level whose engine aggregate runs
    past the probe's own by `UNDER_LOAD_RATIO` marks the curve as measured under load.

    Raises `InputError` naming the levels when none has a rate (a curve needs one point).
    """
    points: list[CurvePoint] = []
    for streams in sorted({lv.streams for lv in levels}):
        rounds = [lv for lv in levels if lv.streams == streams and lv.stream_rates]
        medians = summarize(lv.per_stream_median for lv in rounds)
        if medians.median is None or medians.median <= 0:
            continue
        pooled = summarize([r for lv in rounds for r in lv.stream_rates])
        aggregates = summarize(lv.probe_aggregate_rate for lv in rounds)
        points.append(
            CurvePoint(
                streams=streams,
                per_stream_rate=medians.median,
                aggregate_rate=aggregates.median or 0.0,
                p10=pooled.p10,
                p90=pooled.p90,
                n=pooled.n,
                ci_low=pooled.ci_low,
                ci_high=pooled.ci_high,
            )
        )
    if not points:
        measured = ", ".join(str(lv.streams) for lv in levels) or "none"
        raise InputError(
            f"no level measured a positive per-stream rate (levels: {measured}), so there is no "
            "curve: did every stream report 0 completion tokens or fail?"
        )
    return RateCurve(
        engine=engine,
        points=points,
        source="probe",
        model=model,
        run=run,
        measured_unix_ns=measured_unix_ns,
        under_load=under_load(levels),
    )


def under_load(levels: list[ProbeLevel]) -> str | None:
    """Why the levels were measured beside another tenant's decoding, or None: the engine's own
    counter ran past the probe's tokens by more than `UNDER_LOAD_RATIO` at some level."""
    loaded = [
        lv for lv in levels if lv.engine_probe_ratio is not None and lv.engine_probe_ratio > UNDER_LOAD_RATIO
    ]
    if not loaded:
        return None
    worst = max(loaded, key=lambda lv: lv.engine_probe_ratio or 0.0)
    return (
        f"engine/probe {worst.engine_probe_ratio:.2f} at {worst.streams} streams: the engine decoded "
        "more than the probe sent, so another tenant ran meanwhile"
    )
