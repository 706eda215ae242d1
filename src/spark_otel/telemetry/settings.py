"""The batch and export settings of the standard ``OTEL_*`` variables, checked before the SDK
sees them.

The SDK raises on a value it cannot use (a negative delay, an empty queue, a batch larger than
its queue), and an exporter with a negative timeout fails every export: either way every cell the
process records is lost. So each such value is read here once per `configure()`, and one that is
not a usable number is replaced by the SDK's default with one warning naming the variable; the
providers are then built with explicit values the SDK never re-reads.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

from .._guard import warn_once

__all__ = ["BatchSettings", "ExportSettings", "export_settings"]


@dataclass(frozen=True, slots=True)
class _Variable:
    name: str
    default: float
    unit: str
    integer: bool = False
    infinite_ok: bool = False

    def read(self, fallback: _Variable | None = None) -> float:
        """The variable's value (or ``fallback``'s where it is unset); its default, with one
        warning, where the value is not a positive number."""
        source = self
        raw = os.environ.get(self.name, "").strip()
        if not raw and fallback is not None:
            source, raw = fallback, os.environ.get(fallback.name, "").strip()
        if not raw:
            return self.default
        try:
            value = float(raw)
        except ValueError:
            value = math.nan
        usable = value > 0 and (math.isfinite(value) or (self.infinite_ok and value == math.inf))
        if usable and self.integer and value != int(value):
            usable = False
        if not usable:
            kind = "a whole number above 0" if self.integer else "a number above 0"
            warn_once(
                f"setting {source.name}={raw}",
                f"{source.name}={raw!r} is not {kind} ({self.unit}); "
                f"spark-otel uses the default, {self.default:g} {self.unit}, so nothing is lost",
            )
            return self.default
        return value


_SCHEDULE_DELAY = _Variable("OTEL_BSP_SCHEDULE_DELAY", 5000, "ms")
_MAX_QUEUE_SIZE = _Variable("OTEL_BSP_MAX_QUEUE_SIZE", 2048, "spans", integer=True)
_MAX_EXPORT_BATCH_SIZE = _Variable("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", 512, "spans", integer=True)
_EXPORT_TIMEOUT = _Variable("OTEL_BSP_EXPORT_TIMEOUT", 30_000, "ms")
_METRIC_INTERVAL = _Variable("OTEL_METRIC_EXPORT_INTERVAL", 60_000, "ms", infinite_ok=True)
_METRIC_TIMEOUT = _Variable("OTEL_METRIC_EXPORT_TIMEOUT", 30_000, "ms")
# The Python OTLP exporters read their timeouts in seconds; a signal's own variable comes first.
_OTLP_TIMEOUT = _Variable("OTEL_EXPORTER_OTLP_TIMEOUT", 10, "s")
_OTLP_TRACES_TIMEOUT = _Variable("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", 10, "s")
_OTLP_METRICS_TIMEOUT = _Variable("OTEL_EXPORTER_OTLP_METRICS_TIMEOUT", 10, "s")


@dataclass(frozen=True, slots=True)
class BatchSettings:
    """A batch span processor's arguments, each one the SDK accepts."""

    schedule_delay_millis: float
    max_queue_size: int
    max_export_batch_size: int
    export_timeout_millis: float

    def with_queue(self, max_queue_size: int, schedule_delay_millis: float) -> BatchSettings:
        """The same settings on a queue and delay of the caller's (the store's deep queue)."""
        return BatchSettings(
            schedule_delay_millis,
            max_queue_size,
            min(self.max_export_batch_size, max_queue_size),
            self.export_timeout_millis,
        )


@dataclass(frozen=True, slots=True)
class ExportSettings:
    """Every export setting `configure()` hands the SDK, checked."""

    batch: BatchSettings
    metric_interval_millis: float
    metric_timeout_millis: float
    traces_timeout_s: float
    metrics_timeout_s: float


def export_settings() -> ExportSettings:
    """The export settings of the environment now; an unusable value is its default (warned once)."""
    queue = int(_MAX_QUEUE_SIZE.read())
    batch_size = int(_MAX_EXPORT_BATCH_SIZE.read())
    if batch_size > queue:
        warn_once(
            f"setting batch {batch_size} over queue {queue}",
            f"{_MAX_EXPORT_BATCH_SIZE.name}={batch_size} is larger than {_MAX_QUEUE_SIZE.name}={queue}; "
            f"spark-otel exports batches of {queue} spans",
        )
        batch_size = queue
    return ExportSettings(
        batch=BatchSettings(_SCHEDULE_DELAY.read(), queue, batch_size, _EXPORT_TIMEOUT.read()),
        metric_interval_millis=_METRIC_INTERVAL.read(),
        metric_timeout_millis=_METRIC_TIMEOUT.read(),
        traces_timeout_s=_OTLP_TRACES_TIMEOUT.read(fallback=_OTLP_TIMEOUT),
        metrics_timeout_s=_OTLP_METRICS_TIMEOUT.read(fallback=_OTLP_TIMEOUT),
    )
