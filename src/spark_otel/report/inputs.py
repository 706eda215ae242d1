"""What a report is built from: recorded data from the embedded store or OTLP JSON exports."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from .. import _semconv as sc
from .._exceptions import InputError

if TYPE_CHECKING:
    from ..analysis.curve import RateCurve
    from ..model import Cell, LoadWindow
    from ..probe.results import ProbeReport
    from ..store import Store

__all__ = ["ReportInputs", "inputs_from_otlp_json", "inputs_from_store"]

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


def inputs_from_store(store: Store, *, source: str | None = None, probe_tables: bool = True) -> ReportInputs:
    """Cells, load windows, probe documents and GPU and token-rate samples from the embedded store.

    Curves are read from every probe document, so a document that is not a whole probe report
    (no table to show) still lends its curve. ``probe_tables=False`` reads the curves only, for
    `spark-otel advise`, which shows no probe table and so has none to skip or warn about."""
    from ..analysis.curve import curves_from_documents
    from ..probe.results import load_probe_report

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
    return ReportInputs(
        source=source or str(store.path),
        engine_urls=urls,
        cells=store.cells(),
        windows=store.windows(),
        probes=probes,
        curves=curves,
        gpu_utilization=[x.value for x in store.samples(sc.GPU_UTILIZATION)],
        token_rates=[x.value for x in store.samples(sc.ENGINE_GENERATION_TOKEN_RATE)],
    )


def inputs_from_otlp_json(paths: Sequence[str | Path]) -> ReportInputs:
    from ..receivers.otlp_json import read_otlp_json

    records = read_otlp_json(paths)
    return ReportInputs(source=", ".join(str(p) for p in paths), cells=records.cells, windows=records.windows)
