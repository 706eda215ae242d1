"""Energy per cell and per token on hand-built cells and GPU samples with known answers."""

from __future__ import annotations

import pytest
from tests.support.energy_samples import GPU0, T0, S, cell, counter, power

from spark_otel import _semconv as sc
from spark_otel.analysis.energy import (
    MEASURE_GPU,
    BoxEnergy,
    LevelEnergy,
    attribute,
    box_energy,
    cell_energy,
    level_comparison,
    probe_level_energy,
    restrict,
)
from spark_otel.analysis.probe_levels import curve_of
from spark_otel.model import MetricSample
from spark_otel.records.probe_report import ProbeLevel, ProbeMetadata, ProbeReport, ProbeSettings


def shares(report: object) -> dict[str, float | None]:
    return {c.uid: c.share_j for c in report.cells}  # type: ignore[attr-defined]


def test_overlapping_cells_split_each_stretch_by_their_tokens_and_sum_to_the_box() -> None:
    # 40 W for 100 s. a: 0-60 s, 600 tok (10 tok/s); b: 20-80 s, 1,200 tok (20 tok/s).
    # 0-20: a alone, 800 J. 20-60: both, 1,600 J split 10:20. 60-80: b alone, 800 J. 80-100: idle.
    cells = [cell("a", 0, 60, 600), cell("b", 20, 80, 1200)]
    report = attribute(cells, counter(40.0, 100))
    assert report is not None
    assert shares(report) == pytest.approx({"a": 800 + 1600 / 3, "b": 800 + 3200 / 3})
    assert report.box_j == pytest.approx(3200.0)
    assert sum(c.share_j or 0 for c in report.cells) == pytest.approx(report.box_j)
    assert report.attributed_j == pytest.approx(report.box_j)
    assert report.idle_j == 0.0  # after the last cell is not between cells
    by_uid = {c.uid: c for c in report.cells}
    assert by_uid["a"].box_j == pytest.approx(2400.0)  # the box over a's lifetime: 60 s at 40 W
    assert by_uid["a"].j_per_token == pytest.approx((800 + 1600 / 3) / 600)
    [ev] = report.evals
    assert (ev.n_cells, ev.n_measured, ev.output_tokens) == (2, 2, 1800)
    assert ev.energy_j == pytest.approx(3200.0)
    assert ev.j_per_token == pytest.approx(3200 / 1800)
    assert ev.j_per_cell == pytest.approx(1600.0)
    assert (ev.start_unix_ns, ev.end_unix_ns) == (T0, T0 + 80 * S)
    assert report.estimated is False
    assert report.measure is None


def test_a_stretch_of_cells_without_tokens_splits_by_time_and_idle_gaps_are_charged_to_none() -> None:
    # a: 0-10 s with tokens; gap 10-30 s; t1 and t2 timeouts without tokens, 30-50 s side by side.
    cells = [cell("a", 0, 10, 100), cell("t1", 30, 50, None), cell("t2", 30, 50, None)]
    report = attribute(cells, counter(30.0, 60))
    assert report is not None
    assert shares(report) == pytest.approx({"a": 300.0, "t1": 300.0, "t2": 300.0})
    assert report.idle_j == pytest.approx(600.0)
    assert report.box_j == pytest.approx(900.0)
    assert {c.uid: c.j_per_token for c in report.cells}["t1"] is None


def test_power_samples_are_integrated_and_flagged_estimated() -> None:
    samples = power(36.0, 60)
    report = attribute([cell("a", 5, 55, 500)], samples)
    assert report is not None
    assert report.estimated is True
    assert shares(report) == pytest.approx({"a": 36.0 * 50})
    # The counter wins over power where a GPU has both.
    report = attribute([cell("a", 5, 55, 500)], samples + counter(50.0, 60))
    assert report is not None
    assert report.estimated is False
    assert shares(report) == pytest.approx({"a": 50.0 * 50})


def test_a_counter_reset_is_read_across() -> None:
    samples = counter(40.0, 20) + [
        MetricSample(name=sc.GPU_ENERGY, unix_ns=T0 + k * S, value=40.0 * (k - 25), attributes=GPU0)
        for k in (25, 30, 35, 40)
    ]
    box = box_energy(samples)
    assert box is not None
    assert box.between(T0, T0 + 40 * S) == pytest.approx(40 * 20 + 0 + 40 * 15)  # 20-25 s lost in the reset


def test_two_gpus_sum_into_the_box_where_both_have_readings() -> None:
    samples = counter(30.0, 60) + counter(10.0, 40, gpu="1")
    report = attribute([cell("a", 0, 40, 400), cell("late", 30, 50, 100)], samples)
    assert report is not None
    assert report.gpus == ["0", "1"]
    assert (report.covered_start_unix_ns, report.covered_end_unix_ns) == (T0, T0 + 40 * S)
    by_uid = {c.uid: c for c in report.cells}
    assert by_uid["late"].share_j is None  # ends past the second GPU's last reading
    # a alone 0-30 s at 40 W: 1,200 J; 30-40 s beside "late" at 10 vs 5 tok/s: 400 J split 2:1.
    assert by_uid["a"].share_j == pytest.approx(1200 + 400 * 2 / 3)
    assert report.partial_j == pytest.approx(400 / 3)
    assert report.attributed_j + report.partial_j == pytest.approx(report.box_j)
    assert report.unmeasured == 1
    assert report.measure == MEASURE_GPU
    [ev] = report.evals
    assert (ev.n_cells, ev.n_measured) == (2, 1)


def test_cells_outside_the_samples_have_no_energy_and_name_the_command() -> None:
    report = attribute([cell("before", -50, -10, 100)], counter(40.0, 60))
    assert report is not None
    [c] = report.cells
    assert c.share_j is None
    assert c.box_j is None
    assert report.unmeasured == 1
    assert report.measure == "spark-otel receive --engine NAME=URL --gpu auto --interval 1"
    [ev] = report.evals
    assert ev.j_per_token is None
    assert ev.n_measured == 0


def test_no_gpu_readings_give_no_report() -> None:
    assert attribute([cell("a", 0, 10, 100)], []) is None
    assert attribute([cell("a", 0, 10, 100)], counter(40.0, 0)) is None  # one reading: no interval


def test_evals_are_split_by_worker_count() -> None:
    cells = [
        cell("s1", 0, 10, 100, workers=1),
        cell("p1", 20, 30, 100, workers=4),
        cell("p2", 20, 30, 300, workers=4),
    ]
    report = attribute(cells, counter(40.0, 40))
    assert report is not None
    serial, parallel = report.evals
    assert (serial.workers, serial.j_per_token) == (1, pytest.approx(4.0))
    assert (parallel.workers, parallel.j_per_token) == (4, pytest.approx(1.0))
    assert parallel.per_cell.n == 2
    assert parallel.per_cell.median == pytest.approx(200.0)


def test_a_selection_keeps_its_cells_shares_and_recounts_what_is_unmeasured() -> None:
    cells = [
        cell("a", 0, 20, 200, eval_name="one"),
        cell("b", 10, 30, 200, eval_name="two"),
        cell("early", -30, -10, 100, eval_name="two"),  # before the samples: unmeasured
    ]
    report = attribute(cells, counter(40.0, 40))
    assert report is not None
    whole = shares(report)
    one = restrict(report, eval_name="one")
    assert shares(one) == {"a": whole["a"]}  # the box was split over every cell first
    assert (one.unmeasured, one.measure, [e.eval_name for e in one.evals]) == (0, None, ["one"])
    assert (one.box_j, one.attributed_j, one.gpus) == (report.box_j, report.attributed_j, report.gpus)
    two = restrict(report, eval_name="two")
    assert (sorted(shares(two)), two.unmeasured, two.measure) == (["b", "early"], 1, MEASURE_GPU)
    [ev] = two.evals
    assert (ev.n_cells, ev.n_measured, ev.energy_j) == (2, 1, pytest.approx(whole["b"]))
    assert restrict(report, engine="qwen") == report.model_copy(update={"evals": report.evals})
    nothing = restrict(report, eval_name="one", engine="other")
    assert (nothing.cells, nothing.evals, nothing.unmeasured) == ([], [], 0)
    assert restrict(report) == report


def test_cell_energy_is_each_cell_by_uid_and_empty_without_a_report() -> None:
    report = attribute([cell("a", 0, 20, 200), cell("b", 10, 30, 200)], counter(40.0, 40))
    assert report is not None
    assert cell_energy(report) == {c.uid: c for c in report.cells}
    assert list(cell_energy(report)) == ["a", "b"]
    assert cell_energy(None) == {}


def _probe(
    levels: list[tuple[int, float, float | None, int]], gpu_source: str | None = "nvml"
) -> ProbeReport:
    rows = [
        ProbeLevel(
            streams=n,
            start_unix_ns=T0 + k * 100 * S,
            end_unix_ns=T0 + k * 100 * S + int(wall * S),
            wall_s=wall,
            tokens_expected=512,
            probe_tokens=tokens,
            stream_rates=[tokens / n / wall] * n,
            per_stream_median=tokens / n / wall,
            probe_aggregate_rate=tokens / wall,
            power_w=watts,
        )
        for k, (n, wall, watts, tokens) in enumerate(levels)
    ]
    return ProbeReport(
        metadata=ProbeMetadata(
            created_unix_ns=T0,
            engine_url="http://127.0.0.1:8011",
            engine="qwen",
            model="m",
            gpu_source=gpu_source,
        ),
        settings=ProbeSettings(),
        levels=rows,
        curve=curve_of("qwen", rows),
    )


def test_probe_levels_read_joules_per_token_from_the_appendix_a_power() -> None:
    # Appendix A, Qwen3.8: 1 stream 46.0 s at 34.2 W, 8 streams 50.9 s at 36.6 W, 512 tokens each.
    report = _probe([(1, 46.0, 34.2, 512), (8, 50.9, 36.6, 8 * 512)])
    one, eight = probe_level_energy(report)
    assert one.energy_j == pytest.approx(34.2 * 46.0)
    assert one.j_per_token == pytest.approx(34.2 * 46.0 / 512)
    assert eight.j_per_token == pytest.approx(36.6 * 50.9 / 4096)
    assert one.source == "probe power (nvml)"
    assert not one.estimated
    assert level_comparison([one, eight]) == "8 streams: 0.455 J/token against 3.07 at 1 (6.8x less)"


def test_a_level_without_probe_power_reads_the_stores_samples_and_smi_is_estimated() -> None:
    report = _probe([(1, 46.0, None, 512), (2, 46.9, 35.8, 1024)], gpu_source="smi")
    box = box_energy(counter(40.0, 300))
    first, second = probe_level_energy(report, box)
    assert first.energy_j == pytest.approx(40.0 * 46.0)
    assert (first.source, first.estimated) == ("store GPU samples", False)
    assert second.estimated is True  # nvidia-smi: mean power samples
    assert probe_level_energy(report)[0].energy_j is None
    assert level_comparison(probe_level_energy(report)) is None


def _level(streams: int, j_per_token: float | None, repeat: int = 0) -> LevelEnergy:
    return LevelEnergy(
        engine="qwen",
        streams=streams,
        repeat=repeat,
        energy_j=None if j_per_token is None else j_per_token * 100,
        tokens=100,
        j_per_token=j_per_token,
        source="probe power (nvml)",
        estimated=False,
    )


def test_the_level_comparison_takes_the_median_over_repeats_of_the_fewest_and_most_streams() -> None:
    levels = [_level(1, 2.0), _level(1, 4.0, 1), _level(4, 9.9), _level(8, 1.0), _level(16, None)]
    assert level_comparison(levels) == "8 streams: 1 J/token against 3 at 1 (3.0x less)"
    assert (
        level_comparison([_level(1, 1.0), _level(8, 2.5)])
        == "8 streams: 2.5 J/token against 1 at 1 (2.5x more)"
    )
    assert (
        level_comparison([_level(2, 1.0), _level(8, 1.0)])
        == "8 streams: 1 J/token against 1 at 2 (1.0x less)"
    )
    assert level_comparison([_level(1, 1.0), _level(1, 2.0, 1)]) is None  # one level, repeated
    assert level_comparison([_level(1, 1.0), _level(8, None)]) is None


def test_the_box_energy_is_interpolated_inside_its_readings_and_unknown_outside() -> None:
    box = BoxEnergy(times=[0, 10, 20], joules=[0.0, 100.0, 300.0], gpus=["0"], estimated=False)
    assert [box.at(t) for t in (-1, 0, 5, 10, 15, 20, 21)] == [None, 0.0, 50.0, 100.0, 200.0, 300.0, None]
    assert (box.between(5, 15), box.between(-1, 5), box.between(15, 21), box.covers) == (
        150.0,
        None,
        None,
        (0, 20),
    )
    single = BoxEnergy(times=[0], joules=[0.0], gpus=["0"], estimated=False)
    assert (single.at(0), single.covers) == (None, None)


def test_a_gpus_energy_counter_wins_over_its_power_and_power_alone_is_integrated() -> None:
    watts = [(0, 100.0), (10, 200.0), (20, 200.0), (30, 100.0)]
    gpu1_power = [
        MetricSample(name=sc.GPU_POWER, unix_ns=T0 + s * S, value=w, unit="W", attributes={sc.GPU_ID: "1"})
        for s, w in watts
    ]
    gpu0 = counter(40.0, 20) + power(999.0, 20)  # 40 W by its counter; the power samples are ignored
    box = box_energy(gpu0 + gpu1_power)
    assert box is not None
    assert (box.gpus, box.estimated, box.covers) == (["0", "1"], True, (T0, T0 + 20 * S))
    # GPU 1 by the trapezoid rule: 1,500 J over 0-10 s and 2,000 J over 10-20 s; GPU 0: 40 J/s.
    assert box.between(T0, T0 + 10 * S) == pytest.approx(400.0 + 1_500.0)
    assert box.between(T0 + 10 * S, T0 + 20 * S) == pytest.approx(400.0 + 2_000.0)
    counted = box_energy(gpu0)
    assert counted is not None
    assert (counted.gpus, counted.estimated) == (["0"], False)
    unnamed = [s.model_copy(update={"attributes": {}}) for s in counter(40.0, 10)]
    named = box_energy(unnamed)
    assert named is not None
    assert named.gpus == ["?"]
    apart = counter(40.0, 10) + [
        MetricSample(
            name=sc.GPU_ENERGY, unix_ns=T0 + s * S, value=float(s), unit="J", attributes={sc.GPU_ID: "1"}
        )
        for s in (100, 110)
    ]
    assert box_energy(apart) is None  # the two GPUs' readings never overlap


def test_cells_without_tokens_split_a_stretch_by_time_and_a_zero_length_cell_gets_nothing() -> None:
    cells = [cell("a", 0, 20, None), cell("b", 0, 20, None), cell("z", 5, 5, 100)]
    report = attribute(cells, counter(40.0, 20))
    assert report is not None
    assert shares(report) == {"a": pytest.approx(400.0), "b": pytest.approx(400.0)}
    assert (report.box_j, report.attributed_j, report.partial_j, report.idle_j) == (
        pytest.approx(800.0),
        pytest.approx(800.0),
        0.0,
        0.0,
    )
