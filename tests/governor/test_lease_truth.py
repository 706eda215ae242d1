"""A lease that lapses while its cell runs (the runner stopped or starved past it) is noticed,
recorded and counted: the runner's next transaction records the lapse, puts its slot back when
another runner dropped it, and the lane's next admission counts the cell until it ends. The
state file deleted or replaced under a runner is warned once, and its running cells move with
it. Real SQLite files; the wall clock is moved by hand (the multi-process version, with a real
SIGSTOP, is in test_stopped_runner.py)."""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.support.wall_clock import WallClock

from spark_otel.governor.decision import InFlight
from spark_otel.governor.state import LEASE_S, Lapse, SharedState, read_lanes
from spark_otel.records.rules_file import parse_rules

RULES = parse_rules("[[lane]]\nengine = 'q'\ncells = 1\n", where="test")
A, B, C = (InFlight("q", name, None, False) for name in ("ev-a", "ev-b", "ev-c"))


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> WallClock:
    return WallClock(monkeypatch)


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "governor.sqlite"


@pytest.fixture
def runner(path: Path) -> Iterator[SharedState]:
    """The runner whose lease lapses."""
    state = SharedState(path)
    yield state
    state.close()


@pytest.fixture
def other(path: Path) -> Iterator[SharedState]:
    """Another runner on another host (so only the lease, not the pid, says whether a row is live)."""
    state = SharedState(path)
    state.host = "another-box"
    yield state
    state.close()


def _slots(path: Path) -> list[tuple[str, str]]:
    with sqlite3.connect(path) as conn:
        return list(conn.execute("SELECT host, eval_name FROM slots ORDER BY id"))


def test_a_lapse_whose_slot_was_given_away_is_recorded_and_the_slot_put_back(
    runner: SharedState, other: SharedState, path: Path, clock: WallClock
) -> None:
    runner.host = "this-box-by-another-name"  # only the lease keeps its row, as for a stopped process
    mine = runner.attempt(A, "a-1", RULES, ticket=None, waited_s=0.0).slot
    assert mine is not None
    clock.advance(LEASE_S + 1.5)  # the runner is stopped: no renewal
    assert other.attempt(B, "b-1", RULES, ticket=None, waited_s=0.0).slot is not None  # its row dropped
    assert _slots(path) == [("another-box", "ev-b")]
    noticed = clock.now_ns
    runner.renew()  # continued: the renewal thread's next turn
    # Its slot is back, so the lane counts both cells and admits no third.
    assert _slots(path) == [("another-box", "ev-b"), ("this-box-by-another-name", "ev-a")]
    held = other.attempt(C, "c-1", RULES, ticket=None, waited_s=0.0)
    assert (held.slot, held.rule) == (None, "q lane at most 1 cell")
    lapse = Lapse("q", "ev-a", "a-1", 1.5, True, noticed)
    [lane] = read_lanes(path, RULES)
    assert (lane.lapses, lane.lapsed_in_use, len(lane.in_use)) == ([lapse], 1, 2)
    clock.advance(0.5)
    assert runner.release(mine, A).lapse == lapse  # the cell's span and metrics are told
    assert _slots(path) == [("another-box", "ev-b")]


def test_a_lapse_nobody_acted_on_is_recorded_with_its_slot_kept(
    runner: SharedState, path: Path, clock: WallClock
) -> None:
    mine = runner.attempt(A, "a-1", RULES, ticket=None, waited_s=0.0).slot
    assert mine is not None
    clock.advance(LEASE_S + 0.25)
    released = runner.release(mine, A)
    assert released.lapse == Lapse("q", "ev-a", "a-1", 0.25, False, clock.now_ns)
    assert _slots(path) == []


def test_a_lease_renewed_in_time_is_no_lapse(runner: SharedState, path: Path, clock: WallClock) -> None:
    mine = runner.attempt(A, "a-1", RULES, ticket=None, waited_s=0.0).slot
    assert mine is not None
    for _ in range(5):
        clock.advance(LEASE_S - 0.5)
        runner.renew()
    assert runner.release(mine, A).lapse is None
    [lane] = read_lanes(path, RULES)
    assert lane.lapses == []


def test_lanes_show_lapses_of_the_last_hour_only(runner: SharedState, path: Path, clock: WallClock) -> None:
    mine = runner.attempt(A, "a-1", RULES, ticket=None, waited_s=0.0).slot
    assert mine is not None
    clock.advance(LEASE_S + 2)
    runner.release(mine, A)
    assert [lane.lapses[0].lapsed_s for lane in read_lanes(path, RULES)] == [2.0]
    clock.advance(3600.001)
    assert [lane.lapses for lane in read_lanes(path, RULES)] == []  # the lane is gone from view


@pytest.mark.parametrize("how", ["deleted", "replaced"])
def test_a_state_file_deleted_or_replaced_is_warned_once_and_the_running_cells_move_with_it(
    how: str,
    runner: SharedState,
    other: SharedState,
    path: Path,
    clock: WallClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    mine = runner.attempt(A, "a-1", RULES, ticket=None, waited_s=0.0).slot
    assert mine is not None
    path.unlink()
    if how == "replaced":
        with sqlite3.connect(path) as conn:  # an empty SQLite file, another inode
            conn.execute("PRAGMA user_version = 0")
    assert other.attempt(B, "b-1", RULES, ticket=None, waited_s=0.0).slot is not None  # no slot in sight
    with caplog.at_level(logging.WARNING, logger="spark_otel"):
        runner.renew()
        runner.renew()
    assert [r.getMessage() for r in caplog.records] == [
        f"spark_otel: governor state {path} was deleted or replaced while this runner used it: runners "
        "that open the path now do not see the slots held through the old file. This runner moves to the "
        "file at the path and registers its 1 running cell(s) there; a cell admitted meanwhile beside "
        "them is not undone"
    ]
    assert sorted(_slots(path)) == [("another-box", "ev-b"), (runner.host, "ev-a")]
    assert other.attempt(C, "c-1", RULES, ticket=None, waited_s=0.0).slot is None
    assert runner.release(mine, A).lapse is None  # moved, not lapsed
    assert _slots(path) == [("another-box", "ev-b")]


def test_lanes_shows_the_lapses_in_a_column_of_its_own(
    runner: SharedState,
    other: SharedState,
    path: Path,
    clock: WallClock,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from spark_otel.cli import main

    monkeypatch.setenv("COLUMNS", "200")
    runner.host = "this-box-by-another-name"
    first = runner.attempt(A, "a-1", RULES, ticket=None, waited_s=0.0).slot
    assert first is not None
    clock.advance(LEASE_S + 2)
    runner.release(first, A)  # lapsed, slot kept: nobody came
    assert runner.attempt(A, "a-2", RULES, ticket=None, waited_s=0.0).slot is not None
    clock.advance(LEASE_S + 1)
    other.attempt(B, "b-1", RULES, ticket=None, waited_s=0.0)  # takes the lapsed slot
    runner.renew()  # and puts it back
    assert main(["lanes", "--state", str(path)]) == 0
    out = capsys.readouterr().out
    header = next(line for line in out.splitlines() if "engine" in line)
    row = next(line for line in out.splitlines() if line.startswith("│ q"))
    assert [c.strip() for c in header.split("┃")[1:-1]][-1] == "lease lapses 1 h"
    assert [c.strip() for c in row.split("│")[1:-1]][-1] == "2 (1 slot taken), 1 still in use"
