"""A reader that waits on another process's lock says so within a second, naming the file, and
answers once the lock is let go (issue 40 item 3); past the busy timeout it fails in one line
naming the file and the wait, and the file is left as it was. Real store and governor state
files, a real second process holding the lock (`tests.support.sqlite_locks`): a store not in WAL
mode mid-transaction, and a WAL file held in exclusive locking mode (a plain BEGIN EXCLUSIVE on a
WAL file leaves readers alone)."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from tests.support.sqlite_locks import EXCLUSIVE, EXCLUSIVE_MODE, lock_held

from spark_otel._exceptions import InputError
from spark_otel.cli import main
from spark_otel.governor.state import SharedState, read_lanes
from spark_otel.model import Cell
from spark_otel.store import Store, embedded

WAITING = "{path}: another process holds a lock on this store; waiting for it (up to {s} s)"

HOLDS = {
    "not in WAL mode, mid-transaction": (False, EXCLUSIVE),
    "WAL, exclusive mode": (True, EXCLUSIVE_MODE),
}


def _store(path: Path, *, wal: bool) -> Path:
    with Store(path) as store:
        store.write_cells(
            [Cell(uid="1" * 16, eval_name="e", cell_id="a", start_unix_ns=10**18, end_unix_ns=10**18 + 10**9)]
        )
    if not wal:
        with sqlite3.connect(path) as conn:
            assert conn.execute("PRAGMA journal_mode = DELETE").fetchone() == ("delete",)
        conn.close()
    return path


class _Heard(logging.Handler):
    """Each warning of one logger, with when it came."""

    def __init__(self, logger: str) -> None:
        super().__init__(logging.WARNING)
        self.heard: list[tuple[float, str]] = []
        self.said = threading.Event()
        self._logger = logging.getLogger(logger)

    def emit(self, record: logging.LogRecord) -> None:
        self.heard.append((time.monotonic(), record.getMessage()))
        self.said.set()

    def __enter__(self) -> _Heard:
        self._logger.addHandler(self)
        return self

    def __exit__(self, *exc: object) -> None:
        self._logger.removeHandler(self)


@pytest.mark.parametrize("hold", HOLDS)
def test_cells_says_it_waits_on_another_process_lock_naming_the_store_then_answers(
    hold: str, tmp_path: Path
) -> None:
    wal, statements = HOLDS[hold]
    path = _store(tmp_path / "s.sqlite", wal=wal)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "SPARK_OTEL_"))}
    with lock_held(path, statements) as holder:
        began = time.monotonic()
        cells = subprocess.Popen(
            [sys.executable, "-m", "spark_otel", "cells", "--store", str(path), "--json"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        assert cells.stderr is not None
        line = cells.stderr.readline()
        heard = time.monotonic() - began
        still_waiting = cells.poll() is None
        holder.release()
        out, rest = cells.communicate(timeout=60)
    assert line == "spark-otel: warning: " + WAITING.format(path=path, s=30) + "\n"
    assert still_waiting, "the notice came after the wait, not during it"
    assert heard < 10, "the notice took the busy timeout (30 s)"  # a second, and a loaded machine's start
    assert (cells.returncode, rest) == (0, "")
    assert [c["cell_id"] for c in json.loads(out)] == ["a"]


def test_a_read_after_the_open_says_so_within_a_second_once_per_handle(tmp_path: Path) -> None:
    path = _store(tmp_path / "s.sqlite", wal=False)
    found: list[list[str]] = []
    waited: list[bool] = []
    with Store(path, read_only=True) as store, _Heard("spark_otel.store.embedded") as heard:
        with lock_held(path) as holder:
            began = time.monotonic()
            reader = threading.Thread(target=lambda: found.append([c.cell_id for c in store.cells()]))
            reader.start()
            assert heard.said.wait(timeout=30)
            waited.append(reader.is_alive())
            holder.release()
            reader.join(timeout=60)
        with lock_held(path) as holder:  # the second wait on this handle is as long, and not said again
            reader = threading.Thread(target=lambda: found.append([c.cell_id for c in store.cells()]))
            reader.start()
            time.sleep(1.0)
            waited.append(reader.is_alive())
            holder.release()
            reader.join(timeout=60)
    [(at, message)] = heard.heard
    assert at - began < 1.0
    assert message == WAITING.format(path=path, s=30)
    assert waited == [True, True]
    assert found == [["a"], ["a"]]


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_lock_never_let_go_is_one_error_naming_the_store_and_the_wait(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(embedded, "_BUSY_TIMEOUT_MS", 1_500)  # 30 s as shipped
    path = _store(tmp_path / "s.sqlite", wal=False)
    before = _digest(path)
    with lock_held(path):
        code = main(["cells", "--store", str(path)])
    assert code == 1
    assert capsys.readouterr().err.splitlines() == [
        "spark-otel: warning: " + WAITING.format(path=path, s=1.5),
        f"spark-otel: error: {path}: another process held a lock on this store for 1.5 s; nothing was read "
        "(is a process that writes it stopped or stuck? try again once it ends)",
    ]
    assert _digest(path) == before


def test_lanes_says_it_waits_on_a_locked_state_file_naming_it_then_answers(tmp_path: Path) -> None:
    path = tmp_path / "governor.sqlite"
    state = SharedState(path)
    assert state.lanes() == []
    state.close()
    answers: list[Any] = []

    def read() -> None:
        try:
            answers.append(read_lanes(path))
        except InputError as exc:
            answers.append(exc)

    with _Heard("spark_otel.governor.state") as heard, lock_held(path, EXCLUSIVE_MODE) as holder:
        began = time.monotonic()
        reader = threading.Thread(target=read)
        reader.start()
        assert heard.said.wait(timeout=30)
        holder.release()  # within the 2 s the reader waits in all
        reader.join(timeout=30)
    [(at, message)] = heard.heard
    assert at - began < 1.0
    assert (
        message
        == f"{path}: governor state file: another process holds a lock on it; waiting for it (up to 2 s)"
    )
    assert answers == [[]]
