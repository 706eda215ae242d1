"""Which gauges measure load: hand-built series with known answers, and the article's Appendix F."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from tests.support.article import at
from tests.support.gauge_series import GPU, LOAD, S, by_name, gauge, levels, said

from spark_otel import _semconv as sc
from spark_otel.analysis.gauges import (
    InstrumentsReport,
    InstrumentVerdict,
    LoadInterval,
    Thresholds,
    VerdictReason,
    cell_rate_samples,
    elasticity,
    eval_intervals,
    instrument_verdicts,
    rank_correlation,
    receiver_intervals,
)
from spark_otel.model import AttributeValue, Cell, CellStatus, MetricSample
from spark_otel.views.gauges import fmt_value

QWEN = {sc.ENGINE: "qwen"}
URLS = {"qwen": "http://127.0.0.1:8011", "nemotron": "http://127.0.0.1:8012"}


def counter(
    name: str,
    intervals: Sequence[LoadInterval],
    rates: Sequence[float],
    attributes: dict[str, AttributeValue],
) -> list[MetricSample]:
    """A cumulative counter read at each interval's start and end, rising at ``rates[k]`` per s inside it."""
    out, total = [], 1_000.0
    for interval, rate in zip(intervals, rates, strict=True):
        out.append(
            MetricSample(name=name, unix_ns=interval.start_unix_ns, value=total, attributes=attributes)
        )
        total += rate * (interval.end_unix_ns - interval.start_unix_ns) / S
        out.append(MetricSample(name=name, unix_ns=interval.end_unix_ns, value=total, attributes=attributes))
    return out


def one(intervals: Sequence[LoadInterval], samples: list[MetricSample], **kwargs: Any) -> InstrumentVerdict:
    """The verdict on the series of ``samples`` (the report may add quantities its source lacks)."""
    report = instrument_verdicts(intervals, samples, **kwargs)
    [verdict] = [v for v in by_name(report).values() if v.metric == samples[0].name and v.n_samples]
    return verdict


# -- statistics --------------------------------------------------------------------------------------
def test_rank_correlation_takes_mean_ranks_for_ties_and_is_undefined_for_a_constant() -> None:
    assert rank_correlation([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert rank_correlation([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    # Appendix B: SM Issue 3.1, 2.8, 2.8, 3.6 at 22, 90, 90, 190 tok/s (ranks 3, 1.5, 1.5, 4).
    assert rank_correlation([22, 90, 90, 190], [3.1, 2.8, 2.8, 3.6]) == pytest.approx(1 / 3)
    assert rank_correlation([1, 2, 3], [5, 5, 5]) is None
    assert rank_correlation([1], [2]) is None


def test_elasticity_is_one_in_proportion_zero_when_flat_and_undefined_without_spread() -> None:
    assert elasticity([10, 20, 40], [1, 2, 4]) == pytest.approx(1.0)
    assert elasticity([10, 20, 40], [7, 7, 7]) == pytest.approx(0.0)
    # A gauge with an offset moves less than in proportion: g = 10 + t at the means 23.3 and 33.3.
    assert elasticity([10, 20, 40], [20, 30, 50]) == pytest.approx(70 / 100, abs=0.01)
    assert elasticity([10, 10], [1, 2]) is None
    assert elasticity([10, 20], [-1, 1]) is None  # the gauge averages zero


# -- hand-built series -------------------------------------------------------------------------------
def test_a_flat_gauge_is_pinned_not_load() -> None:
    intervals = levels(LOAD)
    v = by_name(instrument_verdicts(intervals, gauge(sc.GPU_UTILIZATION, intervals, [0.96] * 6, GPU)))[
        "GPU 0 utilization"
    ]
    assert v.verdict == "not load"
    assert v.unit == "%"
    assert (v.gauge_min, v.gauge_max) == (pytest.approx(96.0), pytest.approx(96.0))
    assert v.constant_samples == v.n_samples == 18
    assert v.constant_value == pytest.approx(96.0)
    assert v.relative_range == 0
    assert "6 intervals, 10.0 to 320.0 tok/s (32.0x): pinned at 96.0%" in said(v)


def test_a_linear_gauge_tracks_load() -> None:
    intervals = levels(LOAD)
    v = one(intervals, gauge(sc.ENGINE_REQUESTS_RUNNING, intervals, [t / 10 for t in LOAD], QWEN))
    assert v.instrument == "qwen requests running"
    assert v.verdict == "tracks load"
    assert v.elasticity == pytest.approx(1.0)
    assert v.rank_correlation == pytest.approx(1.0)
    assert said(v).startswith("6 intervals, 10.0 to 320.0 tok/s (32.0x): reads 1.00 to 32.0 requests, rises")


def test_a_falling_gauge_tracks_load_and_says_which_way() -> None:
    intervals = levels(LOAD)
    v = one(intervals, gauge(sc.ENGINE_KV_CACHE_USAGE, intervals, [1_000 / t for t in LOAD], QWEN))
    assert v.verdict == "tracks load"
    assert v.elasticity is not None
    assert v.elasticity == pytest.approx(-0.667, abs=0.001)
    assert "falls as throughput rises" in said(v)


def test_a_gauge_that_fills_up_saturates_at_its_knee() -> None:
    intervals = levels(LOAD)
    v = one(intervals, gauge(sc.ENGINE_KV_CACHE_USAGE, intervals, [min(t, 100) / 100 for t in LOAD], QWEN))
    assert v.verdict == "saturates"
    assert v.knee_throughput == 160.0
    assert "rises with throughput to 100% at 160.0 tok/s, then flat to 320.0 tok/s" in said(v)


def test_the_knee_is_where_a_line_then_a_constant_fit_best() -> None:
    # Over many levels several knees leave a flat enough top; the best fit is the true one.
    load = [10.0 * k for k in range(1, 31)]
    intervals = levels(load)
    v = one(intervals, gauge(sc.ENGINE_KV_CACHE_USAGE, intervals, [min(t, 100) / 100 for t in load], QWEN))
    assert v.verdict == "saturates"
    assert v.knee_throughput == 100.0


def test_a_gauge_that_never_stops_rising_does_not_saturate() -> None:
    intervals = levels(LOAD)
    v = one(intervals, gauge(sc.ENGINE_KV_CACHE_USAGE, intervals, [t**0.7 / 100 for t in LOAD], QWEN))
    assert v.verdict == "tracks load"
    assert v.knee_throughput is None


def test_a_gauge_that_reads_zero_is_unsupported() -> None:
    intervals = levels(LOAD)
    report = instrument_verdicts(
        intervals,
        gauge(sc.GPU_MEMORY_USED, intervals, [0.0] * 6, GPU)
        + gauge(sc.GPU_UTILIZATION, intervals, [0.96] * 6, GPU)
        + gauge(sc.GPU_POWER, intervals, [34.0] * 6, GPU),
    )
    v = by_name(report)["GPU 0 memory used"]
    assert v.verdict == "unsupported"
    assert v.zero_samples == v.n_samples == 18
    assert said(v) == "reads 0 in all 18 samples over 6 intervals (10.0 to 320.0 tok/s)"


def test_a_quantity_its_source_never_reported_is_unsupported() -> None:
    intervals = levels(LOAD)
    report = instrument_verdicts(intervals, gauge(sc.GPU_UTILIZATION, intervals, [0.96] * 6, GPU))
    verdicts = by_name(report)
    assert set(verdicts) == {"GPU 0 utilization", "GPU 0 power", "GPU 0 memory used"}
    for missing in ("GPU 0 power", "GPU 0 memory used"):
        assert verdicts[missing].verdict == "unsupported"
        assert verdicts[missing].n_samples == 0
        assert said(verdicts[missing]).startswith("no readings in 6 loaded intervals (10.0 to 320.0 tok/s)")
    # Nothing recorded from the engines or Nsight: said once, not graded as unsupported.
    assert any("spark-otel receive --engine NAME=URL" in note for note in report.notes)
    assert any("spark-otel ingest-nsight" in note for note in report.notes)


def test_fewer_than_three_intervals_is_not_enough_load_range_and_names_the_probe() -> None:
    intervals = levels([10.0, 160.0])
    v = one(intervals, gauge(sc.ENGINE_REQUESTS_RUNNING, intervals, [1, 16], QWEN), engine_urls=URLS)
    assert v.verdict == "not enough load range"
    assert v.measure == "spark-otel probe --engine qwen=http://127.0.0.1:8011 --streams 1,2,4,8,16"
    assert said(v).startswith(
        "readings in 2 intervals (10.0 to 160.0 tok/s: 1.00 to 16.0 requests); "
        "3 at different loads are needed"
    )
    assert v.measure in said(v)
    assert v.elasticity is None


def test_throughput_moving_under_2x_is_not_enough_load_range() -> None:
    intervals = levels([100.0, 130.0, 190.0])
    v = one(intervals, gauge(sc.ENGINE_REQUESTS_RUNNING, intervals, [10, 13, 19], QWEN))
    assert v.verdict == "not enough load range"
    assert "100.0 to 190.0 tok/s (1.9x): throughput moved less than 2x" in said(v)
    assert "--engine qwen=URL" in said(v)  # no address recorded: a placeholder to fill in
    # The same readings over a wider range are enough.
    assert (
        one(
            intervals,
            gauge(sc.ENGINE_REQUESTS_RUNNING, intervals, [10, 13, 19], QWEN),
            thresholds=Thresholds(min_load_ratio=1.5),
        ).verdict
        == "tracks load"
    )


def test_readings_outside_every_interval_are_not_enough_load_range() -> None:
    intervals = levels(LOAD)
    late = levels([1.0, 1.0], t0=10_000 * S)
    report = instrument_verdicts(intervals, gauge(sc.GPU_POWER, late, [30.0, 31.0], GPU))
    v = by_name(report)["GPU 0 power"]
    assert v.verdict == "not enough load range"
    assert said(v).startswith("none of its 6 readings lie in 6 loaded intervals (10.0 to 320.0 tok/s)")


def test_a_gauge_that_moves_out_of_step_with_throughput_is_not_load() -> None:
    intervals = levels(LOAD)
    v = one(intervals, gauge(sc.ENGINE_REQUESTS_RUNNING, intervals, [5, 1, 6, 2, 5, 1], QWEN))
    assert v.verdict == "not load"
    assert "out of step with throughput" in said(v)
    assert v.relative_range is not None
    assert v.relative_range > 1


def test_engine_gauges_pair_with_their_own_engines_throughput() -> None:
    intervals = levels(LOAD, engine="qwen")
    nemo = {sc.ENGINE: "nemotron"}
    report = instrument_verdicts(
        intervals,
        gauge(sc.ENGINE_REQUESTS_RUNNING, intervals, [t / 10 for t in LOAD], QWEN)
        + gauge(sc.ENGINE_REQUESTS_RUNNING, intervals, [0.0, 0.0, 0.0, 0.0, 0.0, 1.0], nemo),
        engine_urls=URLS,
    )
    verdicts = by_name(report)
    assert verdicts["qwen requests running"].verdict == "tracks load"
    idle = verdicts["nemotron requests running"]
    assert idle.verdict == "not enough load range"
    assert idle.n_intervals == 0
    assert "spark-otel probe --engine nemotron=http://127.0.0.1:8012 --streams 1,2,4,8,16" in said(idle)


def test_a_counter_reads_its_rate_across_a_reset() -> None:
    intervals = levels(LOAD)
    samples = counter(sc.ENGINE_GENERATION_TOKENS, intervals, LOAD, QWEN)
    # The engine restarts inside the fourth level: its counter drops to zero and counts on.
    fourth = intervals[3]
    mid = (fourth.start_unix_ns + fourth.end_unix_ns) // 2
    start, end = samples[6], samples[7]
    restarted = [
        start,
        MetricSample(name=start.name, unix_ns=mid, value=0.0, attributes=QWEN),
        end.model_copy(update={"value": 80.0 * 5}),
    ]
    shift = end.value - 80.0 * 5
    later = [s.model_copy(update={"value": s.value - shift}) for s in samples[8:]]
    v = one(intervals, samples[:6] + restarted + later)
    assert v.instrument == "qwen generation counter"
    assert v.unit == "tok/s"
    assert [r.value for r in v.readings] == pytest.approx([10, 20, 40, 40, 160, 320])
    assert v.verdict == "tracks load"


def test_idle_intervals_are_left_out() -> None:
    intervals = levels([0.0, *LOAD])
    v = one(intervals, gauge(sc.ENGINE_REQUESTS_RUNNING, intervals, [0, *(t / 10 for t in LOAD)], QWEN))
    assert v.n_intervals == 6
    assert v.throughput_min == 10.0


def test_an_idle_reading_at_an_intervals_edge_does_not_drag_its_level() -> None:
    intervals = levels(LOAD)
    samples = gauge(sc.GPU_UTILIZATION, intervals, [0.96] * 6, GPU, per=4)
    edge = [
        MetricSample(name=sc.GPU_UTILIZATION, unix_ns=i.end_unix_ns, value=0.0, attributes=GPU)
        for i in intervals
    ]
    v = by_name(instrument_verdicts(intervals, samples + edge))["GPU 0 utilization"]
    assert v.verdict == "not load"
    assert v.gauge_min == pytest.approx(96.0)
    assert v.zero_samples == 6


def test_the_throughput_source_is_not_graded_against_itself() -> None:
    intervals = levels(LOAD)
    report = instrument_verdicts(
        intervals,
        counter(sc.ENGINE_GENERATION_TOKENS, intervals, LOAD, QWEN)
        + gauge(sc.ENGINE_REQUESTS_RUNNING, intervals, [t / 10 for t in LOAD], QWEN),
        throughput_metric=sc.ENGINE_GENERATION_TOKENS,
    )
    assert [v.instrument for v in report.instruments] == ["qwen requests running"]
    assert any("not graded against itself" in note for note in report.notes)


# -- interval builders -------------------------------------------------------------------------------
def test_receiver_bins_sum_each_engines_counter_rate() -> None:
    t0 = 5_000 * S
    samples = [
        MetricSample(
            name=sc.ENGINE_GENERATION_TOKENS, unix_ns=t0 + k * 5 * S, value=50.0 * k, attributes=QWEN
        )
        for k in range(13)  # 10 tok/s for 60 s
    ] + [
        MetricSample(
            name=sc.ENGINE_GENERATION_TOKENS,
            unix_ns=t0 + k * 5 * S,
            value=100.0 * k,
            attributes={sc.ENGINE: "nemo"},
        )
        for k in range(7)  # 20 tok/s for the first 30 s, then no scrapes
    ]
    bins = receiver_intervals(samples, 30.0)
    assert [(b.throughput, b.engines) for b in bins] == [
        (pytest.approx(30.0), {"nemo": pytest.approx(20.0), "qwen": pytest.approx(10.0)}),
        (pytest.approx(10.0), {"qwen": pytest.approx(10.0)}),
    ]
    assert all(b.source == "receiver" for b in bins)
    with pytest.raises(ValueError, match="bin must be positive"):
        receiver_intervals(samples, 0.0)


def _cell(uid: str, start_s: int, end_s: int, tokens: int | None, engine: str = "qwen") -> Cell:
    return Cell(
        uid=uid,
        eval_name="e",
        cell_id=uid,
        engine=engine,
        start_unix_ns=start_s * S,
        end_unix_ns=end_s * S,
        completion_tokens=tokens,
        status=CellStatus.OK if tokens else CellStatus.DEADLINE,
        workers=1,
    )


def test_eval_intervals_count_every_cells_tokens_inside_them() -> None:
    cells = [_cell("a", 0, 100, 1_000), _cell("b", 100, 200, 2_000), _cell("c", 150, 250, 500, engine="nemo")]
    cells[2] = cells[2].model_copy(update={"eval_name": "other"})
    intervals = {i.label.split(" eval")[0]: i for i in eval_intervals(cells)}
    e, other = intervals["e"], intervals["other"]
    # 0-200 s: a and b, plus half of c's 500 tokens.
    assert e.engines == {"nemo": pytest.approx(1.25), "qwen": pytest.approx(15.0)}
    assert e.throughput == pytest.approx(16.25)
    # 150-250 s: half of b's tokens and all of c's.
    assert other.engines == {"nemo": pytest.approx(5.0), "qwen": pytest.approx(10.0)}


def test_cell_rates_leave_timeouts_out() -> None:
    samples = cell_rate_samples([_cell("a", 0, 100, 1_000), _cell("t", 0, 1_800, None)])
    assert [(s.name, s.value, s.unix_ns, s.attributes) for s in samples] == [
        (sc.CELL_DECODE_RATE_METRIC, 10.0, 50 * S, QWEN)
    ]


# -- the article -------------------------------------------------------------------------------------
# Appendix A, Qwen3.8-27B on 2026-09-17: (streams, wall s, probe aggregate tok/s, engine aggregate
# tok/s, power W mean). The serial eval's one request ran in the background throughout.
APPENDIX_A = [
    (1, 46.0, 11.1, 22.3, 34.2),
    (2, 46.9, 21.9, 32.8, 35.8),
    (4, 47.9, 42.7, 53.5, 36.2),
    (8, 50.9, 80.5, 90.6, 36.6),
    (16, 59.6, 137.4, 146.0, 37.6),
    (32, 88.9, 184.4, 190.2, 39.5),
]
# Appendix B, the Nsight captures (10 s each) inside sustained loads: (time, engine aggregate
# tok/s, GR Active %, SMs Active %, SM Issue % mean, Tensor Active %, compute warps in flight %).
APPENDIX_B = [
    ("07:16", 22, 99.9, 90.1, 3.1, 9.8, 16.9),
    ("07:20", 90, 99.9, 90.9, 2.8, 6.0, 17.6),
    ("07:23", 90, 99.9, 90.7, 2.8, 6.0, 17.6),
    ("07:26", 190, 99.9, 91.7, 3.6, 7.0, 17.7),
]
NSIGHT_METRICS = ("GR Active", "SMs Active", "SM Issue", "Tensor Active", "Compute Warps in Flight")
# Act 1 and Appendix F: utilization.gpu read 96% under any decode load; nvidia-smi dmon's memory
# column reads 0 on the GB10's unified memory.
UTILIZATION = 0.96


def appendix_f() -> InstrumentsReport:
    """The probe levels of Appendix A (from 06:39, as Appendix D places them) and the captures of
    Appendix B as intervals, every gauge the article read at its own value."""
    probe: list[LoadInterval] = []
    t = at("06:39")
    for streams, wall_s, probe_rate, _, _ in APPENDIX_A:
        start, end = t, t + int(wall_s * S)
        probe.append(
            LoadInterval(
                label=f"qwen {streams} streams",
                source="probe",
                start_unix_ns=start,
                end_unix_ns=end,
                throughput=probe_rate,
                engines={"qwen": probe_rate},
            )
        )
        t = end + 30 * S
    captures = [
        LoadInterval(
            label=f"capture {hhmm}",
            source="probe",
            start_unix_ns=at(hhmm),
            end_unix_ns=at(hhmm) + 10 * S,
            throughput=rate,
            engines={"qwen": rate},
        )
        for hhmm, rate, *_ in APPENDIX_B
    ]
    samples = (
        gauge(sc.GPU_POWER, probe, [row[4] for row in APPENDIX_A], GPU, per=1)
        + gauge(sc.GPU_UTILIZATION, probe + captures, [UTILIZATION] * 10, GPU)
        + gauge(sc.GPU_MEMORY_USED, probe, [0.0] * 6, GPU)
        + counter(sc.ENGINE_GENERATION_TOKENS, probe, [row[3] for row in APPENDIX_A], QWEN)
        # The probe's streams and the serial eval's one request.
        + gauge(sc.ENGINE_REQUESTS_RUNNING, probe, [row[0] + 1 for row in APPENDIX_A], QWEN)
    )
    for k, metric in enumerate(NSIGHT_METRICS):
        attrs: dict[str, AttributeValue] = {
            sc.NSIGHT_METRIC_NAME: metric,
            sc.NSIGHT_METRIC_UNIT: "%",
            sc.GPU_ID: "0",
            sc.NSIGHT_CAPTURE: "07:16.nsys-rep",  # each capture its own file: not part of the series
        }
        samples += gauge(sc.NSIGHT_METRIC, captures, [row[2 + k] for row in APPENDIX_B], attrs, per=10)
    return instrument_verdicts(probe + captures, samples, engine_urls=URLS)


def test_appendix_f_from_the_articles_own_numbers() -> None:
    report = appendix_f()
    verdicts = {name: v.verdict for name, v in by_name(report).items()}
    assert verdicts == {
        "GPU 0 utilization": "not load",
        "GPU 0 power": "not load",
        "GPU 0 memory used": "unsupported",
        "Nsight Compute Warps in Flight (GPU 0)": "not load",
        "Nsight GR Active (GPU 0)": "not load",
        "Nsight SM Issue (GPU 0)": "not load",
        "Nsight SMs Active (GPU 0)": "not load",
        "Nsight Tensor Active (GPU 0)": "not load",
        "qwen generation counter": "tracks load",
        "qwen requests running": "tracks load",
    }
    v = by_name(report)
    # utilization.gpu: 96% at every load, 11 to 190 tok/s.
    assert said(v["GPU 0 utilization"]).startswith(
        "10 intervals, 11.1 to 190.0 tok/s (17.1x): pinned at 96.0%"
    )
    # power.draw: 34 to 40 W across a 17x throughput range.
    power = v["GPU 0 power"]
    assert said(power).startswith(
        "6 intervals, 11.1 to 184.4 tok/s (16.6x): reads 34.2 to 39.5 W, moves 0.05x"
    )
    assert power.rank_correlation == pytest.approx(1.0)  # it rises every level, by a few watts
    assert power.elasticity == pytest.approx(0.054, abs=0.001)
    # SM Issue 3.1, 2.8 and 3.6% across 22 to 190 tok/s.
    sm_issue = v["Nsight SM Issue (GPU 0)"]
    assert said(sm_issue).startswith("4 intervals, 22.0 to 190.0 tok/s (8.6x): reads 2.80 to 3.60%")
    assert sm_issue.elasticity == pytest.approx(0.113, abs=0.001)
    assert "out of step with throughput (rank correlation 0.33 < 0.8; elasticity 0.11)" in said(sm_issue)
    assert sm_issue.rank_correlation == pytest.approx(1 / 3)
    assert "pinned at 99.9%" in said(v["Nsight GR Active (GPU 0)"])
    # The engine's generation counter: 22.3 to 190.2 tok/s, in step with the probe's load.
    gen = v["qwen generation counter"]
    assert [r.value for r in gen.readings] == pytest.approx([row[3] for row in APPENDIX_A])
    assert gen.rank_correlation == pytest.approx(1.0)
    assert gen.elasticity == pytest.approx(0.87, abs=0.01)
    assert said(v["GPU 0 memory used"]) == "reads 0 in all 18 samples over 6 intervals (11.1 to 184.4 tok/s)"


def test_nemotron_power_moved_only_while_the_engine_thrashed() -> None:
    # Appendix A, Nemotron's clean curve: (aggregate tok/s, power W). At 16 streams power jumped
    # to 65.6 W while the aggregate fell from 262 to 181: power tracked thrashing, not load.
    curve = [(82, 35.6), (130, 38.1), (188, 38.9), (262, 41.5), (181, 65.6)]
    intervals = levels([tp for tp, _ in curve], engine="nemotron")
    report = instrument_verdicts(
        intervals,
        gauge(sc.GPU_POWER, intervals, [w for _, w in curve], GPU)
        + gauge(sc.GPU_UTILIZATION, intervals, [UTILIZATION] * 5, GPU)
        + gauge(sc.GPU_MEMORY_USED, intervals, [0.0] * 5, GPU),
    )
    power = by_name(report)["GPU 0 power"]
    assert power.verdict == "not load"
    assert power.rank_correlation == pytest.approx(0.7)
    assert (
        "reads 35.6 to 65.6 W, out of step with throughput (rank correlation 0.70 < 0.8; elasticity 0.19)"
        in said(power)
    )


# -- each verdict whole: the text a person reads, and every figure it rests on ------------------------
WHOLE_VERDICT_REASONS = {
    "pinned": VerdictReason.PINNED,
    "rises": VerdictReason.TRACKS,
    "falls": VerdictReason.TRACKS,
    "saturates": VerdictReason.KNEE,
    "out-of-step": VerdictReason.OUT_OF_STEP,
    "too-slow": VerdictReason.MOVES_SLOWLY,
}


@pytest.mark.parametrize(
    ("metric", "attributes", "values", "scale", "verdict", "evidence"),
    [
        (
            sc.GPU_UTILIZATION,
            GPU,
            [0.96] * 6,
            100,
            "not load",
            "6 intervals, 10.0 to 320.0 tok/s (32.0x): pinned at 96.0% (moves 0.0%) while throughput moved "
            "32.0x (elasticity 0.00, rank correlation -)",
        ),
        (
            sc.ENGINE_REQUESTS_RUNNING,
            QWEN,
            [t / 10 for t in LOAD],
            1,
            "tracks load",
            "6 intervals, 10.0 to 320.0 tok/s (32.0x): reads 1.00 to 32.0 requests, rises with throughput "
            "(elasticity 1.00, rank correlation 1.00)",
        ),
        (
            sc.ENGINE_KV_CACHE_USAGE,
            QWEN,
            [0.1 / t for t in LOAD],
            100,
            "tracks load",
            "6 intervals, 10.0 to 320.0 tok/s (32.0x): reads 0.0312 to 1.00%, falls as throughput rises "
            "(elasticity -0.67, rank correlation -1.00)",
        ),
        (
            sc.ENGINE_KV_CACHE_USAGE,
            QWEN,
            [min(t, 100) / 100 for t in LOAD],
            100,
            "saturates",
            "6 intervals, 10.0 to 320.0 tok/s (32.0x): rises with throughput to 100% at 160.0 tok/s, then "
            "flat to 320.0 tok/s (100% above the knee; elasticity 0.51, rank correlation 0.99 overall)",
        ),
        (
            sc.ENGINE_REQUESTS_RUNNING,
            QWEN,
            [5, 1, 6, 2, 5, 1],
            1,
            "not load",
            "6 intervals, 10.0 to 320.0 tok/s (32.0x): reads 1.00 to 6.00 requests, out of step with "
            "throughput (rank correlation -0.26 < 0.8; elasticity -0.23)",
        ),
        (
            sc.ENGINE_REQUESTS_RUNNING,
            QWEN,
            [10, 10.5, 11, 11.5, 12, 12.5],
            1,
            "not load",
            "6 intervals, 10.0 to 320.0 tok/s (32.0x): reads 10.0 to 12.5 requests, moves 0.07x as fast as "
            "throughput (elasticity 0.07 < 0.5; rank correlation 1.00)",
        ),
    ],
    ids=["pinned", "rises", "falls", "saturates", "out-of-step", "too-slow"],
)
def test_each_verdict_states_its_evidence_and_the_figures_it_rests_on(
    metric: str,
    attributes: dict[str, AttributeValue],
    values: list[float],
    scale: int,
    verdict: str,
    evidence: str,
    request: pytest.FixtureRequest,
) -> None:
    intervals = levels(LOAD)
    v = one(intervals, gauge(metric, intervals, values, attributes))
    assert v.reason == WHOLE_VERDICT_REASONS[request.node.callspec.id]
    read = [value * scale for value in values]
    modal = max(read, key=read.count)  # the first of the most frequent readings
    mean = sum(read) / len(read)
    assert (v.verdict, said(v)) == (verdict, evidence)
    assert (v.n_intervals, v.n_samples, v.zero_samples, v.constant_samples) == (
        6,
        18,
        0,
        3 * read.count(modal),
    )
    assert (v.throughput_min, v.throughput_max) == (10.0, 320.0)
    assert (v.gauge_min, v.gauge_max, v.constant_value) == pytest.approx((min(read), max(read), modal))
    assert v.relative_range == pytest.approx((max(read) - min(read)) / mean)
    assert v.elasticity == pytest.approx(elasticity(LOAD, read))
    rho = rank_correlation(LOAD, read)
    assert v.rank_correlation == (None if rho is None else pytest.approx(rho))
    assert v.knee_throughput == (160.0 if verdict == "saturates" else None)
    assert v.measure is None
    assert [r.throughput for r in v.readings] == LOAD
    assert [r.value for r in v.readings] == pytest.approx(read)


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (2405.0, "2,405"),
        (100.0, "100"),
        (-150.0, "-150"),
        (10.0, "10.0"),
        (9.999, "10.00"),
        (1.0, "1.00"),
        (0.999, "0.999"),
        (0.0, "0.00"),
        (0.0421, "0.0421"),
        (-0.5, "-0.5"),
    ],
)
def test_a_gauge_value_shows_about_three_significant_digits(value: float, text: str) -> None:
    assert fmt_value(value) == text


PROBE_QWEN = "spark-otel probe --engine qwen=URL --streams 1,2,4,8,16"


def test_too_few_intervals_say_where_the_readings_lie_and_the_probe_that_would_add_some() -> None:
    single = levels([10.0])
    v = one(single, gauge(sc.ENGINE_REQUESTS_RUNNING, single, [1], QWEN))
    assert (v.verdict, v.measure) == ("not enough load range", PROBE_QWEN)
    assert said(v) == (
        "readings in 1 interval (10.0 tok/s: 1.00 requests); 3 at different loads are needed: "
        f"measure with `{PROBE_QWEN}`"
    )
    on_nemotron = levels([10.0, 40.0, 160.0], engine="nemotron")
    report = instrument_verdicts(on_nemotron, gauge(sc.ENGINE_REQUESTS_RUNNING, on_nemotron, [1, 2, 3], QWEN))
    v = by_name(report)["qwen requests running"]
    assert said(v) == (
        "no interval measured qwen's throughput (the 3 loaded intervals (10.0 to 160.0 tok/s) are on "
        f"nemotron); 3 at different loads are needed: measure with `{PROBE_QWEN}`"
    )
    # A GPU gauge names the engine the intervals measured, or a placeholder.
    gpu = one(single, gauge(sc.GPU_POWER, single, [30], GPU))
    assert gpu.measure == PROBE_QWEN
    assert said(gpu).startswith("readings in 1 interval (10.0 tok/s: 30.0 W); ")
    no_engine = [i.model_copy(update={"engines": {}}) for i in single]
    assert one(no_engine, gauge(sc.GPU_POWER, no_engine, [30], GPU)).measure == (
        "spark-otel probe --engine NAME=URL --streams 1,2,4,8,16"
    )


def test_a_counter_that_never_moves_is_unsupported() -> None:
    intervals = levels(LOAD)
    v = one(intervals, counter(sc.ENGINE_GENERATION_TOKENS, intervals, [0.0] * 6, QWEN))
    assert (v.verdict, said(v)) == (
        "unsupported",
        "does not move in all 12 samples over 6 intervals (10.0 to 320.0 tok/s)",
    )


def test_the_notes_name_each_family_never_recorded_and_the_throughput_source() -> None:
    from spark_otel.analysis.gauges.catalog import HINTS

    intervals = levels(LOAD)
    gpu_only = instrument_verdicts(intervals, gauge(sc.GPU_UTILIZATION, intervals, [0.96] * 6, GPU))
    assert gpu_only.notes == [HINTS["nsight"], HINTS["engine"]]
    with_counter = instrument_verdicts(
        intervals,
        counter(sc.ENGINE_GENERATION_TOKENS, intervals, LOAD, QWEN),
        throughput_metric=sc.ENGINE_GENERATION_TOKENS,
    )
    assert with_counter.notes == [
        f"{sc.ENGINE_GENERATION_TOKENS} is these intervals' throughput: not graded against itself",
        HINTS["gpu"],
        HINTS["nsight"],
    ]


def test_only_intervals_with_throughput_are_load() -> None:
    intervals = levels([0.0, 0.5, 20.0, 40.0])
    report = instrument_verdicts(intervals, gauge(sc.ENGINE_REQUESTS_RUNNING, intervals, [9, 1, 2, 4], QWEN))
    assert [i.throughput for i in report.intervals] == [0.5, 20.0, 40.0]
    assert (report.throughput_min, report.throughput_max) == (0.5, 40.0)


def test_the_cells_rate_pairs_with_its_own_engines_throughput() -> None:
    from spark_otel.analysis.gauges import cell_rate_samples

    intervals = [
        i.model_copy(update={"engines": {"qwen": i.throughput, "nemotron": 500.0}}) for i in levels(LOAD)
    ]
    cells = [
        Cell(
            uid=f"c{k}",
            eval_name="g",
            cell_id=f"c{k}",
            engine="qwen",
            start_unix_ns=i.start_unix_ns + S,
            end_unix_ns=i.end_unix_ns - S,
            completion_tokens=int(i.throughput * 8),
        )
        for k, i in enumerate(intervals)
    ]
    v = one(intervals, cell_rate_samples(cells))
    assert [r.throughput for r in v.readings] == LOAD  # qwen's, not the box's 500 more


def test_without_any_loaded_interval_the_text_says_so() -> None:
    elsewhere = levels([10.0, 20.0, 40.0], t0=10_000 * S)
    report = instrument_verdicts([], gauge(sc.GPU_POWER, elsewhere, [30.0, 31.0, 32.0], GPU))
    power = by_name(report)["GPU 0 power"]
    assert (power.verdict, power.constant_samples, power.constant_value, power.n_samples) == (
        "not enough load range",
        0,
        None,
        0,
    )
    assert said(power).startswith("none of its 9 readings lie in no loaded interval; ")
    assert said(by_name(report)["GPU 0 utilization"]).startswith("no readings in no loaded interval: ")


def test_twice_the_throughput_is_enough_range_and_a_five_percent_move_is_not_pinned() -> None:
    intervals = levels([10.0, 15.0, 20.0])  # exactly 2x
    v = one(intervals, gauge(sc.ENGINE_REQUESTS_RUNNING, intervals, [19.5, 20.0, 20.5], QWEN))
    assert v.relative_range == 0.05
    assert v.verdict == "not load"
    assert "pinned" not in said(v)  # exactly 5%: it moves
    assert said(v).startswith("3 intervals, 10.0 to 20.0 tok/s (2.0x): reads 19.5 to 20.5 requests, moves ")


def test_a_gauge_that_falls_then_holds_saturates_and_says_it_falls() -> None:
    intervals = levels([25.0, 50.0, 100.0, 150.0, 200.0])
    v = one(intervals, gauge(sc.ENGINE_REQUESTS_RUNNING, intervals, [40, 20, 10, 10, 10], QWEN))
    assert (v.verdict, v.knee_throughput) == ("saturates", 100.0)
    assert said(v).startswith(
        "5 intervals, 25.0 to 200.0 tok/s (8.0x): falls with throughput to 10.0 requests at 100.0 tok/s, "
        "then flat to 200.0 tok/s (10.0 requests above the knee; "
    )
    early = levels([50.0, 75.0, 100.0, 125.0, 150.0])
    v = one(early, gauge(sc.ENGINE_REQUESTS_RUNNING, early, [50, 75, 75, 75, 75], QWEN))
    assert (v.verdict, v.knee_throughput) == ("saturates", 75.0)
    assert "rises with throughput to 75.0 requests at 75.0 tok/s" in said(v)  # a knee at the second level
