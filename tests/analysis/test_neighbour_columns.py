"""Neighbour cost over columns gives `neighbour_costs`' and `neighbour_cost`'s reports, figure for
figure, and its JSON is their `model_dump(mode="json")`: on the article's cells, on cells and
windows made to hit each rule's edge, on generated boxes, and where int64 or float64 could not
hold a figure exactly (the path that hands the cells to `neighbour_costs`)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.support.article import appendix_c_cells, appendix_d_cells, appendix_d_loads
from tests.support.cells import S, cell
from tests.support.neighbour_boxes import boxes, rows_no_baseline_reads

from spark_otel import ConfigError, InputError
from spark_otel import _semconv as sc
from spark_otel.analysis.neighbour import (
    neighbour_cost,
    neighbour_costs,
    no_baseline_reason,
    windows_touched,
)
from spark_otel.analysis.neighbour_columns import (
    neighbour_cost_of_columns,
    neighbour_costs_of_columns,
)
from spark_otel.analysis.request_cells import REQUEST_SOURCE
from spark_otel.model import Cell, CellStatus, LoadWindow
from spark_otel.records.cell_columns import CellColumns


def both(cells: list[Cell], windows: list[LoadWindow], **options: Any) -> None:
    """Every report over columns equals the row path's (pydantic compares every field), its JSON
    is the row report's, and the reports without cells or untouched windows are the row reports
    with those rows left out."""
    rows = neighbour_costs(cells, windows, **options)
    found = neighbour_costs_of_columns(CellColumns.from_cells(cells), windows, **options)
    assert [f.report() for f in found] == rows
    assert [f.dump() for f in found] == [r.model_dump(mode="json") for r in rows]
    bare = [f.report(with_cells=False, all_windows=False) for f in found]
    assert bare == [
        r.model_copy(update={"cells": rows_no_baseline_reads(r), "windows": windows_touched(r)}) for r in rows
    ]
    assert [no_baseline_reason(r) for r in bare] == [no_baseline_reason(r) for r in rows]


def each(cells: list[Cell], windows: list[LoadWindow], eval_name: str, **options: Any) -> None:
    """`neighbour_cost_of_columns` equals `neighbour_cost` for the eval, at each of its worker
    counts and over all of them, refusals included."""
    columns = CellColumns.from_cells(cells)
    for workers in [None, *sorted({c.workers for c in cells if c.workers is not None}), 99]:
        if workers is not None and not any(c.workers == workers for c in cells if c.eval_name == eval_name):
            with pytest.raises(InputError) as want_error:
                neighbour_cost(eval_name, cells, windows, workers=workers, **options)
            with pytest.raises(InputError) as got:
                neighbour_cost_of_columns(eval_name, columns, windows, workers=workers, **options)
            assert str(got.value) == str(want_error.value)
            continue
        want = neighbour_cost(eval_name, cells, windows, workers=workers, **options)
        found = neighbour_cost_of_columns(eval_name, columns, windows, workers=workers, **options)
        assert found.report() == want
        assert found.dump() == want.model_dump(mode="json")


def test_the_articles_act_4_and_appendix_c_give_the_same_reports() -> None:
    probes, others = appendix_d_loads()
    cells = appendix_d_cells() + others + appendix_c_cells()
    both(cells, probes)
    both(cells, probes, min_cells=1, merge_gap_s=0.0)
    both(cells, probes, min_overlap_fraction=0.0)
    both(cells, probes, min_overlap_fraction=1.0, eval_names=[cells[0].eval_name, "absent"])
    for name in sorted({c.eval_name for c in cells}):
        each(cells, probes, name)
    (report,) = neighbour_costs_of_columns(
        CellColumns.from_cells(cells), probes, eval_names=[cells[0].eval_name]
    )
    assert report.head.baseline.n == 113  # the article's Act 4 baseline


def _window(uid: str, start_s: float, end_s: float, **fields: Any) -> LoadWindow:
    return LoadWindow(
        uid=uid,
        name=fields.pop("name", uid),
        kind=fields.pop("kind", "load"),
        engine=fields.pop("engine", "q"),
        start_unix_ns=int(start_s * S),
        end_unix_ns=int(end_s * S),
        **fields,
    )


def test_every_edge_the_rules_name() -> None:
    cells = [
        cell("a", 0, 100, 1000, workers=1),  # alone: baseline
        cell("b", 200, 300, 900, workers=1),  # inside w1
        cell("c", 300, 400, 800, workers=1),  # touches w1's end: not beside it
        cell("d", 390, 500, 700, workers=1),  # brushes w2 by less than a quarter
        cell("e", 600, 600, 10, workers=1),  # zero length: neither baseline nor beside anything
        cell("f", 700, 800, None, workers=1),  # no tokens
        cell("g", 700, 800, 0, workers=1),  # zero tokens: no rate
        cell("h", 700, 800, 500, workers=1, status=CellStatus.DEADLINE),  # a timeout
        cell("i", 700, 800, 500, workers=1, status=CellStatus.ERROR),  # a failure
        cell("j", 700, 800, 650, workers=1, source=REQUEST_SOURCE),  # a request standing in
        cell("k", 700, 800, 640, workers=1, engine=None),
        cell("l", 700, 800, 630, workers=1, engine=""),
        cell("m", 0, 50, 400, workers=1),
        # other evals: the same label and start from engine None and "" (and workers None and 0)
        cell("o1", 150, 350, 10, eval_name="other", engine=None, workers=0),
        cell("o2", 150, 350, 10, eval_name="other", engine="", workers=None),
        cell("o3", 150, 250, 10, eval_name="other", engine="", workers=None),
        cell("o4", 240, 260, 10, eval_name="other", engine="", workers=None),  # peak 3 in flight
        cell("o5", 250, 250, 10, eval_name="other", engine="n", workers=2),  # zero length: no window
        cell("o6", 760, 790, 10, eval_name="other", engine="n", workers=2),
        cell("o7", 900, 1000, 10, eval_name="other", engine="n", workers=2),  # a second run
        cell("t1", 690, 750, 10, eval_name="third", workers=None),
        cell("t2", 750, 780, 10, eval_name="third", workers=None),  # touches t1: peak 1, not 2
    ]
    windows = [
        _window("w1", 190, 300),
        _window("w2", 480, 700, engine="n"),
        _window("w3", 650, 820, name="w1"),  # a second window of the same name
        _window("w4", 700, 700),  # zero length: overlaps nothing
        _window("mine", 0, 1000, kind="eval", name="g"),  # the eval's own: never load
        _window("own", 0, 1000, attributes={sc.EVAL_NAME: "g"}),
        _window("theirs", 0, 1000, kind="eval", name="other"),  # counted through its cells
        _window("attr", 0, 1000, kind="eval", name="x", attributes={sc.EVAL_NAME: "other"}),
        _window("stranger", 750, 760, kind="eval", name="stranger", engine=None),
        _window("tie", 700, 710, name="a tie"),
        _window("tie2", 700, 720, name="a tie"),
    ]
    for options in ({}, {"min_cells": 1}, {"merge_gap_s": 0.0}, {"min_overlap_fraction": 0.0}):
        both(cells, windows, **options)
    each(cells, windows, "g")
    each(cells, windows, "other")
    mixed = [*cells, cell("x1", 0, 10, 50, workers=4), cell("x2", 20, 30, 50, workers=None)]
    both(mixed, windows, min_cells=1)
    each(mixed, windows, "g")
    assert neighbour_costs_of_columns(CellColumns.empty(), windows) == []


def test_the_engine_named_is_the_most_common_the_first_seen_of_a_tie() -> None:
    # An eval's engine: its cells' most common (None and "" not counted), the first seen at a tie.
    cases: list[tuple[list[str | None], str | None]] = [
        (["b", "a", "a", "b"], "b"),
        (["a", "b", "b", "a"], "a"),
        (["a", "c", "c", "a"], "a"),
        (["a", "b", "b"], "b"),
        ([None, "", "b", None], "b"),
        ([None, ""], None),
    ]
    for engines, named in cases:
        # Another eval's cell on b read first, and the eval's cells read latest first.
        cells = [cell("o", 0, 40, 10, eval_name="other", engine="b", workers=1)]
        cells += [cell(f"c{k}", 10 * k, 10 * k + 5, 50, workers=1, engine=e) for k, e in enumerate(engines)][
            ::-1
        ]
        both(cells, [], min_cells=1)
        (found,) = neighbour_costs_of_columns(CellColumns.from_cells(cells), eval_names=["g"], min_cells=1)
        assert found.head.engine == named


def test_a_crowded_window_summarizes_as_summarize_does() -> None:
    # 1 to 40 rated cells beside one window: every rank the percentiles and the interval pick.
    alone = [cell(f"a{k}", 10 * k, 10 * k + 5, 50 + k, workers=1) for k in range(5)]
    for n in (1, 2, 3, 9, 10, 17, 40):
        crowd = [cell(f"c{k}", 100 + k, 200 + k, 900 + 37 * k % 101, workers=1) for k in range(n)]
        both([*alone, *crowd], [_window("w", 100, 300)], min_cells=1)


def test_rows_read_in_any_order_are_the_same_rows() -> None:
    # A column read in full and then at a few rows, or at a few rows first: the same values.
    probes, others = appendix_d_loads()
    cells = appendix_d_cells() + others + appendix_c_cells()
    rows = neighbour_costs(cells, probes, min_cells=1)
    fresh = neighbour_costs_of_columns(CellColumns.from_cells(cells), probes, min_cells=1)
    read = neighbour_costs_of_columns(CellColumns.from_cells(cells), probes, min_cells=1)
    for found in read:
        assert found.cells.columns["uid"] == [c.uid for c in found.report().cells]  # every column built
    for f, r, want in zip(fresh, read, rows, strict=True):
        bare = want.model_copy(
            update={"cells": rows_no_baseline_reads(want), "windows": windows_touched(want)}
        )
        assert f.report(with_cells=False, all_windows=False) == bare
        assert r.report(with_cells=False, all_windows=False) == bare
        assert f.report() == r.report() == want
        rated: dict[str, list[tuple[float, int]]] = {}
        for w in want.windows:
            if w.rate.median is not None:
                rated.setdefault(w.name, []).append((w.rate.median, w.rate.n))
        assert f.rated_windows() == r.rated_windows() == rated
    assert sum(len(f.touched()) for f in fresh) == sum(len(windows_touched(r)) for r in rows) > 0


def test_a_window_no_cell_is_attributed_to_is_one_row_per_engine_verdict() -> None:
    # Windows untouched by every report: each report's row of one is its load and whether it is on
    # the eval's engine; reports that agree on that share one frozen row, the others get their own.
    cells = [
        *(cell(f"a{k}", 10 * k, 10 * k + 5, 50 + k, workers=1 + k % 2) for k in range(6)),
        *(cell(f"b{k}", 10 * k, 10 * k + 5, 40 + k, eval_name="b", engine="n", workers=1) for k in range(3)),
    ]
    windows = [_window("far", 500, 600), _window("far-n", 700, 800, engine="n"), _window("none", 900, 950)]
    windows.append(_window("unnamed", 960, 990, engine=None))
    both(cells, windows, min_cells=1)
    reports = [
        f.report() for f in neighbour_costs_of_columns(CellColumns.from_cells(cells), windows, min_cells=1)
    ]
    assert [(r.eval_name, r.workers, r.engine) for r in reports] == [
        ("b", None, "n"),
        ("g", 1, "q"),
        ("g", 2, "q"),
    ]
    far = [r.window("far") for r in reports]
    assert [w.same_engine for w in far] == [False, True, True]
    assert far[1] is far[2]
    assert far[0] is not far[1]
    assert far[0] == far[1].model_copy(update={"same_engine": False})
    assert reports[1].window("unnamed").same_engine is None


def test_refusals_are_the_row_paths() -> None:
    columns = CellColumns.from_cells([cell("a", 0, 1, 1)])
    with pytest.raises(ConfigError, match="must not be negative"):
        neighbour_costs_of_columns(columns, merge_gap_s=-1.0)
    with pytest.raises(ConfigError, match=r"within 0\.\.1"):
        neighbour_costs_of_columns(columns, min_overlap_fraction=1.5)
    with pytest.raises(InputError, match="no cells recorded for eval 'nope'"):
        neighbour_cost_of_columns("nope", columns)


def test_figures_past_int64_and_float64s_exact_integers_are_the_row_paths() -> None:
    # A cell of 200 days (2**53 ns is 104 days), a count past 2**53, a window before 1970.
    long = [cell("y", 0, 200 * 86_400, 5_000_000, workers=1), cell("z", 1, 2, 3, workers=1)]
    both(long, [_window("w", 10, 20)], min_cells=1)
    many = [cell("y", 0, 10, 2**60, workers=1), cell("z", 20, 30, 3, workers=1)]
    both(many, [_window("w", 5, 25)], min_cells=1)
    early = [_window("w", -5, 25)]
    both([cell("y", 0, 10, 5, workers=1), cell("z", 20, 30, 3, workers=1)], early, min_cells=1)
    each(long, [_window("w", 10, 20)], "g")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    box=boxes(),
    min_cells=st.sampled_from([1, 3]),
    fraction=st.sampled_from([0.0, 0.25, 0.5, 1.0]),
    merge_gap_s=st.sampled_from([0.0, 60.0, 1_000.0]),
)
def test_generated_boxes_give_the_same_reports(
    box: tuple[list[Cell], list[LoadWindow]], min_cells: int, fraction: float, merge_gap_s: float
) -> None:
    cells, windows = box
    both(cells, windows, min_cells=min_cells, min_overlap_fraction=fraction, merge_gap_s=merge_gap_s)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(box=boxes(), eval_name=st.sampled_from(["e1", "e2", "absent"]))
def test_generated_boxes_give_the_same_report_per_worker_count(
    box: tuple[list[Cell], list[LoadWindow]], eval_name: str
) -> None:
    cells, windows = box
    if not any(c.eval_name == eval_name for c in cells):
        with pytest.raises(InputError, match="no cells recorded"):
            neighbour_cost_of_columns(eval_name, CellColumns.from_cells(cells), windows)
        return
    each(cells, windows, eval_name)
