"""The report's plots as PNG bytes (the ``plot`` extra: matplotlib, imported on first use)."""

from __future__ import annotations

import io
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._exceptions import ConfigError
from ..analysis.neighbour import windows_touched

if TYPE_CHECKING:
    from ..analysis.concurrency import ConcurrencyReport
    from ..analysis.curve import RateCurve
    from ..analysis.neighbour import NeighbourReport
    from ..probe.results import ProbeReport
    from .content import ReportContent

__all__ = [
    "curve_png_name",
    "neighbour_png_name",
    "plot_concurrency",
    "plot_curve",
    "plot_neighbour",
    "plot_probe",
    "render_images",
]


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError as exc:
        raise ConfigError("plots need the plot extra: pip install 'spark-otel[plot]'") from exc
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _png(fig: Any) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    _pyplot().close(fig)
    return buf.getvalue()


def plot_curve(curve: RateCurve, *, title: str | None = None) -> bytes:
    """Per-stream (with p10-p90) and aggregate tok/s against streams, as PNG bytes."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    xs = [p.streams for p in curve.points]
    per = [p.per_stream_rate for p in curve.points]
    ax.plot(xs, per, "o-", color="#1f77b4", label="per-stream tok/s (median)")
    lows = [p.p10 if p.p10 is not None else p.per_stream_rate for p in curve.points]
    highs = [p.p90 if p.p90 is not None else p.per_stream_rate for p in curve.points]
    ax.fill_between(xs, lows, highs, color="#1f77b4", alpha=0.15, label="p10-p90")
    ax.set_xscale("log", base=2)
    ax.set_xticks(xs, [str(x) for x in xs])
    ax.set_xlabel("concurrent streams")
    ax.set_ylabel("per-stream tok/s", color="#1f77b4")
    ax.set_ylim(bottom=0)
    ax2 = ax.twinx()
    ax2.plot(xs, [p.aggregate_rate for p in curve.points], "s--", color="#d62728", label="aggregate tok/s")
    ax2.set_ylabel("aggregate tok/s", color="#d62728")
    ax2.set_ylim(bottom=0)
    handles = ax.get_legend_handles_labels()[0] + ax2.get_legend_handles_labels()[0]
    ax.legend(handles, [str(h.get_label()) for h in handles], loc="upper center", fontsize=8)
    ax.set_title(title or f"{curve.engine}: concurrency curve ({curve.source})")
    return _png(fig)


def plot_probe(report: ProbeReport, path: Path | None = None) -> bytes:
    """The probe's curve as PNG bytes; also written to ``path`` when given."""
    meta = report.metadata
    png = plot_curve(
        report.curve, title=f"{meta.engine} ({meta.model}): {report.settings.tokens} tokens/stream"
    )
    if path is not None:
        path.write_bytes(png)
    return png


def plot_neighbour(result: NeighbourReport) -> bytes:
    """Per-window median rates (with their range) against the baseline band."""
    plt = _pyplot()
    touched = windows_touched(result)
    fig, ax = plt.subplots(figsize=(8, 0.6 * max(len(touched), 1) + 1.8))
    base = result.baseline
    if base.p10 is not None and base.p90 is not None:
        ax.axvspan(base.p10, base.p90, color="#2ca02c", alpha=0.15, label="baseline p10-p90")
    if base.median is not None:
        ax.axvline(base.median, color="#2ca02c", label=f"baseline median {base.median:.2f}")
    for y, w in enumerate(touched):
        if w.rate.median is None:
            ax.plot([0], [y], "x", color="#b3261e")
            continue
        lo, hi = w.min_rate or w.rate.median, w.max_rate or w.rate.median
        ax.plot([lo, hi], [y, y], color="#555", linewidth=1)
        ax.plot([w.rate.median], [y], "o", color="#d62728")
        if w.cost is not None:
            ax.annotate(f"cost {w.cost:.0%}", (w.rate.median, y), textcoords="offset points", xytext=(0, 7),
                        ha="center", fontsize=8)  # fmt: skip
    ax.set_yticks(range(len(touched)), [w.name for w in touched])
    ax.invert_yaxis()
    ax.set_xlim(left=0)
    ax.set_xlabel(f"{result.label}: per-cell decode tok/s")
    ax.set_title(f"What other load cost {result.label}")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="lower left", fontsize=8)
    return _png(fig)


def plot_concurrency(report: ConcurrencyReport) -> bytes:
    """Per-cell decode rate against time-weighted cells in flight, one colour per engine."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    for engine in report.engines:
        pts = [(c.in_flight, c.decode_rate) for c in engine.cells if c.in_flight and c.decode_rate]
        if pts:
            ax.scatter([p[0] for p in pts], [p[1] for p in pts], s=14, alpha=0.7, label=engine.engine)
    ax.set_xlabel("cells in flight on the engine (time-weighted)")
    ax.set_ylabel("per-cell decode tok/s")
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=8)
    ax.set_title("Per-cell rate against concurrency")
    return _png(fig)


def render_images(content: ReportContent) -> dict[str, bytes]:
    """Every plot of the report, by file name."""
    images: dict[str, bytes] = {}
    for i, curve in enumerate(content.curves):
        images[curve_png_name(i, curve)] = plot_curve(curve)
    if content.concurrency is not None and any(e.cells for e in content.concurrency.engines):
        images["concurrency.png"] = plot_concurrency(content.concurrency)
    for result in content.neighbours:
        if windows_touched(result):
            images[neighbour_png_name(result)] = plot_neighbour(result)
    return images


def _slug(text: str) -> str:
    return "".join(ch if ch.isalnum() else "-" for ch in text.lower()).strip("-") or "x"


def curve_png_name(index: int, curve: RateCurve) -> str:
    """The file name of the report's ``index``-th curve plot."""
    return f"curve-{index + 1}-{_slug(curve.engine)}.png"


def neighbour_png_name(result: NeighbourReport) -> str:
    """The file name of an eval's neighbour-cost plot."""
    workers = "" if result.workers is None else f"-{result.workers}-workers"
    return f"neighbour-{_slug(result.eval_name)}{workers}.png"
