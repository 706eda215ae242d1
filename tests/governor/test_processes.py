"""Admission across real runner processes: one lane shared by processes started at different
times, and a runner killed with SIGKILL losing its slot within seconds."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from spark_otel.governor.state import LEASE_S

RUNNER = Path(__file__).with_name("governed_runner.py")


def _runner(
    tmp_path: Path, rules: Path, state: Path, name: str, cells: int, hold_s: float
) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "SPARK_OTEL_"))}
    return subprocess.Popen(
        [sys.executable, str(RUNNER), str(rules), str(state), name, str(cells), str(hold_s)],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )


def _events(proc: subprocess.Popen[str], timeout_s: float = 60) -> list[dict[str, object]]:
    out, _ = proc.communicate(timeout=timeout_s)
    assert proc.returncode == 0
    return [json.loads(line) for line in out.splitlines()]


def test_runners_started_at_different_times_share_one_lane(
    tmp_path: Path, rules_file: Callable[[str], Path], state_path: Path
) -> None:
    rules = rules_file("[[lane]]\nengine = 'q'\ncells = 2\n")
    first = _runner(tmp_path, rules, state_path, "a", 4, 0.4)
    time.sleep(0.5)
    second = _runner(tmp_path, rules, state_path, "b", 4, 0.4)
    done = [e for e in _events(first) + _events(second) if e["event"] == "done"]
    assert len(done) == 8
    # At every cell's start, at most two cells (itself included) were running anywhere.
    intervals = [(float(e["start"]), float(e["end"])) for e in done]  # type: ignore[arg-type]
    peak = max(sum(1 for s, e in intervals if s <= start < e) for start, _ in intervals)
    assert peak == 2


def test_a_runner_killed_holding_its_slot_loses_it_within_seconds(
    tmp_path: Path, rules_file: Callable[[str], Path], state_path: Path
) -> None:
    rules = rules_file("[[lane]]\nengine = 'q'\ncells = 1\n")
    holder = _runner(tmp_path, rules, state_path, "holder", 1, 600)
    assert holder.stdout is not None
    assert json.loads(holder.stdout.readline())["event"] == "admitted"
    waiter = _runner(tmp_path, rules, state_path, "waiter", 1, 0.0)
    time.sleep(1.0)  # the waiter is queued behind the holder
    killed = time.time()
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait(10)
    [admitted, _done] = _events(waiter)
    assert admitted["event"] == "admitted"
    freed_after = float(admitted["t"]) - killed  # type: ignore[arg-type]
    # Same host: the next admission sees the pid gone; elsewhere the lease lapses in LEASE_S.
    assert 0 <= freed_after < LEASE_S


@pytest.mark.parametrize("where", ["another host"])
def test_a_slot_of_a_process_that_cannot_be_asked_lapses_with_its_lease(
    where: str,
    tmp_path: Path,
    rules_file: Callable[[str], Path],
    state_path: Path,
    tracer_provider,
    meter_provider,
) -> None:
    """A slot held from another host (the pid cannot be checked there) outlives its process
    only until its lease lapses."""
    import sqlite3

    from spark_otel import cell
    from spark_otel._clock import NS_PER_S, real_wall_ns
    from spark_otel.governor import govern

    rules = rules_file("[[lane]]\nengine = 'q'\ncells = 1\n")
    g = govern(rules, state=state_path)
    with cell("ev", "warm", engine="q", tracer_provider=tracer_provider, meter_provider=meter_provider):
        pass  # the state file exists now
    lease_until = real_wall_ns() + int(1.0 * NS_PER_S)
    with sqlite3.connect(state_path) as conn:
        columns = "host, pid, lease_until_ns, engine, eval_name, cell_class, has_deadline, cell_id, "
        columns += "admitted_ns, waited_s"
        conn.execute(
            f"INSERT INTO slots ({columns}) VALUES ('elsewhere', 1, ?, 'q', 'far', NULL, 1, 'x', 0, 0)",
            (lease_until,),
        )
    entered = time.monotonic()
    with cell("ev", "after", engine="q", tracer_provider=tracer_provider, meter_provider=meter_provider):
        waited = time.monotonic() - entered
    assert 0.5 < waited < 1.0 + 4 * g.poll_s + 0.5
