"""Fixtures: the simulated engine Inspect's evals run against (one per module), and a store each
test's cells land in, with spark-otel's patches and telemetry undone afterwards."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.support.inspect_runs import inspect_env, point_inspect_at, store_for_test

from spark_otel.sim import Box, run_box

SPEED = 50.0
"""The box's speed: a short answer streams in milliseconds of real time."""


@pytest.fixture(scope="module")
def box() -> Iterator[Box]:
    with run_box({"qwen": "dense"}, speed=SPEED, seed=0) as b:
        yield b


@pytest.fixture
def inspect_box(box: Box, monkeypatch: pytest.MonkeyPatch) -> Box:
    """The box, with Inspect's providers pointed at it (no model kept from an earlier test)."""
    point_inspect_at(monkeypatch, inspect_env(box.url("qwen")))
    return box


@pytest.fixture
def store_path(tmp_path: Path, clean_env: None) -> Iterator[Path]:
    """The store this test's cells and requests go to; nothing instrumented or configured after."""
    with store_for_test(tmp_path / "store.sqlite") as path:
        yield path
