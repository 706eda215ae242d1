"""The store's OpenTelemetry exporters behind the real SDK: which spans and metric points become
which records, what is skipped, and a failed write reported as the SDK expects, never raised."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import (
    InMemoryMetricReader,
    MetricExportResult,
    PeriodicExportingMetricReader,
)
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from spark_otel import _semconv as sc
from spark_otel.store import Store
from spark_otel.store.exporters import StoreMetricExporter, StoreSpanExporter

T0 = 1_760_000_000_000_000_000


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with Store(tmp_path / "s.sqlite") as s:
        yield s


def test_spark_otels_own_points_become_samples_and_other_scopes_are_left_to_their_receivers(
    store: Store,
) -> None:
    reader = PeriodicExportingMetricReader(StoreMetricExporter(store), export_interval_millis=3_600_000)
    provider = MeterProvider(metric_readers=[reader])
    theirs, ours = provider.get_meter("spark_otel.receivers.gpu"), provider.get_meter(sc.SCOPE_NAME)
    theirs.create_counter("t.gpu", unit="J").add(7)  # a scope before spark-otel's own
    ours.create_counter("t.tokens", unit="{token}").add(5, {"engine": "qwen", "list": ("a", "b")})
    ours.create_counter("t.cells").add(2)  # no unit
    ours.create_gauge("t.running", unit="{request}").set(3, {"engine": "qwen"})
    histogram = ours.create_histogram("t.duration", unit="s")
    for value in (0.5, 1.5, 4.0):
        histogram.record(value, {"engine": "qwen"})
    provider.shutdown()  # one collection, exported
    got = {
        name: [(s.value, s.unit, s.attributes, s.source) for s in store.samples(name)]
        for name in store.sample_names()
    }
    assert got == {
        "t.tokens": [(5.0, "{token}", {"engine": "qwen", "list": "a,b"}, "sdk")],
        "t.cells": [(2.0, "", {}, "sdk")],
        "t.running": [(3.0, "{request}", {"engine": "qwen"}, "sdk")],
        "t.duration.count": [(3.0, "1", {"engine": "qwen"}, "sdk")],
        "t.duration.sum": [(6.0, "s", {"engine": "qwen"}, "sdk")],
    }
    assert all(s.unix_ns > T0 for name in got for s in store.samples(name))  # the points' own times


def test_each_kind_of_span_becomes_its_record_and_a_span_that_does_not_fit_is_left_out_alone(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("test")
    attributes = {
        "cell": {sc.SPAN_KIND_ATTR: sc.SPAN_KIND_CELL, sc.EVAL_NAME: "ev", sc.CELL_ID: "c1"},
        "bad cell": {sc.SPAN_KIND_ATTR: sc.SPAN_KIND_CELL, sc.CELL_STATUS: "no such status"},
        "window": {sc.SPAN_KIND_ATTR: sc.SPAN_KIND_LOAD_WINDOW, sc.LOAD_WINDOW_KIND: "probe"},
        "request": {sc.GEN_AI_OPERATION_NAME: "chat"},
        "other": {"http.method": "GET"},
    }
    for name, attrs in attributes.items():
        tracer.start_span(name, attributes=attrs).end()
    spans = {s.name: s for s in memory.get_finished_spans()}
    with caplog.at_level(logging.WARNING, logger="spark_otel.store.exporters"):
        assert StoreSpanExporter(store).export(list(spans.values())) is SpanExportResult.SUCCESS
    assert [c.cell_id for c in store.cells()] == ["c1"]
    assert [w.kind for w in store.windows()] == ["probe"]
    assert [r.operation for r in store.requests()] == ["chat"]
    assert [r.getMessage() for r in caplog.records] == ["spark_otel: span 'bad cell' could not be stored"]
    exc_info = caplog.records[0].exc_info  # what did not fit, for whoever reads the log
    assert exc_info is not None
    assert exc_info[0] is ValueError
    provider.shutdown()


def test_a_write_that_fails_is_reported_to_the_sdk_and_logged_never_raised(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    provider.get_tracer("test").start_span("request", attributes={sc.GEN_AI_OPERATION_NAME: "chat"}).end()
    store = Store(tmp_path / "s.sqlite")
    store.close()  # a real fault: the connection is gone
    with caplog.at_level(logging.ERROR, logger="spark_otel.store.exporters"):
        assert StoreSpanExporter(store).export(memory.get_finished_spans()) is SpanExportResult.FAILURE
    assert [r.getMessage() for r in caplog.records] == [
        f"spark_otel: writing 1 spans to {tmp_path / 's.sqlite'} failed"
    ]
    caplog.clear()
    metrics = StoreMetricExporter(store)
    reader = PeriodicExportingMetricReader(metrics, export_interval_millis=3_600_000)
    meter_provider = MeterProvider(metric_readers=[reader])
    meter_provider.get_meter(sc.SCOPE_NAME).create_counter("t.tokens").add(1)
    with caplog.at_level(logging.ERROR, logger="spark_otel.store.exporters"):
        meter_provider.shutdown()
    assert [r.getMessage() for r in caplog.records] == [
        f"spark_otel: writing 1 metric samples to {tmp_path / 's.sqlite'} failed"
    ]
    exporter = StoreSpanExporter(store)
    assert exporter.force_flush() is True
    exporter.shutdown()  # the store is its owner's: nothing else to close
    provider.shutdown()


def test_after_shutdown_nothing_is_written_even_into_a_store_since_closed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """After a fork the SDK's periodic reader exports once more in the child, shut down or not;
    into a store the parent had closed that logged "cannot write" (found under mutmut's forks)."""
    memory = InMemoryMetricReader()
    MeterProvider(metric_readers=[memory]).get_meter(sc.SCOPE_NAME).create_counter("t.cells").add(1)
    points = memory.get_metrics_data()
    assert points is not None
    spans = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    tracer_provider.get_tracer("t").start_span("chat", attributes={sc.GEN_AI_OPERATION_NAME: "chat"}).end()

    path = tmp_path / "s.sqlite"
    store = Store(path)
    metric_exporter, span_exporter = StoreMetricExporter(store), StoreSpanExporter(store)
    metric_exporter.shutdown()
    span_exporter.shutdown()
    store.close()
    with caplog.at_level(logging.WARNING):
        assert metric_exporter.export(points) is MetricExportResult.FAILURE
        assert span_exporter.export(spans.get_finished_spans()) is SpanExportResult.FAILURE
    assert caplog.records == []
    with Store(path) as reopened:
        assert (reopened.sample_names(), reopened.requests()) == ([], [])
