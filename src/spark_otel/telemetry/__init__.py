"""Where spans, metrics and cells go: `configure()`, the providers it builds, spark-otel's
instruments and the bulk histograms its readers export.

    pipeline        configure(), ensure_telemetry() (one setup per process), the Telemetry in force
    settings        the OTEL_* batch and export settings, checked (an unusable value is its default)
    providers       tracer and meter providers and OTLP exporters from the OTEL_* settings
    instruments     the histograms and counters spark-otel records, from one table
    bulk_histogram  histograms fed many values per call, and the reader that exports them
"""

from __future__ import annotations

from .pipeline import (
    Telemetry,
    configure,
    current_telemetry,
    ensure_telemetry,
    shutdown,
    user_pipeline_installed,
)
from .providers import (
    DEFAULT_SERVICE_NAME,
    build_providers,
    otlp_configured,
    otlp_metric_exporter,
    otlp_span_exporter,
)

__all__ = [
    "DEFAULT_SERVICE_NAME",
    "Telemetry",
    "build_providers",
    "configure",
    "current_telemetry",
    "ensure_telemetry",
    "otlp_configured",
    "otlp_metric_exporter",
    "otlp_span_exporter",
    "shutdown",
    "user_pipeline_installed",
]
