"""The `Governor` called directly, without cells: a real state file, a short poll, in-memory
metrics. What the cell tests (test_admission.py) reach only by timing is driven here step by
step: the poll's jitter, a wait cancelled while an attempt runs, a failing withdraw or release,
the rules file read again only when it changed, and the environment read on first use."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from tests.support.metric_points import metric_points

from spark_otel import ConfigError, governor
from spark_otel import _semconv as sc
from spark_otel.governor import admission
from spark_otel.governor.admission import Admission, Governor, GovernorError
from spark_otel.governor.decision import InFlight
from spark_otel.governor.state import Decision, default_state_path

LANE_1 = "[[lane]]\nengine = 'q'\ncells = 1\n"
HELD_BY = "q lane at most 1 cell"
POLL_S = 0.01
A, B = InFlight("q", "ev-a", None, False), InFlight("q", "ev-b", None, False)


@pytest.fixture
def make_governor(rules_file: Callable[[str], Path], state_path: Path) -> Iterator[Callable[..., Governor]]:
    made: list[Governor] = []

    def make(text: str = LANE_1, **kwargs: Any) -> Governor:
        g = Governor(rules_file(text), state_path=state_path, poll_s=POLL_S, **kwargs)
        made.append(g)
        return g

    yield make
    for g in made:
        g.close()


def _lanes(g: Governor) -> dict[str, tuple[int, int]]:
    return {lane.engine: (len(lane.in_use), len(lane.waiting)) for lane in g.state.lanes()}


def _gauges(reader: InMemoryMetricReader) -> dict[str, list[tuple[dict[str, Any], int]]]:
    return {
        name: [(dict(p.attributes), p.value) for p in metric_points(reader, name)]
        for name in (sc.GOVERNOR_SLOTS, sc.GOVERNOR_QUEUE)
    }


def _reported_once(caplog: pytest.LogCaptureFixture, g: Governor, fault: BaseException) -> None:
    [warning] = _warnings(caplog, "governor state")
    assert (
        warning.getMessage()
        == f"spark_otel: governor state {g.state.path} failed; the call goes on untouched"
    )
    assert warning.exc_info is not None
    assert warning.exc_info[1] is fault


def _warnings(caplog: pytest.LogCaptureFixture, what: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.levelno == logging.WARNING and what in r.getMessage()]


# -- construction and the rules file ----------------------------------------------------------------


@pytest.mark.parametrize("poll_s", [0, -0.5])
def test_a_poll_that_is_not_positive_is_refused(tmp_path: Path, poll_s: float) -> None:
    with pytest.raises(ConfigError, match=rf"^poll_s must be positive, got {poll_s!r}$"):
        Governor(tmp_path / "rules.toml", state_path=tmp_path / "s.sqlite", poll_s=poll_s)


def test_a_missing_rules_file_is_named_and_fails_open_unless_asked_to_fail_closed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "absent.toml"
    said = f"{path}: cannot read the rules file: No such file or directory"
    g = Governor(path, state_path=tmp_path / "s.sqlite")
    with caplog.at_level(logging.WARNING, logger="spark_otel"):
        assert g.rules() is None
    assert [r.getMessage() for r in _warnings(caplog, "governor rules")] == [
        f"spark_otel: governor rules {path} failed; the call goes on untouched: {said}"
    ]
    closed = Governor(path, state_path=tmp_path / "s.sqlite", fail_closed=True)
    with pytest.raises(GovernorError) as raised:
        closed.rules()
    assert str(raised.value) == f"governor (fail-closed): {said}"
    assert isinstance(raised.value.__cause__, ConfigError)


def test_unchanged_rules_are_not_read_again_and_a_file_removed_then_restored_is(
    make_governor: Callable[..., Governor], rules_file: Callable[[str], Path]
) -> None:
    g = make_governor()
    first = g.rules()
    assert first is not None
    assert first is g.rules()
    g.rules_path.unlink()
    assert g.rules() is None
    rules_file(LANE_1)
    again = g.rules()
    assert again == first
    assert again is not first


# -- admission ----------------------------------------------------------------------------------------


def test_a_cell_on_an_engine_the_rules_do_not_govern_is_let_in_at_once_sync_and_async(
    make_governor: Callable[..., Governor],
) -> None:
    g = make_governor()
    other = InFlight("elsewhere", "ev", None, False)
    let_in = Admission(None, other, 0.0, None)
    assert g.admit(other, "c") == let_in
    assert asyncio.run(g.aadmit(other, "c")) == let_in
    assert not g.state.path.exists()


def _only_in_admission(monkeypatch: pytest.MonkeyPatch, module: str, **stand_ins: Any) -> None:
    """Replace functions of ``module`` as `admission` sees them, and nowhere else: a server
    thread another test left running also sleeps, and must not count as a poll."""
    real = getattr(admission, module)
    monkeypatch.setattr(admission, module, SimpleNamespace(**{**vars(real), **stand_ins}))


class _Polls:
    """Stands in for the poll's sleep and jitter: records both, and on the ``release_at``-th
    sleep frees the holder's slot and reads the gauges as they are while the cell waits."""

    def __init__(self, g: Governor, holder: Admission, meters: MeterProvider, reader: InMemoryMetricReader):
        self.g, self.holder, self.meters, self.reader = g, holder, meters, reader
        self.release_at = 3
        self.jitters = iter([0.9, 1.1, 1.15, 0.85])
        self.uniform_args: list[tuple[float, float]] = []
        self.sleeps: list[float] = []
        self.while_waiting: dict[str, list[tuple[dict[str, Any], int]]] = {}

    def uniform(self, low: float, high: float) -> float:
        self.uniform_args.append((low, high))
        return next(self.jitters)

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        if len(self.sleeps) == self.release_at:
            self.while_waiting = _gauges(self.reader)
            self.g.release(self.holder, meter_provider=self.meters)

    async def asleep(self, seconds: float) -> None:
        self.sleep(seconds)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_waiting_cell_asks_again_every_poll_jittered_by_a_fifth_and_the_gauges_follow(
    make_governor: Callable[..., Governor], monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    reader = InMemoryMetricReader()
    meters = MeterProvider(metric_readers=[reader])
    g = make_governor()
    holder = g.admit(A, "a1", meter_provider=meters)
    polls = _Polls(g, holder, meters, reader)
    _only_in_admission(monkeypatch, "random", uniform=polls.uniform)
    if mode == "sync":
        _only_in_admission(monkeypatch, "time", sleep=polls.sleep)
        got = g.admit(B, "b1", meter_provider=meters)
    else:
        _only_in_admission(monkeypatch, "asyncio", sleep=polls.asleep)
        got = asyncio.run(g.aadmit(B, "b1", meter_provider=meters))
    assert polls.uniform_args == [(0.8, 1.2)] * 3
    assert polls.sleeps == pytest.approx([POLL_S * 0.9, POLL_S * 1.1, POLL_S * 1.15])
    engine = {sc.ENGINE: "q"}
    assert polls.while_waiting == {sc.GOVERNOR_SLOTS: [(engine, 1)], sc.GOVERNOR_QUEUE: [(engine, 1)]}
    assert (got.slot, got.cell, got.rule) == (holder.slot + 1, B, HELD_BY)
    assert got.waited_s > 0
    assert _gauges(reader) == {sc.GOVERNOR_SLOTS: [(engine, 1)], sc.GOVERNOR_QUEUE: [(engine, 0)]}
    g.release(got, meter_provider=meters)
    assert _gauges(reader)[sc.GOVERNOR_SLOTS] == [(engine, 0)]
    assert _lanes(g)["q"] == (0, 0)
    meters.shutdown()


def test_a_withdraw_that_fails_is_reported_once_naming_the_state_and_the_cell_goes_on(
    make_governor: Callable[..., Governor],
    rules_file: Callable[[str], Path],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The rules stop governing the engine while a cell waits: it leaves the queue and starts."""
    g = make_governor()
    holder = g.admit(A, "a1")
    fault = sqlite3.OperationalError("disk I/O error")

    def withdraw(ticket: int) -> None:
        raise fault

    def sleep(seconds: float) -> None:
        rules_file("[[lane]]\nengine = 'elsewhere'\ncells = 1\n")

    monkeypatch.setattr(g.state, "withdraw", withdraw)
    _only_in_admission(monkeypatch, "time", sleep=sleep)
    with caplog.at_level(logging.WARNING, logger="spark_otel"):
        got = g.admit(B, "b1")
    assert (got.slot, got.rule) == (None, HELD_BY)
    _reported_once(caplog, g, fault)
    g.release(holder)


# -- a cancelled asyncio wait -------------------------------------------------------------------------


class _HeldAttempt:
    """The state's attempt, held at its start until the test lets it go (the cancellation lands
    while it runs in its worker thread); ``fault`` makes it raise instead."""

    def __init__(self, g: Governor, fault: BaseException | None = None) -> None:
        self.real = g.state.attempt
        self.entered, self.go = threading.Event(), threading.Event()
        self.fault = fault

    def __call__(self, *args: Any, **kwargs: Any) -> Decision:
        self.entered.set()
        self.go.wait(10)
        if self.fault is not None:
            raise self.fault
        return self.real(*args, **kwargs)


def _cancel_during_attempt(
    g: Governor, held: _HeldAttempt, monkeypatch: pytest.MonkeyPatch
) -> list[dict[str, Any]]:
    """Start ``aadmit`` for B, cancel it while its attempt runs, let the attempt finish and
    wait (10 s at most) for the undo the cancellation left; the loop's unhandled errors (a done
    callback that raised) come back."""
    undo = admission._Waiter.undo

    async def main() -> list[dict[str, Any]]:
        loop = asyncio.get_running_loop()
        unhandled: list[dict[str, Any]] = []
        loop.set_exception_handler(lambda _loop, context: unhandled.append(context))
        undone = asyncio.Event()

        def seen_undo(waiter: Any, attempt: Any) -> None:
            try:
                undo(waiter, attempt)
            finally:
                undone.set()

        monkeypatch.setattr(admission._Waiter, "undo", seen_undo)
        task = asyncio.ensure_future(g.aadmit(B, "b1"))
        assert await asyncio.to_thread(held.entered.wait, 10)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        held.go.set()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(undone.wait(), 10)
        return unhandled

    return asyncio.run(main())


def test_a_slot_won_by_an_attempt_whose_wait_was_cancelled_is_freed(
    make_governor: Callable[..., Governor], monkeypatch: pytest.MonkeyPatch
) -> None:
    g = make_governor()
    held = _HeldAttempt(g)
    monkeypatch.setattr(g.state, "attempt", held)
    assert _cancel_during_attempt(g, held, monkeypatch) == []
    assert _lanes(g)["q"] == (0, 0)  # won, then given back; and B's eval was present on q
    assert g.admit(A, "a1").slot is not None  # the lane is free


def test_a_ticket_taken_by_an_attempt_whose_wait_was_cancelled_is_withdrawn(
    make_governor: Callable[..., Governor], monkeypatch: pytest.MonkeyPatch
) -> None:
    g = make_governor()
    holder = g.admit(A, "a1")
    held = _HeldAttempt(g)
    monkeypatch.setattr(g.state, "attempt", held)
    assert _cancel_during_attempt(g, held, monkeypatch) == []
    assert _lanes(g)["q"] == (1, 0)  # A still in, B out of the queue
    g.release(holder)


def test_a_release_that_fails_after_a_cancelled_wait_is_reported_once(
    make_governor: Callable[..., Governor], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    g = make_governor()
    held = _HeldAttempt(g)
    fault = sqlite3.OperationalError("database is locked")

    def release(slot: int, cell: InFlight) -> None:
        raise fault

    monkeypatch.setattr(g.state, "attempt", held)
    monkeypatch.setattr(g.state, "release", release)
    with caplog.at_level(logging.WARNING, logger="spark_otel"):
        assert _cancel_during_attempt(g, held, monkeypatch) == []
    _reported_once(caplog, g, fault)


@pytest.mark.parametrize("fail_closed", [False, True])
def test_an_attempt_that_fails_after_its_wait_was_cancelled_leaves_nothing_to_undo(
    make_governor: Callable[..., Governor],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    fail_closed: bool,
) -> None:
    """Fail-open the attempt says None; fail-closed it raises `GovernorError` into the done
    callback's future. Either way there is no slot or ticket, and nothing raises on the loop."""
    g = make_governor(fail_closed=fail_closed)
    holder = g.admit(A, "a1")
    held = _HeldAttempt(g, fault=sqlite3.OperationalError("disk I/O error"))
    monkeypatch.setattr(g.state, "attempt", held)
    release = g.state.release
    released: list[int] = []
    monkeypatch.setattr(g.state, "release", lambda slot, cell: (released.append(slot), release(slot, cell)))
    with caplog.at_level(logging.WARNING, logger="spark_otel"):
        assert _cancel_during_attempt(g, held, monkeypatch) == []
    assert released == []
    assert len(_warnings(caplog, "governor state")) == (0 if fail_closed else 1)
    assert _lanes(g)["q"] == (1, 0)
    g.release(holder)


# -- a wait past the cell's own ceiling -----------------------------------------------------------------


def test_a_wait_is_past_the_ceiling_only_beyond_it_and_warned_once_per_eval(
    make_governor: Callable[..., Governor], caplog: pytest.LogCaptureFixture
) -> None:
    g = make_governor()
    with caplog.at_level(logging.WARNING, logger="spark_otel.governor.admission"):
        assert not g.waited_past_deadline(Admission(1, A, 5.0, HELD_BY), "a1", 5.0)
        assert not g.waited_past_deadline(Admission(1, A, 500.0, HELD_BY), "a1", None)
        assert g.waited_past_deadline(Admission(1, A, 5.25, HELD_BY), "a2", 5.0)
        assert g.waited_past_deadline(Admission(1, A, 9.0, HELD_BY), "a3", 5.0)
        assert g.waited_past_deadline(Admission(1, B, 7.0, None), "b1", 2.0)
    assert [r.getMessage() for r in caplog.records] == [
        "spark-otel governor: cell a2 of ev-a waited 5.2 s for its lane (q lane at most 1 cell), longer "
        "than its own 5.0 s ceiling; later cells of ev-a that do so are marked on their spans only "
        "(spark-otel lanes shows what holds them)",
        "spark-otel governor: cell b1 of ev-b waited 7.0 s for its lane (None), longer than its own "
        "2.0 s ceiling; later cells of ev-b that do so are marked on their spans only (spark-otel "
        "lanes shows what holds them)",
    ]


# -- govern() and the environment ----------------------------------------------------------------------


def test_govern_takes_the_state_file_from_the_environment_when_not_given(
    rules_file: Callable[[str], Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SPARK_OTEL_STORE", str(tmp_path / "data" / "store.sqlite"))
    monkeypatch.setenv(governor.STATE_ENV, str(tmp_path / "elsewhere.sqlite"))
    assert governor.govern(rules_file(LANE_1)).state.path == tmp_path / "elsewhere.sqlite"
    assert governor.govern(rules_file(LANE_1), state=tmp_path / "given.sqlite").state.path == (
        tmp_path / "given.sqlite"
    )
    monkeypatch.setenv(governor.STATE_ENV, "")
    assert governor.govern(rules_file(LANE_1)).state.path == default_state_path()


@pytest.fixture
def first_use(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """As in a fresh process: the environment not read yet, no governor in force."""
    governor.ungovern()
    monkeypatch.setattr(governor, "_environment_read", False)
    for name in (governor.RULES_ENV, governor.STATE_ENV, governor.FAIL_CLOSED_ENV):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_the_environment_is_read_once_on_first_use(
    first_use: pytest.MonkeyPatch, rules_file: Callable[[str], Path], state_path: Path
) -> None:
    first_use.setenv(governor.RULES_ENV, str(rules_file(LANE_1)))
    first_use.setenv(governor.STATE_ENV, str(state_path))
    g = governor.governor_from_environment()
    assert g is not None
    assert g is governor.current_governor()
    assert (g.rules_path, g.state.path, g.fail_closed) == (rules_file(LANE_1), state_path, False)
    assert governor.governor_from_environment() is g
    governor.ungovern()
    assert governor.governor_from_environment() is None  # not read again


def test_without_rules_in_the_environment_nothing_is_governed(first_use: pytest.MonkeyPatch) -> None:
    assert governor.governor_from_environment() is None
    first_use.setenv(governor.RULES_ENV, "")
    first_use.setattr(governor, "_environment_read", False)
    assert governor.governor_from_environment() is None


def test_a_governor_already_in_force_wins_over_the_environment(
    first_use: pytest.MonkeyPatch, rules_file: Callable[[str], Path], tmp_path: Path
) -> None:
    explicit = governor.govern(rules_file(LANE_1), state=tmp_path / "explicit.sqlite")
    first_use.setenv(governor.RULES_ENV, str(tmp_path / "other.toml"))
    assert governor.governor_from_environment() is explicit


@pytest.mark.parametrize(
    ("value", "fail_closed"),
    [("1", True), ("true", True), ("YES", True), (" On ", True), ("yes", True), ("on", True),
     ("TRUE", True), ("0", False), ("no", False), ("", False), ("closed", False), (None, False)],
)  # fmt: skip
def test_fail_closed_is_asked_for_with_a_true_word(
    first_use: pytest.MonkeyPatch,
    rules_file: Callable[[str], Path],
    state_path: Path,
    value: str | None,
    fail_closed: bool,
) -> None:
    first_use.setenv(governor.RULES_ENV, str(rules_file(LANE_1)))
    first_use.setenv(governor.STATE_ENV, str(state_path))
    if value is not None:
        first_use.setenv(governor.FAIL_CLOSED_ENV, value)
    g = governor.governor_from_environment()
    assert g is not None
    assert g.fail_closed is fail_closed
