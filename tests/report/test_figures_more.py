"""The plots' edges, read back from their matplotlib artists: neighbour reports built by hand (a
window whose cells all timed out, a baseline with one quantile, rates below 1 tok/s, nothing at
all), a timeline with no rated cell or no cell, the axis limits where the data's top is 0 or under
1, the colours under a user's own colour cycle, and the PNG bytes: the figure at 110 dpi cropped
to its legend, for each plot the report renders. A limit, marker or colour the code means but does
not draw reads as a different plot."""

from __future__ import annotations

import io
import struct
import sys
from collections.abc import Iterator
from typing import Any

import matplotlib
import matplotlib.pyplot as plt
import pytest
from matplotlib.colors import to_hex
from tests.support.gauges import verdict as gauge_verdict

from spark_otel import ConfigError
from spark_otel.analysis.budget import CellBudget, eval_budgets
from spark_otel.analysis.concurrency import concurrency
from spark_otel.analysis.gauges.grades import (
    InstrumentsReport,
    InstrumentVerdict,
    Thresholds,
)
from spark_otel.analysis.neighbour import NeighbourReport, WindowCost, neighbour_cost
from spark_otel.analysis.stats import RateSummary
from spark_otel.model import Cell, CellStatus, LoadWindow
from spark_otel.records.rate_curve import CurvePoint, RateCurve
from spark_otel.report.content import ReportContent
from spark_otel.report.plots import (
    budget_figure,
    budget_png_name,
    concurrency_figure,
    curve_figure,
    instrument_figure,
    neighbour_figure,
    plot_budget,
    plot_curve,
    plot_timeline,
    render_images,
    timeline_figure,
)

S = 1_000_000_000
T0 = 1_790_000_000 * S
TIMEOUT = "#b3261e"


def _r(values: Any) -> tuple[float, ...]:
    return tuple(round(float(v), 6) for v in values)


def lines(ax: Any) -> list[tuple[Any, ...]]:
    """Each line: label, colour, marker, line style, width, x data, y data."""
    return [
        (ln.get_label(), to_hex(ln.get_color()), ln.get_marker(), ln.get_linestyle(), ln.get_linewidth(),
         _r(ln.get_xdata()), _r(ln.get_ydata()))
        for ln in ax.get_lines()
    ]  # fmt: skip


@pytest.fixture(autouse=True)
def _figures_closed() -> Iterator[None]:
    """Each test's figures closed after it: pyplot keeps every open one (a warning past 20)."""
    yield
    plt.close("all")


def _image(png: bytes) -> tuple[tuple[int, int], bytes]:
    """A PNG's size and RGBA pixels: what it shows, whatever its encoder (the report writes RGB at
    zlib's fastest level, matplotlib RGBA at Pillow's default)."""
    from PIL import Image

    image = Image.open(io.BytesIO(png)).convert("RGBA")
    return image.size, image.tobytes()


def _reference_image(fig: Any) -> tuple[tuple[int, int], bytes]:
    """The figure as matplotlib saves it for the report: 110 dpi, cropped tight around the legend
    outside it; its size and pixels."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return _image(buf.getvalue())


def _png_chunk(png: bytes, kind: bytes) -> bytes:
    at = 8
    while at < len(png):
        (size,) = struct.unpack(">I", png[at : at + 4])
        if png[at + 4 : at + 8] == kind:
            return png[at + 8 : at + 8 + size]
        at += 12 + size
    raise AssertionError(f"no {kind!r} chunk")


def _curve() -> RateCurve:
    return RateCurve(
        engine="qwen",
        points=[
            CurvePoint(streams=1, per_stream_rate=10.0, aggregate_rate=10.0, p10=9.0, p90=11.0, n=1),
            CurvePoint(streams=4, per_stream_rate=8.0, aggregate_rate=32.0, p10=7.0, p90=9.0, n=4),
        ],
    )


def test_without_matplotlib_a_plot_says_which_extra_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    """The plot extra is optional: a missing matplotlib is a ConfigError naming the install line,
    chained to the ImportError."""
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(ConfigError) as caught:
        plot_curve(_curve())
    assert str(caught.value) == "plots need the plot extra: pip install 'spark-otel[plot]'"
    assert isinstance(caught.value.__cause__, ImportError)


def test_the_png_is_the_figure_at_110_dpi_cropped_tight_and_the_figure_is_closed() -> None:
    """The pixels are the figure saved at 110 dpi (the PNG's pHYs: 4331 pixels a metre) with the
    bounding box drawn tight, so the legend outside the axes is inside the image; written RGB (the
    figure is opaque); the figure is closed after, so a report of many plots does not hold them
    all open."""
    before = set(plt.get_fignums())
    png = plot_curve(_curve())
    assert set(plt.get_fignums()) == before
    assert _image(png) == _reference_image(curve_figure(_curve()))
    assert _png_chunk(png, b"pHYs") == struct.pack(">IIB", 4331, 4331, 1)
    assert _png_chunk(png, b"IHDR")[8:10] == bytes([8, 2])  # 8 bits a channel, RGB


@pytest.mark.parametrize(
    ("rc", "colour_type"),
    [({"savefig.transparent": True}, 6), ({"figure.constrained_layout.use": True}, 2)],
)
def test_a_users_transparent_or_laid_out_figures_keep_their_pixels(
    rc: dict[str, Any], colour_type: int
) -> None:
    """A transparent figure keeps its alpha (RGBA); one a layout engine lays out is drawn as
    matplotlib draws it, laid out first: the same pixels as matplotlib's own tight PNG either way."""
    with matplotlib.rc_context(rc):
        png = plot_curve(_curve())
        assert _image(png) == _reference_image(curve_figure(_curve()))
    assert _png_chunk(png, b"IHDR")[9] == colour_type


def test_the_png_is_a_png_under_a_users_own_default_save_format() -> None:
    """A user's matplotlibrc may save SVG by default; the report embeds its images as PNG, so
    the format is asked for, not inherited."""
    with matplotlib.rc_context({"savefig.format": "svg"}):
        png = plot_curve(_curve())
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    assert _image(png) == _reference_image(curve_figure(_curve()))


def test_the_plots_keep_their_colours_under_a_users_own_colour_cycle() -> None:
    """The per-stream band and median, and the timeline's cells and their legend entry, are drawn in the
    per-stream blue whatever colour cycle the user's style sets."""
    with matplotlib.rc_context({"axes.prop_cycle": matplotlib.cycler(color=["#000000"])}):
        per_ax, _ = curve_figure(_curve()).axes
        [ax] = timeline_figure(neighbour_cost("serial", [_cell(0, 0.0, 10.0, 100)], [])).axes
    assert to_hex(per_ax.collections[0].get_facecolor()[0]) == "#1f77b4"
    assert [to_hex(ln.get_color()) for ln in per_ax.get_lines()] == ["#1f77b4"]
    assert [(ln.get_label(), to_hex(ln.get_color())) for ln in ax.get_lines()] == [
        ("baseline median 10.00 tok/s (n=1)", "#2ca02c"),
        ("a cell: start to end at its tok/s (n=1)", "#1f77b4"),
    ]
    [cell_bars] = ax.collections
    assert [to_hex(c) for c in cell_bars.get_color()] == ["#1f77b4"]


def test_the_curves_note_wraps_to_the_figures_width() -> None:
    """The note under the curve is long: it wraps rather than run off the image."""
    [note] = curve_figure(_curve()).texts
    assert note.get_wrap() is True


def _summary(
    n: int, median: float | None = None, p10: float | None = None, p90: float | None = None
) -> RateSummary:
    return RateSummary(n=n, median=median, p10=p10, p90=p90)


def _window(
    name: str,
    median: float | None,
    lo: float | None = None,
    hi: float | None = None,
    cost: float | None = None,
) -> WindowCost:
    """A load window the eval's cells ran in: two rated cells, or one that timed out (no median)."""
    n = 0 if median is None else 2
    return WindowCost(
        uid=name, name=name, kind="load", engine="nemotron", streams=4, start_unix_ns=T0, end_unix_ns=T0 + S,
        same_engine=False, n_cells=max(n, 1), timeouts=int(n == 0), failures=0, rate=_summary(n, median),
        min_rate=lo, max_rate=hi, cost=cost,
    )  # fmt: skip


def _neighbour(baseline: RateSummary, *windows: WindowCost) -> NeighbourReport:
    return NeighbourReport(
        eval_name="serial", engine="qwen", workers=None, min_overlap_fraction=0.25, n_cells=3, timeouts=0,
        failures=0, baseline=baseline, baseline_timeouts=0, windows=list(windows), cells=[], warnings=[],
    )  # fmt: skip


def test_the_neighbour_plot_marks_a_window_of_timeouts_at_zero_and_still_draws_the_windows_after_it() -> None:
    """Three windows, top row first: one ranging 3 to 14 tok/s about its median 4 (its top sets the
    axis), one whose cells all timed out (an x at 0 on its row), and one after it at 6. A
    baseline with p10 but no p90 has no band; the cost sits 7 points above its median, centred."""
    result = _neighbour(
        _summary(3, median=10.0, p10=9.0),
        _window("big load", 4.0, 3.0, 14.0, cost=0.6),
        _window("timeout load", None),
        _window("small load", 6.0, 5.0, 7.0),
    )
    fig = neighbour_figure(result)
    [ax] = fig.axes
    assert _r(fig.get_size_inches()) == (8, 3.6)
    assert [*ax.collections, *ax.patches] == []
    assert lines(ax) == [
        ("baseline median 10.00 tok/s (n=3)", "#2ca02c", "None", "-", 1.5, (10, 10), (0, 1)),
        ("_child1", "#555555", "None", "-", 1.0, (3, 14), (0, 0)),
        ("_child2", "#d62728", "o", "None", 1.5, (4,), (0,)),
        ("_child4", TIMEOUT, "x", "None", 1.5, (0,), (1,)),  # _child3: the cost's annotation
        ("_child5", "#555555", "None", "-", 1.0, (5, 7), (2, 2)),
        ("_child6", "#d62728", "o", "None", 1.5, (6,), (2,)),
    ]
    [note] = ax.texts
    assert (note.get_text(), note.xy, note.xycoords, note.anncoords, note.xyann, note.get_ha()) == (
        "cost 60% (n=2)", (4.0, 0), "data", "offset points", (0, 7), "center",
    )  # fmt: skip
    assert [t.get_text() for t in ax.get_yticklabels()] == ["big load", "timeout load", "small load"]
    assert _r(ax.get_ylim()) == (2.6, -0.7)
    assert _r(ax.get_xlim()) == _r((0, 14 * 1.15))


@pytest.mark.parametrize(
    ("baseline", "windows", "right"),
    [
        # The baseline median is the furthest right, past a window's median with no range.
        (_summary(1, median=10.0), [_window("load", 2.0)], 10.0 * 1.15),
        # A window's median with no range is the furthest right, past a baseline under 1 tok/s.
        (_summary(1, median=0.5), [_window("load", 0.8)], 0.8 * 1.15),
        # No baseline: the one median under 1 tok/s sets the axis; a window of timeouts adds nothing.
        (_summary(0), [_window("load", 0.4), _window("timeouts", None)], 0.4 * 1.15),
        # Nothing rated at all: the axis is 0 to 1.
        (_summary(0), [_window("timeouts", None)], 1.0),
    ],
    ids=["baseline-median", "window-median", "under-one", "nothing-rated"],
)
def test_the_neighbour_plots_axis_ends_past_the_furthest_rate_drawn(
    baseline: RateSummary, windows: list[WindowCost], right: float
) -> None:
    """The x axis runs from 0 to 15% past the largest of the baseline's p90 and median and each
    window's top (its max, else its median), whichever are measured."""
    [ax] = neighbour_figure(_neighbour(baseline, *windows)).axes
    assert _r(ax.get_xlim()) == _r((0, right))


def _cell(i: int, start_s: float, elapsed_s: float, tokens: int | None, **kw: Any) -> Cell:
    fields: dict[str, Any] = {
        "uid": f"c{i}", "eval_name": "serial", "cell_id": f"c{i}", "engine": "qwen",
        "start_unix_ns": T0 + int(start_s * S), "end_unix_ns": T0 + int((start_s + elapsed_s) * S),
        "completion_tokens": tokens, "workers": 1,
    }  # fmt: skip
    fields.update(kw)
    return Cell(**fields)


def _timed_out(i: int, start_s: float) -> Cell:
    return _cell(i, start_s, 100.0, None, status=CellStatus.DEADLINE)


def test_a_timeline_of_timeouts_alone_marks_them_on_the_axis_unclipped_with_a_rate_axis_of_0_to_1() -> None:
    """No cell has a rate and there is no baseline: only the x marks at each end, drawn over the
    axis edge (clip off, not merely unset), and the rate axis is 0 to 1."""
    [ax] = timeline_figure(neighbour_cost("serial", [_timed_out(0, 0.0), _timed_out(1, 100.0)], [])).axes
    assert lines(ax) == [
        ("timed out or failed, not rated (n=2)", TIMEOUT, "x", "None", 1.5, (100, 200), (0, 0))
    ]
    assert ax.get_lines()[0].get_clip_on() is False
    assert _r(ax.get_ylim()) == (0, 1)
    assert _r(ax.get_xlim()) == (0, 200)


def test_a_timeline_of_no_cells_is_an_empty_axis_from_0() -> None:
    """An eval report with no cells draws nothing: the time axis is 0 to a nanosecond (never a
    zero-width axis) and the rate axis 0 to 1."""
    [ax] = timeline_figure(_neighbour(_summary(0))).axes
    assert lines(ax) == []
    assert _r(ax.get_ylim()) == (0, 1)
    assert tuple(ax.get_xlim()) == (0, 1e-9)
    assert ax.get_xlabel() == "seconds since the first cell"


def test_the_timelines_time_axis_says_model_time_for_any_scale_but_real_time() -> None:
    """Scale 1 is real time (no label); 2x and 100x are model time, in the PNG too."""
    result = neighbour_cost("serial", [_cell(0, 0.0, 10.0, 100), _cell(1, 10.0, 10.0, 80)], [])
    labels = {
        scale: timeline_figure(result, time_scale=scale).axes[0].get_xlabel() for scale in (1.0, 2.0, 100.0)
    }
    assert labels == {
        1.0: "seconds since the first cell",
        2.0: "seconds since the first cell, model time at 2x",
        100.0: "seconds since the first cell, model time at 100x",
    }
    png = plot_timeline(result, time_scale=100.0)
    assert _image(png) == _reference_image(timeline_figure(result, time_scale=100.0))
    assert png != plot_timeline(result)


def test_rates_under_one_tok_s_get_an_axis_15_percent_above_them() -> None:
    """At 0.5 tok/s the rate axis tops at 0.575, not at 1: slow cells are not squashed flat."""
    [ax] = concurrency_figure(concurrency([_cell(0, 0.0, 100.0, 50)])).axes
    assert _r(ax.get_ylim()) == (0, 0.575)
    [ax] = timeline_figure(neighbour_cost("serial", [_cell(0, 0.0, 100.0, 50)], [])).axes
    assert _r(ax.get_ylim()) == (0, 0.575)


def _verdict(instrument: str, *readings: tuple[float, float]) -> InstrumentVerdict:
    return gauge_verdict(instrument, "not load", *readings)


def test_a_gauge_with_no_readings_draws_an_empty_line_on_a_value_axis_of_0_to_1() -> None:
    """No intervals read: one empty line (its legend says n=0) and a value axis of 0 to 1."""
    [ax] = instrument_figure(_verdict("gpu 0 utilization")).axes
    assert lines(ax) == [("not load (n=0 intervals)", TIMEOUT, "o", "-", 1.5, (), ())]
    assert _r(ax.get_ylim()) == (0, 1)


def _budget(uid: str, wall_s: float, **seconds: float) -> CellBudget:
    return CellBudget(
        uid=uid, eval_name="serial", cell_id=uid, status="ok", elapsed_s=wall_s, wall_s=wall_s,
        seconds=seconds, sources=dict.fromkeys(seconds, "client"), requests=1, joined=0,
    )  # fmt: skip


def test_the_budget_png_is_the_evals_figure_with_its_model_time() -> None:
    """`plot_budget` draws the eval's name and the model-time label; a file name is the eval's
    name lower-cased with each other character a dash, trimmed, and never empty."""
    budgets = [_budget("c0", 30.0, prefill=10.0, decode=20.0), _budget("c1", 10.0, decode=10.0)]
    png = plot_budget("serial", budgets, time_scale=100.0)
    assert _image(png) == _reference_image(budget_figure("serial", budgets, time_scale=100.0))
    assert png != plot_budget("serial", budgets)
    assert budget_png_name("#Review run!") == "budget-review-run.png"
    assert budget_png_name("?!") == "budget-x.png"


def test_the_report_renders_each_plot_its_content_allows_under_its_evals_model_time() -> None:
    """One plottable curve, the concurrency, serial's timeline and neighbour cost, the gauge read at
    exactly two intervals (one read once is left out) and serial's budget: each PNG is its
    figure, the timeline's and budget's labelled at serial's 100x model time."""
    cells = [_cell(i, i * 100.0, 100.0, rate * 100) for i, rate in enumerate((10, 12, 8))]
    cells += [_cell(3 + i, 300.0 + i * 100.0, 100.0, rate * 100) for i, rate in enumerate((5, 4))]
    load = LoadWindow(
        uid="load", name="nemotron load", kind="load", engine="nemotron",
        start_unix_ns=T0 + 300 * S, end_unix_ns=T0 + 500 * S, streams=4,
    )  # fmt: skip
    result = neighbour_cost("serial", cells, [load])
    budgets = [_budget("c0", 30.0, prefill=10.0, decode=20.0), _budget("c1", 10.0, decode=10.0)]
    gauges = [_verdict("gpu 0 utilization", (1.0, 2.0), (2.0, 2.0)), _verdict("gpu 1 power", (1.0, 2.0))]
    content = ReportContent(
        source="box.db", eval_name=None, n_cells=5, n_windows=1, probes=[], curves=[_curve()],
        concurrency=concurrency(cells), neighbours=[result], outcomes=[], advice=None,
        time_scales={"serial": 100.0}, scales=[100.0], budgets=budgets, eval_budgets=eval_budgets(budgets),
        instruments=InstrumentsReport(
            interval_source="evals", intervals=[], throughput_min=None, throughput_max=None,
            thresholds=Thresholds(), instruments=gauges, notes=[],
        ),
    )  # fmt: skip
    images = render_images(content)
    assert list(images) == [
        "curve-1-qwen.png",
        "concurrency.png",
        "timeline-serial.png",
        "neighbour-serial.png",
        "instrument-1-gpu-0-utilization.png",
        "budget-serial.png",
    ]
    expected = {
        "timeline-serial.png": timeline_figure(result, time_scale=100.0),
        "budget-serial.png": budget_figure("serial", budgets, time_scale=100.0),
        "neighbour-serial.png": neighbour_figure(result),
        "instrument-1-gpu-0-utilization.png": instrument_figure(gauges[0]),
    }
    for name, fig in expected.items():
        assert _image(images[name]) == _reference_image(fig), name
