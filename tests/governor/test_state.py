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
from tests.support.wall_clock import START_NS, WallClock

from spark_otel._clock import NS_PER_S
from spark_otel._exceptions import InputError
from spark_otel.governor import state as governor_state
from spark_otel.governor.decision import InFlight
from spark_otel.governor.slack import Projection, Protected, SlackReason, SlackVerdict
from spark_otel.governor.state import LEASE_S, AdmittedOn, BoxNow, Decision, LaneView, Lease, SharedState
from spark_otel.live_progress import LiveProgress
from spark_otel.records.rules_file import parse_rules

RULES = parse_rules("eval_gap_s = 5\n[[lane]]\nengine = 'q'\ncells = 1\n", where="test")
A, B, C = (InFlight("q", name, None, False) for name in ("ev-a", "ev-b", "ev-c"))
DEADLINED = InFlight("q", "ev-d", "seed", True)


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
    (waiting,) = _rows(state, "waiting")
    assert (waiting["ticket"], waiting["cell_id"], waiting["since_ns"]) == (held_c.ticket, "c1", START_NS)


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
    dead = [
        int(subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                           check=True, capture_output=True, text=True).stdout)
        for _ in range(2)
    ]  # fmt: skip
    state.attempt(A, None, RULES, ticket=None, waited_s=0.0)  # this process's: stays
    for pid in dead:  # two at once: one statement drops them all
        for table in ("slots", "waiting"):
            _insert_row(state, table, pid, clock.now_ns + 10 * NS_PER_S, eval_name="ev-dead")
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

    def renewed_now() -> bool:
        return bool(_rows(state, "slots")[0]["lease_until_ns"] == clock.now_ns + int(LEASE_S * NS_PER_S))

    lease.hold()
    thread = lease._thread
    assert thread is not None
    assert (thread.name, thread.daemon) == ("spark-otel-governor-lease", True)
    lease.hold()  # a second hold shares the one thread
    assert lease._thread is thread
    clock.advance(3)
    _until(renewed_now, "the renewal")
    lease.drop()
    time.sleep(0.1)  # five renewal periods: one hold is left, so the thread goes on
    clock.advance(1)
    _until(renewed_now, "the renewal with one hold left")
    assert thread.is_alive()
    lease.drop()
    thread.join(5)
    assert not thread.is_alive()
    assert lease._thread is None
    lease.drop()  # more drops than holds: nothing held, and not below nothing
    lease.hold()  # held again: a new thread renews
    again = lease._thread
    assert again is not None
    assert again is not thread
    clock.advance(1)
    _until(renewed_now, "the renewal after holding again")
    lease.drop()
    again.join(5)
    assert not again.is_alive()
    assert errors == []


def test_a_drop_during_a_renewal_ends_the_thread_at_its_next_turn(
    state: SharedState, clock: WallClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(governor_state, "_RENEW_S", 0.02)
    lease = Lease(state, lambda exc: None)
    renew = state.renew

    def renew_then_drop() -> None:
        renew()
        lease.drop()  # the cell ends while its lease is being renewed

    monkeypatch.setattr(state, "renew", renew_then_drop)
    lease.hold()
    thread = lease._thread
    assert thread is not None
    thread.join(5)
    assert not thread.is_alive()
    assert lease._thread is None
    monkeypatch.setattr(state, "renew", renew)
    lease.hold()  # the next cell's hold starts a thread again
    assert lease._thread is not None
    assert lease._thread.is_alive()
    lease.drop()


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


def test_the_state_file_is_beside_the_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPARK_OTEL_STORE", str(tmp_path / "runs" / "store.sqlite"))
    assert governor_state.default_state_path() == tmp_path / "runs" / "governor.sqlite"


def test_a_state_in_a_new_directory_makes_it(tmp_path: Path, clock: WallClock) -> None:
    state = SharedState(tmp_path / "a" / "b" / "governor.sqlite")
    try:
        assert state.lanes() == []
    finally:
        state.close()
    assert (tmp_path / "a" / "b" / "governor.sqlite").is_file()


def test_one_connection_serves_a_process_until_closed(state: SharedState, clock: WallClock) -> None:
    state.lanes()
    conn = state._conn
    assert conn is not None
    state.lanes()
    assert state._conn is conn
    state.close()
    with pytest.raises(sqlite3.ProgrammingError):
        conn.execute("SELECT 1")
    assert state.lanes() == []  # opened again
    state.close()
    state.close()  # closing a closed state is nothing


def test_a_state_never_opened_closes(tmp_path: Path) -> None:
    SharedState(tmp_path / "never.sqlite").close()
    assert not (tmp_path / "never.sqlite").exists()


def test_a_transaction_waits_two_seconds_for_another_writer_then_says_so(
    state: SharedState, clock: WallClock
) -> None:
    state.lanes()
    other = sqlite3.connect(state.path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    try:
        started = time.monotonic()
        with pytest.raises(InputError) as caught:
            state.attempt(A, None, RULES, ticket=None, waited_s=0.0)
        waited = time.monotonic() - started
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert 1.9 <= waited < 4.5  # the 2 s busy timeout, not SQLite's default 5 s
    assert str(caught.value) == (
        f"{state.path}: governor state file: locked by another process past 2 s (database is locked)"
    )


def test_a_live_process_s_rows_stay_and_it_is_sent_no_signal(state: SharedState, clock: WallClock) -> None:
    state.lanes()  # the file, made
    alive = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        _insert_row(state, "slots", alive.pid, clock.now_ns + 10 * NS_PER_S)
        assert [lane.in_use for lane in state.lanes()] == [[InFlight("q", "ev-other", None, False)]]
        assert alive.poll() is None
    finally:
        alive.kill()
        alive.wait()


def test_a_process_of_another_user_counts_as_alive(
    state: SharedState, clock: WallClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    def not_ours(pid: int, sig: int) -> None:
        raise PermissionError(1, "Operation not permitted")  # as root here, no such process is at hand

    state.lanes()  # the file, made
    _insert_row(state, "slots", 999_999, clock.now_ns + 10 * NS_PER_S)
    monkeypatch.setattr(governor_state.os, "kill", not_ours)
    assert [lane.in_use for lane in state.lanes()] == [[InFlight("q", "ev-other", None, False)]]


def _insert_row(
    state: SharedState, table: str, pid: int, lease_until_ns: int, eval_name: str = "ev-other"
) -> None:
    columns = "host, pid, lease_until_ns, engine, eval_name, has_deadline"
    more = ("admitted_ns, waited_s", "0, 0.0") if table == "slots" else ("since_ns", "0")
    with sqlite3.connect(state.path) as conn:
        conn.execute(
            f"INSERT INTO {table} ({columns}, {more[0]}) VALUES (?, ?, ?, 'q', ?, 0, {more[1]})",
            (state.host, pid, lease_until_ns, eval_name),
        )


def test_live_progress_rides_on_the_slot_and_goes_stale_or_away_with_it(
    state: SharedState, clock: WallClock
) -> None:
    """A renewal publishes each in-flight cell's progress on its slot's row; the reader shows it
    while it is fresh (within the lease), not once the runner stops publishing it, and never
    after the slot is released or its lease lapses."""
    slot = state.attempt(A, "a1", RULES, ticket=None, waited_s=0.0).slot
    assert slot is not None
    other = state.attempt(InFlight("z", "ev-z", None, False), "z1", RULES, ticket=None, waited_s=0.0).slot
    assert other is not None
    [q, z] = governor_state.read_lanes(state.path)
    assert (q.in_use_live, z.in_use_live) == ([None], [None])  # admitted, nothing published yet
    state.renew({slot: LiveProgress(12.5, 340, 10.25), other: LiveProgress(3.0, None, None)})
    [q, z] = governor_state.read_lanes(state.path)
    assert (q.in_use_live, z.in_use_live) == (
        [LiveProgress(12.5, 340, 10.25)],
        [LiveProgress(3.0, None, None)],
    )
    clock.advance(LEASE_S - 0.5)
    state.renew({other: LiveProgress(6.5, None, None)})  # the lease renewed, a's progress not
    [q, z] = governor_state.read_lanes(state.path)
    assert q.in_use_live == [LiveProgress(12.5, 340, 10.25)]  # still within the lease
    clock.advance(1.0)
    state.renew({other: LiveProgress(7.5, None, None)})
    [q, z] = governor_state.read_lanes(state.path)
    assert (q.in_use, q.in_use_live) == ([A], [None])  # the slot holds; its figures are stale
    state.release(other, InFlight("z", "ev-z", None, False))
    state.renew({slot: LiveProgress(20.0, 420, 9.5), other: LiveProgress(9.0, None, None)})
    lanes = {lane.engine: lane for lane in governor_state.read_lanes(state.path)}
    assert lanes["q"].in_use_live == [LiveProgress(20.0, 420, 9.5)]
    assert lanes["z"].in_use == []  # released: its late progress is not written anywhere
    assert [r["id"] for r in _rows(state, "slots")] == [slot]
    clock.advance(LEASE_S + 0.1)  # the runner stops renewing: the slot and its figures lapse
    assert governor_state.read_lanes(state.path) == []


def test_a_lease_publishes_what_its_governors_progress_says(tmp_path: Path) -> None:
    """The renewal thread asks the progress method it was given each time it renews, and holds
    it weakly, as it holds the state."""

    class Runner:
        def __init__(self) -> None:
            self.asked = 0

        def progress(self) -> dict[int, LiveProgress]:
            self.asked += 1
            return {slot: LiveProgress(float(self.asked), self.asked, None)}

    state = SharedState(tmp_path / "governor.sqlite")
    try:
        slot = state.attempt(A, "a1", RULES, ticket=None, waited_s=0.0).slot
        assert slot is not None
        runner = Runner()
        lease = Lease(state, lambda exc: None, runner.progress)
        lease.hold()
        deadline = time.monotonic() + 10
        while runner.asked < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        lease.drop()
        [lane] = governor_state.read_lanes(state.path)
        [live] = lane.in_use_live
        assert live is not None
        assert live.tokens in range(2, runner.asked + 1)  # a renewal after the first, committed
        assert live == LiveProgress(float(live.tokens), live.tokens, None)
    finally:
        state.close()


SERIAL_1 = Protected("s1", "q", "serial", 1800.0, 300.0, 4000, 9.5, 12000.0)
SLACK = SlackVerdict(SlackReason.SLACK, SERIAL_1, Projection("s1", "q", 1260.0, 0.3, 8.25))


def test_the_verdict_a_cell_was_admitted_on_rides_on_its_slot(state: SharedState, clock: WallClock) -> None:
    """Adaptive governing: the law's verdict is written with the slot in the transaction that
    admits the cell, and the reader shows it beside the cell while it runs (in order with
    ``in_use``); a cell the rules alone admitted, or one the law held, carries none; a verdict
    without a ceiling or projection keeps what it has."""
    seen: list[BoxNow] = []

    def judge(verdict: SlackVerdict) -> object:
        def decide(_cell: InFlight, box: BoxNow) -> SlackVerdict:
            seen.append(box)
            return verdict

        return decide

    budgeted = SlackVerdict(
        SlackReason.SLACK,
        Protected("s2", "q", "serial", None, 10.0, 100, 9.0, None, budget=0.1),
        Projection("s2", "q", float("inf"), float("inf"), 8.5),
    )
    wide = parse_rules("[[lane]]\nengine = 'q'\ncells = 4\n", where="test")
    first = state.attempt(A, "a1", wide, ticket=None, waited_s=0.0, judge=judge(SLACK))  # type: ignore[arg-type]
    assert (first.slot is not None, first.verdict) == (True, SLACK)
    held = state.attempt(
        B, "b1", wide, ticket=None, waited_s=0.0,
        judge=judge(SlackVerdict(SlackReason.TIGHT, SERIAL_1)),  # type: ignore[arg-type]
    )  # fmt: skip
    assert held.slot is None
    assert state.attempt(C, "c1", wide, ticket=None, waited_s=0.0).slot is not None  # rules alone
    assert state.attempt(DEADLINED, "d1", wide, ticket=None, waited_s=0.0, judge=judge(budgeted)).slot  # type: ignore[arg-type]
    [lane] = governor_state.read_lanes(state.path)
    assert lane.in_use_ids == ["a1", "c1", "d1"]
    assert lane.in_use_admitted_on == [
        AdmittedOn("slack", "s1", 0.3, 8.25, 1260.0),
        None,
        AdmittedOn("slack", "s2", None, 8.5, None),  # no ceiling: no margin; an unending finish: none
    ]
    assert AdmittedOn.of(SlackVerdict(SlackReason.NOTHING_PROTECTED)) == AdmittedOn(
        "nothing to protect", None, None, None, None
    )
