"""Table shapes the command line and the HTML report share, so one figure has one name and one
explanation wherever it is read: the probe's Appendix A table, the terms a header needs
explained, number cells, and the model-time label of figures recorded under a model clock."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from .. import _semconv as sc

if TYPE_CHECKING:
    from ..analysis.concurrency import LevelSummary
    from ..analysis.energy import EnergyReport
    from ..records.probe_report import ProbeReport

__all__ = [
    "GLOSSARY",
    "PROBE_PRIORITIES",
    "energy_lines",
    "energy_table",
    "fmt_number",
    "level_table",
    "model_time",
    "probe_energy_line",
    "probe_table",
    "seconds",
    "time_scales",
]

# Terms a table header uses that need a word of explanation: printed once per command run, in a
# note under the first table that shows the column. A command may pass its own (``notes``).
GLOSSARY: dict[str, str] = {
    "engine/probe": "the engine's own generation counter over the probe's tokens; above 1, "
    "another tenant decoded too",
    "streams off pin": "streams that did not produce exactly the pinned token count, or failed; "
    "0: every stream was pinned",
    "client CPU µs/tok": "the probe client's own CPU time per streamed token (real time); "
    "! past its budget: the client's lag may read as the engine's",
    "cells in flight": "time-weighted mean number of the engine's cells running while a cell ran, "
    "itself included",
    "ceiling hits": "cells cut off at their per-cell ceiling: counted, never rated",
    "per-cell cost %": "1 - the run's median tok/s over the serial run's: how much slower each cell ran",
    "wall speedup": "wall time per cell of the serial run over this run's",
    "J/tok": "joules per output token: the box's GPU energy over the level (mean power x wall) over "
    "the probe's tokens, or a cell's share over its tokens",
    "J/cell (median, 95% CI)": "each cell's share of the box's energy: split by tokens among the cells "
    "in flight, stretch by stretch; median over the cells and its 95% interval",
}


def fmt_number(value: float | None, digits: int = 2) -> str:
    """A table cell for a number that may be missing ("-"), thousands separated."""
    return "-" if value is None else f"{value:,.{digits}f}"


def time_scales(cells: Iterable[Any]) -> list[float]:
    """The model-time scales the cells were recorded under (``spark_otel.time_scale``; 1 when
    absent), each once, in order."""
    scales: list[float] = []
    for c in cells:
        value = c.attributes.get(sc.TIME_SCALE, 1.0)
        try:
            scale = float(value)
        except (TypeError, ValueError):
            scale = 1.0
        if scale not in scales:
            scales.append(scale)
    return scales


def model_time(scales: Iterable[float | None]) -> str:
    """What a title appends when its figures are in model time: " (model time, 100x)", or for a
    mix of model and real time, " (model time, 100x, for the cells recorded under a model clock)";
    else nothing."""
    distinct = sorted({1.0 if s is None else float(s) for s in scales})
    model = [s for s in distinct if s != 1.0]
    if not model:
        return ""
    speeds = ", ".join(f"{s:g}x" for s in model)
    if len(model) == len(distinct):
        return f" (model time, {speeds})"
    return f" (model time, {speeds}, for the cells recorded under a model clock)"


def seconds(scales: Iterable[float | None]) -> str:
    """The unit of a duration read off these scales: "model s" when any is model time, else "s"."""
    return "model s" if model_time(scales) else "s"


PROBE_PRIORITIES = (0, 0, 0, 2, 0, 0, 1, 1, 2, 2, 3, 3)
"""The probe table's columns a narrow terminal leaves out first (highest first): Appendix A's own
(streams, wall, per-stream median, both aggregates, power) stay, one row per level."""


def probe_table(report: ProbeReport) -> tuple[list[str], list[list[str]]]:
    """The Appendix A table of a probe: its columns and one row per level (per round when the
    probe repeated levels). Durations say "model s" when the probe ran on a model clock."""
    unit = seconds([report.metadata.time_scale])
    columns = [
        "streams",
        f"wall {unit}",
        "per-stream tok/s (median)",
        "p10 to p90 tok/s",
        "probe aggregate tok/s",
        "engine aggregate tok/s",
        "engine/probe",
        "power W",
        "J/tok",
        f"TTFT {unit}",
        "client CPU µs/tok",
        "streams off pin",
    ]
    from ..analysis.energy import probe_level_energy

    energy = probe_level_energy(report)
    rows = [
        [
            str(lv.streams) + (f" #{lv.repeat + 1}" if report.settings.repeats > 1 else ""),
            fmt_number(lv.wall_s, 1),
            fmt_number(lv.per_stream_median),
            f"{fmt_number(lv.per_stream_p10)} to {fmt_number(lv.per_stream_p90)}",
            fmt_number(lv.probe_aggregate_rate, 1),
            fmt_number(lv.engine_aggregate_rate, 1),
            fmt_number(lv.engine_probe_ratio, 2),
            fmt_number(lv.power_w, 1),
            fmt_number(e.j_per_token, 3),
            fmt_number(lv.ttft_s_median, 2),
            fmt_number(lv.client_cpu_us_per_token, 1) + (" !" if lv.client_cpu_over_budget else ""),
            str(lv.token_mismatches + lv.errors),
        ]
        for lv, e in zip(report.levels, energy, strict=True)
    ]
    return columns, rows


def probe_energy_line(report: ProbeReport) -> str:
    """What the probe's levels cost in energy, in a line: "8 streams: N J/token against M at 1",
    or why it cannot say."""
    from ..analysis.energy import level_comparison, probe_level_energy

    levels = probe_level_energy(report)
    compared = level_comparison(levels)
    if compared is None:
        if any(lv.energy_j is not None for lv in levels):
            return "energy: one level measured, nothing to compare its J/token with"
        return (
            "energy: no GPU power was read at any level (power source "
            f"{report.metadata.gpu_source or 'none'}); measure with `spark-otel probe --gpu nvml ...`, "
            "or record the GPU beside it with `spark-otel receive --gpu auto`"
        )
    how = (
        "mean power samples (nvidia-smi), estimated" if any(lv.estimated for lv in levels) else "power x wall"
    )
    return f"energy ({how}, over the probe's own tokens): {compared}"


def energy_table(
    report: EnergyReport, scales: Iterable[float] = (1.0,)
) -> tuple[str, list[str], list[list[Any]]]:
    """Joules per output token and per cell for each eval and worker count: title, columns, rows."""
    from datetime import UTC, datetime

    from .._clock import NS_PER_S

    def hhmm(ns: int | None) -> str:
        return "-" if ns is None else datetime.fromtimestamp(ns / NS_PER_S, UTC).strftime("%m-%d %H:%M")

    gpus = ", ".join(report.gpus)
    how = "integrated from power samples, estimated" if report.estimated else "energy counter"
    title = (
        f"energy on the box (GPU {gpus}, {how}): {report.box_j:,.0f} J while cells ran, "
        f"{report.idle_j:,.0f} J idle between them{model_time(scales)}"
    )
    columns = [
        "eval",
        "workers",
        "cells measured",
        "output tok",
        "energy J",
        "J/tok",
        "J/cell (median, 95% CI)",
        "span (UTC)",
    ]
    rows: list[list[Any]] = []
    for e in report.evals:
        pc = e.per_cell
        ci = (
            f" [{pc.ci_low:,.0f} to {pc.ci_high:,.0f}]"
            if pc.ci_low is not None and pc.ci_high is not None
            else ""
        )
        rows.append(
            [
                e.eval_name,
                "-" if e.workers is None else e.workers,
                f"{e.n_measured} of {e.n_cells}",
                f"{e.output_tokens:,}",
                fmt_number(e.energy_j, 0) if e.n_measured else "-",
                fmt_number(e.j_per_token, 3),
                "-" if pc.median is None else f"{pc.median:,.0f}{ci}",
                f"{hhmm(e.start_unix_ns)} to {hhmm(e.end_unix_ns)}" if e.n_measured else "-",
            ]
        )
    return title, columns, rows


def energy_lines(report: EnergyReport | None, n_cells: int, measure: str) -> list[str]:
    """What a reader must know beside the energy table: cells without energy and how to measure."""
    if report is None:
        return [f"energy: no GPU readings in the store for these {n_cells} cells; measure with `{measure}`"]
    out = []
    if report.unmeasured:
        out.append(
            f"energy: {report.unmeasured} of {len(report.cells)} cells ran outside the GPU readings "
            f"(no energy for them); measure with `{report.measure or measure}` beside the eval"
        )
    out.append(
        "energy: the box's energy split by tokens among the cells in flight, stretch by stretch; "
        "load that is not a recorded cell (a probe, another client) is charged to the cells beside it"
    )
    return out


LEVEL_COLUMNS = [
    "cells",
    "cells with a rate",
    "median tok/s",
    "p10 tok/s",
    "p90 tok/s",
    "mean tok/s",
    "ceiling hits",
    "failed",
]


def level_table(first: str, levels: Iterable[LevelSummary]) -> tuple[list[str], list[list[Any]]]:
    """Cells grouped by a level (``first`` names it: cells in flight, or workers): counts,
    rates and ceiling hits per level."""
    rows = [
        [
            lv.level,
            lv.n_cells,
            lv.rate.n,
            fmt_number(lv.rate.median),
            fmt_number(lv.rate.p10),
            fmt_number(lv.rate.p90),
            fmt_number(lv.rate.mean),
            lv.ceiling_hits,
            lv.failures,
        ]
        for lv in levels
    ]
    return [first, *LEVEL_COLUMNS], rows
