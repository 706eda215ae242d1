"""Receiver fixtures."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from tests.receivers.metrics_server import MetricsServer


@pytest.fixture
def metrics_server() -> Iterator[MetricsServer]:
    with MetricsServer() as server:
        yield server
