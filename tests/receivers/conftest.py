"""Receiver fixtures."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from tests.receivers.metrics_server import MetricsServer, OtlpSink


@pytest.fixture
def metrics_server() -> Iterator[MetricsServer]:
    with MetricsServer() as server:
        yield server


@pytest.fixture
def otlp_sink() -> Iterator[OtlpSink]:
    sink = OtlpSink()
    yield sink
    sink.server.shutdown()
    sink.server.server_close()
