"""A governor state file or rules file that is not what it should be: a runner fails open with
one line naming the file and the problem (never a traceback) or, fail-closed, refuses the cell;
the reader (`read_lanes`) refuses it by name; and neither changes the file's bytes. Real files:
a corrupt one, a text file, a directory, another program's SQLite file, a spark-otel store, a
0-byte file, a file another process holds locked, a FIFO as the rules file."""

from __future__ import annotations

import hashlib
import logging
import os
import sqlite3
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from spark_otel import cell
from spark_otel._exceptions import InputError
from spark_otel.governor import GovernorError, govern
from spark_otel.governor.state import read_lanes
from spark_otel.store import Store

LANE_1 = "[[lane]]\nengine = 'q'\ncells = 1\n"
NOT_STATE = (
    "not a governor state file (it holds {held}; a state file holds slots, waiting and present): another "
    "program's SQLite file, or a spark-otel store? Name the state file (--state, "
    "$SPARK_OTEL_GOVERNOR_STATE); nothing was changed"
)
CORRUPT = "governor state file: not a SQLite file, or a corrupt one (file is not a database)"


def _corrupt(path: Path) -> None:
    path.write_bytes(b"SQLite format 3\x00" + bytes(range(256)) * 20)


def _text(path: Path) -> None:
    path.write_text("slots, waiting, present\n")


def _another_programs(path: Path) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE bookmarks (url TEXT)")
        conn.execute("INSERT INTO bookmarks VALUES ('https://example.org')")
    conn.close()


def _store(path: Path) -> None:
    Store(path).close()


BAD_FILES: dict[str, tuple[Callable[[Path], None], str]] = {
    "corrupt": (_corrupt, CORRUPT),
    "text": (_text, CORRUPT),
    "another program's": (_another_programs, NOT_STATE.format(held="bookmarks")),
    "a store": (
        _store,
        NOT_STATE.format(held="cells, documents, load_windows, meta, metric_samples, requests, ..."),
    ),
}


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _cell(tracer_provider: object, meter_provider: object, i: int = 0) -> object:
    return cell("ev", f"c{i}", engine="q", tracer_provider=tracer_provider, meter_provider=meter_provider)


@pytest.mark.parametrize("kind", BAD_FILES)
def test_a_state_file_that_is_not_one_fails_open_in_one_line_and_is_left_as_it_was(
    kind: str,
    rules_file: Callable[[str], Path],
    tmp_path: Path,
    tracer_provider,
    meter_provider,
    caplog: pytest.LogCaptureFixture,
) -> None:
    make, problem = BAD_FILES[kind]
    path = tmp_path / "governor.sqlite"
    make(path)
    before = _digest(path)
    govern(rules_file(LANE_1), state=path)
    ran = 0
    with caplog.at_level(logging.WARNING, logger="spark_otel"):
        for i in range(3):
            with _cell(tracer_provider, meter_provider, i):
                ran += 1
    assert ran == 3
    assert [(r.getMessage(), r.exc_info) for r in caplog.records] == [
        (f"spark_otel: governor state {path} failed; the call goes on untouched: {path}: {problem}", None)
    ]
    assert _digest(path) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["governor.sqlite", "rules.toml"]


@pytest.mark.parametrize("kind", BAD_FILES)
def test_a_state_file_that_is_not_one_is_refused_fail_closed_and_by_the_reader(
    kind: str, rules_file: Callable[[str], Path], tmp_path: Path, tracer_provider, meter_provider
) -> None:
    make, problem = BAD_FILES[kind]
    path = tmp_path / "governor.sqlite"
    make(path)
    before = _digest(path)
    govern(rules_file(LANE_1), state=path, fail_closed=True)
    with pytest.raises(GovernorError) as refused, _cell(tracer_provider, meter_provider):
        pytest.fail("the cell ran")
    assert str(refused.value) == f"governor (fail-closed): the state file {path} failed: {path}: {problem}"
    with pytest.raises(InputError) as read:
        read_lanes(path)
    assert str(read.value) == f"{path}: {problem}"
    assert _digest(path) == before


def test_a_directory_as_the_state_file_fails_open_in_one_line(
    rules_file: Callable[[str], Path], tmp_path: Path, tracer_provider, meter_provider, caplog
) -> None:
    path = tmp_path / "governor.sqlite"
    path.mkdir()
    govern(rules_file(LANE_1), state=path)
    with caplog.at_level(logging.WARNING, logger="spark_otel"), _cell(tracer_provider, meter_provider):
        pass
    problem = f"{path}: governor state file: a directory, not a file"
    assert [(r.getMessage(), r.exc_info) for r in caplog.records] == [
        (f"spark_otel: governor state {path} failed; the call goes on untouched: {problem}", None)
    ]
    with pytest.raises(InputError, match=f"^{problem}$"):
        read_lanes(path)
    assert list(path.iterdir()) == []


def test_a_zero_byte_state_file_is_a_new_one_for_a_runner_and_refused_by_the_reader(
    rules_file: Callable[[str], Path], tmp_path: Path, tracer_provider, meter_provider
) -> None:
    path = tmp_path / "governor.sqlite"
    path.touch()
    with pytest.raises(InputError) as read:
        read_lanes(path)
    assert (
        str(read.value) == f"{path}: not a governor state file: an empty file (0 bytes); nothing was changed"
    )
    assert path.stat().st_size == 0
    govern(rules_file(LANE_1), state=path)  # as a store's writer takes an empty file for a new store
    with _cell(tracer_provider, meter_provider):
        pass
    assert [lane.engine for lane in read_lanes(path)] == ["q"]


@pytest.fixture
def locked(tmp_path: Path) -> Iterator[Path]:
    """A state file another process's connection holds with an exclusive lock."""
    path = tmp_path / "governor.sqlite"
    govern_state = sqlite3.connect(path, isolation_level=None)
    govern_state.execute("PRAGMA locking_mode = EXCLUSIVE")
    govern_state.execute("CREATE TABLE holder (x)")
    govern_state.execute("BEGIN EXCLUSIVE")
    yield path
    govern_state.execute("ROLLBACK")
    govern_state.close()


def test_a_locked_state_file_fails_open_in_one_line_after_the_busy_wait(
    locked: Path, rules_file: Callable[[str], Path], tracer_provider, meter_provider, caplog
) -> None:
    govern(rules_file(LANE_1), state=locked)
    with caplog.at_level(logging.WARNING, logger="spark_otel"), _cell(tracer_provider, meter_provider):
        pass
    problem = f"{locked}: governor state file: locked by another process past 2 s (database is locked)"
    assert [(r.getMessage(), r.exc_info) for r in caplog.records] == [
        (f"spark_otel: governor state {locked} failed; the call goes on untouched: {problem}", None)
    ]
    with pytest.raises(InputError, match=f"^{problem.replace('(', '[(]').replace(')', '[)]')}$"):
        read_lanes(locked)


@pytest.mark.parametrize("text", ["", "   \n", "# every rule was cut off\n"])
def test_an_empty_rules_file_warns_once_and_governs_nothing_or_is_refused_fail_closed(
    text: str, rules_file: Callable[[str], Path], state_path: Path, tracer_provider, meter_provider, caplog
) -> None:
    path = rules_file(text)
    problem = f"{path}: the rules file is empty: no rules, no engines; nothing is governed"
    with caplog.at_level(logging.WARNING, logger="spark_otel"):
        govern(path, state=state_path)
        for i in range(3):
            with _cell(tracer_provider, meter_provider, i):
                pass
    assert [(r.getMessage(), r.exc_info) for r in caplog.records] == [
        (f"spark_otel: governor rules {path} failed; the call goes on untouched: {problem}", None)
    ]
    assert not state_path.exists()  # nothing governed, nothing shared
    with pytest.raises(GovernorError, match=f"^governor \\(fail-closed\\): {problem}$"):
        govern(path, state=state_path, fail_closed=True)


def test_a_rules_file_with_tables_and_no_rules_is_valid(
    rules_file: Callable[[str], Path], state_path: Path, caplog
) -> None:
    path = rules_file("unmeasured = ['nothing measured yet']\n")
    with caplog.at_level(logging.WARNING, logger="spark_otel"):
        rules = govern(path, state=state_path, fail_closed=True).rules()
    assert rules is not None
    assert rules.rules == []
    assert caplog.records == []


def test_a_fifo_as_the_rules_file_is_refused_at_once_not_read(
    tmp_path: Path, state_path: Path, tracer_provider, meter_provider, caplog
) -> None:
    fifo = tmp_path / "rules.toml"
    os.mkfifo(fifo)
    done = threading.Event()

    def run() -> None:
        govern(fifo, state=state_path)
        with _cell(tracer_provider, meter_provider):
            done.set()

    with caplog.at_level(logging.WARNING, logger="spark_otel"):
        worker = threading.Thread(target=run, daemon=True)
        worker.start()
        worker.join(10)
    assert done.is_set(), "the cell blocked on the FIFO"
    problem = f"rules file {fifo}: is a FIFO (named pipe), not a regular file; nothing was read"
    assert [r.getMessage() for r in caplog.records] == [
        f"spark_otel: governor rules {fifo} failed; the call goes on untouched: {problem}"
    ]
