"""Shared fixtures: in-memory OpenTelemetry providers, a temporary store, free ports, the
process's model clock put back; and helpers to read metric points and to wait for a condition.

Property tests search at random on a developer's machine and the same examples every time in
CI (``SPARK_OTEL_REQUIRE_REAL_COMPONENTS`` or ``CI`` set): a build never fails on an example no
earlier run tried, and a new counterexample is found, and kept as an ``@example``, by hand."""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from hypothesis import settings
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import (
    AggregationTemporality,
    InMemoryMetricReader,
    MetricExporter,
    MetricExportResult,
    MetricsData,
)
from opentelemetry.sdk.metrics.view import Aggregation
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from spark_otel import _clock, _guard
from spark_otel.store import Store

T = TypeVar("T")

pytest_plugins = ["tests.support.snapshots"]

settings.register_profile("ci", derandomize=True, database=None)
if os.environ.get("SPARK_OTEL_REQUIRE_REAL_COMPONENTS") or os.environ.get("CI"):
    settings.load_profile("ci")

DATA = Path(__file__).parent / "data"


@pytest.fixture(autouse=True, scope="session")
def tests_data_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The default store and governor state (``$XDG_DATA_HOME/spark-otel/``) in a directory of the
    session, for this process and the ones its tests start: a test, or a mutant, that leaves a
    store path to its default must not write into the user's own store in ``~/.local/share``."""
    saved = {name: os.environ.get(name) for name in ("XDG_DATA_HOME", "SPARK_OTEL_STORE")}
    data_home = tmp_path_factory.mktemp("xdg-data-home")
    os.environ["XDG_DATA_HOME"] = str(data_home)
    os.environ.pop("SPARK_OTEL_STORE", None)
    yield data_home
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@pytest.fixture(autouse=True)
def _no_warning_given_yet(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each of spark-otel's own failures warns once per process: every test starts with none
    given, so a test that checks a warning sees it whatever ran before."""
    monkeypatch.setattr(_guard, "_warned", set())


@pytest.fixture
def india_local_time(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The process's local zone at UTC+5:30 (a POSIX TZ, no zone database needed), restored
    afterwards: a time printed as UTC that is really local time reads 5 h 30 min off."""
    monkeypatch.setenv("TZ", "IST-5:30")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.fixture
def span_exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def metric_reader() -> InMemoryMetricReader:
    return InMemoryMetricReader()


@pytest.fixture
def tracer_provider(span_exporter: InMemorySpanExporter) -> Iterator[TracerProvider]:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(span_exporter))
    yield provider
    provider.shutdown()


@pytest.fixture
def meter_provider(metric_reader: InMemoryMetricReader) -> Iterator[MeterProvider]:
    provider = MeterProvider(metric_readers=[metric_reader])
    yield provider
    provider.shutdown()


@pytest.fixture
def instrumented(tracer_provider: TracerProvider, meter_provider: MeterProvider) -> Iterator[None]:
    """`spark_otel.instrument()` into the in-memory providers for one test."""
    import spark_otel

    spark_otel.instrument(tracer_provider=tracer_provider, meter_provider=meter_provider)
    yield
    spark_otel.uninstrument()


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with Store(tmp_path / "store.sqlite") as s:
        yield s


@pytest.fixture
def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def restore_clock() -> Iterator[None]:
    """Put the process's model clock back exactly as it was: leaving `_clock.hold` keeps the
    monotonic clock's offset and restarts Unix time, so for tests that compare clock readings
    across a change of scale, ending the hold is not enough."""
    anchor = _clock._Anchor
    saved = {k: v for k, v in vars(anchor).items() if not k.startswith("__")}
    try:
        yield
    finally:
        for key, value in saved.items():
            setattr(anchor, key, value)


def points_in(data: MetricsData | None, name: str) -> list[Any]:
    """Every data point of metric ``name`` in one collection."""
    if data is None:
        return []
    return [
        point
        for rm in data.resource_metrics
        for sm in rm.scope_metrics
        for metric in sm.metrics
        if metric.name == name
        for point in metric.data.data_points
    ]


def metric_points(reader: InMemoryMetricReader, name: str) -> list[Any]:
    """Every data point of metric ``name`` the reader holds now."""
    return points_in(reader.get_metrics_data(), name)


class CapturingExporter(MetricExporter):
    """A push exporter that keeps every export: the readers spark-otel builds take an exporter,
    not a pull reader."""

    def __init__(
        self,
        preferred_temporality: dict[type, AggregationTemporality] | None = None,
        preferred_aggregation: dict[type, Aggregation] | None = None,
    ) -> None:
        super().__init__(
            preferred_temporality=preferred_temporality, preferred_aggregation=preferred_aggregation
        )
        self.exports: list[MetricsData] = []

    @property
    def last(self) -> MetricsData | None:
        return self.exports[-1] if self.exports else None

    def export(
        self, metrics_data: MetricsData, timeout_millis: float = 10_000, **kwargs: Any
    ) -> MetricExportResult:
        self.exports.append(metrics_data)
        return MetricExportResult.SUCCESS

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return True

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        pass


def wait_for(predicate: Callable[[], T], what: str, timeout_s: float, interval_s: float = 0.2) -> T:
    """Poll ``predicate`` until it returns something truthy, and return that; fail the test
    saying what never happened, rather than letting a later assertion fail on stale data."""
    deadline = time.monotonic() + timeout_s
    while True:
        result = predicate()
        if result:
            return result
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout_s:g}s waiting for {what} (last: {result!r})")
        time.sleep(interval_s)
