"""Fixtures: the test server (session-wide), and instrumentation that never leaks between tests."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.trace import TracerProvider
from tests.support.engine_server import LocalServer, ServerLog

import spark_otel
from spark_otel.instrumentation import SparkOtelInstrumentor


@pytest.fixture(scope="session")
def server() -> Iterator[LocalServer]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    with LocalServer(port) as srv:
        yield srv


@pytest.fixture
def base_url(server: LocalServer) -> str:
    return f"http://127.0.0.1:{server.port}/v1"


@pytest.fixture
def server_log(server: LocalServer) -> ServerLog:
    server.log.headers.clear()
    server.log.bodies.clear()
    return server.log


@pytest.fixture(autouse=True)
def _always_uninstrument() -> Iterator[None]:
    """No test leaks its patches into the next."""
    yield
    if SparkOtelInstrumentor().is_instrumented:
        spark_otel.uninstrument()


@pytest.fixture
def fresh_globals(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Unset global OpenTelemetry providers and no spark-otel telemetry, for this test only.

    The API lets a process set its global providers once; tests of how `instrument()` picks
    providers need them unset (and must not leave theirs behind for later tests).
    """
    from opentelemetry import trace
    from opentelemetry.metrics import _internal as metrics_internal
    from opentelemetry.util._once import Once

    spark_otel.shutdown()
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", None)
    monkeypatch.setattr(trace, "_TRACER_PROVIDER_SET_ONCE", Once())
    monkeypatch.setattr(metrics_internal, "_METER_PROVIDER", None)
    monkeypatch.setattr(metrics_internal, "_METER_PROVIDER_SET_ONCE", Once())
    monkeypatch.setattr(metrics_internal, "_PROXY_METER_PROVIDER", metrics_internal._ProxyMeterProvider())
    for name in list(os.environ):
        if name.startswith("OTEL_EXPORTER_OTLP") or name == "OTEL_PYTHON_TRACER_PROVIDER":
            monkeypatch.delenv(name)
    yield
    if SparkOtelInstrumentor().is_instrumented:
        spark_otel.uninstrument()
    spark_otel.shutdown()


@pytest.fixture
def capturing(tracer_provider: TracerProvider, meter_provider: MeterProvider) -> Iterator[None]:
    """`spark_otel.instrument()` with content capture on, into the in-memory providers."""
    spark_otel.instrument(
        tracer_provider=tracer_provider, meter_provider=meter_provider, capture_content=True
    )
    yield
    spark_otel.uninstrument()
