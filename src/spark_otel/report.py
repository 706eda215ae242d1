"""The HTML report: concurrency curves, neighbour cost, deadline outcomes and the advisor's rules.

Reporting is separate from measuring: `inputs_from_store` and `inputs_from_otlp_json` turn
recorded data (from the embedded store, an OTLP JSON export or backfilled records) into
`ReportInputs`; `build_report` runs the analyses (`overview_from_inputs`, the very call
`spark-otel advise` makes, so both give the same rules) into a `ReportContent`; `render_html`
formats it into one self-contained page (inline CSS, plots embedded as base64 PNG data URIs)
and `write_report` writes the page and the same PNGs as separate files. Plotting needs the
``plot`` extra (matplotlib), imported on first use.
"""

from __future__ import annotations

import base64
import html
import io
import logging
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from string import Template
from typing import TYPE_CHECKING, Any

from . import _semconv as sc
from ._exceptions import ConfigError, InputError
from ._version import __version__
from .analysis.neighbour import windows_touched
from .analysis.rates import ceiling_hit
from .model import NS_PER_S, Cell, CellStatus, LoadWindow

if TYPE_CHECKING:
    from .analysis.advisor import Advice, AdvisorConfig
    from .analysis.concurrency import ConcurrencyReport
    from .analysis.curve import RateCurve
    from .analysis.neighbour import NeighbourReport
    from .analysis.overview import Overview
    from .probe_results import ProbeReport
    from .store import Store

__all__ = [
    "DeadlineOutcome",
    "ReportContent",
    "ReportInputs",
    "build_report",
    "deadline_outcomes",
    "inputs_from_store",
    "overview_from_inputs",
    "plot_probe",
    "render_html",
    "write_report",
]

_logger = logging.getLogger(__name__)


@dataclass
class ReportInputs:
    """Recorded data a report is built from, wherever it came from."""

    source: str
    cells: list[Cell] = field(default_factory=list)
    windows: list[LoadWindow] = field(default_factory=list)
    probes: list[ProbeReport] = field(default_factory=list)
    curves: list[RateCurve] = field(default_factory=list)
    """Probe curves, oldest first; when empty, the ``probes``' curves."""
    gpu_utilization: list[float] = field(default_factory=list)
    token_rates: list[float] = field(default_factory=list)


@dataclass(frozen=True)
class DeadlineOutcome:
    """How the cells of one eval at one worker count ended."""

    eval_name: str
    workers: int | None
    cells: int
    statuses: dict[str, int]
    ceiling_hits: int
    salvaged_findings: int
    degraded: int


@dataclass
class ReportContent:
    """Everything the page shows; each part is None or empty where the data does not allow it."""

    source: str
    eval_name: str | None
    n_cells: int
    n_windows: int
    probes: list[ProbeReport]
    curves: list[RateCurve]
    concurrency: ConcurrencyReport | None
    neighbours: list[NeighbourReport]
    outcomes: list[DeadlineOutcome]
    advice: Advice | None
    notes: list[str] = field(default_factory=list)


# -- gathering (I/O) ---------------------------------------------------------------------------------
def inputs_from_store(store: Store, *, source: str | None = None, probe_tables: bool = True) -> ReportInputs:
    """Cells, load windows, probe documents and GPU and token-rate samples from the embedded store.

    Curves are read from every probe document, so a document that is not a whole probe report
    (no table to show) still lends its curve. ``probe_tables=False`` reads the curves only, for
    `spark-otel advise`, which shows no probe table and so has none to skip or warn about."""
    from .analysis.curve import curves_from_documents
    from .probe_results import load_probe_report

    documents = store.documents("probe")
    curves, problems = curves_from_documents(documents)
    for problem in problems:
        _logger.warning("skipping %s", problem)
    probes = []
    for doc in documents if probe_tables else ():
        try:
            probes.append(load_probe_report(doc["body"], where=f"probe document {doc['name']!r}"))
        except InputError as exc:
            _logger.warning("report: skipping %s", exc)
    return ReportInputs(
        source=source or str(store.path),
        cells=store.cells(),
        windows=store.windows(),
        probes=probes,
        curves=curves,
        gpu_utilization=[x.value for x in store.samples(sc.GPU_UTILIZATION)],
        token_rates=[x.value for x in store.samples(sc.ENGINE_GENERATION_TOKEN_RATE)],
    )


def inputs_from_otlp_json(paths: Sequence[str | Path]) -> ReportInputs:
    from .otlp_json import read_otlp_json

    records = read_otlp_json(paths)
    return ReportInputs(source=", ".join(str(p) for p in paths), cells=records.cells, windows=records.windows)


# -- analysis (pure) ---------------------------------------------------------------------------------
def deadline_outcomes(cells: Iterable[Cell]) -> list[DeadlineOutcome]:
    """Status counts, ceiling hits, salvaged findings and degraded cells per eval and worker count."""
    groups: dict[tuple[str, int | None], list[Cell]] = defaultdict(list)
    for c in cells:
        groups[(c.eval_name, c.workers)].append(c)
    out = []
    for (eval_name, workers), members in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1] or 0)):
        statuses = Counter(c.status.value for c in members)
        out.append(
            DeadlineOutcome(
                eval_name=eval_name,
                workers=workers,
                cells=len(members),
                statuses={s.value: statuses.get(s.value, 0) for s in CellStatus},
                ceiling_hits=sum(ceiling_hit(c) for c in members),
                salvaged_findings=sum(c.salvaged_findings for c in members),
                degraded=sum(c.degraded for c in members),
            )
        )
    return out


def overview_from_inputs(
    inputs: ReportInputs,
    *,
    config: AdvisorConfig | None = None,
    eval_name: str | None = None,
    engine: str | None = None,
) -> Overview:
    """`spark_otel.analysis.overview` of recorded inputs: the one call `spark-otel advise` and
    `spark-otel report` both make, so the same records give the same rules. An unknown
    ``eval_name`` is an `InputError` naming the inputs' source."""
    from .analysis.overview import overview

    try:
        return overview(
            inputs.cells,
            inputs.windows,
            inputs.curves or [p.curve for p in inputs.probes],
            config=config,
            gpu_utilization=inputs.gpu_utilization,
            token_rates=inputs.token_rates or None,
            eval_name=eval_name,
            engine=engine,
        )
    except InputError as exc:
        raise InputError(f"{inputs.source}: {exc}") from exc


def build_report(
    inputs: ReportInputs, *, eval_name: str | None = None, config: AdvisorConfig | None = None
) -> ReportContent:
    """Run every analysis the inputs allow, as `spark-otel advise` does (``config`` holds the
    ceiling and threshold). Raises `InputError` when there is nothing to report."""
    if not inputs.cells and not inputs.probes and not inputs.windows:
        raise InputError(f"{inputs.source}: no cells, load windows or probe runs to report on")
    found = overview_from_inputs(inputs, config=config, eval_name=eval_name)
    outcome_cells = [c for c in inputs.cells if eval_name is None or c.eval_name == eval_name]
    return ReportContent(
        source=inputs.source,
        eval_name=eval_name,
        n_cells=len(inputs.cells),
        n_windows=len(inputs.windows),
        probes=inputs.probes,
        curves=found.curves,
        concurrency=found.concurrency,
        neighbours=found.neighbours,
        outcomes=deadline_outcomes(outcome_cells),
        advice=found.advice,
        notes=found.notes,
    )


# -- plots ---------------------------------------------------------------------------------------------
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
        images[f"curve-{i + 1}-{_slug(curve.engine)}.png"] = plot_curve(curve)
    if content.concurrency is not None and any(e.cells for e in content.concurrency.engines):
        images["concurrency.png"] = plot_concurrency(content.concurrency)
    for result in content.neighbours:
        if windows_touched(result):
            images[_neighbour_png(result)] = plot_neighbour(result)
    return images


def _slug(text: str) -> str:
    return "".join(ch if ch.isalnum() else "-" for ch in text.lower()).strip("-") or "x"


def _neighbour_png(result: NeighbourReport) -> str:
    workers = "" if result.workers is None else f"-{result.workers}-workers"
    return f"neighbour-{_slug(result.eval_name)}{workers}.png"


# -- HTML ------------------------------------------------------------------------------------------------
def _f(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def _table(columns: Sequence[str], rows: Iterable[Sequence[Any]], warn_col: int | None = None) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = []
    for row in rows:
        cells = []
        for i, v in enumerate(row):
            text = str(v)  # a count of 0 arrives as an int: compare what the cell shows
            warn = warn_col is not None and i == warn_col and text not in ("", "-", "0")
            cls = ' class="warn"' if warn else ""
            cells.append(f"<td{cls}>{html.escape(text)}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _img(name: str, images: dict[str, bytes], alt: str) -> str:
    png = images.get(name)
    if png is None:
        return ""
    data = base64.b64encode(png).decode("ascii")
    return f'<img src="data:image/png;base64,{data}" alt="{html.escape(alt)}" data-file="{name}">'


def _probe_section(probe: ProbeReport) -> str:
    meta = probe.metadata
    when = datetime.fromtimestamp(meta.created_unix_ns / NS_PER_S, UTC).strftime("%Y-%m-%d %H:%M UTC")
    rows = [
        [
            lv.streams,
            _f(lv.wall_s, 1),
            _f(lv.per_stream_median),
            f"{_f(lv.per_stream_p10)} to {_f(lv.per_stream_p90)}",
            _f(lv.probe_aggregate_rate, 1),
            _f(lv.engine_aggregate_rate, 1),
            _f(lv.engine_probe_ratio),
            _f(lv.power_w, 1),
            _f(lv.ttft_s_median),
            lv.token_mismatches + lv.errors,
        ]
        for lv in probe.levels
    ]
    warnings = "".join(f"<li>{html.escape(w)}</li>" for w in probe.warnings)
    return (
        f"<h3>Probe of {html.escape(meta.engine)} ({html.escape(meta.model)}), {when}</h3>"
        f'<p class="note">{probe.settings.tokens} tokens per stream, {probe.settings.mode} mode, '
        f"{probe.settings.repeats} round(s) per level; {html.escape(meta.engine_url)}.</p>"
        + _table(
            [
                "streams",
                "wall s",
                "per-stream tok/s (median)",
                "p10 to p90",
                "probe aggregate",
                "engine aggregate",
                "engine/probe",
                "power W",
                "TTFT s",
                "streams off pin",
            ],
            rows,
            warn_col=9,
        )
        + (f'<ul class="warnings">{warnings}</ul>' if warnings else "")
    )


def _concurrency_section(content: ReportContent, images: dict[str, bytes]) -> str:
    parts = ["<h2>Concurrency: what more streams buy</h2>"]
    for probe in content.probes:
        parts.append(_probe_section(probe))
    for i, curve in enumerate(content.curves):
        parts.append(_img(f"curve-{i + 1}-{_slug(curve.engine)}.png", images, f"{curve.engine} curve"))
    conc = content.concurrency
    if conc is not None:
        for engine in conc.engines:
            parts.append(f"<h3>Recorded cells on {html.escape(engine.engine)}</h3>")
            parts.append(
                _table(
                    ["cells in flight", "cells", "median tok/s", "p10", "p90", "ceiling hits"],
                    [
                        [
                            lv.level,
                            lv.n_cells,
                            _f(lv.rate.median),
                            _f(lv.rate.p10),
                            _f(lv.rate.p90),
                            lv.ceiling_hits,
                        ]
                        for lv in engine.levels
                    ],
                    warn_col=5,
                )
            )
            if engine.speedups:
                parts.append(
                    _table(
                        ["eval", "workers", "wall s", "serial wall s", "speedup", "per-cell cost"],
                        [
                            [
                                s.eval_name,
                                f"{s.base_workers} -> {s.workers}",
                                _f(s.wall_s, 0),
                                _f(s.base_wall_s, 0),
                                f"{s.speedup:.2f}x",
                                "-" if s.per_cell_cost is None else f"{s.per_cell_cost:.0%}",
                            ]
                            for s in engine.speedups
                        ],
                    )
                )
        parts.append(_img("concurrency.png", images, "per-cell rate against cells in flight"))
    if len(parts) == 1:
        parts.append('<p class="empty">No probe runs or cells recorded.</p>')
    return "".join(parts)


def _neighbour_section(content: ReportContent, images: dict[str, bytes]) -> str:
    parts = ["<h2>Neighbour cost: what other load cost an eval</h2>"]
    if not content.neighbours:
        parts.append('<p class="empty">No eval with enough cells to compare against a baseline.</p>')
    for result in content.neighbours:
        b = result.baseline
        parts.append(
            f"<h3>{html.escape(result.label)}</h3>"
            f"<p>Baseline over {b.n} cells overlapping no other load: median {_f(b.median)} tok/s, "
            f"p10 {_f(b.p10)}, p90 {_f(b.p90)}. {result.timeouts} of {result.n_cells} cells timed out "
            f"and {result.failures} failed (listed, kept out of rates).</p>"
        )
        rows = [
            [
                w.name,
                w.kind,
                w.engine or "-",
                "same" if w.same_engine else ("other" if w.same_engine is False else "-"),
                w.n_cells,
                w.timeouts,
                w.failures,
                _f(w.rate.median),
                f"{_f(w.min_rate)} to {_f(w.max_rate)}",
                "-" if w.cost is None else f"{w.cost:.0%}",
            ]
            for w in windows_touched(result)
        ]
        parts.append(
            _table(
                [
                    "load elsewhere on the box",
                    "kind",
                    "engine",
                    "engine vs eval",
                    "cells",
                    "timeouts",
                    "failed",
                    "median tok/s",
                    "range",
                    "cost",
                ],
                rows,
                warn_col=5,
            )
            if rows
            else '<p class="empty">No cell of this eval overlapped another load.</p>'
        )
        parts.append(_img(_neighbour_png(result), images, "neighbour cost"))
    return "".join(parts)


def _outcomes_section(content: ReportContent) -> str:
    parts = ["<h2>Deadline outcomes</h2>"]
    if not content.outcomes:
        parts.append('<p class="empty">No cells recorded.</p>')
        return "".join(parts)
    statuses = [s.value for s in CellStatus]
    rows = [
        [o.eval_name, "-" if o.workers is None else o.workers, o.cells]
        + [o.statuses[s] for s in statuses]
        + [o.ceiling_hits, o.salvaged_findings, o.degraded]
        for o in content.outcomes
    ]
    parts.append(
        _table(
            ["eval", "workers", "cells", *statuses, "ceiling hits", "salvaged findings", "degraded"],
            rows,
            warn_col=7,
        )
    )
    return "".join(parts)


def _advice_section(content: ReportContent) -> str:
    parts = ["<h2>Queue rules</h2>"]
    if content.advice is not None:
        config = content.advice.config
        parts.append(
            f'<p class="note">Under a {config.ceiling_s:,.0f} s per-cell ceiling; cross-engine loads '
            f"flagged past a {config.threshold:.0%} neighbour cost (as spark-otel advise).</p>"
        )
    rules = _advice_rules(content.advice)
    if not rules:
        parts.append(
            '<p class="empty">The advisor had no measured curve or neighbour cost to reason from.</p>'
        )
    else:
        parts.append(_table(["queue rule", "evidence"], rules))
    return "".join(parts)


def _advice_rules(advice: Advice | None) -> list[list[str]]:
    return [] if advice is None else [[r.rule, r.evidence] for r in advice.rules]


def render_html(content: ReportContent, images: dict[str, bytes]) -> str:
    """The self-contained page: inline CSS, every image as a data URI."""
    template = Template(resources.files("spark_otel").joinpath("report_template.html").read_text("utf-8"))
    scope = f"eval {content.eval_name}" if content.eval_name else "all evals"
    subtitle = (
        f"From {content.source}: {content.n_cells} cells, {content.n_windows} load windows, "
        f"{len(content.probes)} probe runs ({scope}); "
        f"generated {datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC')}."
    )
    notes = "".join(f"<li>{html.escape(n)}</li>" for n in content.notes)
    body = "".join(
        [
            _concurrency_section(content, images),
            _neighbour_section(content, images),
            _outcomes_section(content),
            _advice_section(content),
            f'<ul class="warnings">{notes}</ul>' if notes else "",
        ]
    )
    return template.substitute(
        title=html.escape("spark-otel report" + (f": {content.eval_name}" if content.eval_name else "")),
        subtitle=html.escape(subtitle),
        version=__version__,
        body=body,
    )


def write_report(content: ReportContent, out_dir: str | Path) -> Path:
    """Write ``report.html`` and every plot as a PNG file into ``out_dir``; returns the page's path."""
    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"{out}: cannot create the report directory: {exc}") from exc
    images = render_images(content)
    for name, png in images.items():
        (out / name).write_bytes(png)
    page = out / "report.html"
    page.write_text(render_html(content, images), encoding="utf-8")
    return page
