"""A real runner stopped (SIGSTOP) past its lease while its cell runs, then continued (SIGCONT):
another runner takes its slot meanwhile (nothing can prevent that), and then the truth is told:
the stopped runner puts its slot back, so the lane admits no one else until both cells ended;
its cell's span and its metrics say the lease lapsed and the slot was taken; `spark-otel lanes`
shows it; and its runner says so in one line, no traceback."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from tests.support.waiting import wait_for

from spark_otel import _semconv as sc
from spark_otel.governor.state import read_lanes

HERE = Path(__file__).parent
LEASE_S = 2.0


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "SPARK_OTEL_"))}


def _start(script: str, *args: object) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(HERE / script), *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
    )


def _line(proc: subprocess.Popen[str]) -> dict[str, object]:
    assert proc.stdout is not None
    return json.loads(proc.stdout.readline())


def test_a_runner_stopped_past_its_lease_puts_its_slot_back_and_says_so(
    rules_file: Callable[[str], Path], state_path: Path
) -> None:
    rules = rules_file("[[lane]]\nengine = 'q'\ncells = 1\n")
    stopped = _start("lapsing_runner.py", rules, state_path, "stopped", 10.0, LEASE_S)
    try:
        assert _line(stopped)["event"] == "admitted"
        os.kill(stopped.pid, signal.SIGSTOP)
        time.sleep(LEASE_S + 1.0)  # its lease lapses: the next admission drops its slot
        beside = _start("governed_runner.py", rules, state_path, "beside", 1, 4.0)
        assert _line(beside)["event"] == "admitted"  # two cells in a lane of one: the fault
    finally:
        os.kill(stopped.pid, signal.SIGCONT)
    # Within a renewal of being continued, the stopped runner's slot is back beside the other.
    wait_for(lambda: [len(lane.in_use) for lane in read_lanes(state_path)] == [2], "the slot put back", 10)
    shown = subprocess.run(
        [sys.executable, "-m", "spark_otel", "lanes", "--state", str(state_path), "--json"],
        capture_output=True, text=True, env=_env(), check=True,
    )  # fmt: skip
    [lane] = json.loads(shown.stdout)["lanes"]
    assert ("stopped" in lane["in_use"], lane["lapsed_in_use"]) == (True, 1)
    # The stop's lapse, whose slot was taken (a starved moment before it, on a loaded machine, adds one).
    lapses = [(x["eval"], x["cell"], x["slot_taken"]) for x in lane["lease_lapses"]]
    assert lapses[-1] == ("stopped", "stopped-0", True)
    assert set(lapses) <= {("stopped", "stopped-0", True), ("stopped", "stopped-0", False)}
    after = _start("governed_runner.py", rules, state_path, "after", 1, 0.0)
    admitted_after = float(_line(after)["t"])
    done = _line(stopped)
    beside_done = [json.loads(line) for line in beside.communicate(timeout=60)[0].splitlines()]
    # The lane counted the stopped runner's cell again: the next cell waited for both to end.
    assert admitted_after >= max(float(done["end"]), float(beside_done[-1]["end"]))
    after.communicate(timeout=60)
    _, stopped_err = stopped.communicate(timeout=60)
    assert stopped.returncode == 0
    span = done["span"]
    assert isinstance(span, dict)
    assert (span[sc.CELL_LEASE_LAPSED], span[sc.CELL_SLOT_TAKEN]) == (True, True)
    # Noticed at its first renewal after SIGCONT: the stop (LEASE_S + 1 s and more) less its lease.
    assert 0.5 <= span[sc.CELL_LEASE_LAPSED_S] < 30
    assert done["lapses"] == [
        {"value": 1, "attributes": {sc.ENGINE: "q", sc.EVAL_NAME: "stopped", sc.GOVERNOR_SLOT_TAKEN: True}}
    ]
    warnings = [line for line in stopped_err.splitlines() if line.strip()]
    assert len(warnings) == 1, stopped_err
    assert warnings[0].startswith("spark-otel governor: cell stopped-0 of stopped ran ")
    assert warnings[0].endswith(
        "past its lease on q (its process was stopped or starved), and its slot was given to another "
        "cell meanwhile; its span is marked"
    )
