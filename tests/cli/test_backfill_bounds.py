"""backfill's inputs are bounded (issue 40): only a regular file is read, a FIFO, a device and a
directory are refused by name at once, a file past the documented cap is refused naming the cap,
and a write that waits on another writer's lock on the store says so within a second, naming the
store. Real FIFOs, /dev/zero, a real sparse file past the cap, a real second process holding the
lock."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from spark_otel.model import Cell
from spark_otel.receivers.backfill import records as records_module
from spark_otel.store import Store

ROWS = "cell_id,start,elapsed_s,completion_tokens\na,2026-09-19T01:00:00Z,10,100\n"
HOLD_LOCK = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN IMMEDIATE")
print("held", flush=True)
sys.stdin.read()
conn.execute("ROLLBACK")
"""


_COMMAND = (
    sys.executable,
    "-m",
    "spark_otel",
    "backfill",
    "--mapping",
    "generic-csv",
    "--eval",
    "e",
    "--engine",
    "q",
)


def _backfill(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "SPARK_OTEL_"))}
    return subprocess.run(
        [*_COMMAND, *args],
        check=False,
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
    )


def test_a_fifo_a_device_and_a_directory_are_refused_by_name_at_once_and_the_rest_load(
    tmp_path: Path,
) -> None:
    fifo, zero, folder, good = (
        tmp_path / "pipe.csv",
        tmp_path / "zero.csv",
        tmp_path / "dir.csv",
        tmp_path / "ok.csv",
    )
    os.mkfifo(fifo)  # no writer: reading it would wait forever
    zero.symlink_to("/dev/zero")  # never ends
    folder.mkdir()
    good.write_text(ROWS)
    store = tmp_path / "s.sqlite"
    done = _backfill(str(fifo), str(zero), str(folder), str(good), "--store", str(store), timeout=60)
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        f"spark-otel: error: {fifo}: is a FIFO (named pipe), not a regular file; nothing was read",
        f"spark-otel: error: {zero}: is a character device, not a regular file; nothing was read",
        f"spark-otel: error: {folder}: is a directory, not a regular file; nothing was read",
    ]
    with Store(store, read_only=True) as read:
        assert [c.cell_id for c in read.cells()] == ["a"]


def test_a_file_past_the_cap_is_refused_naming_the_cap_and_nothing_is_written(tmp_path: Path) -> None:
    huge = tmp_path / "huge.csv"
    with huge.open("wb") as file:  # sparse: past the cap without filling the disk
        file.write(ROWS.encode())
        file.truncate(records_module.MAX_INPUT_BYTES + 1)
    store = tmp_path / "s.sqlite"
    done = _backfill(str(huge), "--store", str(store))
    assert done.returncode == 1
    assert done.stderr.splitlines() == [f"spark-otel: error: {huge}: 512.0 MiB is over the cap of 512.0 MiB"]
    assert not store.exists()


@pytest.fixture
def held_store(tmp_path: Path) -> Iterator[tuple[Path, subprocess.Popen[str]]]:
    """A store whose write lock another process holds until its stdin closes."""
    path = tmp_path / "s.sqlite"
    Store(path).close()
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout is not None
    assert holder.stdout.readline() == "held\n"
    try:
        yield path, holder
    finally:
        if holder.stdin is not None and not holder.stdin.closed:
            holder.stdin.close()
        holder.wait(timeout=30)


def _release(holder: subprocess.Popen[str]) -> None:
    assert holder.stdin is not None
    holder.stdin.close()


def test_a_write_waiting_on_another_writers_lock_says_so_within_a_second_naming_the_store(
    held_store: tuple[Path, subprocess.Popen[str]],
) -> None:
    path, holder = held_store
    said = threading.Event()
    heard: list[tuple[float, str]] = []

    class Listen(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            heard.append((time.monotonic(), record.getMessage()))
            said.set()

    listener = Listen(logging.WARNING)
    logger = logging.getLogger("spark_otel.store.embedded")
    logger.addHandler(listener)
    cell = Cell(uid="1" * 16, eval_name="e", cell_id="a", start_unix_ns=10**18, end_unix_ns=10**18 + 10**9)
    try:
        with Store(path) as store:
            began = time.monotonic()
            writer = threading.Thread(target=store.write_cells, args=([cell],))
            writer.start()
            assert said.wait(timeout=30)
            _release(holder)
            writer.join(timeout=60)
    finally:
        logger.removeHandler(listener)
    [(at, message)] = heard
    assert at - began < 1.0
    assert message == f"{path}: another process is writing to this store; waiting for its lock (up to 150 s)"
    with Store(path, read_only=True) as read:
        assert [c.cell_id for c in read.cells()] == ["a"]


def test_backfill_says_it_waits_on_the_lock_then_writes_once_the_other_writer_is_done(
    held_store: tuple[Path, subprocess.Popen[str]], tmp_path: Path
) -> None:
    path, holder = held_store
    rows = tmp_path / "ok.csv"
    rows.write_text(ROWS)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "SPARK_OTEL_"))}
    backfill = subprocess.Popen(
        [*_COMMAND, str(rows), "--store", str(path)],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    assert backfill.stderr is not None
    line = backfill.stderr.readline()
    _release(holder)
    assert backfill.wait(timeout=60) == 0
    assert line == (
        f"spark-otel: warning: {path}: another process is writing to this store; waiting for its lock "
        "(up to 150 s)\n"
    )
    with Store(path, read_only=True) as read:
        assert [c.cell_id for c in read.cells()] == ["a"]
