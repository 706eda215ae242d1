"""What a `BulkHistogramReader` hands its exporter: the metric's own fields, the scope and
resource its points go under, the timeout it was given, the provider's exemplar filter, and the
start of each point, each compared with the SDK's own histogram where the SDK has one."""

from __future__ import annotations

import logging
import math
import threading
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.metrics import (
    AlwaysOffExemplarFilter,
    AlwaysOnExemplarFilter,
    ExemplarFilter,
    MeterProvider,
    TraceBasedExemplarFilter,
)
from opentelemetry.sdk.metrics import Histogram as SdkHistogram
from opentelemetry.sdk.metrics.export import (
    AggregationTemporality,
    MetricExportResult,
    MetricsData,
)
from opentelemetry.sdk.metrics.view import ExponentialBucketHistogramAggregation
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, TraceFlags
from tests.support.metric_points import CapturingExporter, points_in

from spark_otel import _clock
from spark_otel.telemetry.bulk_histogram import (
    BulkHistogram,
    BulkHistogramReader,
    BulkHistograms,
    register_bulk_histograms,
)

BOUNDS = (0.1, 1.0, 10.0)
SCOPE = InstrumentationScope("bulk-test", "1", "https://example.test/schema")
SAMPLED = SpanContext(0xA1, 0xB2, is_remote=False, trace_flags=TraceFlags(TraceFlags.SAMPLED))
UNSAMPLED = SpanContext(0xC3, 0xD4, is_remote=False, trace_flags=TraceFlags(0))


class TimeoutExporter(CapturingExporter):
    """Keeps the timeout each export was given besides the export."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.timeouts: list[float] = []

    def export(
        self, metrics_data: MetricsData, timeout_millis: float = 10_000, **kwargs: Any
    ) -> MetricExportResult:
        self.timeouts.append(timeout_millis)
        return super().export(metrics_data, timeout_millis, **kwargs)


class Box:
    """One provider whose one reader is a bulk reader of one bulk histogram, registered as
    `build_providers` registers it, beside an SDK histogram of the same bounds."""

    def __init__(
        self,
        *,
        exemplar_filter: ExemplarFilter | None = None,
        scope: InstrumentationScope = SCOPE,
        sdk_scope: InstrumentationScope = SCOPE,
        resource: Resource | None = None,
        temporality: AggregationTemporality = AggregationTemporality.CUMULATIVE,
        **exporter: Any,
    ) -> None:
        self.exporter = TimeoutExporter(preferred_temporality={SdkHistogram: temporality}, **exporter)
        self.bulk = BulkHistogram("bulk", unit="s", description="bulk twin", boundaries=BOUNDS)
        self.histograms = BulkHistograms(scope, (self.bulk,))
        self.reader = BulkHistogramReader(
            self.exporter, self.histograms, export_interval_millis=math.inf, resource=resource
        )
        extra: dict[str, Any] = {} if exemplar_filter is None else {"exemplar_filter": exemplar_filter}
        self.provider = MeterProvider(
            metric_readers=[self.reader],
            resource=resource or Resource.get_empty(),
            shutdown_on_exit=False,
            **extra,
        )
        register_bulk_histograms(self.provider, self.histograms)
        meter = self.provider.get_meter(sdk_scope.name, sdk_scope.version, schema_url=sdk_scope.schema_url)
        self.sdk = meter.create_histogram("sdk", unit="s", explicit_bucket_boundaries_advisory=list(BOUNDS))

    def collect(self, timeout_millis: float = 10_000) -> MetricsData | None:
        before = len(self.exporter.exports)
        self.reader.collect(timeout_millis)
        return self.exporter.exports[-1] if len(self.exporter.exports) > before else None

    def close(self) -> None:
        self.provider.shutdown()


@pytest.fixture
def boxes() -> Any:
    made: list[Box] = []

    def make(**kwargs: Any) -> Box:
        made.append(Box(**kwargs))
        return made[-1]

    yield make
    for box in made:
        box.close()


def metric(data: MetricsData | None, name: str) -> Any:
    assert data is not None
    [found] = [
        m for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics if m.name == name
    ]
    return found


def exemplars(data: MetricsData | None, name: str) -> list[tuple[float, int | None, int | None]]:
    [point] = points_in(data, name)
    return [(e.value, e.span_id, e.trace_id) for e in point.exemplars]


@pytest.mark.parametrize("temporality", [AggregationTemporality.CUMULATIVE, AggregationTemporality.DELTA])
def test_the_bulk_metric_carries_its_unit_description_and_the_exporters_temporality(
    boxes: Any, temporality: AggregationTemporality
) -> None:
    box = boxes(temporality=temporality)
    box.bulk.record(0.5, {"k": "v"})
    box.sdk.record(0.5, {"k": "v"})
    data = box.collect()
    bulk, sdk = metric(data, "bulk"), metric(data, "sdk")
    assert (bulk.unit, bulk.description) == ("s", "bulk twin")
    assert bulk.data.aggregation_temporality == sdk.data.aggregation_temporality == temporality


@pytest.mark.parametrize(
    ("exemplar_filter", "want"),
    [
        (None, [(0.05, 0xB2, 0xA1)]),  # the SDK's default: trace-based
        (TraceBasedExemplarFilter(), [(0.05, 0xB2, 0xA1)]),
        (AlwaysOffExemplarFilter(), []),
        (AlwaysOnExemplarFilter(), [(0.05, 0xB2, 0xA1), (0.5, 0xD4, 0xC3), (5.0, None, None)]),
    ],
)
def test_exemplars_follow_the_providers_filter_as_the_sdks_own_do(
    boxes: Any, exemplar_filter: ExemplarFilter | None, want: list[tuple[float, int | None, int | None]]
) -> None:
    """A sampled span, an unsampled one and none, one bucket each, for bulk and SDK alike."""
    box = boxes(exemplar_filter=exemplar_filter, temporality=AggregationTemporality.DELTA)
    for value, span in ((0.05, SAMPLED), (0.5, UNSAMPLED)):
        with trace.use_span(trace.NonRecordingSpan(span)):
            box.sdk.record(value, {"k": "v"})
        box.bulk.record(value, {"k": "v"}, span=span)
    box.sdk.record(5.0, {"k": "v"})
    box.bulk.record(5.0, {"k": "v"})
    data = box.collect()
    assert exemplars(data, "sdk") == want
    assert exemplars(data, "bulk") == want
    [bulk_point], [sdk_point] = points_in(data, "bulk"), points_in(data, "sdk")
    assert [e.filtered_attributes for e in bulk_point.exemplars] == [
        e.filtered_attributes for e in sdk_point.exemplars
    ]


def test_a_batchs_exemplar_is_its_last_value_with_the_time_it_was_recorded(boxes: Any) -> None:
    box = boxes(exemplar_filter=AlwaysOnExemplarFilter())
    before = _clock.real_wall_ns()
    box.bulk.record_many([0.05, 0.07, 3.0, 0.08], {"k": "v"}, span=SAMPLED)
    after = _clock.real_wall_ns()
    [point] = points_in(box.collect(), "bulk")
    [exemplar] = point.exemplars  # one per batch: its last value, in that value's bucket
    assert (exemplar.value, exemplar.span_id, exemplar.trace_id) == (0.08, 0xB2, 0xA1)
    assert before <= exemplar.time_unix_nano <= after


def test_one_values_exemplar_has_the_time_it_was_recorded(boxes: Any) -> None:
    box = boxes()
    before = _clock.real_wall_ns()
    box.bulk.record(0.2, {"k": "v"}, span=SAMPLED)
    after = _clock.real_wall_ns()
    [point] = points_in(box.collect(), "bulk")
    [exemplar] = point.exemplars
    assert before <= exemplar.time_unix_nano <= after


def test_a_points_start_is_its_first_value_then_the_previous_delta_collection(boxes: Any) -> None:
    box = boxes(temporality=AggregationTemporality.DELTA)
    before = _clock.real_wall_ns()
    box.bulk.record(0.2, {"k": "v"})
    after = _clock.real_wall_ns()
    [first] = points_in(box.collect(), "bulk")
    assert before <= first.start_time_unix_nano <= after
    box.bulk.record_many([0.3], {"k": "v"})
    [second] = points_in(box.collect(), "bulk")
    assert second.start_time_unix_nano == first.time_unix_nano


def test_values_without_a_key_accumulate_by_their_attributes(boxes: Any) -> None:
    box = boxes()
    box.bulk.record(0.2, {"model": "a"})
    box.bulk.record(0.3, {"model": "b"})
    box.bulk.record(0.4, {"model": "a"})
    counts = {p.attributes["model"]: p.count for p in points_in(box.collect(), "bulk")}
    assert counts == {"a": 2, "b": 1}


@pytest.mark.parametrize("shape", [tuple, iter, list])
def test_a_batch_may_be_any_iterable(boxes: Any, shape: Any) -> None:
    box = boxes()
    box.bulk.record_many(shape([0.05, 0.5, -1.0, 5.0]), {"k": "v"})
    [point] = points_in(box.collect(), "bulk")
    assert (point.count, point.sum, point.bucket_counts) == (3, 5.55, (1, 1, 1, 0))


def test_an_exporter_wanting_other_histograms_gets_no_bulk_points(boxes: Any) -> None:
    box = boxes(preferred_aggregation={SdkHistogram: ExponentialBucketHistogramAggregation()})
    assert box.reader.takes_bulk is False
    box.bulk.record(0.2, {"k": "v"})
    box.sdk.record(0.2, {"k": "v"})
    data = box.collect()
    assert points_in(data, "bulk") == []
    assert len(points_in(data, "sdk")) == 1


def test_bulk_points_alone_go_under_their_scope_and_the_providers_resource(boxes: Any) -> None:
    resource = Resource({"service.name": "runner"})
    box = boxes(resource=resource)
    box.bulk.record(0.2, {"k": "v"})
    data = box.collect(timeout_millis=1234)
    assert data is not None
    [resource_metrics] = data.resource_metrics
    assert (resource_metrics.resource, resource_metrics.schema_url) == (resource, "")
    [scoped] = resource_metrics.scope_metrics
    assert (scoped.scope, scoped.schema_url) == (SCOPE, SCOPE.schema_url)
    assert box.exporter.timeouts == [1234]


def test_a_scope_without_a_schema_gives_an_empty_schema_url(boxes: Any) -> None:
    bare = InstrumentationScope("bare", "1")
    alone = boxes(scope=bare)
    alone.bulk.record(0.2, {"k": "v"})
    [scoped] = alone.collect().resource_metrics[0].scope_metrics  # type: ignore[union-attr]
    beside = boxes(scope=bare)
    beside.bulk.record(0.2, {"k": "v"})
    beside.sdk.record(0.2, {"k": "v"})
    schemas = {sm.scope.name: sm.schema_url for sm in beside.collect().resource_metrics[0].scope_metrics}  # type: ignore[union-attr]
    assert (scoped.schema_url, schemas) == ("", {"bare": "", SCOPE.name: SCOPE.schema_url})


def test_bulk_points_beside_the_sdks_keep_its_resource_scope_and_timeout(boxes: Any) -> None:
    resource = Resource({"service.name": "runner"})
    box = boxes(resource=resource)
    box.bulk.record(0.2, {"k": "v"})
    box.sdk.record(0.2, {"k": "v"})
    data = box.collect(timeout_millis=4321)
    assert data is not None
    [resource_metrics] = data.resource_metrics
    assert resource_metrics.resource == resource
    assert resource_metrics.schema_url == ""
    [scoped] = resource_metrics.scope_metrics
    assert (scoped.scope, scoped.schema_url) == (SCOPE, SCOPE.schema_url)
    assert [m.name for m in scoped.metrics] == ["sdk", "bulk"]
    assert box.exporter.timeouts == [4321]


def test_a_scope_of_the_same_name_and_another_version_is_not_merged(boxes: Any) -> None:
    later = InstrumentationScope(SCOPE.name, "2", "https://example.test/later")
    box = boxes(scope=later)
    box.bulk.record(0.2, {"k": "v"})
    box.sdk.record(0.2, {"k": "v"})
    data = box.collect()
    assert data is not None
    by_scope = {
        (sm.scope.version, sm.schema_url): [m.name for m in sm.metrics]
        for sm in data.resource_metrics[0].scope_metrics
    }
    assert by_scope == {("1", SCOPE.schema_url): ["sdk"], ("2", later.schema_url): ["bulk"]}


def test_a_scope_of_the_same_version_and_another_name_is_not_merged(boxes: Any) -> None:
    box = boxes(scope=InstrumentationScope("other", SCOPE.version))
    box.bulk.record(0.2, {"k": "v"})
    box.sdk.record(0.2, {"k": "v"})
    data = box.collect()
    assert data is not None
    by_scope = {sm.scope.name: [m.name for m in sm.metrics] for sm in data.resource_metrics[0].scope_metrics}
    assert by_scope == {SCOPE.name: ["sdk"], "other": ["bulk"]}


def test_the_reader_exports_at_the_interval_it_was_given() -> None:
    exporter = CapturingExporter()
    bulk = BulkHistogram("bulk", unit="s", description="", boundaries=BOUNDS)
    reader = BulkHistogramReader(exporter, BulkHistograms(SCOPE, (bulk,)), export_interval_millis=20)
    provider = MeterProvider(metric_readers=[reader], shutdown_on_exit=False)
    try:
        bulk.record(0.2, {"k": "v"})
        deadline = _clock.real_monotonic_ns() + 5_000_000_000
        while not exporter.exports and _clock.real_monotonic_ns() < deadline:
            threading.Event().wait(0.01)
        assert [p.count for p in points_in(exporter.exports[0], "bulk")] == [1]
    finally:
        provider.shutdown()


def _failing_collect(self: BulkHistogram, state: Any, now_ns: int) -> None:
    raise RuntimeError("injected")


@pytest.mark.parametrize(
    ("with_sdk_points", "message"),
    [
        (False, "spark_otel: collecting the bulk histograms failed"),
        (True, "spark_otel: adding the bulk histograms to a metric export failed"),
    ],
)
def test_a_failing_bulk_collection_is_logged_once_by_name(
    boxes: Any,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    with_sdk_points: bool,
    message: str,
) -> None:
    """Injected (no real input makes it fail)."""
    box = boxes()
    box.bulk.record(0.2, {"k": "v"})
    if with_sdk_points:
        box.sdk.record(0.2, {"k": "v"})
    monkeypatch.setattr(BulkHistogram, "collect", _failing_collect)
    with caplog.at_level(logging.ERROR, logger="spark_otel.telemetry.bulk_histogram"):
        data = box.collect()
    assert [r.getMessage() for r in caplog.records if r.name == "spark_otel.telemetry.bulk_histogram"] == [
        message
    ]
    assert len(points_in(data, "sdk")) == int(with_sdk_points)


def test_under_an_always_on_filter_a_batch_without_a_span_has_its_exemplar(boxes: Any) -> None:
    box = boxes(exemplar_filter=AlwaysOnExemplarFilter())
    box.bulk.record_many([0.5, 5.0], {"k": "v"})
    [point] = points_in(box.collect(), "bulk")
    assert [(e.value, e.span_id, e.trace_id) for e in point.exemplars] == [(5.0, None, None)]


def test_a_batch_in_a_sampled_span_has_its_exemplar_under_the_default_filter(boxes: Any) -> None:
    box = boxes()
    box.bulk.record_many([0.5], {"k": "v"}, span=SAMPLED)
    box.bulk.record_many([5.0], {"k": "v"}, span=UNSAMPLED)
    [point] = points_in(box.collect(), "bulk")
    assert [(e.value, e.span_id, e.trace_id) for e in point.exemplars] == [(0.5, 0xB2, 0xA1)]
