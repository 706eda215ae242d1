"""The deadline-slack law on the simulated box, with real runner processes and no rules file: a
serial ceiling-bound eval on qwen, and a 4-worker eval on nemotron started from another process
while the first serial cell runs. The neighbour is held while a serial cell cannot be projected
or its projection is tight, and admitted into the slack; no serial cell reaches its ceiling,
though four neighbours beside it would take it there (`Box.predicted_rate`: 11.1 tok/s alone,
5.1 beside four)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from spark_otel import _semconv as sc
from spark_otel.sim import run_box

RUNNER = Path(__file__).with_name("adaptive_runner.py")
SPEED = 20.0
"""Model seconds per real second: a serial cell of about 5 real seconds, long enough for its
live rate (a 5-second window, first said after 0.5 s) to drive the law."""
SERIAL_TOKENS = 1100
"""About 99 model seconds alone, 215 beside four nemotron streams."""
CEILING_S = 180.0
NEIGHBOUR_TOKENS = 400
NEIGHBOUR_CELLS = 60
"""Enough that, ungoverned, a serial cell runs past its ceiling (benchmarks/bench_adaptive.py: 214 s)."""


@pytest.fixture(scope="module")
def box() -> Iterator[Any]:
    with run_box({"qwen": "dense", "nemotron": "moe"}, speed=SPEED, seed=0) as running:
        yield running


def _runner(state: Path, url: str, *args: object) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "SPARK_OTEL_"))}
    env["PYTHONPATH"] = os.pathsep.join(sys.path)
    command = [sys.executable, str(RUNNER), str(state), url, *map(str, args)]
    return subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=env)


def _spans(proc: subprocess.Popen[str]) -> dict[str, dict[str, Any]]:
    out, _ = proc.communicate(timeout=180)
    assert proc.returncode == 0
    lines = [json.loads(line) for line in out.splitlines()]
    return {s["attributes"][sc.CELL_ID]: s["attributes"] for s in lines if s["event"] == "span"}


def test_the_neighbour_runs_in_the_serial_evals_slack_and_no_serial_cell_reaches_its_ceiling(
    box: Any, tmp_path: Path
) -> None:
    assert (
        box.predicted_rate("qwen", 1, neighbours={"nemotron": 4}) * CEILING_S < SERIAL_TOKENS
    )  # ungoverned: cut off
    state = tmp_path / "governor.sqlite"
    serial = _runner(state, box.url("qwen"), "serial", "qwen", 1, 4, SERIAL_TOKENS, CEILING_S)
    assert serial.stdout is not None
    first = json.loads(serial.stdout.readline())
    assert first == {"event": "admitted", "cell": "serial-0"}
    neighbour = _runner(
        state, box.url("nemotron"), "batch", "nemotron", 4, NEIGHBOUR_CELLS, NEIGHBOUR_TOKENS, 0
    )
    serial_spans, batch_spans = _spans(serial), _spans(neighbour)

    assert sorted(serial_spans) == [f"serial-{i}" for i in range(4)]
    elapsed = {c: a[sc.CELL_ELAPSED_S] for c, a in serial_spans.items()}
    assert max(elapsed.values()) < CEILING_S, elapsed
    assert len(batch_spans) == NEIGHBOUR_CELLS

    held = {c: a for c, a in batch_spans.items() if sc.CELL_ADAPTIVE_HELD_REASON in a}
    assert held, "no neighbour cell was held"
    serial_names = {*serial_spans, "next cell of serial"}
    assert {a[sc.CELL_ADAPTIVE_HELD_FOR] for a in held.values()} <= serial_names
    # the first serial cell's length is unknown (nothing of its eval has ended): the first
    # neighbour cells wait for it, and their spans say so
    assert batch_spans["batch-0"][sc.CELL_ADAPTIVE_HELD_FOR] in serial_names
    assert batch_spans["batch-0"][sc.CELL_QUEUE_WAIT_S] > 0
    # admitted into the slack beside a serial cell, with the projection it was admitted on
    in_slack = [a for a in batch_spans.values() if a[sc.CELL_ADAPTIVE_REASON] == "slack"]
    assert in_slack, "no neighbour cell ran beside a serial cell"
    for a in in_slack:
        assert a[sc.CELL_ADAPTIVE_PROTECTED] in serial_names
        assert a[sc.CELL_ADAPTIVE_MARGIN] >= 0.10
        assert a[sc.CELL_ADAPTIVE_FINISH_S] <= CEILING_S * 0.90 + 1e-6
