"""`BulkHistogram` against the SDK's own explicit-bucket histogram, fed the same values.

Both live in one meter provider whose one reader is a `BulkHistogramReader`, so each
collection holds the SDK's points and the bulk points side by side, in the same scope.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.metrics import Histogram as SdkHistogram
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics._internal import _view_instrument_match as view_instrument_match
from opentelemetry.sdk.metrics.export import AggregationTemporality, HistogramDataPoint, MetricsData
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, TraceFlags
from tests.support.metric_points import CapturingExporter, points_in

from spark_otel import _semconv as sc
from spark_otel.telemetry.bulk_histogram import (
    CARDINALITY_LIMIT,
    BulkHistogram,
    BulkHistogramReader,
    BulkHistograms,
    attributes_key,
    bulk_histograms_of,
)

BOUNDS = tuple(sc.DURATION_BUCKETS_S)
SCOPE = InstrumentationScope("bulk-test", "1", "https://example.test/schema")


class SideBySide:
    """An SDK histogram and a bulk histogram in one provider, read by one bulk reader."""

    def __init__(self, temporality: AggregationTemporality, scope: InstrumentationScope = SCOPE) -> None:
        self.exporter = CapturingExporter({SdkHistogram: temporality})
        self.bulk = BulkHistogram("bulk", unit="s", description="bulk twin", boundaries=BOUNDS)
        self.reader = BulkHistogramReader(
            self.exporter, BulkHistograms(scope, (self.bulk,)), export_interval_millis=math.inf
        )
        self.provider = MeterProvider(metric_readers=[self.reader], shutdown_on_exit=False)
        meter = self.provider.get_meter(SCOPE.name, SCOPE.version, schema_url=SCOPE.schema_url)
        self.sdk = meter.create_histogram("sdk", unit="s", explicit_bucket_boundaries_advisory=list(BOUNDS))

    def record(self, values: Sequence[float], attributes: dict[str, Any]) -> None:
        self.bulk.record_many(values, attributes)
        for value in values:
            self.sdk.record(value, attributes)

    def collect(self) -> MetricsData | None:
        before = len(self.exporter.exports)
        self.reader.collect()
        return self.exporter.exports[-1] if len(self.exporter.exports) > before else None

    def close(self) -> None:
        self.provider.shutdown()


def points(data: MetricsData | None, name: str) -> dict[str, HistogramDataPoint]:
    """Metric ``name``'s points by their attribute set."""
    return {repr(sorted((p.attributes or {}).items())): p for p in points_in(data, name)}


def assert_same_points(data: MetricsData | None) -> None:
    sdk, bulk = points(data, "sdk"), points(data, "bulk")
    assert sdk.keys() == bulk.keys()
    for key, want in sdk.items():
        got = bulk[key]
        assert got.bucket_counts == want.bucket_counts, key
        assert got.count == want.count
        assert got.sum == pytest.approx(want.sum, rel=1e-12, abs=1e-300)
        assert (got.min, got.max) == (want.min, want.max)
        assert tuple(got.explicit_bounds) == tuple(want.explicit_bounds)
        assert got.start_time_unix_nano <= got.time_unix_nano


# Values at, just under and just over every boundary, besides arbitrary ones, and ones the SDK drops.
_edges = st.sampled_from([b * f for b in BOUNDS for f in (1.0, 1 - 1e-12, 1 + 1e-12)])
_value = st.one_of(
    st.floats(min_value=0, max_value=200, allow_nan=False),
    _edges,
    st.sampled_from([-1.0, math.inf, math.nan]),
)
_batch = st.tuples(st.sampled_from(["a", "b", "c"]), st.lists(_value, max_size=40))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    collections=st.lists(st.lists(_batch, max_size=5), min_size=1, max_size=4),
    temporality=st.sampled_from([AggregationTemporality.CUMULATIVE, AggregationTemporality.DELTA]),
)
def test_points_equal_the_sdk_histogram_fed_the_same_values(
    collections: list[list[tuple[str, list[float]]]], temporality: AggregationTemporality
) -> None:
    twin = SideBySide(temporality)
    try:
        for batches in collections:
            for model, values in batches:
                twin.record(values, {"gen_ai.request.model": model, "server.port": 8000})
            assert_same_points(twin.collect())
    finally:
        twin.close()


def test_delta_points_start_at_the_previous_collection() -> None:
    twin = SideBySide(AggregationTemporality.DELTA)
    try:
        twin.record([0.5, 0.7], {"k": "v"})
        first = points(twin.collect(), "bulk")["[('k', 'v')]"]
        assert first.count == 2
        twin.record([0.1], {"k": "v"})
        second = points(twin.collect(), "bulk")["[('k', 'v')]"]
        assert second.count == 1  # only what came since
        assert second.start_time_unix_nano >= first.time_unix_nano
    finally:
        twin.close()


def test_cumulative_points_keep_their_start_and_grow() -> None:
    twin = SideBySide(AggregationTemporality.CUMULATIVE)
    try:
        twin.record([0.5], {"k": "v"})
        first = points(twin.collect(), "bulk")["[('k', 'v')]"]
        twin.record([0.1, 3.0], {"k": "v"})
        second = points(twin.collect(), "bulk")["[('k', 'v')]"]
        assert (first.count, second.count) == (1, 3)
        assert second.start_time_unix_nano == first.start_time_unix_nano
        assert (second.min, second.max) == (0.1, 3.0)
    finally:
        twin.close()


def test_attribute_sets_past_the_cardinality_limit_overflow_as_in_the_sdk() -> None:
    """The SDK limits attribute sets from 1.45.2 (its overflow point); 1.45.1, which the dev
    extra's contrib instrumentations hold the SDK at, keeps every set. The bulk histogram limits
    them on every SDK: side by side where the SDK limits too, else on the sets below the limit."""
    twin = SideBySide(AggregationTemporality.CUMULATIVE)
    try:
        for i in range(CARDINALITY_LIMIT + 5):
            twin.record([0.01 * (i % 7)], {"set": i})
        data = twin.collect()
        bulk = points(data, "bulk")
        assert len(bulk) == CARDINALITY_LIMIT + 1
        assert bulk["[('otel.metric.overflow', True)]"].count == 5
        if hasattr(view_instrument_match, "_OVERFLOW_ATTRIBUTES"):
            assert_same_points(data)
        else:
            sdk = points(data, "sdk")
            assert len(sdk) == CARDINALITY_LIMIT + 5
            for key, got in bulk.items():
                if "overflow" not in key:
                    assert (got.bucket_counts, got.count) == (sdk[key].bucket_counts, sdk[key].count)
    finally:
        twin.close()


def test_bulk_points_join_the_sdk_scope_or_come_in_their_own() -> None:
    same = SideBySide(AggregationTemporality.CUMULATIVE)
    other = SideBySide(AggregationTemporality.CUMULATIVE, InstrumentationScope("elsewhere", "2"))
    try:
        for twin in (same, other):
            twin.record([0.2], {"k": "v"})
        merged, apart = same.collect(), other.collect()
        assert merged is not None
        assert apart is not None
        (scope_metrics,) = merged.resource_metrics[0].scope_metrics
        assert {m.name for m in scope_metrics.metrics} == {"sdk", "bulk"}
        by_scope = {
            sm.scope.name: {m.name for m in sm.metrics} for sm in apart.resource_metrics[0].scope_metrics
        }
        assert by_scope == {SCOPE.name: {"sdk"}, "elsewhere": {"bulk"}}
    finally:
        same.close()
        other.close()


def test_bulk_points_are_exported_when_the_sdk_has_nothing_under_the_providers_resource() -> None:
    """A runner that records only requests has only bulk points: they go out on their own."""
    resource = Resource({"service.name": "runner"})
    exporter = CapturingExporter({SdkHistogram: AggregationTemporality.DELTA})
    bulk = BulkHistogram("bulk", unit="s", description="", boundaries=BOUNDS)
    reader = BulkHistogramReader(
        exporter, BulkHistograms(SCOPE, (bulk,)), export_interval_millis=math.inf, resource=resource
    )
    provider = MeterProvider(metric_readers=[reader], resource=resource, shutdown_on_exit=False)
    try:
        bulk.record(0.3, {"k": "v"})
        bulk.record(0.4, {"k": "v"})
        reader.collect()
        [data] = exporter.exports
        assert data.resource_metrics[0].resource is resource
        assert points(data, "bulk")["[('k', 'v')]"].count == 2
        reader.collect()
        assert len(exporter.exports) == 1  # nothing new: nothing exported (delta)
    finally:
        provider.shutdown()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches=st.lists(_batch, max_size=6))
def test_one_value_at_a_time_gives_the_points_the_sdk_gives(batches: list[tuple[str, list[float]]]) -> None:
    twin = SideBySide(AggregationTemporality.CUMULATIVE)
    try:
        for model, values in batches:
            attributes = {"gen_ai.request.model": model}
            key = attributes_key(attributes)
            for value in values:
                twin.bulk.record(value, attributes, key)
                twin.sdk.record(value, attributes)
        data = twin.collect()
        assert_same_points(data)
    finally:
        twin.close()


def test_exemplars_are_the_sdks_last_sampled_value_per_bucket() -> None:
    """Under the SDK's default trace-based filter, a value recorded in a sampled span becomes its
    bucket's exemplar with that span's ids, for bulk and SDK alike; an unsampled one does not."""
    twin = SideBySide(AggregationTemporality.DELTA)
    tracer = TracerProvider(shutdown_on_exit=False).get_tracer("t")
    try:
        for value in (0.05, 0.07, 2.0):
            with tracer.start_as_current_span("request") as span:
                twin.sdk.record(value, {"k": "v"})
                twin.bulk.record(value, {"k": "v"}, span=span.get_span_context())
        unsampled = SpanContext(1, 2, is_remote=False, trace_flags=TraceFlags(0))
        twin.bulk.record(0.06, {"k": "v"}, span=unsampled)
        twin.sdk.record(0.06, {"k": "v"})  # no current span: not sampled either
        data = twin.collect()
        sdk, bulk = points(data, "sdk")["[('k', 'v')]"], points(data, "bulk")["[('k', 'v')]"]
        want = [(e.value, e.span_id, e.trace_id) for e in sdk.exemplars]
        assert [(e.value, e.span_id, e.trace_id) for e in bulk.exemplars] == want
        assert [v for v, *_ in want] == [0.07, 2.0]
        assert points(twin.collect(), "bulk") == {}  # exemplars went with their delta point
    finally:
        twin.close()


def test_every_reader_gets_every_value_in_its_own_temporality() -> None:
    bulk = BulkHistogram("bulk", unit="s", description="", boundaries=BOUNDS)
    histograms = BulkHistograms(SCOPE, (bulk,))
    exporters = [
        CapturingExporter({SdkHistogram: t})
        for t in (AggregationTemporality.DELTA, AggregationTemporality.CUMULATIVE)
    ]
    readers = [BulkHistogramReader(e, histograms, export_interval_millis=math.inf) for e in exporters]
    provider = MeterProvider(metric_readers=readers, shutdown_on_exit=False)
    sdk = provider.get_meter(SCOPE.name, SCOPE.version).create_histogram("sdk")
    try:
        for round_ in range(3):
            bulk.record_many([0.05] * (round_ + 1), {"k": "v"})
            sdk.record(1.0)
            for reader in readers:
                reader.collect()
        delta = [points(d, "bulk")["[('k', 'v')]"].count for d in exporters[0].exports]
        cumulative = [points(d, "bulk")["[('k', 'v')]"].count for d in exporters[1].exports]
        assert (delta, cumulative) == ([1, 2, 3], [1, 3, 6])
    finally:
        provider.shutdown()


def test_only_providers_spark_otel_built_take_bulk_records() -> None:
    import spark_otel

    own = spark_otel.telemetry.build_providers([], [(CapturingExporter(), math.inf)])
    foreign = MeterProvider(shutdown_on_exit=False)
    try:
        assert bulk_histograms_of(own[1]) is not None
        assert bulk_histograms_of(foreign) is None
        assert bulk_histograms_of(object()) is None
    finally:
        own[1].shutdown()
        foreign.shutdown()


def test_a_failing_bulk_collection_still_exports_the_sdk_points(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Injected (no real input makes it fail): the SDK's own points must never be lost to it."""

    def broken(self: BulkHistogram, state: Any, now_ns: int) -> None:
        raise RuntimeError("injected")

    twin = SideBySide(AggregationTemporality.CUMULATIVE)
    try:
        twin.record([0.2], {"k": "v"})
        monkeypatch.setattr(BulkHistogram, "collect", broken)
        data = twin.collect()
        assert points(data, "sdk")["[('k', 'v')]"].count == 1
        assert points(data, "bulk") == {}
        assert "bulk histograms" in caplog.text
    finally:
        twin.close()
