"""Load intervals of known throughput, built from what the store holds: probe levels, bins of the
engines' generation-counter scrapes, eval runs; and the cells' decode rate as a gauge."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from ... import _semconv as sc
from ..._clock import NS_PER_S
from ..._exceptions import ConfigError, InputError
from ...model import AttributeValue, Cell, MetricSample
from ..rates import rated_decode_rate
from ..windows import DEFAULT_MERGE_GAP_S, overlapping_pairs, windows_from_cells
from .catalog import CELL_RATE_METRIC
from .grades import LoadInterval
from .series import at, cumulative

__all__ = [
    "MAX_RECEIVER_INTERVALS",
    "cell_rate_samples",
    "eval_intervals",
    "fitting_bin_s",
    "probe_intervals",
    "receiver_intervals",
]

MAX_RECEIVER_INTERVALS = 10_000
"""The most receiver bins one reading makes: each is graded against every gauge, so a bin of
10 ms over an hour of scrapes (360,000 bins) ran for minutes and took gigabytes."""


def probe_intervals(documents: Iterable[Mapping[str, Any]]) -> tuple[list[LoadInterval], list[str]]:
    """One interval per probe level of the stored probe documents (``Store.documents("probe")``):
    the probe's own aggregate (its streams' tokens over the level's wall), measured by the client,
    so no gauge on the box, the engine's counter included, is graded against itself. Documents
    that are not probe reports are named in the notes and skipped."""
    from ...records.probe_report import load_probe_report  # here: probe.results imports spark_otel.analysis

    out: list[LoadInterval] = []
    notes: list[str] = []
    for doc in documents:
        try:
            report = load_probe_report(doc.get("body"), where=f"probe document {doc.get('name')!r}")
        except InputError as exc:
            notes.append(f"{exc}; skipped")
            continue
        engine = report.metadata.engine
        repeated = any(level.repeat for level in report.levels)
        for level in report.levels:
            rate = level.probe_aggregate_rate
            if rate is None or level.end_unix_ns <= level.start_unix_ns:
                continue
            label = f"{engine} {level.streams} stream{'s' if level.streams != 1 else ''}"
            out.append(
                LoadInterval(
                    label=label + (f" #{level.repeat + 1}" if repeated else ""),
                    source="probe",
                    start_unix_ns=level.start_unix_ns,
                    end_unix_ns=level.end_unix_ns,
                    throughput=rate,
                    engines={engine: rate},
                    time_scale=report.metadata.time_scale,
                )
            )
    return out, notes


def _hhmmss(unix_ns: int, *, millis: bool = False) -> str:
    """The instant as UTC clock time; with ``millis``, to the millisecond (bins under a second)."""
    when = datetime.fromtimestamp(unix_ns / NS_PER_S, UTC)
    return when.strftime("%H:%M:%S.%f")[:-3] if millis else when.strftime("%H:%M:%S")


def receiver_intervals(counter_samples: Iterable[MetricSample], bin_s: float) -> list[LoadInterval]:
    """Bins of ``bin_s`` seconds over the engines' generation-counter scrapes: each engine's
    increase per second (interpolated at the bin edges, across counter resets), summed for the
    box. A bin that no engine's scrapes cover is left out."""
    if not bin_s > 0:
        raise ValueError(f"bin must be positive seconds, got {bin_s}")
    by_engine: dict[str, list[MetricSample]] = defaultdict(list)
    for sample in counter_samples:
        if sample.name == sc.ENGINE_GENERATION_TOKENS:
            by_engine[str(sample.attributes.get(sc.ENGINE, "unknown"))].append(sample)
    series = {}
    for engine, rows in by_engine.items():
        rows.sort(key=lambda s: s.unix_ns)
        times = [s.unix_ns for s in rows]
        series[engine] = (times, cumulative([s.value for s in rows]))
    if not series:
        return []
    first = min(times[0] for times, _ in series.values())
    last = max(times[-1] for times, _ in series.values())
    step = max(1, int(bin_s * NS_PER_S))
    bins = (last - first) // step
    if bins > MAX_RECEIVER_INTERVALS:
        raise ConfigError(
            f"a bin of {bin_s:g} s makes {bins:,} intervals over {(last - first) / NS_PER_S:,.0f} s of "
            f"engine scrapes, past the cap of {MAX_RECEIVER_INTERVALS:,}; use a bin of at least "
            f"{_fitting(last - first):g} s"
        )
    out: list[LoadInterval] = []
    for start in range(first, last - step + 1, step):
        end = start + step
        engines = {}
        for engine, (times, totals) in sorted(series.items()):
            low, high = at(times, totals, start), at(times, totals, end)
            if low is not None and high is not None:
                engines[engine] = (high - low) * NS_PER_S / step
        if engines:
            out.append(
                LoadInterval(
                    label=f"{_hhmmss(start, millis=not float(bin_s).is_integer())} +{bin_s:g} s",
                    source="receiver",
                    start_unix_ns=start,
                    end_unix_ns=end,
                    throughput=sum(engines.values()),
                    engines=engines,
                )
            )
    return out


def _fitting(span_ns: int) -> float:
    """The smallest whole number of seconds whose bins over ``span_ns`` stay within the cap."""
    return float(max(1, -(-span_ns // (MAX_RECEIVER_INTERVALS * NS_PER_S))))


def fitting_bin_s(counter_samples: Sequence[MetricSample], bin_s: float) -> float:
    """``bin_s``, or the smallest whole number of seconds above it whose bins over these scrapes
    stay within `MAX_RECEIVER_INTERVALS` (a default bin over months of scrapes is widened, not
    refused)."""
    times = [s.unix_ns for s in counter_samples if s.name == sc.ENGINE_GENERATION_TOKENS]
    if not times:
        return bin_s
    span = max(times) - min(times)
    if span // max(1, int(bin_s * NS_PER_S)) <= MAX_RECEIVER_INTERVALS:
        return bin_s
    return max(bin_s, _fitting(span))


def _scale(value: AttributeValue | None) -> float:
    """A cell's ``spark_otel.time_scale``; 1 (real time) when absent or unreadable."""
    try:
        return float(value) if value is not None else 1.0
    except ValueError:
        return 1.0


def eval_intervals(cells: Sequence[Cell], *, merge_gap_s: float = DEFAULT_MERGE_GAP_S) -> list[LoadInterval]:
    """One interval per eval run (`windows_from_cells`): the completion tokens of every cell on the
    box inside it (a cell's tokens spread evenly over its time), per second of the run."""
    windows = windows_from_cells(cells, merge_gap_s=merge_gap_s)
    timed = [c for c in cells if c.end_unix_ns > c.start_unix_ns]
    pairs = overlapping_pairs(
        [(w.start_unix_ns, w.end_unix_ns) for w in windows], [(c.start_unix_ns, c.end_unix_ns) for c in timed]
    )
    tokens: dict[int, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for wi, ci, overlap_ns in pairs:
        cell = timed[ci]
        share = (cell.completion_tokens or 0) * overlap_ns / (cell.end_unix_ns - cell.start_unix_ns)
        tokens[wi][cell.engine or "unknown"] += share
    scales: dict[str | None, float] = defaultdict(lambda: 1.0)
    for cell in timed:
        scales[cell.engine] = max(scales[cell.engine], _scale(cell.attributes.get(sc.TIME_SCALE)))
    out = []
    for wi, window in enumerate(windows):
        seconds = (window.end_unix_ns - window.start_unix_ns) / NS_PER_S
        engines = {e: t / seconds for e, t in sorted(tokens[wi].items())} if seconds > 0 else {}
        out.append(
            LoadInterval(
                label=f"{window.name} {_hhmmss(window.start_unix_ns)[:5]}",
                source="evals",
                start_unix_ns=window.start_unix_ns,
                end_unix_ns=window.end_unix_ns,
                throughput=sum(engines.values()),
                engines=engines,
                time_scale=scales[window.engine],
            )
        )
    return out


def cell_rate_samples(cells: Iterable[Cell]) -> list[MetricSample]:
    """Each rated cell's decode rate as a sample at its midpoint: the cells' own gauge. Timeouts
    and failures have no rate (`rated_decode_rate`) and are left out."""
    out = []
    for cell in cells:
        rate = rated_decode_rate(cell)
        if rate is None:
            continue
        out.append(
            MetricSample(
                name=CELL_RATE_METRIC,
                unix_ns=(cell.start_unix_ns + cell.end_unix_ns) // 2,
                value=rate,
                unit="{token}/s",
                attributes={sc.ENGINE: cell.engine or "unknown"},
                source="cells",
            )
        )
    return out
