"""Instrument verdicts at their edges: each threshold met exactly, a gauge without a unit or
averaging zero, a counter never read over an interval, the cells' gauge on an engine no interval
measured, and the order the report lists its series in. Every text whole, worked out by hand."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from tests.support.gauge_series import by_name, said

from spark_otel import _semconv as sc
from spark_otel.analysis.gauges import (
    InstrumentVerdict,
    LoadInterval,
    instrument_verdicts,
)
from spark_otel.analysis.gauges.catalog import CELL_RATE_METRIC
from spark_otel.model import AttributeValue, MetricSample

S = 1_000_000_000
LOAD = [10.0, 20.0, 40.0, 80.0, 160.0, 320.0]
QWEN: dict[str, AttributeValue] = {sc.ENGINE: "qwen"}
PROBE_QWEN = "spark-otel probe --engine qwen=URL --streams 1,2,4,8,16"


def levels(throughputs: Sequence[float]) -> list[LoadInterval]:
    """Probe levels 10 s long, 5 s apart, each at its throughput, all on qwen."""
    return [
        LoadInterval(
            label=f"level {k}",
            source="probe",
            start_unix_ns=(1_000 + 15 * k) * S,
            end_unix_ns=(1_010 + 15 * k) * S,
            throughput=tp,
            engines={"qwen": tp},
        )
        for k, tp in enumerate(throughputs)
    ]


def gauge(
    name: str,
    intervals: Sequence[LoadInterval],
    values: Sequence[float],
    attributes: dict[str, AttributeValue],
) -> list[MetricSample]:
    """Three samples of ``values[k]`` inside interval k, at 2.5, 5 and 7.5 s."""
    return [
        MetricSample(name=name, unix_ns=i.start_unix_ns + j * S // 4, value=value, attributes=attributes)
        for i, value in zip(intervals, values, strict=True)
        for j in (10, 20, 30)
    ]


def one(intervals: Sequence[LoadInterval], samples: list[MetricSample]) -> InstrumentVerdict:
    """The verdict on the series of ``samples`` (the report adds the quantities its source lacks)."""
    [verdict] = [v for v in by_name(instrument_verdicts(intervals, samples)).values() if v.n_samples]
    return verdict


def test_a_gauge_without_a_unit_shows_its_figures_bare() -> None:
    """An Nsight metric whose capture named no unit: "1.00 to 32.0", no space left for a unit."""
    intervals = levels(LOAD)
    attrs: dict[str, AttributeValue] = {sc.NSIGHT_METRIC_NAME: "Warp Stalls", sc.GPU_ID: "0"}
    v = one(intervals, gauge(sc.NSIGHT_METRIC, intervals, [t / 10 for t in LOAD], attrs))
    assert (v.instrument, v.unit, v.verdict) == ("Nsight Warp Stalls (GPU 0)", "", "tracks load")
    assert said(v) == (
        "6 intervals, 10.0 to 320.0 tok/s (32.0x): reads 1.00 to 32.0, rises with throughput "
        "(elasticity 1.00, rank correlation 1.00)"
    )


def test_an_elasticity_of_exactly_half_tracks_load() -> None:
    """'At least 0.5': 30, 40, 50 requests at 10, 20, 30 tok/s is 20 + t, slope 1 at the means 20
    and 40, elasticity 0.5 exactly; no knee (above 20 tok/s it still moves 0.56)."""
    intervals = levels([10.0, 20.0, 30.0])
    v = one(intervals, gauge(sc.ENGINE_REQUESTS_RUNNING, intervals, [30.0, 40.0, 50.0], QWEN))
    assert (v.verdict, v.elasticity, v.rank_correlation) == ("tracks load", 0.5, 1.0)
    assert said(v) == (
        "3 intervals, 10.0 to 30.0 tok/s (3.0x): reads 30.0 to 50.0 requests, rises with throughput "
        "(elasticity 0.50, rank correlation 1.00)"
    )


# 10, 20, 40, 80 tok/s (mean 37.5, deviations -27.5, -17.5, 2.5, 42.5, sum of squares 2,875) and a
# gauge whose middle two levels swap ranks: 1, 3, 2, 4 against 1, 2, 3, 4, rank correlation
# 1 - 6 * 2 / (4 * 15) = 0.8, the threshold. With readings 1, 4, 3, 8 (deviations -3, 0, -1, 4 from
# 4) the slope is 250 / 2,875 = 2 / 23, elasticity 2 / 23 * 37.5 / 4 = 0.815.
SWAPPED = [10.0, 20.0, 40.0, 80.0]


def test_a_rank_correlation_of_exactly_the_threshold_tracks_load() -> None:
    intervals = levels(SWAPPED)
    v = one(intervals, gauge(sc.ENGINE_REQUESTS_RUNNING, intervals, [1.0, 4.0, 3.0, 8.0], QWEN))
    assert v.verdict == "tracks load"
    assert (v.rank_correlation, v.elasticity) == (0.8, pytest.approx(75 / 92))
    assert said(v) == (
        "4 intervals, 10.0 to 80.0 tok/s (8.0x): reads 1.00 to 8.00 requests, rises with throughput "
        "(elasticity 0.82, rank correlation 0.80)"
    )


def test_a_slow_gauge_at_exactly_the_rank_threshold_is_too_slow_not_out_of_step() -> None:
    """The same ranks 100 higher (mean 104): elasticity 2 / 23 * 37.5 / 104 = 0.031. It is in step
    (0.8 is enough), so the evidence says it moves too little, not that it is out of step."""
    intervals = levels(SWAPPED)
    v = one(intervals, gauge(sc.ENGINE_REQUESTS_RUNNING, intervals, [101.0, 104.0, 103.0, 108.0], QWEN))
    assert (v.verdict, v.rank_correlation) == ("not load", 0.8)
    assert v.elasticity == pytest.approx(75 / 2392)
    assert said(v) == (
        "4 intervals, 10.0 to 80.0 tok/s (8.0x): reads 101 to 108 requests, moves 0.03x as fast as "
        "throughput (elasticity 0.03 < 0.5; rank correlation 0.80)"
    )


def test_a_gauge_that_averages_zero_has_no_relative_range_or_elasticity_and_still_gets_a_verdict() -> None:
    """-1, 0, 1 MHz at 10, 20, 40 tok/s: in step (rank correlation 1), but with a mean of 0 neither
    the range relative to it nor the elasticity is defined: shown as "-", and the move as 0.00x."""
    intervals = levels([10.0, 20.0, 40.0])
    attrs: dict[str, AttributeValue] = {
        sc.NSIGHT_METRIC_NAME: "Clock Skew",
        sc.NSIGHT_METRIC_UNIT: "MHz",
        sc.GPU_ID: "0",
    }
    v = one(intervals, gauge(sc.NSIGHT_METRIC, intervals, [-1.0, 0.0, 1.0], attrs))
    assert (v.verdict, v.relative_range, v.elasticity, v.rank_correlation) == ("not load", None, None, 1.0)
    assert (v.zero_samples, v.n_samples, v.gauge_min, v.gauge_max) == (3, 9, -1.0, 1.0)
    assert said(v) == (
        "3 intervals, 10.0 to 40.0 tok/s (4.0x): reads -1.00 to 1.00 MHz, moves 0.00x as fast as "
        "throughput (elasticity - < 0.5; rank correlation 1.00)"
    )


def test_a_counter_scraped_too_seldom_to_give_a_rate_reading_zero_is_unsupported() -> None:
    """One scrape inside each of the first two levels, both 0: no level is bracketed by two, so
    no reading, and the evidence counts over the loaded intervals instead."""
    intervals = levels([10.0, 20.0, 40.0])
    samples = [
        MetricSample(
            name=sc.ENGINE_GENERATION_TOKENS, unix_ns=i.start_unix_ns + 5 * S, value=0.0, attributes=QWEN
        )
        for i in intervals[:2]
    ]
    v = one(intervals, samples)
    assert (v.verdict, v.n_intervals, v.n_samples, v.zero_samples, v.readings) == ("unsupported", 0, 2, 2, [])
    assert said(v) == "does not move in all 2 samples over 3 loaded intervals (10.0 to 40.0 tok/s)"


def test_the_cells_rate_on_an_engine_no_interval_measured_names_the_engines_that_were() -> None:
    """Qwen's cells against intervals that measured llama and nemotron: the evidence says so,
    naming both, rather than that the readings lay outside the intervals."""
    intervals = [
        i.model_copy(update={"engines": {"llama": 1.0, "nemotron": i.throughput - 1.0}})
        for i in levels([10.0, 40.0, 160.0])
    ]
    report = instrument_verdicts(intervals, gauge(CELL_RATE_METRIC, intervals, [30.0, 20.0, 10.0], QWEN))
    v = by_name(report)["qwen cells' decode rate"]
    assert (v.instrument, v.verdict, v.n_intervals, v.measure) == (
        "qwen cells' decode rate",
        "not enough load range",
        0,
        PROBE_QWEN,
    )
    assert said(v) == (
        "no interval measured qwen's throughput (the 3 loaded intervals (10.0 to 160.0 tok/s) are on "
        f"llama, nemotron); 3 at different loads are needed: measure with `{PROBE_QWEN}`"
    )


def test_throughput_moving_too_little_names_the_probe_that_would_measure_more() -> None:
    intervals = levels([100.0, 130.0, 190.0])
    v = one(intervals, gauge(sc.ENGINE_REQUESTS_RUNNING, intervals, [10.0, 13.0, 19.0], QWEN))
    assert (v.verdict, v.measure) == ("not enough load range", PROBE_QWEN)
    assert said(v) == (
        "3 intervals, 100.0 to 190.0 tok/s (1.9x): throughput moved less than 2x, too little to tell a "
        f"flat gauge from a moving one (it read 10.0 to 19.0 requests): measure with `{PROBE_QWEN}`"
    )


def test_the_report_lists_gpus_then_nsight_then_each_engine_with_its_cells() -> None:
    """As Appendix F reads: each GPU by id (here uuids, the one that sorts later sampled first) with its
    quantities in catalog order, Nsight's metrics by name, then each engine by name, its own
    gauges and then its cells' rate. Names chosen so that no other order happens to agree."""
    intervals = levels(LOAD)
    late: dict[str, AttributeValue] = {sc.GPU_ID: "GPU-8f3c"}
    early: dict[str, AttributeValue] = {sc.GPU_ID: "GPU-1a2b"}
    llama: dict[str, AttributeValue] = {sc.ENGINE: "Llama"}
    nsight: list[dict[str, AttributeValue]] = [
        {sc.NSIGHT_METRIC_NAME: name, sc.NSIGHT_METRIC_UNIT: "%", sc.GPU_ID: "GPU-8f3c"}
        for name in ("SM Issue", "Compute Warps in Flight")
    ]
    samples = (
        gauge(sc.GPU_UTILIZATION, intervals, [0.96] * 6, late)
        + gauge(sc.GPU_UTILIZATION, intervals[1:], [0.96] * 5, early)
        + gauge(sc.GPU_POWER, intervals, [35.0] * 6, late)
        + gauge(sc.GPU_POWER, intervals, [35.0] * 6, early)
        + [s for attrs in nsight for s in gauge(sc.NSIGHT_METRIC, intervals, [3.0] * 6, attrs)]
        + gauge(CELL_RATE_METRIC, intervals, [20.0] * 6, QWEN)
        + gauge(CELL_RATE_METRIC, intervals, [20.0] * 6, llama)
        + gauge(sc.ENGINE_REQUESTS_RUNNING, intervals, [t / 10 for t in LOAD], QWEN)
        + gauge(sc.ENGINE_REQUESTS_RUNNING, intervals, [t / 10 for t in LOAD], llama)
    )
    report = instrument_verdicts(intervals, samples)
    assert [v.instrument for v in report.instruments] == [
        "GPU GPU-1a2b utilization",
        "GPU GPU-1a2b power",
        "GPU GPU-1a2b memory used",  # expected, never reported: unsupported
        "GPU GPU-8f3c utilization",
        "GPU GPU-8f3c power",
        "GPU GPU-8f3c memory used",
        "Nsight Compute Warps in Flight (GPU GPU-8f3c)",
        "Nsight SM Issue (GPU GPU-8f3c)",
        "Llama generation counter",
        "Llama requests running",
        "Llama cells' decode rate",
        "qwen generation counter",
        "qwen requests running",
        "qwen cells' decode rate",
    ]


def test_the_report_keeps_where_its_intervals_came_from() -> None:
    intervals = levels(LOAD)
    samples = gauge(sc.GPU_UTILIZATION, intervals, [0.96] * 6, {sc.GPU_ID: "0"})
    assert instrument_verdicts(intervals, samples, interval_source="probe").interval_source == "probe"
    assert instrument_verdicts(intervals, samples).interval_source is None
