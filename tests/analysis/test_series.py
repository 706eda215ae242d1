"""Gauge samples as series, and each series read over load intervals: exact figures on plain
samples (a counter's total across resets, interpolated at an interval's ends; a gauge's median)."""

from __future__ import annotations

import pytest

from spark_otel import _semconv as sc
from spark_otel.analysis.gauges import LoadInterval
from spark_otel.analysis.gauges.series import _counter_rate, at, cumulative, group, read_series
from spark_otel.model import MetricSample

S = 1_000_000_000


def _sample(name: str, t_s: float, value: float, unit: str = "", **attributes: str) -> MetricSample:
    return MetricSample(name=name, unix_ns=int(t_s * S), value=value, unit=unit, attributes=attributes)


def _interval(label: str, start_s: float, end_s: float, throughput: float, **engines: float) -> LoadInterval:
    return LoadInterval(
        label=label,
        source="probe",
        start_unix_ns=int(start_s * S),
        end_unix_ns=int(end_s * S),
        throughput=throughput,
        engines=engines,
    )


def test_a_counters_total_runs_on_across_resets() -> None:
    assert cumulative([5.0, 7.0, 3.0, 4.0, 4.0]) == [0.0, 2.0, 5.0, 6.0, 6.0]  # 7 -> 3: restarted at 0
    assert cumulative([]) == []


@pytest.mark.parametrize(
    ("t", "total"),
    [(5, None), (10, 0.0), (15, 5.0), (20, 10.0), (30, 20.0), (40, 30.0), (41, None)],
)
def test_a_total_is_interpolated_between_samples_and_unknown_outside_them(
    t: int, total: float | None
) -> None:
    assert at([10, 20, 40], [0.0, 10.0, 30.0], t) == total
    assert at([], [], t) is None


TIMES = [0, 10 * S, 20 * S]
TOTALS = [0.0, 100.0, 300.0]


@pytest.mark.parametrize(
    ("start_s", "end_s", "rate"),
    [
        (5, 15, 15.0),  # bracketed: 50 to 200 over 10 s
        (12, 18, 20.0),
        (0, 20, 15.0),
        (-5, 15, 10.0),  # starts before the samples: between the samples inside, 0 to 10 s
        (-5, 25, 15.0),
        (10, 10, None),  # no time
        (21, 30, None),  # after the samples
        (12, 25, None),  # one sample inside and no bracket at the end: nothing to read
    ],
)
def test_a_counters_rate_over_an_interval(start_s: float, end_s: float, rate: float | None) -> None:
    assert _counter_rate(TIMES, TOTALS, int(start_s * S), int(end_s * S)) == rate


def test_samples_group_into_series_by_metric_and_key_in_time_order() -> None:
    samples = [
        _sample(sc.GPU_POWER, 2, 31.0, **{sc.GPU_ID: "0"}),
        _sample(sc.GPU_POWER, 1, 30.0, **{sc.GPU_ID: "0"}),
        _sample(sc.GPU_POWER, 1, 50.0, **{sc.GPU_ID: "1", sc.ENGINE: "q"}),  # the engine keys no GPU series
        _sample(sc.ENGINE_REQUESTS_RUNNING, 1, 3.0, **{sc.ENGINE: "q"}),
        _sample(sc.ENGINE_REQUESTS_RUNNING, 1, 4.0),  # no engine named
        _sample(sc.NSIGHT_METRIC, 1, 9.0, "%", **{sc.NSIGHT_METRIC_NAME: "SM Issue", sc.GPU_ID: "0"}),
        _sample(
            sc.NSIGHT_METRIC,
            1,
            1.0,
            "%",
            **{sc.NSIGHT_METRIC_NAME: "DRAM Read", sc.NSIGHT_METRIC_UNIT: "GB/s"},
        ),
        _sample("some.other.metric", 1, 1.0),
    ]
    series = group(samples)
    assert {k: (s.label, s.unit, s.times, s.values, s.attributes) for k, s in series.items()} == {
        (sc.GPU_POWER, ("0",)): ("GPU 0 power", "W", [1 * S, 2 * S], [30.0, 31.0], {sc.GPU_ID: "0"}),
        (sc.GPU_POWER, ("1",)): ("GPU 1 power", "W", [1 * S], [50.0], {sc.GPU_ID: "1"}),
        (sc.ENGINE_REQUESTS_RUNNING, ("q",)): (
            "q requests running",
            "requests",
            [S],
            [3.0],
            {sc.ENGINE: "q"},
        ),
        (sc.ENGINE_REQUESTS_RUNNING, (None,)): (
            "unknown engine requests running",
            "requests",
            [S],
            [4.0],
            {},
        ),
        (sc.NSIGHT_METRIC, ("SM Issue", "0")): (
            "Nsight SM Issue (GPU 0)",
            "%",
            [S],
            [9.0],
            {sc.NSIGHT_METRIC_NAME: "SM Issue", sc.GPU_ID: "0"},
        ),
        (sc.NSIGHT_METRIC, ("DRAM Read", None)): (
            "Nsight DRAM Read",
            "GB/s",
            [S],
            [1.0],
            {sc.NSIGHT_METRIC_NAME: "DRAM Read"},
        ),
    }
    assert series[(sc.ENGINE_REQUESTS_RUNNING, ("q",))].engine == "q"
    assert series[(sc.ENGINE_REQUESTS_RUNNING, (None,))].engine is None


def test_a_gauge_reads_the_median_of_its_samples_inside_each_interval_in_its_display_unit() -> None:
    samples = [
        _sample(sc.GPU_UTILIZATION, t, v, **{sc.GPU_ID: "0"})
        for t, v in [(1, 0.2), (2, 0.9), (3, 0.4), (12, 0.5)]
    ]
    (series,) = group(samples).values()
    intervals = [
        _interval("a", 1, 3, 100.0),  # its ends included: 0.2, 0.9, 0.4
        _interval("idle", 3, 12, 0.0),  # no throughput: not read
        _interval("empty", 4, 11, 50.0),  # no sample inside
        _interval("b", 11, 13, 40.0),
    ]
    readings, inside = read_series(series, intervals)
    assert [(r.interval.label, r.throughput, r.value, r.samples) for r in readings] == [
        ("a", 100.0, pytest.approx(40.0), 3),
        ("b", 40.0, pytest.approx(50.0), 1),
    ]
    assert inside == {0, 1, 2, 3}
    assert readings[0].result().model_dump() == {
        "interval": "a",
        "throughput": 100.0,
        "value": 40.0,
        "samples": 3,
    }


def test_an_engine_gauge_pairs_with_its_own_engines_throughput() -> None:
    samples = [_sample(sc.ENGINE_REQUESTS_RUNNING, t, 2.0, **{sc.ENGINE: "q"}) for t in (1, 6, 11)]
    (series,) = group(samples).values()
    intervals = [
        _interval("both", 0, 2, 100.0, q=30.0, n=70.0),
        _interval("other only", 5, 7, 70.0, n=70.0),  # q decoded nothing here: not read
        _interval("box only", 10, 12, 90.0),  # no per-engine split: the box's throughput
    ]
    readings, inside = read_series(series, intervals)
    assert [(r.interval.label, r.throughput) for r in readings] == [("both", 30.0), ("box only", 90.0)]
    assert inside == {0, 2}


def test_a_counter_reads_its_increase_per_second_across_a_reset() -> None:
    # 50 tok/s throughout; the engine restarted between 10 and 20 s and counted 500 since.
    values = [(0, 100.0), (10, 600.0), (20, 500.0), (30, 1_000.0)]
    samples = [_sample(sc.ENGINE_GENERATION_TOKENS, t, v, **{sc.ENGINE: "q"}) for t, v in values]
    (series,) = group(samples).values()
    readings, _ = read_series(series, [_interval("all", 0, 30, 50.0), _interval("mid", 5, 25, 50.0)])
    assert [(r.interval.label, r.value, r.samples) for r in readings] == [
        ("all", 50.0, 4),
        ("mid", 50.0, 2),
    ]
