"""Receiver fixtures."""

from __future__ import annotations

import socket
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.support.metrics_server import MetricsServer
from tests.support.nsight import LOOSE, build_capture


@pytest.fixture
def metrics_server() -> Iterator[MetricsServer]:
    with MetricsServer() as server:
        yield server


@pytest.fixture
def silent_url() -> Iterator[str]:
    """An engine that takes the connection and never answers (its listen backlog holds it)."""
    with socket.create_server(("127.0.0.1", 0), backlog=8) as listener:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"


@pytest.fixture(scope="module")
def captures(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Small captures by layout, plain and generic: 19 metrics x 50 samples (0.05 s at 1 kHz, 1 ms
    apart from 1 ms into the session), their columns without NOT NULL (`LOOSE`); one per module, for
    the bad-input tests to damage copies of."""
    out = {}
    for layout, loosen in LOOSE.items():
        path = tmp_path_factory.mktemp("nsight") / f"{layout}.sqlite"
        build_capture(path, layout=layout, seconds=0.05, hz=1000)
        with sqlite3.connect(path) as conn:
            conn.executescript(loosen)
        conn.close()
        out[layout] = path
    return out
