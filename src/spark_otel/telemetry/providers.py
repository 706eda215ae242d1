"""OpenTelemetry providers and OTLP exporters, built from the standard ``OTEL_*`` settings.

`build_providers` makes a tracer and a meter provider whose readers also export spark-otel's
bulk histograms (`bulk_histogram`); every provider it makes is remembered, so a global provider
can be told apart from one the user installed (`is_own_provider`).
"""

from __future__ import annotations

import os
import weakref
from collections.abc import Sequence

from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import MetricExporter
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter

from .. import _semconv as sc
from .._exceptions import ConfigError
from .bulk_histogram import BulkHistogramReader, register_bulk_histograms
from .instruments import bulk_histograms

__all__ = [
    "DEFAULT_SERVICE_NAME",
    "EVAL_ENV",
    "build_providers",
    "is_own_provider",
    "otlp_configured",
    "otlp_metric_exporter",
    "otlp_span_exporter",
    "set_global_providers",
]

DEFAULT_SERVICE_NAME = sc.DEFAULT_SERVICE_NAME
EVAL_ENV = "SPARK_OTEL_EVAL"
"""The eval a runner's requests belong to when no `cell()` names one: on the resource as
``spark_otel.eval``, so requests outside cells are grouped under it (`analysis.request_cells`)."""
# Every provider build_providers() created, so a global one can be told apart from the user's own.
_own_providers: weakref.WeakSet[object] = weakref.WeakSet()


def is_own_provider(provider: object) -> bool:
    """Whether spark-otel built ``provider`` (as opposed to the user or the API's placeholder)."""
    return provider in _own_providers


def otlp_configured(signal: str = "traces") -> bool:
    """True when the standard variables name an OTLP endpoint for ``signal``."""
    return bool(
        os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
        or os.environ.get(f"OTEL_EXPORTER_OTLP_{signal.upper()}_ENDPOINT")
    )


def _protocol(signal: str) -> str:
    return (
        os.environ.get(f"OTEL_EXPORTER_OTLP_{signal.upper()}_PROTOCOL")
        or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL")
        or "http/protobuf"
    ).strip()


def _checked_protocol(signal: str) -> str:
    proto = _protocol(signal)
    if proto not in ("http/protobuf", "grpc"):
        raise ConfigError(f"OTEL_EXPORTER_OTLP_PROTOCOL={proto!r}: use 'http/protobuf' or 'grpc'")
    return proto


def otlp_span_exporter(timeout_s: float | None = None) -> SpanExporter:
    """An OTLP span exporter configured by the standard variables (protocol, endpoint, headers);
    ``timeout_s`` overrides theirs (`settings` passes a checked one)."""
    try:
        if _checked_protocol("traces") == "grpc":
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

            return OTLPSpanExporter(timeout=timeout_s)
    except ImportError as exc:
        raise ConfigError("OTLP over gRPC needs the grpc extra: pip install 'spark-otel[grpc]'") from exc
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpanExporter

    return HttpSpanExporter(timeout=timeout_s)


def otlp_metric_exporter(timeout_s: float | None = None) -> MetricExporter:
    """An OTLP metric exporter configured by the standard variables (temporality included);
    ``timeout_s`` overrides theirs."""
    try:
        if _checked_protocol("metrics") == "grpc":
            from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter

            return OTLPMetricExporter(timeout=timeout_s)
    except ImportError as exc:
        raise ConfigError("OTLP over gRPC needs the grpc extra: pip install 'spark-otel[grpc]'") from exc
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import (
        OTLPMetricExporter as HttpMetricExporter,
    )

    return HttpMetricExporter(timeout=timeout_s)


def build_providers(
    span_processors: Sequence[SpanProcessor],
    metric_exporters: Sequence[tuple[MetricExporter, float | None]],
    *,
    service_name: str | None = None,
    export_timeout_millis: float | None = None,
) -> tuple[TracerProvider, MeterProvider]:
    """Providers that send spans to ``span_processors`` and metrics to each exporter at its
    interval (None: ``OTEL_METRIC_EXPORT_INTERVAL``), each export bounded by
    ``export_timeout_millis`` (None: ``OTEL_METRIC_EXPORT_TIMEOUT``), with the resource from the
    ``OTEL_*`` settings and `EVAL_ENV`. Their readers also export spark-otel's bulk histograms
    (see `bulk_histogram`)."""
    attributes: dict[str, str] = {SERVICE_NAME: service_name} if service_name else {}
    if os.environ.get(EVAL_ENV, "").strip():
        attributes[sc.EVAL_NAME] = os.environ[EVAL_ENV].strip()
    resource = Resource.create(attributes)
    if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
        # Neither the argument, OTEL_SERVICE_NAME nor OTEL_RESOURCE_ATTRIBUTES named the service.
        resource = resource.merge(Resource({SERVICE_NAME: DEFAULT_SERVICE_NAME}))
    tracer_provider = TracerProvider(resource=resource, shutdown_on_exit=False)
    for processor in span_processors:
        tracer_provider.add_span_processor(processor)
    bulk = bulk_histograms()
    readers = [
        BulkHistogramReader(
            exporter, bulk, export_interval_millis=interval, export_timeout_millis=export_timeout_millis
        )
        for exporter, interval in metric_exporters
    ]
    meter_provider = MeterProvider(resource=resource, metric_readers=readers, shutdown_on_exit=False)
    if all(reader.takes_bulk for reader in readers):
        register_bulk_histograms(meter_provider, bulk)
    _own_providers.add(tracer_provider)
    _own_providers.add(meter_provider)
    return tracer_provider, meter_provider


def set_global_providers(tracer_provider: TracerProvider, meter_provider: MeterProvider) -> None:
    """Install as the global providers where the user has not installed their own."""
    if isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        trace.set_tracer_provider(tracer_provider)
    if type(metrics.get_meter_provider()).__name__ == "_ProxyMeterProvider":
        metrics.set_meter_provider(meter_provider)
