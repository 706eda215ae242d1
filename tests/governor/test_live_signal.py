"""The live signal: real runner processes governed through one state file publish each in-flight
cell's elapsed time, tokens so far and live decode rate, read back by `spark-otel lanes --json`.

Two runners stream chat completions of a pinned length from the simulated box's dense engine
(real HTTP, the real openai client, each runner on the box's model clock); one of the second
runner's cells never streams. The box knows each stream's decode rate (`Box.predicted_rate`), so
the published rates are checked against it; a runner killed with SIGKILL takes its entries with
it, and one stopped with SIGSTOP loses them with its lease and publishes again when continued."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from spark_otel.cli import main
from spark_otel.governor.state import LEASE_S
from spark_otel.sim import run_box

RUNNER = Path(__file__).with_name("streaming_runner.py")
SPEED = 20.0
"""Model seconds per real second: a stream of about 210 chunks a real second, which a loaded
two-core machine reads without falling behind."""
TOKENS = 4000
"""Each cell's answer: about 380 model seconds, 19 real seconds, at the rates here."""
TOLERANCE = 0.15
"""A live rate this close to the box's: the streams' start and a runner's bursty reads on a
loaded machine move a 5-second window by a few percent."""


@pytest.fixture(scope="module")
def box() -> Iterator[Any]:
    with run_box({"qwen": "dense"}, speed=SPEED, seed=0) as running:
        yield running


def _runner(rules: Path, state: Path, url: str, name: str, workers: int, *more: str) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "SPARK_OTEL_"))}
    env["PYTHONPATH"] = os.pathsep.join(sys.path)
    args = [str(rules), str(state), url, name, "qwen", str(workers), str(TOKENS), *more]
    return subprocess.Popen([sys.executable, str(RUNNER), *args], stdout=subprocess.PIPE, text=True, env=env)


def _wait_for(proc: subprocess.Popen[str], event: str, count: int) -> None:
    """Read the runner's lines until ``count`` of ``event`` (its cells admitted, streaming)."""
    assert proc.stdout is not None
    seen = 0
    for line in proc.stdout:
        if json.loads(line)["event"] == event:
            seen += 1
            if seen == count:
                return
    raise AssertionError(f"the runner exited before {count} {event} (exit {proc.wait()})")


def _in_flight(state: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, dict[str, Any]]:
    """`spark-otel lanes --json`'s cells in flight, by cell id."""
    assert main(["lanes", "--state", str(state), "--json"]) == 0
    lanes = json.loads(capsys.readouterr().out)["lanes"]
    return {c["cell"]: c for lane in lanes for c in lane["in_flight"]}


def _until(check: Callable[[], bool], timeout_s: float) -> float:
    """Seconds until ``check()`` holds, polled every 0.1 s; fails after ``timeout_s``."""
    start = time.monotonic()
    while not check():
        assert time.monotonic() - start < timeout_s, "not within the time allowed"
        time.sleep(0.1)
    return time.monotonic() - start


def test_runners_publish_live_rates_and_progress_and_a_stopped_or_killed_runners_entries_go(
    box: Any,
    tmp_path: Path,
    rules_file: Callable[[str], Path],
    state_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    rules = rules_file("[[lane]]\nengine = 'qwen'\ncells = 4\n")
    url = box.url("qwen")
    first = _runner(rules, state_path, url, "live-a", 1)
    second = _runner(rules, state_path, url, "live-b", 1)
    quiet = _runner(rules, state_path, url, "live-q", 1, "--no-stream")
    try:
        for proc in (first, second):
            _wait_for(proc, "streaming", 1)
        _wait_for(quiet, "admitted", 1)
        # Three requests decode on the engine at once (the quiet one too, unseen by its runner).
        expected = box.predicted_rate("qwen", 3)
        streaming = ("live-a-0", "live-b-0")
        # A rate over the window's first seconds is already a rate: wait for one from each.
        _until(
            lambda: all((_in_flight(state_path, capsys).get(c) or {}).get("rate_tok_s") for c in streaming),
            timeout_s=20,
        )
        time.sleep(2.0)  # the window fills past the streams' start
        before = _in_flight(state_path, capsys)
        time.sleep(2.0)
        after = _in_flight(state_path, capsys)
        assert set(after) == {"live-a-0", "live-b-0", "live-q-0"}
        for cell in streaming:
            assert abs(after[cell]["rate_tok_s"] - expected) <= TOLERANCE * expected, (cell, after[cell])
            assert 0 < before[cell]["tokens"] < after[cell]["tokens"] <= TOKENS
            assert before[cell]["elapsed_s"] < after[cell]["elapsed_s"]
            # Tokens so far agree with the rate over the cell's time (its prefill is a fraction
            # of a model second here).
            decoded = after[cell]["tokens"] / after[cell]["elapsed_s"]
            assert abs(decoded - expected) <= 2 * TOLERANCE * expected, (cell, after[cell])
        # The cell that never streams: its progress, and no rate (none is invented); its tokens
        # come only when its answer does.
        assert after["live-q-0"]["rate_tok_s"] is None
        assert after["live-q-0"]["tokens"] is None
        assert before["live-q-0"]["elapsed_s"] < after["live-q-0"]["elapsed_s"]

        os.kill(first.pid, signal.SIGKILL)
        first.wait(10)
        gone_after = _until(lambda: "live-a-0" not in _in_flight(state_path, capsys), timeout_s=LEASE_S + 5)
        assert gone_after < LEASE_S
        left = _in_flight(state_path, capsys)
        assert set(left) == {"live-b-0", "live-q-0"}
        assert left["live-b-0"]["rate_tok_s"] is not None

        # A runner stopped (SIGSTOP): its entries go when its lease lapses (it renewed at most a
        # second before), and come back, published afresh, once it continues.
        os.kill(second.pid, signal.SIGSTOP)
        stopped_for = _until(lambda: "live-b-0" not in _in_flight(state_path, capsys), timeout_s=LEASE_S + 5)
        assert stopped_for <= LEASE_S + 1.0  # the polls of a loaded machine
        os.kill(second.pid, signal.SIGCONT)
        _until(lambda: (_in_flight(state_path, capsys).get("live-b-0") or {}).get("tokens"), timeout_s=10)
    finally:
        for proc in (first, second, quiet):
            if proc.poll() is None:
                proc.kill()
            proc.wait(10)
            if proc.stdout is not None:
                proc.stdout.close()
