"""Receiver fixtures."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest
from tests.receivers.metrics_server import MetricsServer


@pytest.fixture
def metrics_server() -> Iterator[MetricsServer]:
    with MetricsServer() as server:
        yield server


@pytest.fixture
def silent_url() -> Iterator[str]:
    """An engine that takes the connection and never answers (its listen backlog holds it)."""
    with socket.create_server(("127.0.0.1", 0), backlog=8) as listener:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
