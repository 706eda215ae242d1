"""Telemetry is set up once per process, however many workers start at once (issue 40, item 1).

Each case is a cold process (`cold_start_runner.py`) whose first cells race the setup: before
the fix, each thread's first cell built providers and shut down the ones another thread had just
built, and 7 to 18 of 200 cells never reached the store.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from tests.support.engine_server import LocalServer

from spark_otel.store import Store

RUNNER = Path(__file__).with_name("cold_start_runner.py")


def _run(mode: str, workers: int, cells: int, store: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env["SPARK_OTEL_STORE"] = str(store)
    env["PYTHONPATH"] = os.pathsep.join([str(RUNNER.parents[2]), env.get("PYTHONPATH", "")])
    return subprocess.run(
        [sys.executable, str(RUNNER), mode, str(workers), str(cells), *extra],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("workers", [8, 32, 64])
def test_every_cell_of_a_cold_start_reaches_the_store(tmp_path: Path, mode: str, workers: int) -> None:
    cells = max(200, 4 * workers)
    done = _run(mode, workers, cells, tmp_path / "store.sqlite")
    assert (done.returncode, done.stderr) == (0, "")
    stored = Store(tmp_path / "store.sqlite").cells()
    assert sorted(c.cell_id for c in stored) == sorted(f"c{i}" for i in range(cells))


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("workers", [8, 32, 64])
def test_every_request_of_a_cold_start_reaches_the_store_in_its_cell(
    tmp_path: Path, free_port: int, mode: str, workers: int
) -> None:
    cells = 2 * workers
    with LocalServer(free_port) as server:
        done = _run(mode, workers, cells, tmp_path / "store.sqlite", str(free_port))
    assert (done.returncode, done.stderr) == (0, "")
    assert len(server.log.bodies) == cells
    store = Store(tmp_path / "store.sqlite")
    by_uid = {c.uid: c.cell_id for c in store.cells()}
    assert sorted(by_uid.values()) == sorted(f"c{i}" for i in range(cells))
    requests = store.requests()
    assert sorted(by_uid[r.cell_uid] for r in requests if r.cell_uid) == sorted(by_uid.values())
    assert {(r.input_tokens, r.output_tokens) for r in requests} == {(2, 3)}
