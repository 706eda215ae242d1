"""The OpenTelemetry SDK internals `telemetry/bulk_histogram.py` and `telemetry/providers.py`
rely on, each checked by name: an SDK upgrade that moves one fails here, naming it, before any
export goes wrong. The SDK range in pyproject.toml is the range these pass on (checked by hand
at both ends: see docs/decisions.md)."""

from __future__ import annotations

import inspect

from opentelemetry import metrics
from opentelemetry.sdk.metrics import Histogram as SdkHistogram
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import (
    AggregationTemporality,
    MetricExporter,
    MetricExportResult,
    MetricsData,
    PeriodicExportingMetricReader,
)
from opentelemetry.sdk.metrics.view import DefaultAggregation


class _Kept(MetricExporter):
    def __init__(self) -> None:
        super().__init__(preferred_temporality={SdkHistogram: AggregationTemporality.DELTA})
        self.exports: list[MetricsData] = []

    def export(
        self, metrics_data: MetricsData, timeout_millis: float = 10_000, **kwargs: object
    ) -> MetricExportResult:
        self.exports.append(metrics_data)
        return MetricExportResult.SUCCESS

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return True

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: object) -> None:
        return None


def test_a_periodic_reader_hands_each_collection_to_receive_metrics() -> None:
    """`BulkHistogramReader` overrides `_receive_metrics` (to add its points to the SDK's) and
    `collect` (to export them alone when the SDK had nothing)."""
    received: list[MetricsData] = []

    class Reader(PeriodicExportingMetricReader):
        def _receive_metrics(
            self, metrics_data: MetricsData, timeout_millis: float = 10_000, **kwargs: object
        ) -> None:
            received.append(metrics_data)
            super()._receive_metrics(metrics_data, timeout_millis, **kwargs)

    exporter = _Kept()
    reader = Reader(exporter, export_interval_millis=float("inf"))
    provider = MeterProvider(metric_readers=[reader])
    provider.get_meter("contract").create_counter("c").add(1)
    reader.collect(timeout_millis=1_000)
    assert len(received) == 1
    assert exporter.exports == received
    assert list(inspect.signature(PeriodicExportingMetricReader._receive_metrics).parameters)[:3] == [
        "self",
        "metrics_data",
        "timeout_millis",
    ]
    provider.shutdown()


def test_a_reader_keeps_its_exporters_temporality_and_aggregation_per_instrument_class() -> None:
    """`BulkHistogramReader` reads the histogram's temporality and aggregation from these two."""
    reader = PeriodicExportingMetricReader(_Kept(), export_interval_millis=float("inf"))
    temporality = [t for c, t in reader._instrument_class_temporality.items() if issubclass(c, SdkHistogram)]
    aggregation = [a for c, a in reader._instrument_class_aggregation.items() if issubclass(c, SdkHistogram)]
    assert temporality == [AggregationTemporality.DELTA]
    assert len(aggregation) == 1
    assert isinstance(aggregation[0], DefaultAggregation)


def test_a_meter_provider_keeps_its_exemplar_filter_in_its_sdk_config() -> None:
    """`bulk_histograms_of` follows the provider's exemplar filter, as the SDK's own histograms do."""
    from opentelemetry.sdk.metrics import AlwaysOnExemplarFilter

    provider = MeterProvider(exemplar_filter=AlwaysOnExemplarFilter())
    assert isinstance(provider._sdk_config.exemplar_filter, AlwaysOnExemplarFilter)
    provider.shutdown()


def test_the_api_placeholder_provider_is_named_as_providers_checks_it() -> None:
    """`set_global_providers` installs spark-otel's provider only over the API's placeholder,
    which it recognises by its class name."""
    from opentelemetry.metrics import _internal

    assert _internal._ProxyMeterProvider.__name__ == "_ProxyMeterProvider"
    assert isinstance(_internal._PROXY_METER_PROVIDER, _internal._ProxyMeterProvider)
    assert metrics.get_meter_provider is _internal.get_meter_provider
