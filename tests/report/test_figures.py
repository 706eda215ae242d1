"""Each plot's artists read back from its matplotlib figure, on inputs whose figures are known:
the data every line, band and bar draws, its colour, marker and label, the axes' labels, scales,
ticks and limits, and where the legend sits. A plot that draws the wrong series, or the right one
unlabelled, looks plausible; only its artists say it is wrong."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from matplotlib.collections import LineCollection
from matplotlib.colors import to_hex
from tests.support.gauges import verdict as gauge_verdict

from spark_otel.analysis.budget import CellBudget
from spark_otel.analysis.concurrency import concurrency
from spark_otel.analysis.gauges.grades import InstrumentVerdict
from spark_otel.analysis.neighbour import neighbour_cost
from spark_otel.model import Cell, CellStatus, LoadWindow
from spark_otel.records.probe_report import ProbeMetadata, ProbeReport, ProbeSettings
from spark_otel.records.rate_curve import CurvePoint, RateCurve
from spark_otel.report.plots import (
    BUDGET_BARS,
    budget_figure,
    budget_png_name,
    concurrency_figure,
    curve_figure,
    curve_png_name,
    instrument_figure,
    instrument_png_name,
    neighbour_figure,
    neighbour_png_name,
    plot_budget,
    plot_curve,
    plot_probe,
    timeline_figure,
    timeline_png_name,
)

S = 1_000_000_000
T0 = 1_790_000_000 * S
PNG = b"\x89PNG\r\n\x1a\n"


def _r(values: Any) -> tuple[float, ...]:
    return tuple(round(float(v), 6) for v in values)


def lines(ax: Any) -> list[tuple[Any, ...]]:
    """Each line: label, colour, marker, line style, width, x data, y data."""
    return [
        (ln.get_label(), to_hex(ln.get_color()), ln.get_marker(), ln.get_linestyle(), ln.get_linewidth(),
         _r(ln.get_xdata()), _r(ln.get_ydata()))
        for ln in ax.get_lines()
    ]  # fmt: skip


def bars(ax: Any) -> list[tuple[Any, ...]]:
    """Each segment of the axes' line collections: colour, width, cap style, x data, y data."""
    return [
        (to_hex(coll.get_color()[0]), float(coll.get_linewidth()[0]), coll.get_capstyle(),
         _r(seg[:, 0]), _r(seg[:, 1]))
        for coll in ax.collections if isinstance(coll, LineCollection)
        for seg in coll.get_segments()
    ]  # fmt: skip


def bands(ax: Any) -> list[tuple[Any, ...]]:
    """Each filled band or span drawn as a polygon: label, colour, alpha, its corner points."""
    out = []
    for artist in [*ax.collections, *ax.patches]:
        if isinstance(artist, LineCollection) or (
            not hasattr(artist, "get_paths") and not hasattr(artist, "get_path")
        ):
            continue
        paths = artist.get_paths() if hasattr(artist, "get_paths") else [artist.get_path()]
        transform = artist.get_patch_transform() if hasattr(artist, "get_patch_transform") else None
        corners = set()
        for path in paths:
            verts = transform.transform(path.vertices) if transform is not None else path.vertices
            corners |= {(round(float(x), 6), round(float(y), 6)) for x, y in verts}
        colour = artist.get_facecolor()
        colour = colour[0] if len(colour) and hasattr(colour[0], "__len__") else colour
        out.append((artist.get_label(), to_hex(colour), artist.get_alpha(), sorted(corners)))
    return out


def legend(ax: Any) -> tuple[list[str], int, tuple[float, float], float, bool]:
    """The legend's entries, its anchor corner (2: upper left), where the anchor sits in axes
    coordinates (x past 1: right of the data), its font size and whether it has a frame."""
    lg = ax.get_legend()
    box = lg.get_bbox_to_anchor().transformed(ax.transAxes.inverted())
    return (
        [t.get_text() for t in lg.get_texts()], lg._loc, (round(box.x0, 3), round(box.y0, 3)),
        lg._fontsize, lg.get_frame_on(),
    )  # fmt: skip


OUTSIDE = (2, (1.01, 1.0), 8.0, False)
"""Every plot's legend: upper left corner just right of the data, small, frameless."""


def ticks(axis: Any) -> list[tuple[float, str]]:
    return [
        (round(float(t), 6), lbl.get_text())
        for t, lbl in zip(axis.get_ticklocs(), axis.get_ticklabels(), strict=True)
    ]


def _curve() -> RateCurve:
    return RateCurve(
        engine="qwen",
        points=[
            CurvePoint(streams=1, per_stream_rate=10.0, aggregate_rate=10.0, p10=9.0, p90=11.0, n=1),
            CurvePoint(streams=4, per_stream_rate=8.0, aggregate_rate=32.0, p10=None, p90=12.0, n=4),
            CurvePoint(streams=16, per_stream_rate=5.0, aggregate_rate=80.0, p10=4.0, p90=None, n=16),
        ],
    )


def test_the_curve_draws_the_median_and_its_band_above_the_aggregate_on_a_shared_log2_stream_axis() -> None:
    fig = curve_figure(_curve(), title="qwen: mine")
    per_ax, agg_ax = fig.axes
    assert _r(fig.get_size_inches()) == (7.5, 5.5)
    assert per_ax.get_shared_x_axes().joined(per_ax, agg_ax)
    assert lines(per_ax) == [("median", "#1f77b4", "o", "-", 1.5, (1, 4, 16), (10, 8, 5))]
    # A point without p10 or p90 draws its band edge at the median.
    [(label, colour, alpha, corners)] = bands(per_ax)
    assert (label, colour, alpha) == ("p10-p90", "#1f77b4", 0.15)
    assert corners == [(1, 9), (1, 11), (4, 8), (4, 12), (16, 4), (16, 5)]
    assert lines(agg_ax) == [("all streams", "#d62728", "s", "-", 1.5, (1, 4, 16), (10, 32, 80))]
    assert (agg_ax.get_xscale(), agg_ax.xaxis.get_transform().base) == ("log", 2)
    assert ticks(agg_ax.xaxis) == [(1, "1"), (4, "4"), (16, "16")]
    assert list(agg_ax.get_xticks(minor=True)) == []
    assert (agg_ax.get_xlabel(), per_ax.get_ylabel(), agg_ax.get_ylabel()) == (
        "concurrent streams", "per-stream tok/s", "aggregate tok/s",
    )  # fmt: skip
    assert _r(per_ax.get_ylim()) == _r((0, 12 * 1.15))
    assert _r(agg_ax.get_ylim()) == _r((0, 80 * 1.15))
    assert legend(per_ax) == (["p10-p90", "median"], *OUTSIDE)
    assert legend(agg_ax) == (["all streams"], *OUTSIDE)
    assert (per_ax.get_title(), per_ax.title.get_fontsize()) == ("qwen: mine", 11.0)
    assert curve_figure(_curve()).axes[0].get_title() == "qwen: what more streams buy"
    [note] = fig.texts
    assert note.get_text().startswith("probe, idle, at 1, 4, 16 streams")
    assert (note.get_position(), note.get_fontsize(), note.get_ha(), note.get_va()) == (
        (0.5, -0.01),
        8.0,
        "center",
        "top",
    )


def test_plot_probe_titles_the_curve_with_engine_model_and_tokens_and_writes_the_png(tmp_path: Path) -> None:
    report = ProbeReport(
        metadata=ProbeMetadata(
            created_unix_ns=T0, engine_url="http://127.0.0.1:8011", engine="qwen", model="q-27b"
        ),
        settings=ProbeSettings(streams=[1, 4, 16], tokens=256),
        levels=[],
        curve=_curve(),
    )
    path = tmp_path / "probe.png"
    png = plot_probe(report, path)
    assert png.startswith(PNG)
    assert path.read_bytes() == png
    assert plot_probe(report) == png  # the same figure, drawn again, without a file
    assert png == plot_curve(_curve(), title="qwen (q-27b): 256 tokens per stream")
    assert png != plot_curve(_curve())  # the title is drawn, and only that differs
    assert curve_png_name(2, _curve()) == "curve-3-qwen.png"


def _budget(i: int, wall_s: float, **seconds: float) -> CellBudget:
    return CellBudget(
        uid=f"u{i}", eval_name="serial", cell_id=f"c{i}", status="ok", elapsed_s=wall_s, wall_s=wall_s,
        seconds=seconds, sources={}, requests=1, joined=0,
    )  # fmt: skip


def test_the_budget_stacks_each_cells_phases_in_order_longest_at_the_top() -> None:
    budgets = [
        _budget(0, 30.0, prefill=10.0, decode=20.0),
        _budget(1, 10.0, queue=4.0, first_token=1.0, decode=5.0),
    ]
    fig = budget_figure("serial", budgets, time_scale=100.0)
    [ax] = fig.axes
    assert _r(fig.get_size_inches()) == (8, 1.2 + 0.22 * 2)
    bars = [
        (
            b.get_label(), to_hex(b.get_facecolor()), round(b.get_x(), 6),
            round(b.get_y() + b.get_height() / 2, 6), round(b.get_width(), 6),
        )
        for b in ax.patches
    ]  # fmt: skip
    # Shortest first (row 0, drawn at the bottom); phases stacked left to right in BUDGET_PHASES order,
    # a phase no cell has drawing nothing. Matplotlib labels a container's bars "_nolegend_".
    assert sorted(bars, key=lambda b: (b[3], b[2])) == [
        ("_nolegend_", "#9467bd", 0.0, 0.0, 4.0),
        ("_nolegend_", "#ff7f0e", 4.0, 0.0, 0.0),
        ("_nolegend_", "#e9a23b", 4.0, 0.0, 1.0),
        ("_nolegend_", "#1f77b4", 5.0, 0.0, 5.0),
        ("_nolegend_", "#9467bd", 0.0, 1.0, 0.0),
        ("_nolegend_", "#ff7f0e", 0.0, 1.0, 10.0),
        ("_nolegend_", "#e9a23b", 10.0, 1.0, 0.0),
        ("_nolegend_", "#1f77b4", 10.0, 1.0, 20.0),
    ]
    assert [c.get_label() for c in ax.containers] == ["queue", "prefill", "first token", "decode"]
    assert ticks(ax.yaxis) == [(0, "c1"), (1, "c0")]
    assert ax.get_yticklabels()[0].get_fontsize() == 7.0
    assert ax.get_xlabel() == "seconds, model time at 100x"
    assert budget_figure("serial", budgets).axes[0].get_xlabel() == "seconds"
    assert (ax.get_title(), ax.title.get_fontsize()) == ("serial: where each cell's time went", 9.0)
    assert legend(ax) == (["queue", "prefill", "first token", "decode"], *OUTSIDE)
    assert plot_budget("serial", budgets).startswith(PNG)
    assert budget_png_name("Serial review #2") == "budget-serial-review--2.png"


def test_the_budget_draws_only_the_longest_cells_and_says_how_many_it_left_out() -> None:
    budgets = [_budget(i, float(i + 1), decode=float(i + 1)) for i in range(BUDGET_BARS + 3)]
    [ax] = budget_figure("serial", budgets).axes
    assert [t.get_text() for t in ax.get_yticklabels()] == [f"c{i}" for i in range(3, BUDGET_BARS + 3)]
    assert (
        ax.get_title()
        == f"serial: where each cell's time went (the {BUDGET_BARS} longest of {BUDGET_BARS + 3})"
    )
    [ax] = budget_figure("serial", budgets[:BUDGET_BARS]).axes
    assert ax.get_title() == "serial: where each cell's time went"


def _cell(i: int, start_s: float, elapsed_s: float, tokens: int | None, **kw: Any) -> Cell:
    fields: dict[str, Any] = {
        "uid": f"c{i}", "eval_name": "serial", "cell_id": f"c{i}", "engine": "qwen",
        "start_unix_ns": T0 + int(start_s * S), "end_unix_ns": T0 + int((start_s + elapsed_s) * S),
        "completion_tokens": tokens, "workers": 1,
    }  # fmt: skip
    fields.update(kw)
    return Cell(**fields)


def _records() -> tuple[list[Cell], list[LoadWindow]]:
    """Alone at 10, 12 and 8 tok/s; two at 5 and 4 inside a load; one timeout inside it."""
    cells = [_cell(i, i * 100.0, 100.0, rate * 100) for i, rate in enumerate((10, 12, 8))]
    cells += [_cell(3 + i, 300.0 + i * 100.0, 100.0, rate * 100) for i, rate in enumerate((5, 4))]
    cells.append(_cell(5, 500.0, 100.0, None, status=CellStatus.DEADLINE))
    load = LoadWindow(
        uid="load", name="nemotron load", kind="load", engine="nemotron",
        start_unix_ns=T0 + 300 * S, end_unix_ns=T0 + 600 * S, streams=4,
    )  # fmt: skip
    return cells, [load]


def test_the_neighbour_plot_draws_the_baseline_band_and_each_windows_median_range_and_cost() -> None:
    result = neighbour_cost("serial", *_records())
    fig = neighbour_figure(result)
    [ax] = fig.axes
    base = result.baseline
    [(label, colour, alpha, corners)] = bands(ax)
    assert (label, colour, alpha) == ("baseline p10-p90", "#2ca02c", 0.15)
    assert {x for x, _ in corners} == {round(base.p10, 6), round(base.p90, 6)}
    [window] = result.windows
    assert lines(ax) == [
        ("baseline median 10.00 tok/s (n=3)", "#2ca02c", "None", "-", 1.5, (10, 10), (0, 1)),
        ("_child2", "#555555", "None", "-", 1.0, (4, 5), (0, 0)),
        ("_child3", "#d62728", "o", "None", 1.5, (4.5,), (0,)),
    ]
    [note] = ax.texts
    assert (note.get_text(), note.xy, note.get_fontsize()) == (f"cost {window.cost:.0%} (n=2)", (4.5, 0), 8.0)
    assert ticks(ax.yaxis) == [(0, "nemotron load")]
    assert _r(ax.get_ylim()) == (0.6, -0.7)
    assert _r(ax.get_xlim()) == _r((0, max(base.p90, 10.0) * 1.15))
    assert ax.get_xlabel() == "serial: per-cell decode tok/s"
    assert (ax.get_title(), ax.title.get_fontsize()) == ("What other load cost serial", 11.0)
    assert _r(fig.get_size_inches()) == (8, 0.6 + 1.8)
    assert legend(ax) == (["baseline p10-p90", "baseline median 10.00 tok/s (n=3)"], *OUTSIDE)
    assert neighbour_png_name(result) == "neighbour-serial.png"
    four = result.model_copy(update={"workers": 4})
    assert (neighbour_png_name(four), timeline_png_name(four)) == (
        "neighbour-serial-4-workers.png", "timeline-serial-4-workers.png",
    )  # fmt: skip


def test_the_timeline_draws_every_cell_shades_the_load_and_marks_the_timeout_at_its_end() -> None:
    result = neighbour_cost("serial", *_records())
    fig = timeline_figure(result)
    [ax] = fig.axes
    assert _r(fig.get_size_inches()) == (9, 4)
    assert lines(ax) == [
        ("baseline median 10.00 tok/s (n=3)", "#2ca02c", "None", "--", 1.0, (0, 1), (10, 10)),
        ("a cell: start to end at its tok/s (n=5)", "#1f77b4", "None", "-", 2.0, (), ()),
        ("timed out or failed, not rated (n=1)", "#b3261e", "x", "None", 1.5, (600,), (0,)),
    ]
    # The cells' bars, all in one collection: one artist however many cells.
    assert len([c for c in ax.collections if isinstance(c, LineCollection)]) == 1
    assert bars(ax) == [
        ("#1f77b4", 2.0, "projecting", (0, 100), (10, 10)),
        ("#1f77b4", 2.0, "projecting", (100, 200), (12, 12)),
        ("#1f77b4", 2.0, "projecting", (200, 300), (8, 8)),
        ("#1f77b4", 2.0, "projecting", (300, 400), (5, 5)),
        ("#1f77b4", 2.0, "projecting", (400, 500), (4, 4)),
    ]
    assert not ax.get_lines()[-1].get_clip_on()  # the mark on the axis is not cut in half
    [(label, colour, alpha, corners)] = bands(ax)  # the load's window, in the legend apart
    assert (label, colour, alpha) == ("_nolegend_", "#ff7f0e", 0.13)
    assert {x for x, _ in corners} == {300.0, 600.0}
    [entry] = [h for h in ax.get_legend().legend_handles if h.get_label() == "nemotron load"]
    assert (to_hex(entry.get_facecolor()), entry.get_alpha()) == ("#ff7f0e", 0.13)
    assert _r(ax.get_ylim()) == _r((0, 12 * 1.15))
    assert _r(ax.get_xlim()) == (0, 600)
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("seconds since the first cell", "per-cell decode tok/s")
    assert (ax.get_title(), ax.title.get_fontsize()) == ("serial over time", 11.0)
    assert legend(ax)[1:] == OUTSIDE
    assert timeline_png_name(result) == "timeline-serial.png"


def test_a_timeline_longer_than_ten_minutes_reads_in_minutes() -> None:
    long = [_cell(0, 0.0, 601.0, 6010)]
    [ax] = timeline_figure(neighbour_cost("serial", long, [])).axes
    assert ax.get_xlabel() == "minutes since the first cell"
    assert bars(ax)[0][3] == _r((0.0, 601.0 / 60))
    exactly = [_cell(0, 0.0, 600.0, 6000)]
    assert (
        timeline_figure(neighbour_cost("serial", exactly, [])).axes[0].get_xlabel()
        == "seconds since the first cell"
    )


def test_the_concurrency_plot_scatters_each_engines_cells_at_their_load_and_rate() -> None:
    cells = [_cell(i, 0.0, 100.0, 1000) for i in range(2)] + [_cell(9, 500.0, 100.0, 500, engine="nemo")]
    fig = concurrency_figure(concurrency(cells))
    [ax] = fig.axes
    assert _r(fig.get_size_inches()) == (7.5, 4)
    points = [
        (c.get_label(), [tuple(_r(p)) for p in c.get_offsets()], c.get_alpha(), list(c.get_sizes()))
        for c in ax.collections
    ]
    assert sorted(points) == [
        ("nemo (n=1)", [(1.0, 5.0)], 0.7, [14.0]),
        ("qwen (n=2)", [(2.0, 10.0), (2.0, 10.0)], 0.7, [14.0]),
    ]
    assert ax.get_xlim()[0] == 0
    assert _r(ax.get_ylim()) == _r((0, 10 * 1.15))
    assert (ax.get_xlabel(), ax.get_ylabel()) == (
        "cells in flight on the engine (time-weighted)",
        "per-cell decode tok/s",
    )
    assert (ax.get_title(), ax.title.get_fontsize()) == ("Per-cell rate against concurrency", 11.0)
    assert legend(ax)[1:] == OUTSIDE


def _verdict(verdict: str, knee: float | None, *readings: tuple[float, float]) -> InstrumentVerdict:
    return gauge_verdict("gpu 0 utilization", verdict, *readings, knee_throughput=knee)


def test_the_instrument_plot_draws_the_gauge_against_throughput_in_its_verdicts_colour_with_the_knee() -> (
    None
):
    fig = instrument_figure(_verdict("saturates", 40.0, (80.0, 96.0), (10.0, 30.0), (40.0, 95.0)))
    [ax] = fig.axes
    assert _r(fig.get_size_inches()) == (4.2, 2.6)
    assert lines(ax) == [
        ("saturates (n=3 intervals)", "#ff7f0e", "o", "-", 1.5, (10, 40, 80), (30, 95, 96)),
        ("knee", "#555555", "None", ":", 1.0, (40, 40), (0, 1)),
    ]
    assert ax.get_lines()[0].get_markersize() == 4
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("throughput tok/s", "%")
    assert ax.get_xlim()[0] == 0
    assert _r(ax.get_ylim()) == _r((0, 96 * 1.15))
    assert (ax.get_title(), ax.title.get_fontsize()) == ("gpu 0 utilization", 9.0)
    assert ax.get_xticklabels()[0].get_fontsize() == 7.0
    assert legend(ax) == (["saturates (n=3 intervals)", "knee"], *OUTSIDE)
    colours = {
        v: lines(instrument_figure(_verdict(v, None, (1.0, 2.0), (2.0, 2.0))).axes[0])[0][1]
        for v in ("tracks load", "not load", "unsupported")
    }
    assert colours == {"tracks load": "#2ca02c", "not load": "#b3261e", "unsupported": "#555555"}
    unitless = _verdict("not load", None, (1.0, 2.0)).model_copy(update={"unit": ""})
    assert instrument_figure(unitless).axes[0].get_ylabel() == "value"
    assert instrument_png_name(1, unitless) == "instrument-2-gpu-0-utilization.png"
