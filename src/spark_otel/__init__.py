"""spark-otel: where an LLM evaluation box spends its time, in OpenTelemetry.

    import spark_otel
    spark_otel.instrument()                       # every openai / raw HTTP call gets a span
    with spark_otel.cell("golden-review", cell_id="B#265", engine="qwen", deadline_s=1800):
        result = spark_otel.stream_with_deadline(client, model=..., messages=..., deadline_s=1800)

With no OTLP endpoint configured, spans, metrics and cells go to the embedded store
(``spark-otel cells`` lists them); the standard ``OTEL_*`` variables send them to a collector.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._version import __version__
from .cells import CellState, ContextThreadPoolExecutor, carry_context, cell, current_cell
from .model import Cell, CellStatus, LoadWindow, MetricSample, Request
from .telemetry import Telemetry, configure, shutdown

if TYPE_CHECKING:
    from .deadline import DeadlineResult, astream_with_deadline, stream_with_deadline
    from .instrumentation import SparkOtelInstrumentor, instrument, uninstrument

__all__ = [
    "Cell",
    "CellState",
    "CellStatus",
    "ContextThreadPoolExecutor",
    "DeadlineResult",
    "LoadWindow",
    "MetricSample",
    "Request",
    "SparkOtelInstrumentor",
    "Telemetry",
    "__version__",
    "astream_with_deadline",
    "carry_context",
    "cell",
    "configure",
    "current_cell",
    "instrument",
    "shutdown",
    "stream_with_deadline",
    "uninstrument",
]

# Imported on first use, so `import spark_otel` stays cheap and the CLI's --help stays fast.
_LAZY = {
    "DeadlineResult": "deadline",
    "astream_with_deadline": "deadline",
    "stream_with_deadline": "deadline",
    "SparkOtelInstrumentor": "instrumentation",
    "instrument": "instrumentation",
    "uninstrument": "instrumentation",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'spark_otel' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
