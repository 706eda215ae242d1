"""Fixtures for the command-line tests: the article's store, a metrics server, an OTLP sink; and
tables read at one known width with no terminal in sight (tests/cli/test_tables.py tries others)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.support.article import (
    NEMOTRON_CURVE,
    QWEN_CURVE,
    appendix_c_cells,
    appendix_d_cells,
    appendix_d_loads,
)
from tests.support.metrics_server import MetricsServer
from tests.support.otlp import OtlpSink

from spark_otel.store import Store

TABLE_COLUMNS = 200


@pytest.fixture(autouse=True)
def _table_width(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tables as wide as a wide terminal, whatever the environment running the tests says; and
    no variable that would make rich take the captured streams for a terminal."""
    monkeypatch.setenv("COLUMNS", str(TABLE_COLUMNS))
    for name in ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def article_store(tmp_path: Path) -> str:
    path = tmp_path / "article.sqlite"
    probes, others = appendix_d_loads()
    with Store(path) as store:
        store.write_cells(appendix_c_cells() + appendix_d_cells() + others)
        store.write_windows(probes)
        # The probe command stores its whole report; the advisor reads the "curve" in it.
        store.put_document("probe", "qwen probe", {"curve": QWEN_CURVE.model_dump(mode="json")})
        store.put_document("probe", "nemotron probe", {"curve": NEMOTRON_CURVE.model_dump(mode="json")})
    return str(path)


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
