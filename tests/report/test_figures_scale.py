"""The report's plots at a year of data (issue 38): a time axis reads in dates when the span is
long, and many cells are drawn as one density (hexbin) rather than a marker or bar each. Facts
pinned on the figure objects, at small and year-long inputs; the figures still write PNGs."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from matplotlib.collections import PathCollection, PolyCollection
from matplotlib.dates import ConciseDateFormatter, date2num

from spark_otel.analysis.concurrency import concurrency
from spark_otel.analysis.neighbour import neighbour_cost
from spark_otel.model import Cell
from spark_otel.report.plots import (
    DATES_ABOVE_S,
    DENSITY_ABOVE,
    concurrency_figure,
    plot_concurrency,
    plot_timeline,
    time_axis,
    timeline_figure,
)

S = 1_000_000_000
T0 = 1_790_000_000 * S
DAY = 86_400.0
PNG = b"\x89PNG\r\n\x1a\n"


def _cell(i: int, start_s: float, rate: int, engine: str = "qwen") -> Cell:
    """Cell ``i`` of eval serial: 100 s from ``start_s`` after T0, at ``rate`` tok/s."""
    return Cell(
        uid=f"c{i}", eval_name="serial", cell_id=f"c{i}", engine=engine, workers=1,
        start_unix_ns=T0 + int(start_s * S), end_unix_ns=T0 + int((start_s + 100.0) * S),
        completion_tokens=rate * 100,
    )  # fmt: skip


def _year(n: int) -> list[Cell]:
    """``n`` cells spread evenly over 365 days, at 5 to 14 tok/s."""
    step = 365 * DAY / n
    return [_cell(i, i * step, 5 + i % 10) for i in range(n)]


def _hexbins(ax: Any) -> list[PolyCollection]:
    return [c for c in ax.collections if isinstance(c, PolyCollection) and c.get_array() is not None]


@pytest.mark.parametrize(
    ("span_s", "unit"),
    [
        (600.0, "seconds"),
        (601.0, "minutes"),
        (6 * 3600.0, "minutes"),
        (6 * 3600.0 + 1, "hours"),
        (DATES_ABOVE_S, "hours"),
        (DATES_ABOVE_S + 1, "dates"),
        (365 * DAY, "dates"),
    ],
)
def test_a_time_axis_reads_in_a_unit_that_fits_its_span(span_s: float, unit: str) -> None:
    axis = time_axis(T0, T0 + int(span_s * S))
    assert axis.unit == unit
    end = axis.at(T0 + int(span_s * S))
    if unit == "dates":  # matplotlib's date numbers: days, at the calendar date
        assert axis.at(T0) == pytest.approx(float(date2num(datetime.fromtimestamp(T0 / S, UTC))), abs=1e-9)
        assert end - axis.at(T0) == pytest.approx(span_s / DAY)
    else:
        assert axis.at(T0) == 0.0
        assert end == pytest.approx(span_s / {"seconds": 1, "minutes": 60, "hours": 3600}[unit])


def _bars(ax: Any) -> list[Any]:
    """The cells' bars: one line collection of a segment per cell."""
    from matplotlib.collections import LineCollection

    return [c for c in ax.collections if isinstance(c, LineCollection)]


def test_a_year_long_timeline_reads_in_dates_and_a_short_one_in_seconds() -> None:
    cells = _year(365)
    [ax] = timeline_figure(neighbour_cost("serial", cells, [])).axes
    assert ax.get_xlabel() == "date (UTC)"
    assert isinstance(ax.xaxis.get_major_formatter(), ConciseDateFormatter)
    first = datetime.fromtimestamp(T0 / S, UTC)
    baseline = ax.get_lines()[0]  # the baseline median
    assert tuple(baseline.get_xdata()) == (0, 1)  # across the axes, whatever their unit
    [bars] = _bars(ax)  # every cell's bar in one collection
    first_bar = bars.get_segments()[0]
    assert tuple(first_bar[:, 0]) == pytest.approx((date2num(first), date2num(first) + 100 / DAY))
    assert ax.get_xlim() == pytest.approx((date2num(first), date2num(first) + (364 * DAY + 100) / DAY))
    labels = [label.get_text() for label in ax.get_xticklabels()]
    assert any(text in {"Oct", "Nov", "Dec", "2027"} for text in labels), labels  # months, not seconds

    [short] = timeline_figure(neighbour_cost("serial", [_cell(i, i * 100.0, 10) for i in range(3)], [])).axes
    assert short.get_xlabel() == "seconds since the first cell"


def test_many_cells_on_a_timeline_are_drawn_as_one_density() -> None:
    cells = _year(DENSITY_ABOVE + 1)
    fig = timeline_figure(neighbour_cost("serial", cells, []))
    ax = fig.axes[0]
    [density] = _hexbins(ax)
    assert density.get_array().sum() == DENSITY_ABOVE + 1  # every cell counted once
    assert density.get_label() == f"cells by their middle and tok/s (n={DENSITY_ABOVE + 1})"
    [baseline] = ax.get_lines()  # no bar per cell
    assert baseline.get_label().startswith("baseline median ")
    assert fig.axes[1].get_xlabel() == "cells per hexagon"  # the colour bar, below: the legend is right
    # At the threshold: a bar each, no density.
    [at_most] = timeline_figure(neighbour_cost("serial", cells[:DENSITY_ABOVE], [])).axes
    assert _hexbins(at_most) == []
    [bars] = _bars(at_most)
    assert len(bars.get_segments()) == DENSITY_ABOVE  # a bar per cell
    assert len(at_most.get_lines()) == 2  # the baseline and the bars' legend entry


def test_many_cells_in_the_concurrency_plot_are_one_density_panel_per_engine() -> None:
    n_qwen = DENSITY_ABOVE - 100
    cells = [_cell(i, i * 50.0, 10) for i in range(n_qwen)]
    cells += [_cell(n_qwen + i, i * 50.0, 6, engine="nemo") for i in range(101)]
    fig = concurrency_figure(concurrency(cells))
    nemo, qwen = sorted((ax for ax in fig.axes if _hexbins(ax)), key=lambda ax: ax.get_title(loc="left"))
    counts = {ax.get_title(loc="left"): _hexbins(ax)[0].get_array().sum() for ax in (nemo, qwen)}
    assert counts == {"nemo: 101 cells": 101, f"qwen: {n_qwen:,} cells": n_qwen}
    assert [c for ax in fig.axes for c in ax.collections if isinstance(c, PathCollection)] == []
    # The panels share their axes; the bottom one names x.
    x_label = "cells in flight on the engine (time-weighted)"
    assert sorted(ax.get_xlabel() for ax in (nemo, qwen)) == ["", x_label]
    assert fig.get_suptitle() == "Per-cell rate against concurrency"
    assert [ax.get_ylabel() for ax in fig.axes if not _hexbins(ax)] == ["cells per hexagon"] * 2
    # At the threshold in all: one scatter, a marker per cell.
    [ax] = concurrency_figure(concurrency(cells[: DENSITY_ABOVE - 1] + cells[-1:])).axes
    assert sum(len(c.get_offsets()) for c in ax.collections) == DENSITY_ABOVE


def test_dense_year_long_plots_still_write_pngs() -> None:
    cells = _year(DENSITY_ABOVE + 1)
    assert plot_timeline(neighbour_cost("serial", cells, [])).startswith(PNG)
    assert plot_concurrency(concurrency(cells)).startswith(PNG)
