"""Receivers: turn what engines, GPUs, Nsight captures and old eval records already know into
spark-otel's data (OpenTelemetry metrics and spans, and the embedded store).

    prometheus  scrape an engine's /metrics: snapshots, counter deltas, rates
    receiver    the long-running engine (and GPU) scraper behind ``spark-otel receive``
    gpu         NVML / nvidia-smi / simulated-box GPU readouts
    nsight      Nsight Systems SQLite exports: GPU metric series and per-capture summaries
    backfill    eval records (JSON, JSONL, CSV) to cells with their historical times
    served_models  what each engine serves now, against what a rules file was measured on

The engine-counter API and the `Receiver` are imported here; the Nsight, GPU and backfill
modules load on use.
"""

from __future__ import annotations

from .prometheus import (
    CounterDelta,
    EngineKind,
    EngineSnapshot,
    ascrape_engine,
    counter_delta,
    metrics_url,
    parse_metrics,
    scrape_engine,
)
from .receiver import EngineTarget, Receiver

__all__ = [
    "CounterDelta",
    "EngineKind",
    "EngineSnapshot",
    "EngineTarget",
    "Receiver",
    "ascrape_engine",
    "counter_delta",
    "metrics_url",
    "parse_metrics",
    "scrape_engine",
]
