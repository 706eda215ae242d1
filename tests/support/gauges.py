"""A gauge's verdict built by hand (`InstrumentVerdict`): the tests of what renders one (tables,
plots, the report) give the few facts they show; every other figure is empty."""

from __future__ import annotations

from typing import Any

from spark_otel.analysis.gauges import InstrumentVerdict, IntervalReading, Verdict, VerdictReason

REASONS = {
    Verdict.TRACKS_LOAD: VerdictReason.TRACKS,
    Verdict.NOT_LOAD: VerdictReason.PINNED,
    Verdict.UNSUPPORTED: VerdictReason.NO_READINGS,
    Verdict.SATURATES: VerdictReason.KNEE,
    Verdict.NOT_ENOUGH_LOAD_RANGE: VerdictReason.FEW_INTERVALS,
}
"""The reason a hand-built verdict gets unless a test names another."""


def verdict(
    instrument: str,
    verdict: str = "not load",
    *readings: tuple[float, float],
    unit: str = "%",
    metric: str = "gpu.utilization",
    **figures: Any,
) -> InstrumentVerdict:
    """A verdict on ``instrument`` with one reading per (throughput, value) of ``readings``;
    ``figures`` sets any other field."""
    fields: dict[str, Any] = {
        "instrument": instrument,
        "metric": metric,
        "attributes": {},
        "unit": unit,
        "verdict": Verdict(verdict),
        "reason": REASONS[Verdict(verdict)],
        "engine": None,
        "other_engines": [],
        "n_readings": len(readings),
        "n_intervals": len(readings),
        "n_samples": 0,
        "zero_samples": 0,
        "constant_samples": 0,
        "constant_value": None,
        "throughput_min": None,
        "throughput_max": None,
        "gauge_min": None,
        "gauge_max": None,
        "relative_range": None,
        "elasticity": None,
        "rank_correlation": None,
        "knee_throughput": None,
        "knee_value": None,
        "flat_min": None,
        "flat_max": None,
        "measure": None,
        "readings": [
            IntervalReading(interval=f"i{i}", throughput=t, value=v, samples=1)
            for i, (t, v) in enumerate(readings)
        ],
    }
    return InstrumentVerdict(**(fields | figures))
