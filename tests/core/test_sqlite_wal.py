"""Files several runners open at once (the store, the governor's state) all end up in WAL, even
when the openers race to switch a new file: SQLite refuses one of two such switches at once."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from spark_otel import _sqlite
from spark_otel._sqlite import use_wal
from spark_otel.governor.state import SharedState
from spark_otel.store import Store


def _mode(path: Path) -> str:
    with sqlite3.connect(path) as conn:
        return str(conn.execute("PRAGMA journal_mode").fetchone()[0])


def _reader_holding(path: Path) -> sqlite3.Connection:
    """A connection in a read transaction: its shared lock keeps any switch to WAL waiting."""
    reader = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    reader.execute("CREATE TABLE IF NOT EXISTS t (x INTEGER)")
    reader.execute("BEGIN")
    reader.execute("SELECT * FROM t").fetchall()
    return reader


def test_a_switch_refused_while_another_holds_the_file_is_tried_again(tmp_path: Path) -> None:
    path = tmp_path / "shared.sqlite"
    reader = _reader_holding(path)
    release = threading.Timer(0.3, reader.execute, args=("COMMIT",))
    release.start()
    conn = sqlite3.connect(path, timeout=0.05, isolation_level=None)
    try:
        use_wal(conn)  # refused at least once: the reader holds the file for 0.3 s
    finally:
        release.join()
        conn.close()
        reader.close()
    assert _mode(path) == "wal"


def test_a_file_held_past_every_attempt_raises_what_sqlite_said(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_sqlite, "_WAL_ATTEMPTS", 3)
    path = tmp_path / "shared.sqlite"
    reader = _reader_holding(path)
    conn = sqlite3.connect(path, timeout=0.01, isolation_level=None)
    statements: list[str] = []
    conn.set_trace_callback(statements.append)
    pauses: list[float] = []
    monkeypatch.setattr(_sqlite.time, "sleep", pauses.append)
    try:
        with pytest.raises(sqlite3.OperationalError, match="database is locked"):
            use_wal(conn)
    finally:
        conn.close()
        reader.close()
    assert statements == ["PRAGMA journal_mode", "PRAGMA journal_mode=WAL"] * 3  # every attempt, no more
    assert pauses == [0.01, 0.02]  # 10 ms longer each time: about 2 s over the 20 attempts
    assert _mode(path) == "delete"


def test_a_file_already_in_wal_is_only_read(tmp_path: Path) -> None:
    path = tmp_path / "shared.sqlite"
    with sqlite3.connect(path) as first:
        first.execute("PRAGMA journal_mode=WAL")
    conn = sqlite3.connect(path, isolation_level=None)
    statements: list[str] = []
    conn.set_trace_callback(statements.append)
    try:
        use_wal(conn)
    finally:
        conn.close()
    assert statements == ["PRAGMA journal_mode"]  # no switch, so no lock asked for


def _open_at_once(opener: Callable[[], object], openers: int = 6) -> list[BaseException]:
    barrier = threading.Barrier(openers)
    failures: list[BaseException] = []

    def run() -> None:
        barrier.wait()
        try:
            opener()
        except BaseException as exc:  # collected for the assertion
            failures.append(exc)

    threads = [threading.Thread(target=run) for _ in range(openers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return failures


def test_runners_opening_a_new_governor_state_at_once_all_open_it(tmp_path: Path) -> None:
    for trial in range(30):  # one trial in twenty raced into "database is locked" before
        path = tmp_path / f"governor-{trial}.sqlite"

        def lanes(path: Path = path) -> None:
            state = SharedState(path)
            try:
                state.lanes()
            finally:
                state.close()

        assert _open_at_once(lanes) == []
        assert _mode(path) == "wal"


def test_runners_opening_a_new_store_at_once_all_open_it(tmp_path: Path) -> None:
    for trial in range(10):
        path = tmp_path / f"store-{trial}.sqlite"
        assert _open_at_once(lambda path=path: Store(path).close()) == []  # type: ignore[misc]
        assert _mode(path) == "wal"
