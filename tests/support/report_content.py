"""The HTML report's content built by hand: the content itself, a probe's curve, a speedup, an
engine's concurrency, and the instruments section with its verdicts."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from tests.support.gauges import verdict as gauge_verdict

from spark_otel.analysis.concurrency import EngineConcurrency, LevelSummary, Speedup
from spark_otel.analysis.gauges.grades import (
    InstrumentsReport,
    InstrumentVerdict,
    IntervalReading,
    LoadInterval,
    Thresholds,
    VerdictReason,
)
from spark_otel.records.rate_curve import CurvePoint, RateCurve
from spark_otel.report.content import ReportContent

S = 1_000_000_000


T0 = int(datetime(2026, 3, 4, 5, 6, 7, tzinfo=UTC).timestamp()) * S


def report_content(**kw: Any) -> ReportContent:
    fields: dict[str, Any] = {
        "source": "store.db",
        "eval_name": None,
        "n_cells": 0,
        "n_windows": 0,
        "probes": [],
        "curves": [],
        "concurrency": None,
        "neighbours": [],
        "outcomes": [],
        "advice": None,
    }
    fields.update(kw)
    return ReportContent(**fields)


def probe_curve(engine: str, *streams: int) -> RateCurve:
    points = [CurvePoint(streams=n, per_stream_rate=10.0 / n, aggregate_rate=10.0, n=n) for n in streams]
    return RateCurve(engine=engine, points=points, measured_unix_ns=T0)


def speedup_of(workers: int, wall_s: float, base_wall_s: float, speedup: float, **kw: Any) -> Speedup:
    fields: dict[str, Any] = {
        "eval_name": "review",
        "engine": "qwen",
        "base_workers": 1,
        "workers": workers,
        "base_start_unix_ns": T0,
        "start_unix_ns": T0 + 10_000 * S,
        "base_wall_s": base_wall_s,
        "wall_s": wall_s,
        "base_cells": 4,
        "n_cells": 4,
        "speedup": speedup,
        "same_cells": True,
        "base_rate_median": 11.0,
        "rate_median": 5.0,
        "per_cell_cost": None,
    }
    fields.update(kw)
    return Speedup.model_validate(fields)


def engine_concurrency(name: str, levels: list[LevelSummary], speedups: list[Speedup]) -> EngineConcurrency:
    return EngineConcurrency(
        engine=name, n_cells=6, wall_s=100.0, completion_tokens=600, aggregate_rate=6.0, ceiling_hits=1,
        failures=0, levels=levels, by_workers=[], runs=[], speedups=speedups, cells=[],
    )  # fmt: skip


def instrument_verdict(name: str, verdict: str, n: int, elasticity: float | None, rank: float | None,
             readings: list[IntervalReading] | None = None) -> InstrumentVerdict:  # fmt: skip
    """A verdict whose reason needs no figure the test leaves out: unsupported, no readings."""
    return gauge_verdict(
        name, verdict, metric="gpu.power", unit="W", reason=VerdictReason.NO_READINGS, n_intervals=n,
        n_samples=n, elasticity=elasticity, rank_correlation=rank, readings=readings or [],
    )  # fmt: skip


def _interval(label: str, throughput: float, scale: float = 1.0) -> LoadInterval:
    return LoadInterval(
        label=label, source="probe", start_unix_ns=0, end_unix_ns=S, throughput=throughput, time_scale=scale
    )


def instruments_report(**kw: Any) -> InstrumentsReport:
    fields: dict[str, Any] = {
        "interval_source": "probe",
        "intervals": [_interval("1 stream", 12.5, 100.0), _interval("8 streams", 1234.5, 100.0)],
        "throughput_min": 12.5,
        "throughput_max": 1234.56,
        "thresholds": Thresholds(),
        "instruments": [
            instrument_verdict("GPU 0 power", "not load", 2, 0.04, None),
            instrument_verdict("qwen requests running", "tracks load", 3, None, 0.9512),
        ],
        "notes": ["no GPU samples & no Nsight", "one engine"],
    }
    fields.update(kw)
    return InstrumentsReport(**fields)
