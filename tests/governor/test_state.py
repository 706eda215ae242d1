"""The governor's shared state on a real SQLite file and a stepped clock: admission in ticket
order, the rule that holds a cell, leases that lapse, processes that are gone, and what
`spark-otel lanes` shows."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from spark_otel import _clock
from spark_otel._clock import NS_PER_S
from spark_otel.governor import state as governor_state
from spark_otel.governor.rules import InFlight, parse_rules
from spark_otel.governor.state import LEASE_S, Decision, LaneView, Lease, SharedState

RULES = parse_rules("eval_gap_s = 5\n[[lane]]\nengine = 'q'\ncells = 1\n", where="test")
A, B, C = (InFlight("q", name, None, False) for name in ("ev-a", "ev-b", "ev-c"))
DEADLINED = InFlight("q", "ev-d", "seed", True)
START_NS = 1_800_000_000 * NS_PER_S


class WallClock:
    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.now_ns = START_NS
        monkeypatch.setattr(_clock, "real_wall_ns", lambda: self.now_ns)

    def advance(self, seconds: float) -> None:
        self.now_ns += int(seconds * NS_PER_S)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> WallClock:
    return WallClock(monkeypatch)


@pytest.fixture
def state(tmp_path: Path) -> Iterator[SharedState]:
    state = SharedState(tmp_path / "state" / "governor.sqlite")
    yield state
    state.close()


def _rows(state: SharedState, table: str) -> list[sqlite3.Row]:
    with sqlite3.connect(state.path) as conn:
        conn.row_factory = sqlite3.Row
        return list(conn.execute(f"SELECT * FROM {table}"))


def test_cells_are_admitted_in_the_order_they_queued(state: SharedState, clock: WallClock) -> None:
    first = state.attempt(A, "a1", RULES, ticket=None, waited_s=0.0)
    assert first == Decision(1, None, None)
    held_b = state.attempt(B, "b1", RULES, ticket=None, waited_s=0.0)
    held_c = state.attempt(C, "c1", RULES, ticket=None, waited_s=0.0)
    assert held_b == Decision(None, held_b.ticket, "q lane at most 1 cell")
    assert held_c == Decision(None, held_c.ticket, "q lane at most 1 cell")
    assert held_b.ticket is not None
    assert held_c.ticket is not None
    assert held_b.ticket < held_c.ticket
    clock.advance(3)
    state.release(1, A)
    # C may not pass B, which queued first: the lane is free, B is not served yet.
    again_c = state.attempt(C, "c1", RULES, ticket=held_c.ticket, waited_s=3.0)
    assert again_c == Decision(None, held_c.ticket, "an earlier cell in the queue for this lane")
    admitted_b = state.attempt(B, "b1", RULES, ticket=held_b.ticket, waited_s=3.0)
    assert admitted_b == Decision(2, None, None)
    (slot,) = _rows(state, "slots")
    assert (slot["id"], slot["eval_name"], slot["cell_id"], slot["waited_s"]) == (2, "ev-b", "b1", 3.0)
    assert slot["admitted_ns"] == clock.now_ns
    assert slot["lease_until_ns"] == clock.now_ns + int(LEASE_S * NS_PER_S)
    assert [r["ticket"] for r in _rows(state, "waiting")] == [held_c.ticket]


def test_lanes_show_what_is_in_use_waiting_and_present(state: SharedState, clock: WallClock) -> None:
    state.attempt(A, "a1", RULES, ticket=None, waited_s=0.0)
    state.attempt(DEADLINED, "d1", RULES, ticket=None, waited_s=0.0)
    clock.advance(2.5)
    other = InFlight("r", "ev-r", None, False)
    slot = state.attempt(other, "r1", RULES, ticket=None, waited_s=0.0).slot  # no rule for r
    assert slot is not None
    state.release(slot, other)
    clock.advance(1)
    state.renew()  # the leases last 4 s: this test's rows must outlive them
    assert state.lanes(RULES) == [
        LaneView(engine="q", in_use=[A], waiting=[(DEADLINED, "q lane at most 1 cell", 3.5)], present=[]),
        LaneView(engine="r", in_use=[], waiting=[], present=[other]),
    ]
    clock.advance(1.5)  # 2.5 s after r's cell ended: past the default gap, inside the rules' 5 s
    state.renew()
    assert [lane.engine for lane in state.lanes()] == ["q"]
    assert [lane.present for lane in state.lanes(RULES)] == [[], [other]]
    clock.advance(3)
    state.renew()
    assert [lane.engine for lane in state.lanes(RULES)] == ["q"]


def test_the_last_cell_s_class_and_ceiling_are_what_is_present(state: SharedState, clock: WallClock) -> None:
    for cell in (InFlight("q", "ev", None, False), InFlight("q", "ev", "seed", True)):
        slot = state.attempt(cell, None, RULES, ticket=None, waited_s=0.0).slot
        assert slot is not None
        state.release(slot, cell)
    (present,) = _rows(state, "present")
    assert (present["cell_class"], present["has_deadline"], present["last_end_ns"]) == (
        "seed",
        1,
        clock.now_ns,
    )


def test_a_cell_present_on_its_engine_counts_for_the_gap(state: SharedState, clock: WallClock) -> None:
    rules = parse_rules(
        "eval_gap_s = 5\n[[cross_engine]]\nengine = 'q'\ncells = 0\n"
        "while_engine = 'r'\nwhile_eval = 'ev-r'\n",
        where="test",
    )
    serial = InFlight("r", "ev-r", None, False)
    slot = state.attempt(serial, None, rules, ticket=None, waited_s=0.0).slot
    assert slot is not None
    state.release(slot, serial)
    clock.advance(4.9)  # the serial eval's next cell is a moment away: it still runs
    held = state.attempt(A, None, rules, ticket=None, waited_s=0.0)
    assert held == Decision(None, held.ticket, "q yields while ev-r runs on r")
    clock.advance(0.2)
    assert state.attempt(A, None, rules, ticket=held.ticket, waited_s=5.1).slot is not None


def test_a_ticket_dropped_while_its_process_stalled_queues_again(
    state: SharedState, clock: WallClock
) -> None:
    state.attempt(A, None, RULES, ticket=None, waited_s=0.0)
    held = state.attempt(B, None, RULES, ticket=None, waited_s=0.0)
    assert held.ticket is not None
    state.withdraw(held.ticket)
    assert _rows(state, "waiting") == []
    again = state.attempt(B, None, RULES, ticket=held.ticket, waited_s=1.0)
    assert again.ticket is not None
    assert again.ticket != held.ticket
    assert [r["ticket"] for r in _rows(state, "waiting")] == [again.ticket]


def test_another_host_s_rows_go_when_their_lease_lapses(
    state: SharedState, clock: WallClock, tmp_path: Path
) -> None:
    elsewhere = SharedState(state.path)
    elsewhere.host = "another-box"
    try:
        assert elsewhere.attempt(A, None, RULES, ticket=None, waited_s=0.0).slot is not None
        elsewhere.attempt(B, None, RULES, ticket=None, waited_s=0.0)
    finally:
        elsewhere.close()
    clock.advance(LEASE_S)  # the lease ends now: not lapsed yet
    assert state.lanes()[0].in_use == [A]
    clock.advance(0.001)
    assert state.lanes() == []
    assert _rows(state, "slots") == _rows(state, "waiting") == []


def test_renewed_leases_outlive_their_first_term(state: SharedState, clock: WallClock) -> None:
    state.host = "this-box-by-another-name"  # so only the lease can keep the rows
    state.attempt(A, None, RULES, ticket=None, waited_s=0.0)
    state.attempt(B, None, RULES, ticket=None, waited_s=0.0)
    clock.advance(LEASE_S - 1)
    state.renew()
    clock.advance(2)
    lane = state.lanes()[0]
    assert (lane.in_use, [w[0] for w in lane.waiting]) == ([A], [B])
    renewed = clock.now_ns - 2 * NS_PER_S + int(LEASE_S * NS_PER_S)
    assert {r["lease_until_ns"] for r in (*_rows(state, "slots"), *_rows(state, "waiting"))} == {renewed}


def test_the_rows_of_a_process_gone_on_this_host_go_at_once(state: SharedState, clock: WallClock) -> None:
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], check=True, capture_output=True, text=True
    )
    dead_pid = int(gone.stdout)
    state.attempt(A, None, RULES, ticket=None, waited_s=0.0)  # this process's: stays
    with sqlite3.connect(state.path) as conn:
        lease = clock.now_ns + 10 * NS_PER_S
        common = "host, pid, lease_until_ns, engine, eval_name, has_deadline"
        conn.execute(
            f"INSERT INTO slots ({common}, admitted_ns, waited_s)"
            " VALUES (?, ?, ?, 'q', 'ev-dead', 0, 0, 0.0)",
            (state.host, dead_pid, lease),
        )
        conn.execute(
            f"INSERT INTO waiting ({common}, since_ns) VALUES (?, ?, ?, 'q', 'ev-dead', 0, 0)",
            (state.host, dead_pid, lease),
        )
    assert [lane.in_use for lane in state.lanes()] == [[A]]
    assert [r["eval_name"] for r in _rows(state, "slots")] == ["ev-a"]
    assert _rows(state, "waiting") == []


def _until(predicate: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 10
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.01)


def test_a_lease_is_renewed_while_held_and_its_thread_ends_when_dropped(
    state: SharedState, clock: WallClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(governor_state, "_RENEW_S", 0.02)
    errors: list[BaseException] = []
    lease = Lease(state, errors.append)
    state.attempt(A, None, RULES, ticket=None, waited_s=0.0)
    lease.hold()
    lease.hold()  # a second hold shares the one thread
    thread = lease._thread
    assert thread is not None
    clock.advance(3)
    renewed = clock.now_ns + int(LEASE_S * NS_PER_S)
    _until(lambda: _rows(state, "slots")[0]["lease_until_ns"] == renewed, "the renewal")
    lease.drop()
    assert thread.is_alive()  # still one hold
    lease.drop()
    lease.drop()  # more drops than holds: nothing held, not below
    thread.join(5)
    assert not thread.is_alive()
    assert lease._thread is None
    assert errors == []


def test_a_renewal_that_fails_is_handed_to_the_governor(
    state: SharedState, clock: WallClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(governor_state, "_RENEW_S", 0.02)

    def locked() -> None:
        raise sqlite3.OperationalError("database is locked")

    monkeypatch.setattr(state, "renew", locked)
    errors: list[BaseException] = []
    lease = Lease(state, errors.append)
    lease.hold()
    try:
        _until(lambda: len(errors) > 0, "the failure")
    finally:
        lease.drop()
    assert isinstance(errors[0], sqlite3.OperationalError)
    assert str(errors[0]) == "database is locked"
