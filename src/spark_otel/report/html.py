"""The self-contained HTML page: inline CSS, plots embedded as base64 PNG data URIs."""

from __future__ import annotations

import base64
import html
import re
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from string import Template
from typing import TYPE_CHECKING, Any

from .._clock import NS_PER_S, real_wall_ns
from .._exceptions import InputError
from .._files import write_output
from .._version import __version__
from ..analysis.advisor import engine_url, probe_command
from ..analysis.neighbour import no_baseline_reason, windows_touched
from ..model import CellStatus
from ..views.curves import describe_curve
from ..views.gauges import evidence
from ..views.requests import requests_as_cells_line
from ..views.rules import rule_text, rules_table
from ..views.tables import (
    GLOSSARY,
    energy_lines,
    energy_table,
    fmt_number,
    level_table,
    model_time,
    probe_energy_line,
    probe_table,
    seconds,
)
from .plots import (
    curve_png_name,
    instrument_png_name,
    neighbour_png_name,
    plottable,
    render_images,
    timeline_png_name,
)

if TYPE_CHECKING:
    from ..analysis.advisor import Advice
    from ..records.probe_report import ProbeReport
    from .content import ReportContent

__all__ = ["render_html", "write_report"]


_f = fmt_number


class _Glossary:
    """The terms of `GLOSSARY` a page's tables use, each explained once, under the first table
    that shows it (as the command line does)."""

    def __init__(self) -> None:
        self._explained: set[str] = set()

    def notes(self, columns: Sequence[str], extra: dict[str, str] | None = None) -> str:
        terms = {**GLOSSARY, **(extra or {})}
        lines = []
        for column in columns:
            if column in terms and column not in self._explained:
                self._explained.add(column)
                lines.append(f"<li><b>{html.escape(column)}</b>: {html.escape(terms[column])}</li>")
        return f'<ul class="terms">{"".join(lines)}</ul>' if lines else ""


_NUMBER = re.compile(r"^[-+]?\d[\d,]*(\.\d+)?( ?(%|x|s|W|tok/s|!)| #\d+| to [-+]?\d[\d,]*(\.\d+)?)?$")


def _numeric(column: list[str]) -> bool:
    """A column of numbers (or dashes) reads right-aligned; any text makes it left-aligned."""
    shown = [v for v in column if v not in ("", "-")]
    return bool(shown) and all(_NUMBER.match(v) for v in shown)


def _table(columns: Sequence[str], rows: Iterable[Sequence[Any]], warn_col: int | None = None) -> str:
    texts = [[str(v) for v in row] for row in rows]  # a count of 0 arrives as an int: compare what shows
    numeric = [_numeric([row[i] for row in texts]) for i in range(len(columns))]
    num = ' class="num"'
    head = "".join(f"<th{num if numeric[i] else ''}>{html.escape(c)}</th>" for i, c in enumerate(columns))
    body = []
    for row in texts:
        cells = []
        for i, text in enumerate(row):
            classes = ["num"] if numeric[i] else []
            if warn_col is not None and i == warn_col and text not in ("", "-", "0"):
                classes.append("warn")
            cls = f' class="{" ".join(classes)}"' if classes else ""
            cells.append(f"<td{cls}>{html.escape(text)}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _img(name: str, images: dict[str, bytes], alt: str) -> str:
    png = images.get(name)
    if png is None:
        return ""
    data = base64.b64encode(png).decode("ascii")
    return f'<img src="data:image/png;base64,{data}" alt="{html.escape(alt)}" data-file="{name}">'


def _probe_section(probe: ProbeReport, glossary: _Glossary) -> str:
    meta = probe.metadata
    when = datetime.fromtimestamp(meta.created_unix_ns / NS_PER_S, UTC).strftime("%Y-%m-%d %H:%M UTC")
    columns, rows = probe_table(probe)
    warnings = "".join(f"<li>{html.escape(w)}</li>" for w in probe.warnings)
    return (
        f"<h3>Probe of {html.escape(meta.engine)} ({html.escape(meta.model)}), {when}"
        f"{html.escape(model_time([meta.time_scale]))}</h3>"
        f'<p class="note">{probe.settings.tokens} tokens per stream, {probe.settings.mode} mode, '
        f"{probe.settings.repeats} round(s) per level; {html.escape(meta.engine_url)}.</p>"
        + _table(columns, rows, warn_col=columns.index("streams off pin"))
        + glossary.notes(columns)
        + f'<p class="note">{html.escape(probe_energy_line(probe))}</p>'
        + (f'<ul class="warnings">{warnings}</ul>' if warnings else "")
    )


def _concurrency_section(content: ReportContent, images: dict[str, bytes], glossary: _Glossary) -> str:
    parts = ["<h2>Concurrency: what more streams buy</h2>"]
    for probe in content.probes:
        parts.append(_probe_section(probe, glossary))
    for i, curve in enumerate(content.curves):
        if plottable(curve):
            parts.append(_img(curve_png_name(i, curve), images, f"{curve.engine} curve"))
            what = html.escape(f"Curve of {curve.engine}: {describe_curve(curve)}.")
            parts.append(f'<p class="note">{what}</p>')
        else:
            command = probe_command(curve.engine, engine_url(curve.engine, content.engine_urls), (1, 2, 4, 8))
            parts.append(
                f'<p class="empty">{html.escape(curve.engine)}: one level measured '
                f"({html.escape(describe_curve(curve))}), so no curve is drawn; measure more levels "
                f"with <code>{html.escape(command)}</code>.</p>"
            )
    conc = content.concurrency
    if conc is not None:
        when, unit = model_time(content.scales), seconds(content.scales)
        for engine in conc.engines:
            parts.append(f"<h3>Recorded cells on {html.escape(engine.engine)}{html.escape(when)}</h3>")
            columns, rows = level_table("cells in flight", engine.levels)
            parts.append(_table(columns, rows, warn_col=columns.index("ceiling hits")))
            parts.append(glossary.notes(columns))
            if engine.speedups:
                columns = [
                    "eval",
                    "workers",
                    f"wall {unit}",
                    f"serial wall {unit}",
                    "wall speedup",
                    "per-cell cost %",
                ]
                parts.append(
                    _table(
                        columns,
                        [
                            [
                                s.eval_name,
                                f"{s.base_workers} -> {s.workers}",
                                _f(s.wall_s, 0),
                                _f(s.base_wall_s, 0),
                                f"{s.speedup:.1f}x" + ("" if s.same_cells else " (other cells)"),
                                "-" if s.per_cell_cost is None else f"{s.per_cell_cost * 100:.0f}",
                            ]
                            for s in engine.speedups
                        ],
                    )
                )
                parts.append(glossary.notes(columns))
        parts.append(_img("concurrency.png", images, "per-cell rate against cells in flight"))
        parts.append(_energy_part(content, glossary))
    if len(parts) == 1:
        parts.append('<p class="empty">No probe runs or cells recorded.</p>')
    return "".join(parts)


def _energy_part(content: ReportContent, glossary: _Glossary) -> str:
    """Each eval's joules per token and per cell, or why there are none and how to measure them."""
    from ..analysis.energy import MEASURE_GPU

    energy, parts = content.energy, []
    if energy is not None and energy.evals:
        title, columns, rows = energy_table(energy, content.scales)
        parts += [f"<h3>{html.escape(title[0].upper() + title[1:])}</h3>", _table(columns, rows)]
        parts.append(glossary.notes(columns))
    lines = energy_lines(energy, content.n_cells, MEASURE_GPU) if content.n_cells else []
    return "".join(parts) + "".join(f'<p class="note">{html.escape(line)}</p>' for line in lines)


def _instruments_section(content: ReportContent, images: dict[str, bytes]) -> str:
    """Appendix F from the records: each gauge's verdict and evidence, one plot per gauge."""
    parts = ["<h2>Instruments: which gauge measures load</h2>"]
    report = content.instruments
    if report is None:
        parts.append(
            '<p class="empty">No gauge recorded beside a measured load. Record the GPU and the engines '
            "beside a probe: <code>spark-otel receive --engine NAME=URL --gpu auto --interval 1</code> and "
            "<code>spark-otel probe --engine NAME=URL --streams 1,2,4,8,16</code>.</p>"
        )
        return "".join(parts)
    lo, hi = report.throughput_min or 0.0, report.throughput_max or 0.0
    parts.append(
        f'<p class="note">{len(report.intervals)} {html.escape(report.interval_source or "")} intervals, '
        f"{lo:,.1f} to {hi:,.1f} tok/s{html.escape(model_time(i.time_scale for i in report.intervals))}: "
        "each gauge's value per interval against the interval's throughput.</p>"
    )
    rows = [
        [
            v.instrument,
            v.verdict,
            v.n_intervals,
            "-" if v.elasticity is None else f"{v.elasticity:.2f}",
            "-" if v.rank_correlation is None else f"{v.rank_correlation:.2f}",
            evidence(v, report),
        ]
        for v in report.instruments
    ]
    parts.append(_table(["instrument", "verdict", "intervals", "elasticity", "rank corr", "evidence"], rows))
    parts.append(
        '<p class="note">elasticity: least-squares slope of the gauge on throughput, times mean throughput '
        "over mean gauge (1 moves in proportion, 0 not at all); rank corr: Spearman rank correlation.</p>"
    )
    plots = [
        _img(instrument_png_name(i, v), images, f"{v.instrument} against throughput")
        for i, v in enumerate(report.instruments)
    ]
    parts.append(f'<div class="gauges">{"".join(p for p in plots if p)}</div>')
    parts += [f'<p class="note">{html.escape(note)}</p>' for note in report.notes]
    return "".join(parts)


def _neighbour_section(content: ReportContent, images: dict[str, bytes], glossary: _Glossary) -> str:
    parts = ["<h2>Neighbour cost: what other load cost an eval</h2>"]
    if not content.neighbours:
        parts.append('<p class="empty">No eval with enough cells to compare against a baseline.</p>')
    for result in content.neighbours:
        parts.append(f"<h3>{html.escape(result.label)}</h3>")
        reason = no_baseline_reason(result)
        if reason is not None:
            parts.append(f'<p class="empty">{html.escape(reason[0].upper() + reason[1:])}.</p>')
            parts.append(_img(timeline_png_name(result), images, f"{result.label} over time"))
            continue
        b = result.baseline
        when = model_time([content.time_scales.get(result.eval_name, 1.0)])
        parts.append(
            f"<p>Baseline over {b.n} cells overlapping no other load: median {_f(b.median)} tok/s, "
            f"p10 {_f(b.p10)} tok/s, p90 {_f(b.p90)} tok/s{html.escape(when)}. {result.timeouts} of "
            f"{result.n_cells} cells timed out and {result.failures} failed (listed, kept out of rates).</p>"
        )
        threshold = content.advice.config.threshold if content.advice is not None else None
        rows = [
            [
                w.name,
                w.kind,
                (w.engine or "-") + (" (same)" if w.same_engine else ""),
                w.n_cells,
                w.timeouts,
                w.failures,
                _f(w.rate.median),
                "-" if w.rate.n < 2 else f"{_f(w.min_rate)} to {_f(w.max_rate)}",
                "-"
                if w.cost is None
                else f"{w.cost * 100:.0f}" + (" !" if threshold is not None and w.cost > threshold else ""),
            ]
            for w in windows_touched(result)
        ]
        columns = [
            "load elsewhere on the box",
            "kind",
            "engine",
            "cells",
            "timeouts",
            "failed",
            "median tok/s",
            "range tok/s",
            "cost %",
        ]
        cost_note = {
            "cost %": "1 - that median over the baseline median"
            + ("" if threshold is None else f"; ! past the advisor's threshold ({threshold:.0%})")
        }
        parts.append(
            _table(columns, rows, warn_col=columns.index("timeouts")) + glossary.notes(columns, cost_note)
            if rows
            else '<p class="empty">No cell of this eval overlapped another load.</p>'
        )
        parts.append(_img(neighbour_png_name(result), images, "neighbour cost"))
        parts.append(_img(timeline_png_name(result), images, f"{result.label} over time"))
    return "".join(parts)


def _outcomes_section(content: ReportContent) -> str:
    parts = ["<h2>Deadline outcomes</h2>"]
    if not content.outcomes:
        parts.append('<p class="empty">No cells recorded.</p>')
        return "".join(parts)
    statuses = [s.value for s in CellStatus]
    governed = any(o.queued for o in content.outcomes)
    rows = []
    for o in content.outcomes:
        row = [o.eval_name, "-" if o.workers is None else o.workers, o.cells]
        row += [o.statuses[s] for s in statuses] + [o.ceiling_hits, o.salvaged_findings, o.degraded]
        if governed:
            row += [o.queued, fmt_number(o.longest_wait_s, 0), o.waits_past_deadline, o.held_by or "-"]
        rows.append(row)
    columns = ["eval", "workers", "cells", *statuses, "ceiling hits", "salvaged findings", "degraded"]
    if governed:
        columns += ["queued", "longest queue wait s", "waited past ceiling", "held by"]
    parts.append(_table(columns, rows, warn_col=columns.index("ceiling hits")))
    if governed:
        parts.append(
            '<p class="note">queued: cells the queue governor held before they started, by the rule '
            "that held the most of them; a wait is not part of the cell's time or rate.</p>"
        )
    return "".join(parts)


def _decisions_section(content: ReportContent, glossary: _Glossary) -> str:
    """What the adaptive governor decided: a line at a glance (did it hold anything, how long,
    why), then per eval, and the holds by reason and by the protected cell; or the command that
    records such decisions."""
    from ..views.adaptive_decisions import evals_table, holds_tables, no_decisions_line, summary_line

    parts = ["<h2>Adaptive governor: what it admitted and held</h2>"]
    decisions = content.decisions
    if decisions is None or not decisions.any:
        line = no_decisions_line(decisions.cells_seen if decisions is not None else content.n_cells)
        parts.append(f'<p class="empty">{_code(line)}</p>')
        return "".join(parts)
    unit = seconds(content.scales)
    parts.append(f'<p class="decisions-summary">{html.escape(summary_line(decisions, unit))}</p>')
    columns, rows, notes = evals_table(decisions, unit)
    parts.append(_table(columns, rows, warn_col=columns.index("held")))
    parts.append(glossary.notes(columns, notes))
    for title, columns, rows in holds_tables(decisions, unit):
        parts.append(f"<h3>{html.escape(title[0].upper() + title[1:])}</h3>")
        parts.append(_table(columns, rows))
    return "".join(parts)


def _code(text: str) -> str:
    """``text`` escaped, its backticked commands as code."""
    pieces = html.escape(text).split("`")
    return "".join(f"<code>{p}</code>" if i % 2 else p for i, p in enumerate(pieces))


def _budget_section(content: ReportContent, images: dict[str, bytes]) -> str:
    """Where each eval's wall time went, a bar per cell; then a verdict for every timeout."""
    from ..views.budget import PHASE_NOTES, eval_budget_table
    from ..views.timeouts import timeouts_table
    from .plots import budget_png_name

    parts = ["<h2>Where the time went</h2>"]
    if not content.eval_budgets or not content.budgets:
        parts.append(
            '<p class="empty">No cell was recorded with a time budget (a live cell() records one; '
            "older and backfilled cells have none unless their records say).</p>"
        )
    else:
        columns, rows = eval_budget_table(content.eval_budgets)
        parts.append(_table(columns, rows))
        notes = "; ".join(f"{k}: {v}" for k, v in PHASE_NOTES.items() if k in columns)
        parts.append(f'<p class="note">{html.escape(notes)}.</p>')
        for e in content.eval_budgets:
            name = budget_png_name(e.eval_name)
            if name in images:
                parts.append(_img(name, images, f"{e.eval_name}: where each cell's time went"))
    parts.append("<h3>Timeouts</h3>")
    if not content.timeouts:
        parts.append('<p class="empty">No cell hit its ceiling.</p>')
    else:
        columns, rows = timeouts_table(content.timeouts)
        parts.append(
            _table(
                ["eval", *columns],
                [[v.eval_name, *row] for v, row in zip(content.timeouts, rows, strict=True)],
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


def _answers_section(content: ReportContent) -> str:
    """The box the page opens with: each question's answer in a line, then the rules."""
    if not content.answers and (content.advice is None or not content.advice.rules):
        return ""
    unmeasured = ' class="unmeasured"'
    items = [
        f"<li{'' if a.measured else unmeasured}>{html.escape(a.text)}</li>"
        for a in content.answers
        if a.topic != "rules"
    ]
    rules = [] if content.advice is None else content.advice.rules
    rule_items = "".join(f"<li>{html.escape(rule_text(r))}</li>" for r in rules)
    summary = next((a for a in content.answers if a.topic == "rules"), None)
    return (
        '<section class="answers"><h2>Answers</h2>'
        + (f"<ul>{''.join(items)}</ul>" if items else "")
        + (f"<p>{html.escape(summary.text[0].upper() + summary.text[1:])}:</p>" if summary else "")
        + (f"<ol>{rule_items}</ol>" if rule_items else "")
        + "</section>"
    )


def _advice_rules(advice: Advice | None) -> list[list[str]]:
    return [] if advice is None else rules_table(advice)[1]


def render_html(content: ReportContent, images: dict[str, bytes]) -> str:
    """The self-contained page: inline CSS, every image as a data URI."""
    template = Template(resources.files(__package__).joinpath("template.html").read_text("utf-8"))
    scope = f"eval {content.eval_name}" if content.eval_name else "all evals"
    subtitle = (
        f"From {content.source}: {content.n_cells} cells, {content.n_windows} load windows, "
        f"{len(content.probes)} probe runs ({scope}); "
        f"generated {datetime.fromtimestamp(real_wall_ns() / NS_PER_S, UTC).strftime('%Y-%m-%d %H:%M UTC')}."
    )
    notes = "".join(f"<li>{html.escape(n)}</li>" for n in content.notes)
    glossary = _Glossary()
    stand_ins = requests_as_cells_line(content.requests_as_cells, content.n_cells)
    body = "".join(
        [
            f'<p class="note requests-as-cells">{html.escape(stand_ins)}</p>' if stand_ins else "",
            _answers_section(content),
            _concurrency_section(content, images, glossary),
            _neighbour_section(content, images, glossary),
            _instruments_section(content, images),
            _outcomes_section(content),
            _decisions_section(content, glossary),
            _budget_section(content, images),
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
    """Write ``report.html`` and every plot as a PNG file into ``out_dir``; returns the page's path.
    Each file is written whole or not at all: a full disk leaves an earlier report's files as
    they were."""
    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"{out}: cannot create the report directory: {exc}") from exc
    images = render_images(content)
    for name, png in images.items():
        write_output(out / name, png)
    return write_output(out / "report.html", render_html(content, images))
