"""The report's plots as PNG bytes (the ``plot`` extra: matplotlib, imported on first use).

Each plot answers one question at a glance: legends sit outside the data, the y axis is padded
so no marker is clipped, stream counts sit on an integer axis, and a curve of one point is not
drawn at all (the page says why instead, `plottable`). A year of cells stays readable: a time
axis reads in seconds, minutes, hours, then dates as the span grows (`time_axis`), and more
cells than `DENSITY_ABOVE` are drawn as density, one hexbin call, not a solid bar of markers.

A year of history stays quick to draw: each plot's many marks are one artist (a timeline's loads
one collection, its cells one segment collection or one hexbin), its inputs are read
into numpy columns once (`timeline_marks`, `concurrency_points`: the facts tests pin), a PNG is
drawn once and written RGB at zlib's fastest level (`_png`).
"""

from __future__ import annotations

import functools
import importlib
import io
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._clock import NS_PER_S
from .._exceptions import ConfigError
from ..analysis.neighbour import windows_touched
from ..views.curves import describe_curve

if TYPE_CHECKING:
    from ..analysis.budget import CellBudget
    from ..analysis.concurrency import ConcurrencyReport
    from ..analysis.gauges import InstrumentVerdict
    from ..analysis.neighbour import NeighbourReport, WindowCost
    from ..records.probe_report import ProbeReport
    from ..records.rate_curve import RateCurve
    from .content import ReportContent

__all__ = [
    "DATES_ABOVE_S",
    "DENSITY_ABOVE",
    "LoadShade",
    "TimeAxis",
    "TimelineMarks",
    "budget_figure",
    "budget_png_name",
    "concurrency_figure",
    "concurrency_points",
    "curve_figure",
    "curve_png_name",
    "instrument_figure",
    "instrument_png_name",
    "neighbour_figure",
    "neighbour_png_name",
    "plot_budget",
    "plot_concurrency",
    "plot_curve",
    "plot_instrument",
    "plot_neighbour",
    "plot_probe",
    "plot_timeline",
    "plottable",
    "render_images",
    "time_axis",
    "timeline_figure",
    "timeline_marks",
    "timeline_png_name",
]

_PER_STREAM = "#1f77b4"
_AGGREGATE = "#d62728"
_BASELINE = "#2ca02c"
_TIMEOUT = "#b3261e"
_Y_PAD = 1.15
"""Headroom above the highest marker, so none is clipped and annotations fit."""
DENSITY_ABOVE = 2_000
"""More cells than this on one plot are drawn as density (hexagons shaded by how many cells fall
in each), not one marker or bar each: markers past a few thousand merge into a solid bar and cost
seconds to draw."""
DENSITY_LABEL = "cells per hexagon"
"""What a density plot's colour bar counts."""
_HEXBINS = 60
"""Hexagons across a density plot's x axis."""
_DENSITY_CMAP = "Blues"
DATES_ABOVE_S = 2 * 86_400
"""A time axis longer than this reads in dates (UTC), not in time since the first cell."""
_MINUTES_ABOVE_S = 600
_HOURS_ABOVE_S = 6 * 3_600
_LOAD_COLOURS = ("#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf")


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError as exc:
        raise ConfigError("plots need the plot extra: pip install 'spark-otel[plot]'") from exc
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


_DPI = 110
_PNG_LEVEL = 1
"""zlib's fastest level: a plot's PNG in about half the time of Pillow's default 6, a few per
cent larger (smaller than the default's RGBA, as it is written RGB)."""


def _png(fig: Any) -> bytes:
    """The figure as PNG at `_DPI`, cropped to what it draws (legends outside the axes included)
    and closed: the pixels of ``savefig(bbox_inches="tight")``, in one draw rather than two (the
    crop is measured from the figure's artists, not from a draw of its own), written RGB where
    the figure is opaque and at `_PNG_LEVEL`."""
    import matplotlib

    buf = io.BytesIO()
    _canvas_class()(fig)  # this figure's canvas from now on: its PNG is written by `_write_png`
    if fig.get_layout_engine() is not None:  # a user's rc laying figures out: the layout needs a draw
        fig.savefig(buf, format="png", dpi=_DPI, bbox_inches="tight")
    else:
        fig.set_dpi(_DPI)
        crop = fig.get_tightbbox(fig.canvas.get_renderer()).padded(matplotlib.rcParams["savefig.pad_inches"])
        fig.savefig(buf, format="png", dpi=_DPI, bbox_inches=crop)
    _pyplot().close(fig)
    return buf.getvalue()


def _write_png(rgba: Any, out: Any, dpi: float) -> None:
    """An Agg canvas's RGBA pixels as PNG: RGB where every pixel is opaque (a quarter less to
    compress, the same image), at `_PNG_LEVEL`, with the dpi and the software as matplotlib writes
    them."""
    import matplotlib
    from PIL import Image, PngImagePlugin

    pixels = _numpy().asarray(rgba)
    image = Image.fromarray(pixels, "RGBA")
    if bool((pixels[..., 3] == 255).all()):
        image = image.convert("RGB")
    info = PngImagePlugin.PngInfo()
    info.add_text("Software", f"Matplotlib version{matplotlib.__version__}, https://matplotlib.org/")
    image.save(out, format="png", compress_level=_PNG_LEVEL, dpi=(dpi, dpi), pnginfo=info)


@functools.cache
def _canvas_class() -> Any:
    """An Agg canvas whose PNG is `_write_png`'s (matplotlib's own is RGBA at Pillow's level 6)."""
    agg: Any = importlib.import_module("matplotlib.backends.backend_agg").FigureCanvasAgg

    class Canvas(agg):  # type: ignore[misc]
        def print_png(self, filename_or_obj: Any, **_: Any) -> None:
            agg.draw(self)
            _write_png(self.buffer_rgba(), filename_or_obj, self.figure.dpi)

    return Canvas


def _legend_outside(ax: Any, first: Sequence[Any] = ()) -> None:
    """The axes' legend right of the data; ``first``: entries for artists that carry none
    themselves (a collection of several colours), before the axes' own."""
    handles, labels = ax.get_legend_handles_labels()
    handles, labels = [*first, *handles], [*(h.get_label() for h in first), *labels]
    if handles:
        ax.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)


def _pad_y(ax: Any, top: float) -> None:
    ax.set_ylim(0, top * _Y_PAD if top > 0 else 1.0)


def _model_time(time_scale: float | None) -> str:
    return "" if not time_scale or time_scale == 1 else f", model time at {time_scale:g}x"


@dataclass(frozen=True)
class TimeAxis:
    """How a time axis reads: ``unit`` is "seconds", "minutes" or "hours" since ``t0_ns``, or
    "dates": matplotlib date numbers (days since its date epoch, ``epoch_days`` after the Unix
    one), UTC, for a long span."""

    unit: str
    t0_ns: int
    epoch_days: float = 0.0

    def at(self, unix_ns: int) -> float:
        """Where ``unix_ns`` sits on the axis."""
        if self.unit == "dates":
            return unix_ns / NS_PER_S / 86_400 + self.epoch_days
        return (unix_ns - self.t0_ns) / NS_PER_S / _UNIT_S[self.unit]

    def at_array(self, unix_ns: Any) -> Any:
        """`at` of a numpy array of instants, as floats."""
        np = _numpy()
        ns = np.asarray(unix_ns, dtype=np.int64)
        if self.unit == "dates":
            return ns / NS_PER_S / 86_400 + self.epoch_days
        return (ns - self.t0_ns) / NS_PER_S / _UNIT_S[self.unit]

    def label(self, what: str) -> str:
        return "date (UTC)" if self.unit == "dates" else f"{self.unit} since {what}"

    def format(self, ax: Any) -> None:
        """Date ticks (matplotlib's locator and its concise labels) on a dates axis."""
        if self.unit == "dates":
            dates = _dates()
            locator = dates.AutoDateLocator(tz=dates.UTC)
            ax.xaxis.set_major_locator(locator)
            ax.xaxis.set_major_formatter(dates.ConciseDateFormatter(locator, tz=dates.UTC))


_UNIT_S = {"seconds": 1.0, "minutes": 60.0, "hours": 3_600.0}


def time_axis(t0_ns: int, t1_ns: int) -> TimeAxis:
    """The unit a span from ``t0_ns`` to ``t1_ns`` reads in: seconds up to ten minutes, minutes up
    to six hours, hours up to `DATES_ABOVE_S`, dates beyond."""
    span = (t1_ns - t0_ns) / NS_PER_S
    if span > DATES_ABOVE_S:
        from datetime import UTC, datetime

        return TimeAxis("dates", t0_ns, float(_dates().date2num(datetime(1970, 1, 1, tzinfo=UTC))))
    if span > _HOURS_ABOVE_S:
        return TimeAxis("hours", t0_ns)
    return TimeAxis("minutes" if span > _MINUTES_ABOVE_S else "seconds", t0_ns)


def _dates() -> Any:
    """matplotlib's dates module (untyped: reached through Any)."""
    _pyplot()
    return importlib.import_module("matplotlib.dates")


def _density(ax: Any, xs: Any, ys: Any, *, label: str, below: bool = False) -> Any:
    """Many points as hexagons shaded by count (one call), with a colour bar saying so: right of
    the axes, or ``below`` them where a legend sits to the right."""
    cells = ax.hexbin(xs, ys, gridsize=_HEXBINS, mincnt=1, cmap=_DENSITY_CMAP, linewidths=0, label=label)
    where = {"location": "bottom", "pad": 0.2, "fraction": 0.05, "aspect": 60} if below else {"pad": 0.01}
    ax.figure.colorbar(cells, ax=ax, label=DENSITY_LABEL, **where)
    return cells


def plottable(curve: RateCurve) -> bool:
    """Whether a curve has a shape to draw: two levels or more (one point is a note, not a curve)."""
    return len(curve.points) >= 2


def plot_curve(curve: RateCurve, *, title: str | None = None) -> bytes:
    """`curve_figure` as PNG bytes."""
    return _png(curve_figure(curve, title=title))


def curve_figure(curve: RateCurve, *, title: str | None = None) -> Any:
    """Per-stream tok/s (median, p10-p90 band) above aggregate tok/s, against concurrent
    streams on one integer axis. A curve of one point is refused (`plottable`)."""
    if not plottable(curve):
        raise ConfigError(f"{curve.engine}: one level measured, nothing to draw a curve through")
    plt = _pyplot()
    fig, (per_ax, agg_ax) = plt.subplots(2, 1, sharex=True, figsize=(7.5, 5.5))
    xs = [p.streams for p in curve.points]
    per = [p.per_stream_rate for p in curve.points]
    lows = [p.p10 if p.p10 is not None else p.per_stream_rate for p in curve.points]
    highs = [p.p90 if p.p90 is not None else p.per_stream_rate for p in curve.points]
    per_ax.fill_between(xs, lows, highs, color=_PER_STREAM, alpha=0.15, label="p10-p90")
    per_ax.plot(xs, per, "o-", color=_PER_STREAM, label="median")
    per_ax.set_ylabel("per-stream tok/s")
    _pad_y(per_ax, max(highs + per))
    _legend_outside(per_ax)
    aggregate = [p.aggregate_rate for p in curve.points]
    agg_ax.plot(xs, aggregate, "s-", color=_AGGREGATE, label="all streams")
    agg_ax.set_ylabel("aggregate tok/s")
    _pad_y(agg_ax, max(aggregate))
    _legend_outside(agg_ax)
    agg_ax.set_xscale("log", base=2)
    agg_ax.set_xticks(xs, [str(x) for x in xs])
    agg_ax.xaxis.set_minor_locator(plt.NullLocator())
    agg_ax.set_xlabel("concurrent streams")
    per_ax.set_title(title or f"{curve.engine}: what more streams buy", fontsize=11)
    fig.text(0.5, -0.01, describe_curve(curve), ha="center", va="top", fontsize=8, wrap=True)
    return fig


def plot_probe(report: ProbeReport, path: Path | None = None) -> bytes:
    """The probe's curve as PNG bytes; also written to ``path`` when given."""
    meta = report.metadata
    png = plot_curve(
        report.curve, title=f"{meta.engine} ({meta.model}): {report.settings.tokens} tokens per stream"
    )
    if path is not None:
        path.write_bytes(png)
    return png


def plot_neighbour(result: NeighbourReport) -> bytes:
    """`neighbour_figure` as PNG bytes."""
    return _png(neighbour_figure(result))


NEIGHBOUR_ROWS = 40
"""The most windows an eval's neighbour plot draws (one row each): those beside the most of its
cells, in time order; the title says how many it left out (the table lists every one)."""


def neighbour_figure(result: NeighbourReport) -> Any:
    """Per-window median rates (with their range) against the baseline band."""
    plt = _pyplot()
    every = windows_touched(result)
    touched = every
    if len(every) > NEIGHBOUR_ROWS:
        kept = sorted(range(len(every)), key=lambda k: (-every[k].n_cells, k))[:NEIGHBOUR_ROWS]
        touched = [every[k] for k in sorted(kept)]
    fig, ax = plt.subplots(figsize=(8, 0.6 * max(len(touched), 1) + 1.8))
    base = result.baseline
    if base.p10 is not None and base.p90 is not None:
        ax.axvspan(base.p10, base.p90, color=_BASELINE, alpha=0.15, label="baseline p10-p90")
    if base.median is not None:
        label = f"baseline median {base.median:.2f} tok/s (n={base.n})"
        ax.axvline(base.median, color=_BASELINE, label=label)
    right = max([base.p90 or 0.0, base.median or 0.0] + [w.max_rate or w.rate.median or 0.0 for w in touched])
    for y, w in enumerate(touched):
        if w.rate.median is None:
            ax.plot([0], [y], "x", color=_TIMEOUT)
            continue
        lo, hi = w.min_rate or w.rate.median, w.max_rate or w.rate.median
        ax.plot([lo, hi], [y, y], color="#555", linewidth=1)
        ax.plot([w.rate.median], [y], "o", color=_AGGREGATE)
        if w.cost is not None:
            ax.annotate(f"cost {w.cost:.0%} (n={w.rate.n})", (w.rate.median, y), textcoords="offset points",
                        xytext=(0, 7), ha="center", fontsize=8)  # fmt: skip
    ax.set_yticks(range(len(touched)), [w.name for w in touched])
    ax.set_ylim(len(touched) - 0.4, -0.7)  # top row first, room for its annotation
    ax.set_xlim(0, right * _Y_PAD if right > 0 else 1.0)
    ax.set_xlabel(f"{result.label}: per-cell decode tok/s")
    more = f" (the {len(touched)} beside the most cells, of {len(every)})" if touched != every else ""
    ax.set_title(f"What other load cost {result.label}{more}", fontsize=11)
    _legend_outside(ax)
    return fig


def plot_timeline(
    result: NeighbourReport, *, time_scale: float | None = None, density_above: int = DENSITY_ABOVE
) -> bytes:
    """`timeline_figure` as PNG bytes."""
    return _png(timeline_figure(result, time_scale=time_scale, density_above=density_above))


def timeline_figure(
    result: NeighbourReport, *, time_scale: float | None = None, density_above: int = DENSITY_ABOVE
) -> Any:
    """The eval over time: each cell a bar from its start to its end at its decode rate
    (timeouts and failures marked at their end), the other loads it ran beside shaded and
    labelled. The neighbour cost, seen rather than tabled. More rated cells than
    ``density_above``: their density by middle and rate instead of a bar each. The time axis
    reads as `time_axis` says."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(9, 4))
    marks = timeline_marks(result)
    axis, at = marks.axis, marks.axis.at
    t0, t1 = marks.t0_ns, marks.t1_ns
    entries = _shade(ax, marks.loads)
    if result.baseline.median is not None:
        ax.axhline(
            result.baseline.median,
            color=_BASELINE,
            linestyle="--",
            linewidth=1,
            label=f"baseline median {result.baseline.median:.2f} tok/s (n={result.baseline.n})",
        )
    rated = len(marks.rates)
    if rated > density_above:
        _density(
            ax,
            axis.at_array((marks.starts_ns + marks.ends_ns) // 2),
            marks.rates,
            label=f"cells by their middle and tok/s (n={rated})",
            below=True,
        )
    elif rated:
        # One collection for every cell's bar: a line artist per cell cost a year of cells minutes.
        from matplotlib.collections import LineCollection

        np = _numpy()
        xs0, xs1 = axis.at_array(marks.starts_ns), axis.at_array(marks.ends_ns)
        bars = np.stack([np.column_stack([xs0, marks.rates]), np.column_stack([xs1, marks.rates])], axis=1)
        ax.add_collection(LineCollection(bars, colors=_PER_STREAM, linewidths=2, capstyle="projecting"))
        label = f"a cell: start to end at its tok/s (n={rated})"
        ax.plot([], [], color=_PER_STREAM, linewidth=2, label=label)
    if len(marks.unrated_ends_ns):
        ax.plot(
            axis.at_array(marks.unrated_ends_ns),
            [0.0] * len(marks.unrated_ends_ns),
            "x",
            color=_TIMEOUT,
            clip_on=False,
            label=f"timed out or failed, not rated (n={len(marks.unrated_ends_ns)})",
        )
    top = marks.top
    _pad_y(ax, top)
    ax.set_xlim(at(t0), max(at(t1), at(t0) + 1e-9))
    axis.format(ax)
    ax.set_xlabel(axis.label("the first cell") + _model_time(time_scale))
    ax.set_ylabel("per-cell decode tok/s")
    ax.set_title(f"{result.label} over time", fontsize=11)
    _legend_outside(ax, first=entries)
    return fig


_OTHER_LOADS = "#bbbbbb"


def _load_colours(touched: Sequence[WindowCost]) -> tuple[dict[str, str], str]:
    """Each load's colour by name (a load that ran several times keeps one colour and one legend
    entry), in order of first appearance; past as many names as there are colours, the names
    beside the most cells keep theirs and the rest share a grey, under the second value's label."""
    cells: dict[str, int] = {}
    for w in touched:
        cells[w.name] = cells.get(w.name, 0) + w.n_cells
    names = list(cells)
    if len(names) > len(_LOAD_COLOURS):
        order = {n: i for i, n in enumerate(names)}
        top = set(sorted(names, key=lambda n: (-cells[n], order[n]))[: len(_LOAD_COLOURS) - 1])
        names = [n for n in names if n in top]
    other = f"{len(cells) - len(names)} other loads"
    return {n: _LOAD_COLOURS[i] for i, n in enumerate(names)}, other


@dataclass(frozen=True)
class LoadShade:
    """A window of other load shaded on a timeline: where it starts and ends on the time axis
    (clipped to the eval's span), its colour, and the legend entry it comes under."""

    start: float
    end: float
    colour: str
    label: str


@dataclass(frozen=True)
class TimelineMarks:
    """What an eval's timeline draws, as data: its rated cells' starts, ends (ns) and rates, its
    unrated cells' ends, the loads shaded beside them (in time order), the time axis and the rate
    axis's top (before padding)."""

    axis: TimeAxis
    t0_ns: int
    t1_ns: int
    starts_ns: Any
    ends_ns: Any
    rates: Any
    unrated_ends_ns: Any
    loads: list[LoadShade]
    top: float


def timeline_marks(result: NeighbourReport) -> TimelineMarks:
    """`timeline_figure`'s inputs from the report's cells and windows: numpy columns of the cells
    (one pass over them), and the touched windows' shades in time order."""
    np = _numpy()
    cells = result.cells
    n = len(cells)
    starts = np.fromiter((c.start_unix_ns for c in cells), dtype=np.int64, count=n)
    ends = np.fromiter((c.end_unix_ns for c in cells), dtype=np.int64, count=n)
    rates = np.fromiter(
        (np.nan if c.decode_rate is None else c.decode_rate for c in cells), dtype=np.float64, count=n
    )
    t0 = int(starts.min()) if n else 0
    t1 = int(ends.max()) if n else t0
    axis = time_axis(t0, t1)
    rated = ~np.isnan(rates)
    top = max(float(rates[rated].max()) if rated.any() else 0.0, 0.0, result.baseline.p90 or 0.0)
    touched = windows_touched(result)
    colours, other = _load_colours(touched)
    loads = [
        LoadShade(
            start=axis.at(max(window.start_unix_ns, t0)),
            end=axis.at(min(window.end_unix_ns, t1)),
            colour=colours.get(window.name, _OTHER_LOADS),
            label=window.name if window.name in colours else other,
        )
        for window in touched
    ]
    return TimelineMarks(
        axis=axis,
        t0_ns=t0,
        t1_ns=t1,
        starts_ns=starts[rated],
        ends_ns=ends[rated],
        rates=rates[rated],
        unrated_ends_ns=ends[~rated],
        loads=loads,
        top=top,
    )


def _shade(ax: Any, loads: Sequence[LoadShade]) -> list[Any]:
    """Every load's window, full height, as one collection in time order (a patch each cost a
    year of windows seconds to add and to draw; in time order, overlapping windows blend as
    they did as patches); returns a legend entry per label, in order of first appearance."""
    if not loads:
        return []
    from matplotlib.collections import PolyCollection
    from matplotlib.patches import Patch

    verts = [((w.start, 0.0), (w.start, 1.0), (w.end, 1.0), (w.end, 0.0)) for w in loads]
    colours = [w.colour for w in loads]
    shades = PolyCollection(
        verts,
        facecolors=colours,
        edgecolors=colours,
        alpha=_SHADE_ALPHA,
        transform=ax.get_xaxis_transform(),
        label="_nolegend_",
    )
    ax.add_collection(shades, autolim=False)
    entries: dict[str, str] = {}
    for w in loads:
        entries.setdefault(w.label, w.colour)
    return [Patch(color=colour, alpha=_SHADE_ALPHA, label=label) for label, colour in entries.items()]


_SHADE_ALPHA = 0.13


def _numpy() -> Any:
    """numpy (matplotlib's own dependency), untyped: reached through Any."""
    return importlib.import_module("numpy")


def plot_concurrency(report: ConcurrencyReport, *, density_above: int = DENSITY_ABOVE) -> bytes:
    """`concurrency_figure` as PNG bytes."""
    return _png(concurrency_figure(report, density_above=density_above))


def concurrency_points(report: ConcurrencyReport) -> dict[str, tuple[Any, Any]]:
    """`concurrency_figure`'s inputs: per engine with any, its cells' time-weighted in-flight
    counts and decode rates (numpy columns, in the report's order), of the cells with both
    (neither None nor 0)."""
    np = _numpy()
    points = {}
    for engine in report.engines:
        n = len(engine.cells)
        xs = np.fromiter((c.in_flight or 0.0 for c in engine.cells), dtype=np.float64, count=n)
        ys = np.fromiter((c.decode_rate or 0.0 for c in engine.cells), dtype=np.float64, count=n)
        both = (xs != 0) & (ys != 0)
        if both.any():
            points[engine.engine] = (xs[both], ys[both])
    return points


def concurrency_figure(report: ConcurrencyReport, *, density_above: int = DENSITY_ABOVE) -> Any:
    """Per-cell decode rate against time-weighted cells in flight, one colour per engine. More
    cells than ``density_above`` in all: one panel per engine, each its cells' density."""
    plt = _pyplot()
    points = concurrency_points(report)
    top = max((float(ys.max()) for _, ys in points.values()), default=0.0)
    if sum(len(xs) for xs, _ in points.values()) > density_above:
        fig, axes = plt.subplots(
            len(points), 1, sharex=True, sharey=True, figsize=(7.5, 1.2 + 2.8 * len(points)), squeeze=False
        )
        for ax, (engine, pts) in zip(axes[:, 0], points.items(), strict=True):
            n = len(pts[0])
            _density(ax, pts[0], pts[1], label=f"{engine} (n={n})")
            ax.set_title(f"{engine}: {n:,} cells", fontsize=9, loc="left")
            ax.set_ylabel("per-cell decode tok/s")
        axes[-1, 0].set_xlabel("cells in flight on the engine (time-weighted)")
        ax = axes[0, 0]
        ax.set_xlim(left=0)
        _pad_y(ax, top)
        fig.suptitle("Per-cell rate against concurrency", fontsize=11)
        return fig
    fig, ax = plt.subplots(figsize=(7.5, 4))
    for engine, (xs, ys) in points.items():
        ax.scatter(xs, ys, s=14, alpha=0.7, label=f"{engine} (n={len(xs)})")
    ax.set_xlabel("cells in flight on the engine (time-weighted)")
    ax.set_ylabel("per-cell decode tok/s")
    ax.set_xlim(left=0)
    _pad_y(ax, top)
    ax.set_title("Per-cell rate against concurrency", fontsize=11)
    _legend_outside(ax)
    return fig


_VERDICT_COLOURS = {"tracks load": _BASELINE, "saturates": "#ff7f0e", "not load": _TIMEOUT}


def plot_instrument(verdict: InstrumentVerdict) -> bytes:
    """`instrument_figure` as PNG bytes."""
    return _png(instrument_figure(verdict))


def instrument_figure(verdict: InstrumentVerdict) -> Any:
    """One gauge's value per load interval against the interval's throughput, small, with its
    verdict in the title: a flat row of markers is a gauge that does not measure load."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(4.2, 2.6))
    points = sorted((r.throughput, r.value) for r in verdict.readings)
    colour = _VERDICT_COLOURS.get(verdict.verdict, "#555")
    ax.plot([p[0] for p in points], [p[1] for p in points], "o-", color=colour, markersize=4,
            label=f"{verdict.verdict} (n={len(points)} intervals)")  # fmt: skip
    if verdict.knee_throughput is not None:
        ax.axvline(verdict.knee_throughput, color="#555", linestyle=":", linewidth=1, label="knee")
    ax.set_xlabel("throughput tok/s")
    ax.set_ylabel(verdict.unit or "value")
    ax.set_xlim(left=0)
    _pad_y(ax, max((p[1] for p in points), default=0.0))
    ax.set_title(verdict.instrument, fontsize=9)
    ax.tick_params(labelsize=7)
    _legend_outside(ax)
    return fig


def instrument_png_name(index: int, verdict: InstrumentVerdict) -> str:
    """The file name of the report's ``index``-th gauge plot."""
    return f"instrument-{index + 1}-{_slug(verdict.instrument)}.png"


_PHASE_COLOURS = {
    "admission": "#7f7f7f", "queue": "#9467bd", "prefill": "#ff7f0e", "first_token": "#e9a23b",
    "decode": _PER_STREAM, "unsplit": "#17becf", "other": "#c7c7c7", "scoring": "#bcbd22",
}  # fmt: skip
BUDGET_BARS = 40
"""The longest cells an eval's budget plot draws (one bar each); the title says how many it left out."""


def plot_budget(eval_name: str, budgets: Sequence[CellBudget], *, time_scale: float | None = None) -> bytes:
    """`budget_figure` as PNG bytes."""
    return _png(budget_figure(eval_name, budgets, time_scale=time_scale))


def budget_figure(eval_name: str, budgets: Sequence[CellBudget], *, time_scale: float | None = None) -> Any:
    """One bar per cell of the eval, longest at the top, split into its phases: where a slow
    cell's time went (waiting for prefill, decoding, held by the governor) reads at a glance."""
    from ..analysis.budget import BUDGET_PHASES

    plt = _pyplot()
    shown = sorted(budgets, key=lambda b: b.wall_s)[-BUDGET_BARS:]
    fig, ax = plt.subplots(figsize=(8, 1.2 + 0.22 * len(shown)))
    left = [0.0] * len(shown)
    for phase in BUDGET_PHASES:
        widths = [b.seconds.get(phase, 0.0) for b in shown]
        if any(widths):
            ax.barh(
                range(len(shown)),
                widths,
                left=left,
                color=_PHASE_COLOURS[phase],
                label=phase.replace("_", " "),
            )
            left = [x + w for x, w in zip(left, widths, strict=True)]
    ax.set_yticks(range(len(shown)), [b.cell_id for b in shown], fontsize=7)
    ax.set_xlabel("seconds" + _model_time(time_scale))
    more = f" (the {len(shown)} longest of {len(budgets)})" if len(budgets) > len(shown) else ""
    ax.set_title(f"{eval_name}: where each cell's time went{more}", fontsize=9)
    _legend_outside(ax)
    return fig


def budget_png_name(eval_name: str) -> str:
    """The file name of an eval's budget plot."""
    return f"budget-{_slug(eval_name)}.png"


def render_images(content: ReportContent) -> dict[str, bytes]:
    """Every plot the content allows, by file name, in the page's order."""
    images: dict[str, bytes] = {}
    for i, curve in enumerate(content.curves):
        if plottable(curve):
            images[curve_png_name(i, curve)] = plot_curve(curve)
    if content.concurrency is not None and any(e.cells for e in content.concurrency.engines):
        images["concurrency.png"] = plot_concurrency(content.concurrency)
    for result in content.neighbours:
        if result.cells:
            scale = content.time_scales.get(result.eval_name)
            images[timeline_png_name(result)] = plot_timeline(result, time_scale=scale)
        if windows_touched(result) and result.baseline.median is not None:
            images[neighbour_png_name(result)] = plot_neighbour(result)
    if content.instruments is not None:
        for i, verdict in enumerate(content.instruments.instruments):
            if len(verdict.readings) >= 2:
                images[instrument_png_name(i, verdict)] = plot_instrument(verdict)
    for e in content.eval_budgets:
        mine = [b for b in content.budgets if b.eval_name == e.eval_name]
        if mine:
            scale = content.time_scales.get(e.eval_name)
            images[budget_png_name(e.eval_name)] = plot_budget(e.eval_name, mine, time_scale=scale)
    return images


def _slug(text: str) -> str:
    return "".join(ch if ch.isalnum() else "-" for ch in text.lower()).strip("-") or "x"


def curve_png_name(index: int, curve: RateCurve) -> str:
    """The file name of the report's ``index``-th curve plot."""
    return f"curve-{index + 1}-{_slug(curve.engine)}.png"


def _eval_slug(result: NeighbourReport) -> str:
    workers = "" if result.workers is None else f"-{result.workers}-workers"
    return f"{_slug(result.eval_name)}{workers}"


def neighbour_png_name(result: NeighbourReport) -> str:
    """The file name of an eval's neighbour-cost plot."""
    return f"neighbour-{_eval_slug(result)}.png"


def timeline_png_name(result: NeighbourReport) -> str:
    """The file name of an eval's timeline plot."""
    return f"timeline-{_eval_slug(result)}.png"
