"""Table shapes the command line and the HTML report share, so one figure has one name and one
explanation wherever it is read: the probe's Appendix A table, the terms a header needs
explained, number cells, and the model-time label of figures recorded under a model clock."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from .. import _semconv as sc

if TYPE_CHECKING:
    from ..analysis.concurrency import LevelSummary
    from ..probe.results import ProbeReport

__all__ = ["GLOSSARY", "fmt_number", "level_table", "model_time", "probe_table", "seconds", "time_scales"]

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
    mix, " (model time, 100x, for the cells recorded under a model clock)"; else nothing."""
    distinct = sorted({1.0 if s is None else float(s) for s in scales})
    model = [s for s in distinct if s != 1.0]
    if not model:
        return ""
    speeds = ", ".join(f"{s:g}x" for s in model)
    if len(distinct) == 1:
        return f" (model time, {speeds})"
    return f" (model time, {speeds}, for the cells recorded under a model clock)"


def seconds(scales: Iterable[float | None]) -> str:
    """The unit of a duration read off these scales: "model s" when any is model time, else "s"."""
    return "model s" if model_time(scales) else "s"


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
        f"TTFT {unit}",
        "client CPU µs/tok",
        "streams off pin",
    ]
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
            fmt_number(lv.ttft_s_median, 2),
            fmt_number(lv.client_cpu_us_per_token, 1) + (" !" if lv.client_cpu_over_budget else ""),
            str(lv.token_mismatches + lv.errors),
        ]
        for lv in report.levels
    ]
    return columns, rows


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
