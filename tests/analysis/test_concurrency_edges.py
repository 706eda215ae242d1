"""The concurrency analysis at its edges, every figure worked out by hand: cells of no length and
of one nanosecond, runs of a second or less, the order runs and speedups are listed in, and which
serial run a speedup is measured against."""

from __future__ import annotations

import pytest
from tests.support.cells import S, cell

from spark_otel.analysis.concurrency import concurrency, in_flight
from spark_otel.model import Cell


def ns_cell(uid: str, start_ns: int, end_ns: int) -> Cell:
    return Cell(uid=uid, eval_name="g", cell_id=uid, engine="q", start_unix_ns=start_ns, end_unix_ns=end_ns)


def test_a_one_nanosecond_cell_is_weighed_and_only_a_zero_length_cell_is_not() -> None:
    """Only a cell without duration has no weight: one nanosecond is enough to weigh over."""
    cells = [ns_cell("a", 0, 10), ns_cell("b", 0, 1), ns_cell("z", 5, 5)]
    # a: 2 in flight for 1 ns, then alone for 9 ns -> 11 / 10; b: beside a throughout -> 2.
    assert in_flight(cells) == [1.1, 2.0, None]


def test_a_zero_length_cell_has_no_weight_level_or_rate_and_its_run_no_speedup() -> None:
    """A cell that took no time is counted but never weighed, rated or divided by."""
    cells = [
        cell("s", 0, 10, 100, workers=1),
        cell("z", 20, 20, 50, workers=2),
        cell("o", 30, 30, 5, engine="o", workers=1),  # engine o's only cell: no busy time at all
    ]
    o, q = concurrency(cells).engines
    assert [(c.uid, c.in_flight, c.level, c.decode_rate) for c in q.cells] == [
        ("s", 1.0, 1, 10.0),
        ("z", None, None, None),
    ]
    assert [(lv.level, lv.n_cells) for lv in q.levels] == [(1, 1)]  # z has no level
    assert [(lv.level, lv.n_cells) for lv in q.by_workers] == [(1, 1), (2, 1)]
    assert [(r.workers, r.n_cells, r.wall_s, r.completion_tokens, r.aggregate_rate) for r in q.runs] == [
        (1, 1, 10.0, 100, 10.0),
        (2, 1, 0.0, 50, None),
    ]
    assert q.speedups == []  # a run without wall time is no speedup over the serial one
    assert (q.n_cells, q.wall_s, q.completion_tokens, q.aggregate_rate) == (2, 10.0, 150, 15.0)
    assert (o.engine, o.n_cells, o.wall_s, o.completion_tokens, o.aggregate_rate) == ("o", 1, 0.0, 5, None)
    assert [(c.in_flight, c.level) for c in o.cells] == [(None, None)]
    assert (o.levels, o.speedups) == ([], [])
    assert [(r.workers, r.wall_s, r.aggregate_rate) for r in o.runs] == [(1, 0.0, None)]


def test_runs_of_a_second_or_less_have_their_aggregate_rate_and_speedup() -> None:
    """Short runs are rated like long ones: the thresholds are zero seconds, not one."""
    cells = [
        cell("s1", 0, 0.25, 5, workers=1),
        cell("s2", 0.25, 0.5, 5, workers=1),  # touches s1: one serial run of 0.5 s
        cell("p1", 100, 100.25, 5, workers=2),
        cell("p2", 100, 100.25, 5, workers=2),  # side by side with p1: 0.25 s
    ]
    (q,) = concurrency(cells).engines
    assert [(r.workers, r.wall_s, r.completion_tokens, r.aggregate_rate) for r in q.runs] == [
        (1, 0.5, 10, 20.0),
        (2, 0.25, 10, 40.0),
    ]
    (sp,) = q.speedups
    # 0.25 s per cell serially against 0.125 s per cell at two workers.
    assert (sp.base_workers, sp.workers, sp.speedup) == (1, 2, 2.0)
    assert q.wall_s == 0.75
    assert q.aggregate_rate == pytest.approx(20 / 0.75)


def test_runs_are_listed_by_eval_then_worker_count_with_no_count_first() -> None:
    """Runs come in eval order, then worker count, a run without one first, whatever order the
    cells came in; a run without a worker count is no speedup base, and a cell without tokens
    adds none to the engine's total."""
    cells = [
        cell("b4", 0, 10, 100, eval_name="b", workers=4),
        cell("b1", 100, 120, 100, eval_name="b", workers=1),
        cell("bn", 200, 210, None, eval_name="b", workers=None),
        cell("a8", 300, 305, 40, eval_name="a", workers=8),
    ]
    (q,) = concurrency(cells).engines
    assert [(r.eval_name, r.workers, r.n_cells, r.wall_s, r.completion_tokens) for r in q.runs] == [
        ("a", 8, 1, 5.0, 40),
        ("b", None, 1, 10.0, 0),
        ("b", 1, 1, 20.0, 100),
        ("b", 4, 1, 10.0, 100),
    ]
    assert q.completion_tokens == 240
    # b at 4 workers against b at 1: 20 s per cell against 10 s; a ran at one count only.
    assert [(s.eval_name, s.base_workers, s.workers, s.speedup) for s in q.speedups] == [("b", 1, 4, 2.0)]


def test_speedups_are_listed_by_worker_count_not_by_time() -> None:
    """A 4-worker run recorded before a 2-worker one still comes after it."""
    cells = [
        cell("s", 0, 100, 100, workers=1),
        cell("p4", 1_000, 1_020, 100, workers=4),
        cell("p2", 2_000, 2_050, 100, workers=2),
    ]
    (q,) = concurrency(cells).engines
    # 100 s per cell serially against 50 s at two workers and 20 s at four.
    assert [(s.workers, s.speedup) for s in q.speedups] == [(2, 2.0), (4, 5.0)]


def test_the_base_is_the_nearest_serial_run_even_when_it_comes_later() -> None:
    """Between two serial runs over other cells, the base is the one nearer in time, here the
    later one."""
    cells = [
        cell("x", 0, 100, 100, workers=1),
        cell("y", 10_000, 10_100, 100, workers=1),
        cell("p0", 9_000, 9_050, 100, workers=2),
        cell("p1", 9_000, 9_050, 100, workers=2),
    ]
    (q,) = concurrency(cells).engines
    (sp,) = q.speedups
    # y starts 1,000 s after the pair, x 9,000 s before it.
    assert (sp.base_start_unix_ns, sp.start_unix_ns, sp.same_cells) == (10_000 * S, 9_000 * S, False)
    # 100 s per cell serially against 50 s for two cells.
    assert sp.speedup == 4.0


def test_a_backfilled_run_at_zero_workers_is_the_base() -> None:
    """The backfill reads any whole worker count from 0; a run at 0 is then the fewest."""
    cells = [
        cell("w0", 0, 100, 100, workers=0),
        cell("p0", 1_000, 1_050, 100, workers=2),
        cell("p1", 1_000, 1_050, 100, workers=2),
    ]
    (q,) = concurrency(cells).engines
    (sp,) = q.speedups
    assert (sp.base_workers, sp.workers, sp.speedup) == (0, 2, 4.0)


def test_the_report_names_the_eval_it_was_asked_for() -> None:
    cells = [cell("a", 0, 10, 100)]
    assert concurrency(cells, eval_name="g").eval_name == "g"
    assert concurrency(cells).eval_name is None
