"""Energy at its edges, every joule worked out by hand: the fewest readings that make a box, cells
given out of order, tokenless and one-nanosecond cells, a box that drew nothing, cells cut by the
samples' ends, short probe levels, and the level comparison's wording at zero."""

from __future__ import annotations

from typing import Any

from tests.support.cells import S, cell

from spark_otel import _semconv as sc
from spark_otel.analysis.energy import (
    MEASURE_GPU,
    BoxEnergy,
    LevelEnergy,
    attribute,
    box_energy,
    level_comparison,
    probe_level_energy,
)
from spark_otel.model import Cell, CellStatus, MetricSample
from spark_otel.records.probe_report import ProbeLevel, ProbeMetadata, ProbeReport, ProbeSettings
from spark_otel.records.rate_curve import CurvePoint, RateCurve

T0 = 1_700_000_000 * S


def reading(name: str, t_ns: int, value: float, gpu: str = "0") -> MetricSample:
    return MetricSample(name=name, unix_ns=t_ns, value=value, attributes={sc.GPU_ID: gpu})


def counter(watts: float, seconds: int, *, first_s: int = 0, gpu: str = "0") -> list[MetricSample]:
    """A steady draw read as NVML's cumulative energy counter every 5 s from ``first_s``."""
    return [
        reading(sc.GPU_ENERGY, T0 + k * S, 1_000.0 + watts * k, gpu)
        for k in range(first_s, first_s + seconds + 1, 5)
    ]


def at(uid: str, start_s: float, end_s: float, tokens: int | None, **kw: Any) -> Cell:
    """A cell ``start_s`` to ``end_s`` seconds after T0, where the samples start."""
    return cell(uid, start_s, end_s, tokens, t0_ns=T0, **kw)


def test_two_power_readings_make_a_box_integrated_by_the_trapezoid() -> None:
    """Two readings are the fewest that span an interval, for power samples as for the box."""
    box = box_energy([reading(sc.GPU_POWER, T0, 100.0), reading(sc.GPU_POWER, T0 + 10 * S, 200.0)])
    assert box is not None
    # (100 W + 200 W) / 2 over 10 s.
    assert (box.covers, box.estimated, box.gpus) == ((T0, T0 + 10 * S), True, ["0"])
    assert box.between(T0, T0 + 10 * S) == 1_500.0
    assert box.at(T0 + 5 * S) == 750.0
    pair = BoxEnergy(times=[0, 10], joules=[0.0, 100.0], gpus=["0"], estimated=False)
    assert (pair.at(5), pair.between(0, 10), pair.covers) == (50.0, 100.0, (0, 10))


def test_two_gpus_whose_readings_only_touch_give_no_box() -> None:
    """Readings that share a single instant cover no interval on both GPUs."""
    samples = counter(40.0, 10) + counter(30.0, 10, first_s=10, gpu="1")
    assert box_energy(samples) is None
    assert attribute([at("a", 0, 20, 100)], samples) is None


def test_cells_given_out_of_start_order_are_charged_as_in_order() -> None:
    """The cell listed first may start last: each stretch still goes to the cells running in it."""
    report = attribute([at("b", 20, 40, 100), at("a", 0, 20, 100)], counter(40.0, 40))
    assert report is not None
    assert {c.uid: c.share_j for c in report.cells} == {"b": 800.0, "a": 800.0}
    assert (report.box_j, report.idle_j) == (1_600.0, 0.0)


def test_no_timed_cells_leave_the_box_charged_to_no_one() -> None:
    """Without a cell that took time nothing ran, so nothing is busy, idle or unmeasured."""
    for cells in ([], [at("z", 5, 5, 100)]):
        report = attribute(cells, counter(40.0, 20))
        assert report is not None
        assert (report.gpus, report.estimated) == (["0"], False)
        assert (report.covered_start_unix_ns, report.covered_end_unix_ns) == (T0, T0 + 20 * S)
        assert (report.box_j, report.attributed_j, report.partial_j, report.idle_j) == (0.0, 0.0, 0.0, 0.0)
        assert (report.cells, report.evals, report.unmeasured, report.measure) == ([], [], 0, None)


def test_a_box_that_drew_nothing_charges_every_cell_nothing() -> None:
    """A flat energy counter is zero joules in every stretch, busy or idle."""
    report = attribute([at("a", 0, 5, 100), at("b", 10, 15, 50)], counter(0.0, 20))
    assert report is not None
    assert [(c.uid, c.box_j, c.share_j, c.j_per_token) for c in report.cells] == [
        ("a", 0.0, 0.0, 0.0),
        ("b", 0.0, 0.0, 0.0),
    ]
    assert (report.box_j, report.idle_j) == (0.0, 0.0)
    [ev] = report.evals
    assert (ev.n_measured, ev.output_tokens, ev.energy_j, ev.j_per_token, ev.j_per_cell) == (
        2,
        150,
        0.0,
        0.0,
        0.0,
    )


def test_a_cell_without_tokens_beside_one_with_tokens_pays_nothing() -> None:
    """By tokens, a timeout that kept none takes no share while a neighbour decodes; its eval row
    shows 0 J over 0 tokens, so no J/token."""
    cells = [at("a", 0, 10, 100, workers=2), at("t", 0, 10, None, workers=1, status=CellStatus.DEADLINE)]
    report = attribute(cells, counter(40.0, 20))
    assert report is not None
    assert {c.uid: c.share_j for c in report.cells} == {"a": 400.0, "t": 0.0}
    serial, pair = report.evals
    assert (serial.workers, serial.n_measured, serial.output_tokens, serial.energy_j) == (1, 1, 0, 0.0)
    assert (serial.j_per_token, serial.j_per_cell, serial.per_cell.median) == (None, 0.0, 0.0)
    assert (pair.workers, pair.output_tokens, pair.energy_j, pair.j_per_token) == (2, 100, 400.0, 4.0)


def test_two_one_nanosecond_cells_split_their_stretch_by_tokens() -> None:
    """A cell one nanosecond long has a token rate like any other."""
    samples = [reading(sc.GPU_ENERGY, T0, 0.0), reading(sc.GPU_ENERGY, T0 + 2, 2.0)]  # 1 J per ns
    cells = [
        Cell(uid=u, eval_name="g", cell_id=u, start_unix_ns=T0, end_unix_ns=T0 + 1, completion_tokens=n)
        for u, n in (("a", 10), ("b", None))
    ]
    report = attribute(cells, samples)
    assert report is not None
    assert {c.uid: c.share_j for c in report.cells} == {"a": 1.0, "b": 0.0}
    assert (report.box_j, report.idle_j) == (1.0, 0.0)  # the last nanosecond is after every cell


def test_cells_cut_by_either_end_of_the_samples_add_up_as_partial_and_both_gaps_as_idle() -> None:
    """Every partly covered cell's share is partial and every idle gap is idle, not just the last."""
    cells = [at("early", -10, 10, 100), at("mid", 15, 25, 100), at("late", 30, 50, 100)]
    report = attribute(cells, counter(40.0, 40))
    assert report is not None
    # 40 W over 0-40 s: early alone 0-10 (400 J), idle 10-15 (200 J), mid 15-25 (400 J),
    # idle 25-30 (200 J), late alone 30-40 (400 J).
    assert [(c.uid, c.box_j, c.share_j) for c in report.cells] == [
        ("early", None, None),
        ("mid", 400.0, 400.0),
        ("late", None, None),
    ]
    assert (report.box_j, report.partial_j, report.attributed_j, report.idle_j) == (
        1_200.0,
        800.0,
        400.0,
        400.0,
    )
    assert (report.unmeasured, report.measure) == (2, MEASURE_GPU)


def test_evals_are_listed_by_name_then_worker_count_with_no_count_first() -> None:
    """Per-eval rows come in eval order, then worker count, a row without one first, whatever
    order the cells came in."""
    cells = [
        at("b4", 0, 10, 100, eval_name="b", workers=4),
        at("b1", 10, 20, 100, eval_name="b", workers=1),
        at("bn", 20, 30, 100, eval_name="b", workers=None),
        at("a8", 30, 40, 100, eval_name="a", workers=8),
    ]
    report = attribute(cells, counter(40.0, 40))
    assert report is not None
    # 40 W over each cell's 10 s alone: 400 J for 100 tokens.
    assert [(e.eval_name, e.workers, e.energy_j, e.j_per_token) for e in report.evals] == [
        ("a", 8, 400.0, 4.0),
        ("b", None, 400.0, 4.0),
        ("b", 1, 400.0, 4.0),
        ("b", 4, 400.0, 4.0),
    ]


def _probe(levels: list[ProbeLevel]) -> ProbeReport:
    return ProbeReport(
        metadata=ProbeMetadata(
            created_unix_ns=T0,
            engine_url="http://127.0.0.1:8011",
            engine="qwen",
            model="m",
            gpu_source="nvml",
        ),
        settings=ProbeSettings(),
        levels=levels,
        curve=RateCurve(
            engine="qwen", points=[CurvePoint(streams=1, per_stream_rate=1.0, aggregate_rate=1.0)]
        ),
    )


def _probe_level(streams: int, wall_s: float, power_w: float | None, tokens: int) -> ProbeLevel:
    return ProbeLevel(
        streams=streams,
        start_unix_ns=T0,
        end_unix_ns=T0 + int(wall_s * S),
        wall_s=wall_s,
        tokens_expected=512,
        probe_tokens=tokens,
        power_w=power_w,
    )


def test_a_sub_second_level_reads_the_probes_power_and_a_level_without_wall_has_no_energy() -> None:
    """Probe power times wall needs a wall above zero, not above a second; without one (and no
    store samples) the level has no energy, no source and is not estimated."""
    short, empty = probe_level_energy(_probe([_probe_level(1, 0.5, 30.0, 50), _probe_level(2, 0.0, 30.0, 0)]))
    assert short == LevelEnergy(
        engine="qwen",
        streams=1,
        repeat=0,
        energy_j=15.0,
        tokens=50,
        j_per_token=0.3,
        source="probe power (nvml)",
        estimated=False,
    )
    assert empty == LevelEnergy(
        engine="qwen",
        streams=2,
        repeat=0,
        energy_j=None,
        tokens=0,
        j_per_token=None,
        source=None,
        estimated=False,
    )


def _level(streams: int, j_per_token: float) -> LevelEnergy:
    return LevelEnergy(
        engine="qwen",
        streams=streams,
        repeat=0,
        energy_j=j_per_token * 100,
        tokens=100,
        j_per_token=j_per_token,
        source="probe power (nvml)",
        estimated=False,
    )


def test_the_level_comparison_gives_no_ratio_against_zero_joules_at_the_fewest_streams() -> None:
    """A ratio over 0 J/token would be infinite: the line gives the figures alone."""
    assert level_comparison([_level(1, 0.0), _level(8, 0.0)]) == "8 streams: 0 J/token against 0 at 1"
    assert level_comparison([_level(1, 0.0), _level(8, 1.0)]) == "8 streams: 1 J/token against 0 at 1"


def test_the_level_comparison_says_how_many_times_more_the_most_streams_cost() -> None:
    assert (
        level_comparison([_level(1, 2.0), _level(8, 5.0)])
        == "8 streams: 5 J/token against 2 at 1 (2.5x more)"
    )


def test_zero_joules_at_the_most_streams_is_not_called_more() -> None:
    assert level_comparison([_level(1, 2.0), _level(8, 0.0)]) == "8 streams: 0 J/token against 2 at 1"
