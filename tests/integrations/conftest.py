"""Fixtures: the simulated engine Inspect's evals run against (one per module), and a store each
test's cells land in, with spark-otel's patches and telemetry undone afterwards."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.support.inspect_runs import inspect_env

import spark_otel
from spark_otel.instrumentation import SparkOtelInstrumentor
from spark_otel.sim import Box, run_box

SPEED = 50.0
"""The box's speed: a short answer streams in milliseconds of real time."""


@pytest.fixture(scope="module")
def box() -> Iterator[Box]:
    with run_box({"qwen": "dense"}, speed=SPEED, seed=0) as b:
        yield b


@pytest.fixture
def inspect_box(box: Box, monkeypatch: pytest.MonkeyPatch) -> Box:
    """The box, with Inspect's providers pointed at it. Inspect memoizes a model by its name, not
    by the base URL its provider read from the environment: a model kept from an earlier test would
    call that test's stopped box (and back off for minutes), so each test starts with none."""
    import inspect_ai.model._model as inspect_models

    monkeypatch.setattr(inspect_models, "_models", {})
    for name, value in inspect_env(box.url("qwen")).items():
        monkeypatch.setenv(name, value)
    for name in ("SPARK_OTEL_INSPECT", "SPARK_OTEL_EVAL", "SPARK_OTEL_ENGINE", "SPARK_OTEL_RULES"):
        monkeypatch.delenv(name, raising=False)
    return box


@pytest.fixture
def store_path(tmp_path: Path, clean_env: None) -> Iterator[Path]:
    """The store this test's cells and requests go to; nothing instrumented or configured after."""
    path = tmp_path / "store.sqlite"
    spark_otel.configure(store=path)
    yield path
    if SparkOtelInstrumentor().is_instrumented:
        spark_otel.uninstrument()
    spark_otel.shutdown()
