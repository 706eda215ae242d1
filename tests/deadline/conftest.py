"""Fixtures for the deadline tests: one misbehaving OpenAI-compatible server per session."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from tests.support.deadline_server import MisbehavingServer


@pytest.fixture(scope="session")
def test_server() -> Iterator[MisbehavingServer]:
    server = MisbehavingServer()
    server.start()
    yield server
    server.stop()


@pytest.fixture
def tag() -> str:
    return uuid.uuid4().hex
