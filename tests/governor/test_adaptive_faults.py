"""Adaptive governing's failure modes (issue 37, item 6) not covered where the law is built: a
runner stopped (SIGSTOP) or killed while it publishes the cell the law protects, a neighbour that
never ends, a neighbour eval with no completed cell to learn its length from, a wait that would
otherwise be unbounded, and fail-open / fail-closed with no rules file. (Stale rates, a cell that
never streams, no completed cell of the protected eval: `test_adaptive.py`; noisy rates:
`test_slack.py`.)"""

from __future__ import annotations

import json
import logging
import math
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from spark_otel.governor import Governor, GovernorError
from spark_otel.governor.decision import InFlight
from spark_otel.governor.slack import SlackReason, SlackVerdict
from spark_otel.governor.state import LEASE_S
from spark_otel.live_progress import LiveProgress
from spark_otel.sim import run_box

RUNNER = Path(__file__).with_name("adaptive_runner.py")
SERIAL = InFlight("qwen", "serial", None, True, None, deadline_s=1000.0)
NEIGHBOUR = InFlight("nemotron", "batch", None, False)


def _verdict(g: Governor, cell: InFlight = NEIGHBOUR) -> SlackVerdict:
    """The law's verdict for ``cell`` now, leaving nothing behind (its slot or ticket undone)."""
    rules = g.rules()
    assert rules is not None
    decision = g.state.attempt(cell, "probe", rules, ticket=None, waited_s=0.0, judge=g.judge)
    if decision.slot is not None:
        g.state.release(decision.slot, cell)
    if decision.ticket is not None:
        g.state.withdraw(decision.ticket)
    assert decision.verdict is not None
    return decision.verdict


# -- a runner stopped or killed while it publishes --------------------------------------------------


@pytest.fixture(scope="module")
def box() -> Iterator[Any]:
    with run_box({"qwen": "dense", "nemotron": "moe"}, speed=20.0, seed=0) as running:
        yield running


def _until(check: Callable[[], bool], timeout_s: float) -> float:
    start = time.monotonic()
    while not check():
        assert time.monotonic() - start < timeout_s, "not within the time allowed"
        time.sleep(0.1)
    return time.monotonic() - start


def test_a_protected_cells_runner_stopped_or_killed_stops_protecting_within_the_lease(
    box: Any, state_path: Path
) -> None:
    g = Governor(None, state_path=state_path, adaptive=True)
    done = g.state.attempt(SERIAL, "s-done", g.rules(), ticket=None, waited_s=0.0)  # type: ignore[arg-type]
    assert done.slot is not None
    g.state.release(done.slot, SERIAL, LiveProgress(100.0, 6000, 11.0))  # the eval's cells: 6,000 tokens
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "SPARK_OTEL_"))}
    env["PYTHONPATH"] = os.pathsep.join(sys.path)
    command = [
        sys.executable,
        str(RUNNER),
        str(state_path),
        box.url("qwen"),
        "serial",
        "qwen",
        "1",
        "1",
        "6000",
        "1000",
    ]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout is not None
        assert json.loads(proc.stdout.readline()) == {"event": "admitted", "cell": "serial-0"}
        # publishing: the law projects the cell from its live rate
        _until(lambda: _verdict(g).projection is not None, timeout_s=15)
        protected = _verdict(g).protected
        assert protected is not None
        assert protected.cell_id == "serial-0"

        os.kill(proc.pid, signal.SIGSTOP)
        # its figures stop: no projection is ever made from figures older than the lease; the
        # row itself goes with the lease (the process may never come back)
        stopped_for = _until(
            lambda: _verdict(g).reason is SlackReason.NOTHING_PROTECTED, timeout_s=LEASE_S + 5
        )
        assert stopped_for <= LEASE_S + 1.5  # it renewed at most a second before; a loaded machine's polls
        os.kill(proc.pid, signal.SIGCONT)
        _until(lambda: _verdict(g).projection is not None, timeout_s=10)  # publishing again

        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        assert _until(lambda: _verdict(g).reason is SlackReason.NOTHING_PROTECTED, timeout_s=5) < 1.0
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGCONT)
            proc.kill()
        proc.wait(10)
        if proc.stdout is not None:
            proc.stdout.close()


# -- neighbours whose length is unknown -------------------------------------------------------------


def _serial_in_flight(g: Governor) -> None:
    """A serial cell 100 s in, 1,000 tokens of a 4,000-token eval, at 10 tok/s (best 10)."""
    done = g.state.attempt(SERIAL, "s0", g.rules(), ticket=None, waited_s=0.0)  # type: ignore[arg-type]
    assert done.slot is not None
    g.state.release(done.slot, SERIAL, LiveProgress(400.0, 4000, 10.0))
    slot = g.state.attempt(SERIAL, "s1", g.rules(), ticket=None, waited_s=0.0).slot  # type: ignore[arg-type]
    assert slot is not None
    g.state.renew({slot: LiveProgress(100.0, 1000, 10.0)})


def test_a_neighbour_eval_with_no_completed_cell_is_projected_to_run_to_the_protected_cells_end(
    state_path: Path,
) -> None:
    g = Governor(None, state_path=state_path, adaptive=True)
    _serial_in_flight(g)
    verdict = _verdict(g)
    assert verdict.protected is not None
    assert verdict.protected.drain_s == math.inf
    assert verdict.projection is not None
    assert verdict.projection.finish_s == pytest.approx(100 + 3000 / 7.0)  # the whole remainder at 0.7


def test_a_neighbour_that_outran_its_evals_cells_may_never_end_and_is_projected_so(state_path: Path) -> None:
    g = Governor(None, state_path=state_path, adaptive=True)
    first = g.state.attempt(NEIGHBOUR, "n0", g.rules(), ticket=None, waited_s=0.0)  # type: ignore[arg-type]
    assert first.slot is not None
    g.state.release(first.slot, NEIGHBOUR, LiveProgress(40.0, 400, None))  # its eval's cells: 40 s
    running = g.state.attempt(NEIGHBOUR, "n1", g.rules(), ticket=None, waited_s=0.0).slot  # type: ignore[arg-type]
    assert running is not None
    g.state.renew({running: LiveProgress(10.0, 100, None)})
    _serial_in_flight(g)
    bounded = _verdict(g)
    assert bounded.protected is not None
    assert bounded.protected.drain_s == pytest.approx(40.0)  # the candidate's 40 s; n1's 30 s left
    g.state.renew({running: LiveProgress(60.0, 600, None)})  # n1 outran every cell of its eval
    endless = _verdict(g)
    assert endless.protected is not None
    assert endless.protected.drain_s == math.inf
    assert endless.projection is not None
    # n1 counts in the live rate already; the candidate is one more neighbour, for the rest
    assert endless.projection.finish_s == pytest.approx(100 + 3000 / 7.0)


# -- a wait is never unbounded without a word --------------------------------------------------------


def test_a_cell_held_past_the_bound_is_reported_once_with_what_holds_it_and_goes_on_waiting(
    state_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    g = Governor(None, state_path=state_path, adaptive=True, report_wait_s=0.3)
    holder = g.state.attempt(SERIAL, "s0", g.rules(), ticket=None, waited_s=0.0)  # type: ignore[arg-type]
    assert holder.slot is not None
    g.state.renew({holder.slot: LiveProgress(10.0, 100, 10.0)})  # length unknown: the neighbour waits
    admitted = threading.Event()

    def neighbour() -> None:
        admission = g.admit(NEIGHBOUR, "n0")
        admitted.set()
        g.release(admission)

    with caplog.at_level(logging.WARNING, logger="spark_otel.governor.admission"):
        t = threading.Thread(target=neighbour)
        t.start()
        _until(lambda: "has waited" in caplog.text, timeout_s=5)
        time.sleep(0.5)  # more polls: still one report
        assert not admitted.is_set()
        g.state.release(holder.slot, SERIAL)
        t.join(5)
    assert admitted.is_set()
    reports = [r.getMessage() for r in caplog.records if "has waited" in r.getMessage()]
    assert len(reports) == 1
    assert reports[0].startswith("spark-otel governor: cell n0 of batch has waited ")
    assert reports[0].endswith(
        " s (real) for its lane on nemotron, held by adaptive: length unknown, protecting s0 (serial on "
        "qwen); it goes on waiting (spark-otel lanes shows what holds it)"
    )


def test_the_report_bound_must_be_positive(state_path: Path) -> None:
    from spark_otel._exceptions import ConfigError

    with pytest.raises(ConfigError, match=r"^report_wait_s must be positive, got 0$"):
        Governor(None, state_path=state_path, adaptive=True, report_wait_s=0)


# -- fail-open and fail-closed, with no rules file -------------------------------------------------------


@pytest.mark.parametrize("fail_closed", [False, True])
def test_adaptive_with_a_state_file_that_fails_runs_the_cell_ungoverned_or_refuses_it_as_asked(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, fail_closed: bool
) -> None:
    not_state = tmp_path / "governor.sqlite"
    not_state.write_bytes(b"this is not a SQLite file, nor a governor state file" * 100)
    g = Governor(None, state_path=not_state, adaptive=True, fail_closed=fail_closed)
    with caplog.at_level(logging.WARNING, logger="spark_otel"):
        if fail_closed:
            with pytest.raises(
                GovernorError, match=rf"^governor \(fail-closed\): the state file {not_state} failed"
            ):
                g.admit(NEIGHBOUR, "n0")
        else:
            admission = g.admit(NEIGHBOUR, "n0")
            assert (admission.slot, admission.verdict) == (None, None)  # ran ungoverned
            g.release(admission)
    said = [r.getMessage() for r in caplog.records if str(not_state) in r.getMessage()]
    assert len(said) == (0 if fail_closed else 1)


def test_a_declared_max_tokens_bounds_the_drain_where_short_cells_ended_first(state_path: Path) -> None:
    """The finder's eval: its 300-token cells end first, so its longest completed cell (10 s)
    understates a cell that may run to its declared 1,200 tokens; the drain counts those."""
    bounded = replace(NEIGHBOUR, max_tokens=1200)
    g = Governor(None, state_path=state_path, adaptive=True)
    first = g.state.attempt(bounded, "n0", g.rules(), ticket=None, waited_s=0.0)  # type: ignore[arg-type]
    assert first.slot is not None
    g.state.release(first.slot, bounded, LiveProgress(10.0, 300, 30.0))  # ended at 30 tok/s
    running = g.state.attempt(bounded, "n1", g.rules(), ticket=None, waited_s=0.0).slot  # type: ignore[arg-type]
    assert running is not None
    g.state.renew({running: LiveProgress(5.0, 150, 35.0)})  # 1,050 tokens left at 35 tok/s: 30 s
    _serial_in_flight(g)
    verdict = _verdict(g, bounded)
    assert verdict.protected is not None
    assert verdict.protected.drain_s == pytest.approx(1200 / 30.0)  # the candidate's bound
    g.state.renew({running: LiveProgress(5.0, 150, 20.0)})  # n1 slower: 1,050 / 20 = 52.5 s left
    slower = _verdict(g, bounded)
    assert slower.protected is not None
    assert slower.protected.drain_s == pytest.approx(1050 / 20.0)
