"""spark-otel: where an LLM evaluation box spends its time, in OpenTelemetry.

    import spark_otel
    spark_otel.instrument()                       # every openai / raw HTTP call gets a span
    with spark_otel.cell("golden-review", cell_id="B#265", engine="qwen", deadline_s=1800):
        result = spark_otel.stream_with_deadline(client, model=..., messages=..., deadline_s=1800)

With no OTLP endpoint configured, spans, metrics and cells go to the embedded store
(``spark-otel cells`` lists them); the standard ``OTEL_*`` variables send them to a collector.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._version import __version__

if TYPE_CHECKING:
    from ._exceptions import (
        ConfigError,
        EngineError,
        GovernorError,
        InputError,
        NoGpuError,
        NoGpuMetricsError,
        SparkOtelError,
        StoreError,
    )
    from .cells import CellState, ContextThreadPoolExecutor, carry_context, cell, current_cell
    from .deadline import DeadlineResult, astream_with_deadline, stream_with_deadline
    from .governor import govern, ungovern
    from .instrumentation import SparkOtelInstrumentor, instrument, uninstrument
    from .model import Cell, CellStatus, LoadWindow, MetricSample, Request
    from .telemetry import Telemetry, configure, shutdown

__all__ = [
    "Cell",
    "CellState",
    "CellStatus",
    "ConfigError",
    "ContextThreadPoolExecutor",
    "DeadlineResult",
    "EngineError",
    "GovernorError",
    "InputError",
    "LoadWindow",
    "MetricSample",
    "NoGpuError",
    "NoGpuMetricsError",
    "Request",
    "SparkOtelError",
    "SparkOtelInstrumentor",
    "StoreError",
    "Telemetry",
    "__version__",
    "astream_with_deadline",
    "carry_context",
    "cell",
    "configure",
    "current_cell",
    "govern",
    "instrument",
    "shutdown",
    "stream_with_deadline",
    "ungovern",
    "uninstrument",
]

# Each public name's home, imported on first use: `import spark_otel` costs next to nothing and
# does nothing else (no provider, no hook, no environment read), and the CLI's --help stays fast.
_HOMES = {
    "ConfigError": "_exceptions",
    "EngineError": "_exceptions",
    "GovernorError": "_exceptions",
    "InputError": "_exceptions",
    "NoGpuError": "_exceptions",
    "NoGpuMetricsError": "_exceptions",
    "SparkOtelError": "_exceptions",
    "StoreError": "_exceptions",
    "CellState": "cells",
    "ContextThreadPoolExecutor": "cells",
    "carry_context": "cells",
    "cell": "cells",
    "current_cell": "cells",
    "DeadlineResult": "deadline",
    "astream_with_deadline": "deadline",
    "stream_with_deadline": "deadline",
    "govern": "governor",
    "ungovern": "governor",
    "SparkOtelInstrumentor": "instrumentation",
    "instrument": "instrumentation",
    "uninstrument": "instrumentation",
    "Cell": "model",
    "CellStatus": "model",
    "LoadWindow": "model",
    "MetricSample": "model",
    "Request": "model",
    "Telemetry": "telemetry",
    "configure": "telemetry",
    "shutdown": "telemetry",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'spark_otel' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{home}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
