"""Plots that answer at a glance, read back from the matplotlib figures themselves: two stacked
panels for a curve, integer stream ticks, legends outside the data, y padded past the highest
marker, no curve from one point, and a timeline per eval with its loads shaded."""

from __future__ import annotations

import pytest
from matplotlib.collections import LineCollection, PolyCollection

from spark_otel import ConfigError
from spark_otel.analysis.neighbour import neighbour_cost, no_baseline_reason
from spark_otel.model import Cell, CellStatus, LoadWindow
from spark_otel.records.rate_curve import CurvePoint, RateCurve
from spark_otel.report import ReportInputs, build_report, render_html, render_images
from spark_otel.report.plots import (
    LoadShade,
    concurrency_figure,
    concurrency_points,
    curve_figure,
    neighbour_figure,
    plottable,
    timeline_figure,
    timeline_marks,
)

S = 1_000_000_000
T0 = 1_790_000_000 * S


def _curve(*levels: tuple[int, float]) -> RateCurve:
    return RateCurve(
        engine="qwen",
        points=[
            CurvePoint(streams=n, per_stream_rate=r, aggregate_rate=n * r, p10=r * 0.9, p90=r * 1.1, n=n)
            for n, r in levels
        ],
    )


def _cell(i: int, start_s: float, elapsed_s: float, tokens: int | None, **kw: object) -> Cell:
    return Cell(
        uid=f"c{i}",
        eval_name="serial",
        cell_id=f"c{i}",
        engine="qwen",
        start_unix_ns=T0 + int(start_s * S),
        end_unix_ns=T0 + int((start_s + elapsed_s) * S),
        completion_tokens=tokens,
        workers=1,
        **kw,
    )


def _load(start_s: float, end_s: float) -> LoadWindow:
    return LoadWindow(
        uid="load", name="nemotron load", kind="load", engine="nemotron",
        start_unix_ns=T0 + int(start_s * S), end_unix_ns=T0 + int(end_s * S), streams=4,
    )  # fmt: skip


def _outside(fig: object, ax: object) -> bool:
    """Whether the axes' legend lies wholly to the right of its data area."""
    legend = ax.get_legend()  # type: ignore[attr-defined]
    fig.canvas.draw()  # type: ignore[attr-defined]
    box = legend.get_window_extent()
    return bool(box.x0 >= ax.get_window_extent().x1)  # type: ignore[attr-defined]


def test_a_curve_is_two_stacked_panels_on_integer_stream_ticks_with_padded_y_and_legends_outside() -> None:
    fig = curve_figure(_curve((1, 11.0), (2, 10.5), (4, 9.8), (8, 8.0)))
    per_ax, agg_ax = fig.axes  # two panels, no twin axis
    assert per_ax.get_ylabel() == "per-stream tok/s"
    assert agg_ax.get_ylabel() == "aggregate tok/s"
    assert [t.get_text() for t in agg_ax.get_xticklabels()] == ["1", "2", "4", "8"]
    assert list(agg_ax.get_xticks(minor=True)) == []
    assert per_ax.get_ylim()[1] == pytest.approx(11.0 * 1.1 * 1.15)  # the highest p90, padded
    assert agg_ax.get_ylim()[1] == pytest.approx(64.0 * 1.15)
    assert _outside(fig, per_ax)
    assert _outside(fig, agg_ax)


def test_a_curve_of_one_point_is_not_drawn_and_the_page_says_what_to_measure() -> None:
    single = _curve((4, 9.8))
    assert not plottable(single)
    assert plottable(_curve((1, 11.0), (4, 9.8)))
    with pytest.raises(ConfigError, match="one level measured"):
        curve_figure(single)
    content = build_report(
        ReportInputs(source="test", curves=[single], engine_urls={"qwen": "http://127.0.0.1:8011"})
    )
    images = render_images(content)
    assert not any(name.startswith("curve-") for name in images)
    page = render_html(content, images)
    assert "qwen: one level measured" in page
    assert "spark-otel probe --engine qwen=http://127.0.0.1:8011 --streams 1,2,4,8" in page


def _neighbour_records() -> tuple[list[Cell], list[LoadWindow]]:
    """Four cells alone at 10 tok/s, two inside a load at 5, and one timeout inside it."""
    cells = [_cell(i, i * 100.0, 100.0, 1000) for i in range(4)]
    cells += [_cell(4 + i, 400.0 + i * 100.0, 100.0, 500) for i in range(2)]
    cells.append(_cell(6, 600.0, 100.0, None, status=CellStatus.DEADLINE))
    return cells, [_load(400.0, 700.0)]


def test_the_timeline_draws_each_cell_at_its_rate_and_shades_the_load_it_ran_beside() -> None:
    cells, windows = _neighbour_records()
    result = neighbour_cost("serial", cells, windows)
    fig = timeline_figure(result, time_scale=50.0)
    [ax] = fig.axes
    # Every cell's bar in one collection of segments, none a line of its own.
    [bars] = [c for c in ax.collections if isinstance(c, LineCollection)]
    assert [line for line in ax.get_lines() if len(line.get_xdata()) == 2 and line.get_linewidth() == 2] == []
    # 700 s of cells read in minutes.
    drawn = sorted((round(x0 * 60, 6), round(x1 * 60, 6), y0) for (x0, y0), (x1, _) in bars.get_segments())
    assert drawn == [
        (0.0, 100.0, 10.0),
        (100.0, 200.0, 10.0),
        (200.0, 300.0, 10.0),
        (300.0, 400.0, 10.0),
        (400.0, 500.0, 5.0),
        (500.0, 600.0, 5.0),
    ]
    # The load's shade: one collection, full height, its window in minutes; its legend entry apart.
    [shade] = [c for c in ax.collections if isinstance(c, PolyCollection)]
    [path] = shade.get_paths()
    assert sorted({(round(x * 60, 6), y) for x, y in path.vertices}) == [
        (400.0, 0.0), (400.0, 1.0), (700.0, 0.0), (700.0, 1.0)
    ]  # fmt: skip
    labels = ax.get_legend_handles_labels()[1]
    assert "timed out or failed, not rated (n=1)" in labels
    assert "baseline median 10.00 tok/s (n=4)" in labels
    assert ax.get_xlabel() == "minutes since the first cell, model time at 50x"
    assert timeline_figure(neighbour_cost("serial", cells[:4])).axes[0].get_xlabel() == (
        "seconds since the first cell"
    )
    assert ax.get_ylim()[1] == pytest.approx(10.0 * 1.15)
    assert _outside(fig, ax)


def test_the_neighbour_and_concurrency_plots_keep_legends_outside_and_markers_inside() -> None:
    cells, windows = _neighbour_records()
    result = neighbour_cost("serial", cells, windows)
    fig = neighbour_figure(result)
    [ax] = fig.axes
    assert ax.get_xlim()[1] == pytest.approx(10.0 * 1.15)
    assert _outside(fig, ax)
    from spark_otel.analysis.concurrency import concurrency

    fig = concurrency_figure(concurrency(cells))
    [ax] = fig.axes
    assert ax.get_ylim()[1] == pytest.approx(10.0 * 1.15)
    assert _outside(fig, ax)


def test_an_eval_without_a_baseline_says_why_in_one_line_instead_of_an_empty_table() -> None:
    cells = [_cell(i, i * 100.0, 100.0, 500) for i in range(4)]
    result = neighbour_cost("serial", cells, [_load(0.0, 400.0)])
    reason = no_baseline_reason(result)
    assert reason == (
        "no baseline: every one of the 4 cells of serial ran beside other load, so nothing says what it "
        "decodes alone; run a few of its cells with the box otherwise idle"
    )
    timeouts = [_cell(i, i * 100.0, 100.0, None, status=CellStatus.DEADLINE) for i in range(3)]
    alone = neighbour_cost("serial", timeouts, [])
    assert no_baseline_reason(alone) is not None
    assert "the 3 cells of serial that ran alone all timed out or failed (3 not rated)" in str(
        no_baseline_reason(alone)
    )
    assert no_baseline_reason(neighbour_cost("serial", *_neighbour_records())) is None

    content = build_report(ReportInputs(source="test", cells=cells, windows=[_load(0.0, 400.0)]))
    images = render_images(content)
    assert "neighbour-serial.png" not in images  # no chart of costs that cannot be computed
    assert "timeline-serial.png" in images  # but the cells over time still show what happened
    page = render_html(content, images)
    section = page[page.index("Neighbour cost") : page.index("Deadline outcomes")]
    assert "No baseline: every one of the 4 cells of serial ran beside other load" in section
    assert "<table>" not in section


def test_the_timelines_inputs_are_the_cells_columns_and_the_loads_by_colour() -> None:
    """What the timeline draws, as data: the rated cells' starts, ends and rates in the report's
    order, the unrated cell's end, the load's window on the axis (minutes: 700 s) under its colour."""
    cells, windows = _neighbour_records()
    marks = timeline_marks(neighbour_cost("serial", cells, windows))
    assert (marks.axis.unit, marks.t0_ns, marks.t1_ns) == ("minutes", T0, T0 + 700 * S)
    assert marks.starts_ns.tolist() == [T0 + k * 100 * S for k in range(6)]
    assert marks.ends_ns.tolist() == [T0 + (k + 1) * 100 * S for k in range(6)]
    assert marks.rates.tolist() == [10.0, 10.0, 10.0, 10.0, 5.0, 5.0]
    assert marks.unrated_ends_ns.tolist() == [T0 + 700 * S]
    assert marks.loads == [LoadShade(400 / 60, 700 / 60, "#ff7f0e", "nemotron load")]
    assert marks.top == 10.0


def test_the_concurrency_plots_inputs_are_each_engines_cells_with_a_load_and_a_rate() -> None:
    """Per engine, the in-flight counts and rates of its cells with both, in the report's order;
    the timeout (no rate) left out, an engine of no such cell left out."""
    from spark_otel.analysis.concurrency import concurrency

    cells, _ = _neighbour_records()
    cells.append(_cell(7, 0.0, 100.0, None, status=CellStatus.DEADLINE).model_copy(update={"engine": "nemo"}))
    report = concurrency(cells)
    points = concurrency_points(report)
    [qwen] = [e for e in report.engines if e.engine == "qwen"]
    expected = [(c.in_flight, c.decode_rate) for c in qwen.cells if c.in_flight and c.decode_rate]
    assert len(expected) == 6
    assert list(points) == ["qwen"]
    xs, ys = points["qwen"]
    assert list(zip(xs.tolist(), ys.tolist(), strict=True)) == expected
    assert sorted(ys.tolist()) == [5.0, 5.0, 10.0, 10.0, 10.0, 10.0]
