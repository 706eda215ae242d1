"""The gauges the instruments analysis grades: what each measures, its unit, how its series are keyed."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ... import _semconv as sc

__all__ = [
    "CATALOG",
    "CELL_RATE_METRIC",
    "GAUGE_METRICS",
    "HINTS",
    "KEYS",
    "MEASURE_STREAMS",
    "SPECS",
    "STORED_METRICS",
    "Spec",
]

MEASURE_STREAMS = (1, 2, 4, 8, 16)
"""The levels the suggested probe measures: a 2x step each, 16x in all."""


@dataclass(frozen=True)
class Spec:
    """A gauge spark-otel records, how to read it and how to show it."""

    metric: str
    what: str
    family: Literal["gpu", "engine", "nsight", "cells"]
    unit: str
    scale: float = 1.0
    counter: bool = False
    expected: bool = False
    """Reported as unsupported when its source recorded other quantities but not this one: the
    columns of the article's Appendix F (nvidia-smi's utilization, power and memory; vLLM's
    generation counter and running requests), which every part and engine should have."""
    group: str | None = None
    """Reported as unsupported when the same GPU recorded another metric of this group but not
    this one: NVML's GPM metrics, which a part has all of or none of, but one may be refused."""


_GIB = 1024**3
CELL_RATE_METRIC = sc.CELL_DECODE_RATE_METRIC
CATALOG: tuple[Spec, ...] = (
    Spec(sc.GPU_UTILIZATION, "utilization", "gpu", "%", 100.0, expected=True),
    Spec(sc.GPU_POWER, "power", "gpu", "W", expected=True),
    Spec(sc.GPU_ENERGY, "energy counter", "gpu", "W", counter=True),
    Spec(sc.GPU_CLOCK_SM, "SM clock", "gpu", "MHz"),
    Spec(sc.GPU_CLOCK_MEMORY, "memory clock", "gpu", "MHz"),
    Spec(sc.GPU_MEMORY_USED, "memory used", "gpu", "GiB", 1 / _GIB, expected=True),
    Spec(sc.GPU_SM_OCCUPANCY, "SM occupancy (GPM)", "gpu", "%", 100.0, group="gpm"),
    Spec(sc.GPU_DRAM_BANDWIDTH, "DRAM bandwidth (GPM)", "gpu", "%", 100.0, group="gpm"),
    Spec(sc.GPU_TENSOR_ACTIVITY, "tensor activity (GPM)", "gpu", "%", 100.0, group="gpm"),
    Spec(sc.NSIGHT_METRIC, "", "nsight", ""),
    Spec(sc.ENGINE_GENERATION_TOKENS, "generation counter", "engine", "tok/s", counter=True, expected=True),
    Spec(sc.ENGINE_REQUESTS_RUNNING, "requests running", "engine", "requests", expected=True),
    Spec(sc.ENGINE_KV_CACHE_USAGE, "KV-cache usage", "engine", "%", 100.0),
    Spec(CELL_RATE_METRIC, "cells' decode rate", "cells", "tok/s"),
)
SPECS = {s.metric: s for s in CATALOG}
KEYS: dict[str, tuple[str, ...]] = {
    "gpu": (sc.GPU_ID,),
    "engine": (sc.ENGINE,),
    "nsight": (sc.NSIGHT_METRIC_NAME, sc.GPU_ID),
    "cells": (sc.ENGINE,),
}
"""The attributes that tell one series of a family from another."""
GAUGE_METRICS = tuple(s.metric for s in CATALOG)
"""Every metric `instrument_verdicts` grades, in the order it lists them."""
STORED_METRICS = tuple(s.metric for s in CATALOG if s.family != "cells")
"""The metrics to read from the store (the cells' decode rate comes from the cells)."""
HINTS = {
    "gpu": "no GPU samples: record them beside the load with `spark-otel gpu-sample` "
    "(or `spark-otel receive --gpu auto`)",
    "nsight": "no Nsight captures: ingest one taken under load with `spark-otel ingest-nsight`",
    "engine": "no engine /metrics scrapes: run `spark-otel receive --engine NAME=URL` beside the load",
}
"""The note for a family with no samples at all: how to record it."""
