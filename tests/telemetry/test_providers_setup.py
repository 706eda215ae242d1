"""The providers and OTLP exporters the standard ``OTEL_*`` settings ask for: which exporter each
protocol gets, per signal and overall, the service's name, and which providers are spark-otel's."""

from __future__ import annotations

import sys

import pytest
from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter as GrpcMetricExporter
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpanExporter
from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter as HttpMetricExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpanExporter
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.resources import SERVICE_NAME
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from tests.support.metric_points import CapturingExporter

from spark_otel import ConfigError
from spark_otel.telemetry.providers import (
    DEFAULT_SERVICE_NAME,
    build_providers,
    is_own_provider,
    otlp_configured,
    otlp_metric_exporter,
    otlp_span_exporter,
)

OTEL = (
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
    "OTEL_EXPORTER_OTLP_PROTOCOL",
    "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
    "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL",
    "OTEL_SERVICE_NAME",
    "OTEL_RESOURCE_ATTRIBUTES",
)


@pytest.fixture(autouse=True)
def _no_otel_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in OTEL:
        monkeypatch.delenv(name, raising=False)


def test_an_endpoint_for_all_signals_or_for_one_turns_otlp_on_for_it(monkeypatch: pytest.MonkeyPatch) -> None:
    assert (otlp_configured(), otlp_configured("metrics")) == (False, False)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://127.0.0.1:4318/v1/traces")
    assert (otlp_configured("traces"), otlp_configured("metrics")) == (True, False)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")
    assert (otlp_configured("traces"), otlp_configured("metrics")) == (True, True)


def test_each_signal_gets_the_exporter_of_its_protocol(monkeypatch: pytest.MonkeyPatch) -> None:
    assert type(otlp_span_exporter()) is HttpSpanExporter  # the default: http/protobuf
    assert type(otlp_metric_exporter()) is HttpMetricExporter
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", " grpc ")
    assert type(otlp_span_exporter()) is GrpcSpanExporter
    assert type(otlp_metric_exporter()) is GrpcMetricExporter
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_METRICS_PROTOCOL", "http/protobuf")  # one signal's own wins
    assert type(otlp_span_exporter()) is GrpcSpanExporter
    assert type(otlp_metric_exporter()) is HttpMetricExporter
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/json")
    with pytest.raises(ConfigError) as caught:
        otlp_span_exporter()
    assert str(caught.value) == "OTEL_EXPORTER_OTLP_PROTOCOL='http/json': use 'http/protobuf' or 'grpc'"
    with pytest.raises(ConfigError, match="'http/json'"):
        otlp_span_exporter()
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_METRICS_PROTOCOL", "udp")
    with pytest.raises(ConfigError, match="OTEL_EXPORTER_OTLP_PROTOCOL='udp'"):
        otlp_metric_exporter()


def test_the_service_is_named_by_the_argument_the_settings_or_else_spark_otel(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def name(**kw: str) -> object:
        tracer_provider, meter_provider = build_providers([], [], **kw)
        meter_provider.shutdown()
        return tracer_provider.resource.attributes[SERVICE_NAME]

    assert name() == DEFAULT_SERVICE_NAME == "spark-otel"
    assert name(service_name="evals") == "evals"
    monkeypatch.setenv("OTEL_SERVICE_NAME", "box-7")
    assert name() == "box-7"
    assert name(service_name="evals") == "evals"


def test_the_providers_built_send_spans_to_each_processor_and_are_known_as_spark_otels() -> None:
    first, second = InMemorySpanExporter(), InMemorySpanExporter()
    reader = InMemoryMetricReader()
    tracer_provider, meter_provider = build_providers(
        [SimpleSpanProcessor(first), SimpleSpanProcessor(second)], []
    )
    with tracer_provider.get_tracer("t").start_as_current_span("s"):
        pass
    assert (
        [s.name for s in first.get_finished_spans()] == [s.name for s in second.get_finished_spans()] == ["s"]
    )
    assert (is_own_provider(tracer_provider), is_own_provider(meter_provider)) == (True, True)
    assert not is_own_provider(TracerProvider())
    assert not is_own_provider(MeterProvider(metric_readers=[reader]))
    tracer_provider.shutdown()
    meter_provider.shutdown()


def test_the_default_signal_is_traces(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://127.0.0.1:4318/v1/traces")
    assert otlp_configured() is True


@pytest.mark.parametrize(
    ("module", "make"),
    [
        ("opentelemetry.exporter.otlp.proto.grpc.trace_exporter", otlp_span_exporter),
        ("opentelemetry.exporter.otlp.proto.grpc.metric_exporter", otlp_metric_exporter),
    ],
)
def test_grpc_without_its_extra_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch, module: str, make: object
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
    monkeypatch.setitem(sys.modules, module, None)  # as if the grpc extra were not installed
    with pytest.raises(ConfigError) as caught:
        make()  # type: ignore[operator]
    assert str(caught.value) == "OTLP over gRPC needs the grpc extra: pip install 'spark-otel[grpc]'"


def test_metrics_leave_with_the_service_named_on_them() -> None:
    exporter = CapturingExporter()
    tracer_provider, meter_provider = build_providers([], [(exporter, 60_000.0)], service_name="box-7")
    meter_provider.get_meter("t").create_counter("c").add(1)
    meter_provider.force_flush()
    assert exporter.last is not None
    assert [rm.resource.attributes[SERVICE_NAME] for rm in exporter.last.resource_metrics] == ["box-7"]
    meter_provider.shutdown()
    tracer_provider.shutdown()
