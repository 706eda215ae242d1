"""The concurrency probe (the article's Appendix A): what N concurrent streams buy on one engine.

    report = run_probe("http://127.0.0.1:8011", ProbeSettings(streams=[1, 8], engine="qwen"), store=store)

    prober    discovery, the levels, their load windows and the stored report
    streams   the timing loop of one request
    power     mean GPU power over a level
    results   the versioned ProbeReport document and its parts

A level's figures are computed by `spark_otel.analysis.probe_levels`. Names load on first use,
so reading a stored report does not import the HTTP client.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .prober import ProbeIncomplete, arun_probe, default_engine_label, run_probe
    from .results import (
        PROBE_REPORT_VERSION,
        ProbeLevel,
        ProbeMetadata,
        ProbeReport,
        ProbeSettings,
        load_probe_report,
    )

__all__ = [
    "PROBE_REPORT_VERSION",
    "ProbeIncomplete",
    "ProbeLevel",
    "ProbeMetadata",
    "ProbeReport",
    "ProbeSettings",
    "arun_probe",
    "default_engine_label",
    "load_probe_report",
    "run_probe",
]

_HOMES = {
    "ProbeIncomplete": "prober",
    "arun_probe": "prober",
    "default_engine_label": "prober",
    "run_probe": "prober",
    "PROBE_REPORT_VERSION": "results",
    "ProbeLevel": "results",
    "ProbeMetadata": "results",
    "ProbeReport": "results",
    "ProbeSettings": "results",
    "load_probe_report": "results",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{home}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
