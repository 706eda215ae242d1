"""What a report is built from: recorded data from the embedded store or OTLP JSON exports."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, cast

from .. import _semconv as sc
from .._clock import NS_PER_S
from .._exceptions import InputError

if TYPE_CHECKING:
    from ..analysis.gauges import InstrumentsReport, IntervalSource, LoadInterval
    from ..model import Cell, LoadWindow, MetricSample, Request, ServerTiming
    from ..records.cell_columns import CellColumns
    from ..records.probe_report import ProbeReport
    from ..records.rate_curve import RateCurve
    from ..store import Store

__all__ = [
    "DEFAULT_BIN_S",
    "ENERGY_MARGIN_NS",
    "InstrumentInputs",
    "ReportInputs",
    "cells_from_store",
    "columns_from_store",
    "energy_samples",
    "inputs_from_otlp_json",
    "inputs_from_store",
    "instruments_from_store",
    "read_inputs",
]

DEFAULT_BIN_S = 30.0
"""Receiver intervals: seconds of engine scrapes in each."""
_MARGIN_NS = 60 * NS_PER_S  # read this far past the intervals: counters need a sample either side

ENERGY_MARGIN_NS = 60 * 1_000_000_000
"""How far past the cells to read GPU samples: the readings either side of a cell's edges."""

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
    engine_urls: dict[str, str] = field(default_factory=dict)
    """Where each engine answered: what a rule's measuring command names."""
    gpu_energy: list[MetricSample] = field(default_factory=list)
    """GPU energy-counter and power samples around the cells and probes, for their energy."""
    instruments: InstrumentsReport | None = None
    """Which gauges measured load over the recorded intervals (`instrument_verdicts`)."""
    requests: list[Request] = field(default_factory=list)
    """The cells' requests, which the engine's server timings join to (the time budget)."""
    server_timings: dict[str, ServerTiming] = field(default_factory=dict)
    """The engine's split of requests, by request uid (its server spans)."""
    holdings: dict[str, int] = field(default_factory=dict)
    """Rows of each kind the source holds (`Store.row_counts`): what a refusal names."""
    cell_columns: CellColumns | None = None
    """The cells as columns, where they were read so (``cells`` is then empty): what an answer
    that shows no cell by name reads (`inputs_from_store(cells_as_columns=True)`)."""


@dataclass
class InstrumentInputs:
    """What `instrument_verdicts` needs, as one store holds it."""

    source: IntervalSource | None
    intervals: list[LoadInterval]
    samples: list[MetricSample]
    throughput_metric: str | None = None
    engine_urls: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def read_inputs(
    store: Store, *, source: str = "auto", bin_s: float | None = None, cells: Sequence[Cell] | None = None
) -> InstrumentInputs:
    """The intervals (from ``source``, or with ``auto`` the first kind the store holds: probe
    levels, receiver bins, eval runs) and every gauge sample and rated cell around them. Reads
    only; the analysis is `instrument_verdicts`. ``cells``: ``store.cells()`` where the caller
    has read them already (a report), so they are not read again.

    Receiver bins are ``bin_s`` seconds (`ConfigError` when they would be more than
    `MAX_RECEIVER_INTERVALS`); without it, `DEFAULT_BIN_S`, widened (with a note) where the
    scrapes span so long that the default would pass the cap."""
    from .. import _semconv as sc
    from ..analysis.gauges import (
        MAX_RECEIVER_INTERVALS,
        STORED_METRICS,
        cell_rate_samples,
        eval_intervals,
        fitting_bin_s,
        probe_intervals,
        receiver_intervals,
    )

    notes: list[str] = []
    intervals: list[LoadInterval] = []
    chosen: IntervalSource | None = None
    throughput_metric = None
    kinds: tuple[IntervalSource, ...] = (
        ("probe", "receiver", "evals") if source == "auto" else (cast("IntervalSource", source),)
    )
    for kind in kinds:
        if kind == "probe":
            intervals, notes = probe_intervals(store.documents("probe"))
        elif kind == "receiver":
            scrapes = store.samples(sc.ENGINE_GENERATION_TOKENS)
            width = bin_s if bin_s is not None else fitting_bin_s(scrapes, DEFAULT_BIN_S)
            if width != (bin_s or DEFAULT_BIN_S):
                notes.append(
                    f"receiver bins of {width:g} s, not {DEFAULT_BIN_S:g} s: the scrapes span too long for "
                    f"{MAX_RECEIVER_INTERVALS:,} bins of {DEFAULT_BIN_S:g} s"
                )
            intervals = receiver_intervals(scrapes, width)
            throughput_metric = sc.ENGINE_GENERATION_TOKENS
        else:
            intervals = eval_intervals(store.cells() if cells is None else cells)
        if intervals:
            chosen = kind
            break
        throughput_metric = None
    if not intervals:
        return InstrumentInputs(chosen, [], [], notes=notes)
    since = min(i.start_unix_ns for i in intervals) - _MARGIN_NS
    until = max(i.end_unix_ns for i in intervals) + _MARGIN_NS
    samples = [
        sample
        for name in STORED_METRICS
        if name != throughput_metric
        for sample in store.samples(name, since_unix_ns=since, until_unix_ns=until)
    ]
    around = (
        store.cells(since_unix_ns=since, until_unix_ns=until)
        if cells is None
        else [c for c in cells if since <= c.start_unix_ns <= until]
    )
    samples.extend(cell_rate_samples(around))
    return InstrumentInputs(chosen, intervals, samples, throughput_metric, _engine_urls(store), notes)


def _engine_urls(store: Store) -> dict[str, str]:
    """Each engine's address as its requests reached it, else as a probe of it recorded it."""
    urls: dict[str, str] = {}
    for doc in store.documents("probe"):
        metadata = doc["body"].get("metadata") if isinstance(doc["body"], dict) else None
        if isinstance(metadata, dict) and metadata.get("engine") and metadata.get("engine_url"):
            urls[str(metadata["engine"])] = str(metadata["engine_url"])
    return urls | store.engine_urls()


def cells_from_store(store: Store, recorded: Sequence[Cell] | None = None) -> list[Cell]:
    """Every cell the store holds (``recorded``: ``store.cells()`` where already read) and, each
    as a cell of its own, the requests no cell holds (`analysis.request_cells`): the cells every
    analysis of a store reads."""
    from ..analysis.request_cells import with_requests_as_cells

    return with_requests_as_cells(
        store.cells() if recorded is None else list(recorded),
        store.requests_outside_cells(),
        engine_urls=store.engine_urls(),
        windows=store.windows(kind="load") + store.windows(kind="probe"),
    )


def columns_from_store(store: Store) -> CellColumns:
    """`cells_from_store`'s cells as columns (`Store.cell_columns`, no `Cell` per row): the same
    cells in the same order (numpy, the ``cli`` extra)."""
    from ..analysis.request_cells import columns_with_requests_as_cells

    return columns_with_requests_as_cells(
        store.cell_columns(),
        store.requests_outside_cells(),
        engine_urls=store.engine_urls(),
        windows=store.windows(kind="load") + store.windows(kind="probe"),
    )


def eval_scales_from_store(store: Store, cells: CellColumns, eval_name: str) -> list[float]:
    """The time scales ``eval_name``'s cells were recorded under (`views.tables.time_scales`),
    read from its stored cells' attributes, which columns do not carry; a request standing in
    for a cell (in ``cells``, as `columns_from_store` reads them) has none: real time."""
    from ..analysis.request_cells import REQUEST_SOURCE
    from ..views.tables import time_scales

    scales = time_scales(store.cells(eval_name=eval_name))
    stand_in = any(
        e == eval_name and s == REQUEST_SOURCE for e, s in zip(cells.eval_name, cells.source, strict=True)
    )
    return [*scales, 1.0] if stand_in and 1.0 not in scales else scales


def energy_samples(store: Store, spans: Sequence[tuple[int, int]]) -> list[MetricSample]:
    """The GPU energy-counter and power samples around ``spans`` (start, end ns): what
    `spark_otel.analysis.energy` reads. Empty without spans."""
    if not spans:
        return []
    since = min(s for s, _ in spans) - ENERGY_MARGIN_NS
    until = max(e for _, e in spans) + ENERGY_MARGIN_NS
    return [
        sample
        for name in (sc.GPU_ENERGY, sc.GPU_POWER)
        for sample in store.samples(name, since_unix_ns=since, until_unix_ns=until)
    ]


def instruments_from_store(store: Store, cells: Sequence[Cell] | None = None) -> InstrumentsReport | None:
    """`instrument_verdicts` over what the store holds, as `spark-otel instruments` reads it
    (``cells``: ``store.cells()`` where already read); None where there is no load to pair the
    gauges with, or no gauge."""
    found = read_inputs(store, cells=cells)
    if not found.intervals:
        return None
    report = verdicts_of(found)
    if not report.intervals or not any(v.n_samples for v in report.instruments):
        return None
    return report


def verdicts_of(found: InstrumentInputs) -> InstrumentsReport:
    """`instrument_verdicts` of what `read_inputs` read, with the reading's notes first."""
    from ..analysis.gauges import instrument_verdicts

    report = instrument_verdicts(
        found.intervals,
        found.samples,
        interval_source=found.source,
        engine_urls=found.engine_urls,
        throughput_metric=found.throughput_metric,
    )
    return report.model_copy(update={"notes": [*found.notes, *report.notes]})


def inputs_from_store(
    store: Store, *, source: str | None = None, probe_tables: bool = True, cells_as_columns: bool = False
) -> ReportInputs:
    """Cells, load windows, probe documents and GPU and token-rate samples from the embedded store.

    Curves are read from every probe document, so a document that is not a whole probe report
    (no table to show) still lends its curve. ``probe_tables=False`` reads the curves only, for
    `spark-otel advise`, which shows no probe table and so has none to skip or warn about.
    ``cells_as_columns`` reads the cells as columns only (``cell_columns``; ``cells`` empty),
    for an answer that needs no cell as a record."""
    from ..analysis.curve import curves_from_documents
    from ..records.probe_report import load_probe_report

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
    urls = store.engine_urls()
    for doc in documents:  # a probe names the engine's base URL itself; the newest wins
        metadata = (doc.get("body") or {}).get("metadata") or {}
        if isinstance(metadata.get("engine"), str) and isinstance(metadata.get("engine_url"), str):
            urls[metadata["engine"]] = metadata["engine_url"]
    columns = columns_from_store(store) if cells_as_columns else None
    recorded = None if cells_as_columns else store.cells()  # read once: the cells and the gauges' inputs
    cells = [] if recorded is None else cells_from_store(store, recorded)
    spans = [(c.start_unix_ns, c.end_unix_ns) for c in cells]
    if columns is not None and len(columns):  # the samples' range is the cells' first start to last end
        spans.append((int(columns.start_unix_ns.min()), int(columns.end_unix_ns.max())))
    spans += [(lv.start_unix_ns, lv.end_unix_ns) for p in probes for lv in p.levels]
    return ReportInputs(
        source=source or str(store.path),
        engine_urls=urls,
        cells=cells,
        windows=store.windows(),
        probes=probes,
        curves=curves,
        gpu_utilization=[x.value for x in store.samples(sc.GPU_UTILIZATION)],
        token_rates=[x.value for x in store.samples(sc.ENGINE_GENERATION_TOKEN_RATE)],
        gpu_energy=energy_samples(store, spans),
        instruments=instruments_from_store(store, recorded) if probe_tables else None,
        requests=store.requests(),
        server_timings=store.server_timings(),
        holdings=store.row_counts(),
        cell_columns=columns,
    )


def inputs_from_otlp_json(paths: Sequence[str | Path]) -> ReportInputs:
    from ..analysis.request_cells import with_requests_as_cells
    from ..receivers.otlp_json import read_otlp_json

    records = read_otlp_json(paths)
    named = {  # where the cells' requests named their engine, as `Store.engine_urls` reads it
        r.engine: f"http://{r.server_address}" + (f":{r.server_port}" if r.server_port else "")
        for r in records.requests
        if r.engine and r.server_address
    }
    return ReportInputs(
        source=", ".join(str(p) for p in paths),
        cells=with_requests_as_cells(
            records.cells, records.requests, engine_urls=named, windows=records.windows
        ),
        holdings={
            "cells": len(records.cells),
            "requests": len(records.requests),
            "load_windows": len(records.windows),
        },
        windows=records.windows,
        requests=records.requests,
        server_timings={t.request_uid: t for t in records.server_timings},
    )
