"""The concurrency analysis on a handful of plain cells, every figure worked out by hand: the
in-flight weights, levels, runs, the speedup and the engine's totals."""

from __future__ import annotations

import pytest
from tests.support.cells import S, cell

from spark_otel import ConfigError, InputError
from spark_otel.analysis.concurrency import concurrency, in_flight, in_flight_level, union_seconds
from spark_otel.analysis.curve import curve_from_concurrency
from spark_otel.analysis.stats import summarize
from spark_otel.model import CellStatus

CELLS = [
    cell("s1", 0, 100, 1_000, cell_id="a", workers=1),  # serial: 10 tok/s
    cell("s2", 100, 200, 800, cell_id="b", workers=1),  # serial, touching s1: 8 tok/s
    cell("p1", 1_000, 1_050, 500, cell_id="a", workers=2),  # beside p2 throughout: 10 tok/s
    cell("p2", 1_000, 1_100, 600, cell_id="b", workers=2),  # beside p1 half the time: 6 tok/s
    cell("t", 2_000, 2_100, 50, cell_id="x", workers=None, eval_name="h", status=CellStatus.DEADLINE),
    cell("f", 3_000, 3_010, 10, cell_id="y", workers=1, engine=None, status=CellStatus.ERROR),
]


def test_every_figure_of_one_engine() -> None:
    report = concurrency(CELLS)
    assert [e.engine for e in report.engines] == ["q", "unknown"]
    q = report.engines[0]
    loads = {c.uid: c for c in q.cells}
    assert {uid: (c.in_flight, c.level, c.decode_rate) for uid, c in loads.items()} == {
        "s1": (1.0, 1, 10.0),
        "s2": (1.0, 1, 8.0),
        "p1": (2.0, 2, 10.0),
        "p2": (1.5, 2, 6.0),  # (2 x 50 s + 1 x 50 s) / 100 s, read as level 2
        "t": (1.0, 1, None),
    }
    assert (loads["t"].ceiling_hit, loads["t"].failed, loads["t"].elapsed_s) == (True, False, 100.0)
    assert (q.n_cells, q.wall_s, q.completion_tokens, q.ceiling_hits, q.failures) == (5, 400.0, 2_950, 1, 0)
    assert q.aggregate_rate == pytest.approx(2_950 / 400)
    assert [(lv.level, lv.n_cells, lv.rate.median, lv.ceiling_hits) for lv in q.levels] == [
        (1, 3, 9.0, 1),
        (2, 2, 8.0, 0),
    ]
    assert [(lv.level, lv.n_cells) for lv in q.by_workers] == [(1, 2), (2, 2)]  # t has no worker count
    assert [
        (r.eval_name, r.workers, r.n_cells, r.wall_s, r.completion_tokens, r.aggregate_rate) for r in q.runs
    ] == [
        ("g", 1, 2, 200.0, 1_800, 9.0),
        ("g", 2, 2, 100.0, 1_100, 11.0),
        ("h", None, 1, 100.0, 50, 0.5),
    ]
    (speedup,) = q.speedups
    assert (speedup.base_workers, speedup.workers, speedup.base_wall_s, speedup.wall_s) == (
        1,
        2,
        200.0,
        100.0,
    )
    assert (speedup.speedup, speedup.same_cells, speedup.base_cells, speedup.n_cells) == (2.0, True, 2, 2)
    assert (speedup.base_rate_median, speedup.rate_median) == (9.0, 8.0)
    assert speedup.per_cell_cost == pytest.approx(1 - 8 / 9)
    assert (speedup.base_start_unix_ns, speedup.start_unix_ns) == (0, 1_000 * S)
    unknown = report.engines[1]
    assert (unknown.n_cells, unknown.failures, unknown.levels[0].failures, unknown.runs[0].failures) == (
        1,
        1,
        1,
        1,
    )
    assert unknown.speedups == []


def test_one_eval_or_engine_is_reported_while_every_cell_counts_in_flight() -> None:
    beside = [*CELLS, cell("other", 1_050, 1_100, 100, cell_id="z", workers=1, eval_name="other")]
    (q,) = concurrency(beside, eval_name="g", engine="q").engines
    assert [c.uid for c in q.cells] == ["s1", "s2", "p1", "p2"]
    assert {c.uid: c.in_flight for c in q.cells}["p2"] == 2.0  # "other" ran beside its second half
    assert concurrency(CELLS, engine="unknown").engines[0].engine == "unknown"
    assert concurrency(CELLS, eval_name="none").engines == []


def test_a_run_splits_at_a_gap_past_the_merge_gap() -> None:
    apart = [
        cell("s1", 0, 100, 1_000, cell_id="a", workers=1),
        cell("s2", 161, 261, 1_000, cell_id="a", workers=1),
    ]
    assert len(concurrency(apart).engines[0].runs) == 2  # 61 s apart: past the default 60 s
    assert len(concurrency(apart, merge_gap_s=61).engines[0].runs) == 1


def test_the_base_run_is_the_one_over_the_same_cells_else_the_nearest_in_time() -> None:
    cells = [
        cell("s-old", 0, 100, 1_000, cell_id="a", workers=1),
        cell("s-other", 10_000, 10_100, 500, cell_id="c", workers=1),
        cell("p", 10_300, 10_350, 500, cell_id="c", workers=4),
        cell("p2", 20_000, 20_050, 500, cell_id="d", workers=4),
    ]
    first, second = concurrency(cells).engines[0].speedups
    assert (first.base_start_unix_ns, first.same_cells, first.speedup) == (10_000 * S, True, 2.0)
    assert (second.base_start_unix_ns, second.same_cells) == (10_000 * S, False)  # nearest in time


def test_in_flight_weights_levels_and_the_union_of_intervals() -> None:
    cells = [
        cell("a", 0, 10, 1, cell_id="a", workers=1),
        cell("b", 5, 15, 1, cell_id="b", workers=1),
        cell("z", 7, 7, 1, cell_id="z", workers=1),
    ]
    assert in_flight(cells) == [1.5, 1.5, None]
    assert [in_flight_level(w) for w in (0.2, 1.0, 1.49, 1.5, 2.5)] == [1, 1, 1, 2, 3]
    assert union_seconds([(0, 10 * S), (5 * S, 15 * S), (20 * S, 20 * S), (30 * S, 40 * S)]) == 25.0
    assert union_seconds([]) == 0.0


def test_a_curve_from_cells_takes_each_levels_median_and_says_when_and_what_it_rests_on() -> None:
    curve = curve_from_concurrency(concurrency(CELLS), "q", model="m")
    assert [(p.streams, p.per_stream_rate, p.aggregate_rate, p.n) for p in curve.points] == [
        (1, 9.0, 9.0, 2),  # too few cells at every level for min_cells: all levels kept
        (2, 8.0, 16.0, 2),
    ]
    rates = summarize([8.0, 10.0])
    assert (curve.points[0].p10, curve.points[0].p90, curve.points[0].ci_low, curve.points[0].ci_high) == (
        rates.p10,
        rates.p90,
        rates.ci_low,
        rates.ci_high,
    )
    assert (curve.engine, curve.source, curve.model, curve.measured_unix_ns) == ("q", "cells", "m", 2_100 * S)


def test_a_curve_from_cells_leaves_out_levels_under_min_cells_but_keeps_one_at_it() -> None:
    cells = [cell(f"s{k}", 200 * k, 200 * k + 100, 1_000, cell_id=f"c{k}", workers=1) for k in range(3)]
    cells += [
        cell("p1", 1_000, 1_100, 500, cell_id="a", workers=2),
        cell("p2", 1_000, 1_100, 0, cell_id="b", workers=2),
    ]  # one rated
    report = concurrency(cells)
    assert [p.streams for p in curve_from_concurrency(report).points] == [1]
    assert [p.streams for p in curve_from_concurrency(report, min_cells=4).points] == [1, 2]


def test_a_curve_from_cells_names_what_is_missing() -> None:
    with pytest.raises(ConfigError, match=r"name an engine: the cells ran on \['q', 'unknown'\]"):
        curve_from_concurrency(concurrency(CELLS))
    with pytest.raises(ConfigError, match="name an engine: the cells ran on no engine"):
        curve_from_concurrency(concurrency([]))
    with pytest.raises(InputError, match=r"no recorded cells on engine 'x' \(have: q, unknown\)"):
        curve_from_concurrency(concurrency(CELLS), "x")
    with pytest.raises(
        InputError, match="engine 'unknown': no completed cells with token counts to build a curve from"
    ):
        curve_from_concurrency(concurrency(CELLS), "unknown")
