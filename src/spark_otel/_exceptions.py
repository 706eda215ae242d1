"""Errors spark-otel raises to its callers (never from instrumentation into a user's call).

    SparkOtelError              base; carries the CLI exit code
    ├── ConfigError             bad arguments or settings; also a ValueError (exit 2)
    ├── InputError              a file or record that cannot be read as what it claims to be (exit 1)
    │   └── NoGpuMetricsError   an Nsight export captured without GPU metrics (exit 1)
    ├── EngineError             an engine that is unreachable or answers wrongly (exit 1)
    │   └── ProbeIncomplete     the probe stopped partway; carries the levels measured
    │                           (`spark_otel.probe`, beside the report it carries)
    ├── NoGpuError              no NVIDIA GPU, NVML or nvidia-smi on this machine (exit 1)
    ├── StoreError              the embedded store cannot be opened or written (exit 1)
    └── GovernorError           with ``fail_closed=True``: the governor cannot decide (exit 1)

Each is exported from ``spark_otel``: ``except spark_otel.SparkOtelError`` catches every error
spark-otel raises on purpose. Messages name the input and the problem, so the CLI can print
them as one line.
"""

from __future__ import annotations

__all__ = [
    "ConfigError",
    "EngineError",
    "GovernorError",
    "InputError",
    "NoGpuError",
    "NoGpuMetricsError",
    "SparkOtelError",
    "StoreError",
]


class SparkOtelError(Exception):
    """Base of every error spark-otel raises on purpose."""

    exit_code = 1


class ConfigError(SparkOtelError, ValueError):
    """An argument, option or environment setting is invalid."""

    exit_code = 2


class InputError(SparkOtelError):
    """An input file or record is malformed; the message names it (and the line, where there is one)."""


class NoGpuMetricsError(InputError):
    """An Nsight Systems export holds no GPU metrics (captured without --gpu-metrics-devices)."""


class EngineError(SparkOtelError):
    """An inference engine is unreachable or its answer is not what the protocol promises."""


class NoGpuError(SparkOtelError):
    """Neither NVML nor nvidia-smi can see a GPU here."""


class StoreError(SparkOtelError):
    """The embedded SQLite store cannot be opened or written."""


class GovernorError(SparkOtelError):
    """With ``fail_closed=True``: the governor cannot decide, so the cell does not start."""
