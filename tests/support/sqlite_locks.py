"""A second process that holds a lock on a SQLite file until told to let go: what a reader meets
when another process writes a store not in WAL mode, or holds one in exclusive locking mode."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

EXCLUSIVE = ("BEGIN EXCLUSIVE",)
"""On a file not in WAL mode: every reader waits until the transaction ends."""
EXCLUSIVE_MODE = ("PRAGMA locking_mode = EXCLUSIVE", "BEGIN EXCLUSIVE")
"""On a WAL file (where a plain BEGIN EXCLUSIVE leaves readers alone): every reader waits."""

_HOLD = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
for statement in sys.argv[2:]:
    conn.execute(statement).fetchall()
print("held", flush=True)
sys.stdin.read()
conn.execute("ROLLBACK")
conn.close()
print("released", flush=True)
"""


class Holder:
    """The holding process; `release` ends its hold and waits until the lock is gone."""

    def __init__(self, path: Path, statements: tuple[str, ...]) -> None:
        self._process = subprocess.Popen(
            [sys.executable, "-c", _HOLD, str(path), *statements],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self._process.stdout is not None
        assert self._process.stdout.readline() == "held\n", "the holder could not take the lock"

    def release(self) -> None:
        assert self._process.stdin is not None
        assert self._process.stdout is not None
        if not self._process.stdin.closed:
            self._process.stdin.close()
            assert self._process.stdout.readline() == "released\n"
        self._process.wait(timeout=30)


@contextmanager
def lock_held(path: Path, statements: tuple[str, ...] = EXCLUSIVE) -> Iterator[Holder]:
    """``path`` locked by another process (``statements`` run there) until `Holder.release` or the
    block's end."""
    holder = Holder(path, statements)
    try:
        yield holder
    finally:
        holder.release()
