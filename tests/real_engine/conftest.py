"""Fixtures for the contract tests against a real engine: llama.cpp's server built from source
(`tests.support.llama_server`), serving a tiny random-weight Llama model written once per session
(`tests.support.tiny_llama`). ``llama`` is one server for the whole session (4 parallel slots);
``llama_pair`` starts two more (one thread each) that share the cores, for the neighbour-cost
test. Every server started is stopped, whatever the test did.

A missing binary fails the test with ``SPARK_OTEL_REQUIRE_REAL_COMPONENTS=1`` or ``CI`` set (CI
builds it) and skips elsewhere, saying to run ``make llama-server``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.support.collector_stack import Unusable, missing
from tests.support.llama_server import VOCAB, LlamaServer, resolve_llama_server, running_llama_server
from tests.support.tiny_llama import write_tiny_model


@pytest.fixture(scope="session")
def llama_server_bin() -> Path:
    resolved = resolve_llama_server()
    if isinstance(resolved, Unusable):
        if resolved.always_fails:
            pytest.fail(resolved.reason)
        missing(resolved.reason)
    return resolved


@pytest.fixture(scope="session")
def tiny_model(llama_server_bin: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    here = llama_server_bin.parent
    out = tmp_path_factory.mktemp("tiny-llama") / "tiny-llama.gguf"
    return write_tiny_model(here / "gguf-py", here / VOCAB, out)


@pytest.fixture(scope="session")
def llama(
    llama_server_bin: Path, tiny_model: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LlamaServer]:
    """One llama-server for the session: 4 slots, one thread, /metrics on."""
    with running_llama_server(
        llama_server_bin, tiny_model, tmp_path_factory.mktemp("llama"), name="tiny-llama"
    ) as server:
        yield server


@pytest.fixture
def llama_pair(
    llama_server_bin: Path, tiny_model: Path, tmp_path: Path
) -> Iterator[tuple[LlamaServer, LlamaServer]]:
    """Two llama-servers of one thread each, on the same cores: an eval's and a neighbour's."""
    with (
        running_llama_server(llama_server_bin, tiny_model, tmp_path, name="eval-engine") as a,
        running_llama_server(llama_server_bin, tiny_model, tmp_path, name="neighbour") as b,
    ):
        yield a, b
