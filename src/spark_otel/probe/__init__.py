"""The concurrency probe (the article's Appendix A): what N concurrent streams buy on one engine.

    report = run_probe("http://127.0.0.1:8011", ProbeSettings(streams=[1, 8], engine="qwen"), store=store)

    prober    discovery, the levels, their load windows and the stored report
    streams   the timing loop of one request
    power     mean GPU power over a level

The report document it writes (`ProbeReport` and its parts) lives in `spark_otel.records.probe_report`,
below the analyses that read it, and is named here too. A level's figures are computed by
`spark_otel.analysis.probe_levels`. Names load on first use, so reading a stored report does not
import the HTTP client.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..records.probe_report import (
        PROBE_REPORT_VERSION,
        ProbeLevel,
        ProbeMetadata,
        ProbeReport,
        ProbeSettings,
        load_probe_report,
    )
    from .prober import ProbeIncomplete, arun_probe, default_engine_label, run_probe

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
    "PROBE_REPORT_VERSION": "spark_otel.records.probe_report",
    "ProbeLevel": "spark_otel.records.probe_report",
    "ProbeMetadata": "spark_otel.records.probe_report",
    "ProbeReport": "spark_otel.records.probe_report",
    "ProbeSettings": "spark_otel.records.probe_report",
    "load_probe_report": "spark_otel.records.probe_report",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = home if home.startswith("spark_otel.") else f".{home}"
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
