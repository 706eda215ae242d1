"""The concurrency analysis over columns gives `concurrency`'s report, figure for figure: on the
article's cells, on cells made to hit each rule's edge, on generated boxes, and where int64 or
float64 could not hold a figure exactly (the path that hands those cells to `concurrency`)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.support.article import C_EVAL, appendix_c_cells, appendix_d_cells
from tests.support.cells import S, cell

from spark_otel import ConfigError
from spark_otel.analysis.concurrency import concurrency, in_flight
from spark_otel.analysis.concurrency_columns import concurrency_of_columns, in_flight_of_columns
from spark_otel.analysis.request_cells import REQUEST_SOURCE
from spark_otel.model import Cell, CellStatus
from spark_otel.records.cell_columns import CellColumns

DAY_NS = 86_400 * S


def both(cells: list[Cell], **options: object) -> None:
    """The columnar report equals the row report, every figure (pydantic compares every field);
    without the per-cell rows, every other figure still equal."""
    rows = concurrency(cells, **options)  # type: ignore[arg-type]
    columns = concurrency_of_columns(CellColumns.from_cells(cells), **options)  # type: ignore[arg-type]
    assert columns == rows
    assert columns.model_dump(mode="json") == rows.model_dump(mode="json")
    bare = concurrency_of_columns(CellColumns.from_cells(cells), with_cells=False, **options)  # type: ignore[arg-type]
    assert bare == rows.model_copy(
        update={"engines": [e.model_copy(update={"cells": []}) for e in rows.engines]}
    )


def test_the_articles_cells_give_the_same_report() -> None:
    cells = appendix_c_cells() + appendix_d_cells()
    both(cells)
    both(cells, eval_name=C_EVAL)
    both(cells, engine="qwen")
    both(cells, merge_gap_s=0.0)
    report = concurrency_of_columns(CellColumns.from_cells(appendix_c_cells()), eval_name=C_EVAL)
    (speedup,) = report.engines[0].speedups
    assert (speedup.base_wall_s, speedup.wall_s) == (8_507, 1_801)  # the article's 4.7x


def test_every_edge_the_rules_name() -> None:
    cells = [
        cell("a", 0, 10, 100, workers=2),
        cell("b", 0, 10, 100, workers=2),  # the same instants as a
        cell("c", 5, 5, 50, workers=2),  # zero length: no weight, level or rate
        cell("d", 10, 30, 0, workers=None),  # no tokens: counted, not rated
        cell("e", 12, 20, 80, workers=0, status=CellStatus.DEADLINE),  # a ceiling hit
        cell("f", 12, 14, 80, workers=0, status=CellStatus.ERROR),  # a failure
        cell("g", 40, 41, 10, engine=None),  # unknown engine
        cell("h", 40, 42, 10, engine=""),  # an empty engine reads as unknown too
        cell("i", 500, 520, 99, workers=1, source=REQUEST_SOURCE),  # a request standing in
        cell("j", 520, 530, None, workers=1, status=CellStatus.LENGTH_CAP),
        cell("k", 1000, 1001, 7, workers=1, eval_name="other"),
    ]
    for options in (
        {},
        {"eval_name": "g"},
        {"eval_name": "absent"},
        {"engine": "unknown"},
        {"merge_gap_s": 0.0},
    ):
        both(cells, **options)
    assert concurrency_of_columns(CellColumns.empty()) == concurrency([])


def test_the_merge_gap_is_checked_as_concurrency_checks_it() -> None:
    with pytest.raises(ConfigError, match="must not be negative"):
        concurrency_of_columns(CellColumns.from_cells([cell("a", 0, 1, 1)]), merge_gap_s=-1.0)


def test_figures_past_float64s_exact_integers_are_python_integers_divided() -> None:
    # Three cells of 60 days side by side: each one's covered cell-ns (3 x 60 days) is past 2**53,
    # its duration not, and for the second, float64's division of the two rounds differently from
    # Python's division of the integers (2.999999999996945 against 2.9999999999969447).
    ends = [5_184_000_000_000_001, 5_184_000_000_015_839, 5_184_000_000_031_677]
    long = [
        Cell(uid=f"l{k}", eval_name="g", cell_id=f"l{k}", start_unix_ns=0, end_unix_ns=end, workers=3)
        for k, end in enumerate(ends)
    ]
    assert in_flight(long)[1] == 2.9999999999969447
    both(long)
    # Durations past 2**53 ns (104 days) and sweeps past 2**62 cell-ns: the row path answers.
    both([cell("y", 0, 200 * 86_400, 5_000_000, workers=1), cell("z", 1, 2, 3, workers=1)])
    crowd = [cell(f"c{k}", 0, 365 * 86_400 + k, 10 + k, workers=400) for k in range(400)]
    both(crowd)


def test_runs_as_arrays_split_union_and_order_as_concurrency_does() -> None:
    cells = [
        # eval g at 2 workers: a run of three (the third inside the first), an idle gap, a run of two
        cell("a", 0, 100, 500, workers=2),
        cell("b", 50, 60, 40, workers=2),
        cell("c", 10, 20, 30, workers=2, status=CellStatus.DEADLINE),
        cell("d", 400, 400, 10, workers=2),  # zero length: in the run, covering nothing
        cell("e", 401, 450, 70, workers=2, status=CellStatus.ERROR),
        # None listed before 0 in eval g: two groups sorting as 0, in the order they appeared
        cell("f", 5, 15, 20, workers=None),
        cell("h", 7, 9, 20, workers=0),
        cell("i", 200, 210, 20, workers=None),
        # eval b sorts before g; its cells share a start and an end
        cell("j", 30, 40, 9, workers=1, eval_name="b", cell_id="x"),
        cell("k", 30, 40, 9, workers=1, eval_name="b", cell_id="x"),
        cell("l", 40, 45, 9, workers=4, eval_name="b", cell_id="x"),
        # worker counts too far apart to count in a table: sorted instead
        cell("m", 600, 610, 5, workers=1_000_000_000, eval_name="z"),
        cell("n", 600, 601, 5, workers=-3, eval_name="z"),
    ]
    both(cells)
    both(cells, merge_gap_s=0.0)
    both(cells, merge_gap_s=300.0)
    both(list(reversed(cells)))  # 0 now appears before None
    (engine,) = concurrency_of_columns(CellColumns.from_cells(cells), with_cells=False).engines
    assert [(r.eval_name, r.workers, r.n_cells) for r in engine.runs] == [
        ("b", 1, 2),
        ("b", 4, 1),
        ("g", None, 1),  # None's two runs, then 0's: the order the groups appeared in
        ("g", None, 1),
        ("g", 0, 1),
        ("g", 2, 3),
        ("g", 2, 2),
        ("z", -3, 1),
        ("z", 1_000_000_000, 1),
    ]
    assert [r.aggregate_rate for r in engine.runs][5:7] == [570 / 100, 80 / 49]
    assert [level.level for level in engine.by_workers] == [-3, 0, 1, 2, 4, 1_000_000_000]


def test_a_run_longer_than_float64s_exact_nanoseconds_divides_its_integers() -> None:
    # Cells of 60 days, each overlapping the next: one run of 600 days (past 2**53 ns, 104 days),
    # every duration under it, so the column path answers; its wall and busy seconds are Python's
    # division of the integers.
    chain = [
        Cell(
            uid=f"r{k}",
            eval_name="g",
            cell_id=f"r{k}",
            start_unix_ns=k * 30 * DAY_NS + k,
            end_unix_ns=(k * 30 + 60) * DAY_NS + 7 * k + 1,
            completion_tokens=1_000 + k,
            workers=1 + k % 2,
        )
        for k in range(20)
    ]
    both(chain)
    both(chain, merge_gap_s=0.0)


def test_cells_that_end_before_they_start_take_the_runs_group_by_group() -> None:
    cells = [
        cell("a", 0, 100, 50, workers=2),
        cell("b", 90, 10, 50, workers=2),  # ends before it starts (a clock stepped back)
        cell("c", 150, 160, 50, workers=2),
        cell("d", 20, 30, 50, workers=1),
    ]
    for gap in (0.0, 30.0, 60.0):
        both(cells, merge_gap_s=gap)


def test_in_flight_weights_are_in_flights() -> None:
    cells = [cell("a", 0, 10), cell("b", 5, 15), cell("c", 7, 7), cell("d", 15, 16)]
    cols = CellColumns.from_cells(cells)
    weights, weighed = in_flight_of_columns(cols.start_unix_ns, cols.end_unix_ns)
    assert [w if ok else None for w, ok in zip(weights.tolist(), weighed.tolist(), strict=True)] == in_flight(
        cells
    )
    assert weights.tolist()[:2] == [1.5, 1.5]


_statuses = st.sampled_from(list(CellStatus))


@st.composite
def boxes(draw: st.DrawFn) -> list[Cell]:
    """Cells of a few evals on a few engines, starts and ends drawn from a few instants so that
    ties, shared endpoints and zero-length cells are common."""
    n = draw(st.integers(0, 40))
    instants = draw(st.lists(st.integers(0, 5_000 * S), min_size=1, max_size=12))
    cells = []
    for k in range(n):
        a, b = sorted((draw(st.sampled_from(instants)), draw(st.sampled_from(instants))))
        cells.append(
            Cell(
                uid=f"u{k}",
                eval_name=draw(st.sampled_from(["e1", "e2", "e3"])),
                cell_id=draw(st.sampled_from(["c1", "c2", "c3", f"c{k}"])),
                engine=draw(st.sampled_from(["q", "n", None, ""])),
                start_unix_ns=a,
                end_unix_ns=b,
                prompt_tokens=draw(st.none() | st.integers(0, 50_000)),
                completion_tokens=draw(st.none() | st.integers(0, 50_000)),
                status=draw(_statuses),
                deadline_s=draw(st.none() | st.floats(1, 3600)),
                workers=draw(st.none() | st.integers(0, 8)),
                source=draw(st.sampled_from(["live", "backfill", REQUEST_SOURCE])),
            )
        )
    return sorted(cells, key=lambda c: c.start_unix_ns) if draw(st.booleans()) else cells


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    cells=boxes(),
    eval_name=st.none() | st.sampled_from(["e1", "e2"]),
    engine=st.none() | st.sampled_from(["q", "unknown"]),
    merge_gap_s=st.sampled_from([0.0, 60.0, 1_000.0]),
)
def test_generated_boxes_give_the_same_report(
    cells: list[Cell], eval_name: str | None, engine: str | None, merge_gap_s: float
) -> None:
    both(cells, eval_name=eval_name, engine=engine, merge_gap_s=merge_gap_s)


def in_range(cells: list[Cell], since: int | None, until: int | None, **options: object) -> None:
    """The report over a start range lists the cells that start in it, each weighed against every
    cell given, with the levels those cells make, as the whole report's rows for them are."""
    from spark_otel.analysis.concurrency import level_summaries

    whole = concurrency(cells, **options)  # type: ignore[arg-type]
    ranged = concurrency_of_columns(
        CellColumns.from_cells(cells), since_unix_ns=since, until_unix_ns=until, **options
    )  # type: ignore[arg-type]
    for engine in whole.engines:
        want = [
            x
            for x in engine.cells
            if (since is None or x.start_unix_ns >= since) and (until is None or x.start_unix_ns <= until)
        ]
        got = [e for e in ranged.engines if e.engine == engine.engine]
        if not want:
            assert got == []
            continue
        (found,) = got
        assert found.cells == want
        assert found.levels == level_summaries((x.level, x) for x in want)
        assert found.by_workers == level_summaries((x.workers, x) for x in want)
        assert (found.n_cells, found.ceiling_hits) == (len(want), sum(x.ceiling_hit for x in want))
    assert {e.engine for e in ranged.engines} <= {e.engine for e in whole.engines}


def test_a_start_range_reports_its_cells_weighed_against_every_cell_given() -> None:
    cells = [cell("a", 0, 100, 10), cell("b", 50, 150, 10), cell("c", 120, 200, 10), cell("d", 300, 310, 10)]
    report = concurrency_of_columns(
        CellColumns.from_cells(cells), since_unix_ns=100 * S, until_unix_ns=250 * S
    )
    (only,) = report.engines[0].cells
    assert (only.uid, only.in_flight) == ("c", (30 * 2 + 50) / 80)  # b, which began before, counts
    in_range(cells, 100 * S, 250 * S)
    in_range(cells, None, 50 * S)
    in_range(cells, 400 * S, None)
    # Past float64's exact integers, the row path answers for the range too.
    crowd = [cell(f"c{k}", k, 365 * 86_400 + k, 10 + k, workers=400) for k in range(400)]
    in_range(crowd, 100 * S, 200 * S)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    cells=boxes(),
    since=st.none() | st.integers(0, 5_000 * S),
    until=st.none() | st.integers(0, 5_000 * S),
    eval_name=st.none() | st.sampled_from(["e1", "e2"]),
)
def test_generated_start_ranges(
    cells: list[Cell], since: int | None, until: int | None, eval_name: str | None
) -> None:
    in_range(cells, since, until, eval_name=eval_name)
