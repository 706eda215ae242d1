"""SQLite files that several processes open at once: the store and the governor's state."""

from __future__ import annotations

import sqlite3
import time

__all__ = ["LOCK_NOTICE_MS", "busy", "use_wal"]

_WAL_ATTEMPTS = 20

LOCK_NOTICE_MS = 500
"""How long a read or a write waits on another process's lock on the file before it says so."""


def busy(exc: BaseException) -> bool:
    """Whether ``exc`` is SQLite's "database is locked": another connection holds a lock on the file
    past the busy timeout. (A `StoreError` made from one counts as one.)"""
    for error in (exc, exc.__cause__):
        if (
            isinstance(error, sqlite3.OperationalError)
            and error.sqlite_errorcode & 0xFF == sqlite3.SQLITE_BUSY
        ):
            return True
    return False


def use_wal(conn: sqlite3.Connection) -> None:
    """Put ``conn``'s file in WAL mode (a file keeps it), unless it is already.

    Switching needs the file to itself. Two processes opening a new file at once can each hold
    the shared lock the other's switch waits on, and SQLite then answers "database is locked" at
    once instead of waiting (its busy timeout does not cover a deadlock). So a switch that finds
    the file locked tries again: once another opener has switched, the file reads as WAL and
    nothing is left to do. A file already in WAL (every file after its first opener) is only read.
    """
    for attempt in range(_WAL_ATTEMPTS):
        if str(conn.execute("PRAGMA journal_mode").fetchone()[0]).lower() == "wal":
            return
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or attempt + 1 == _WAL_ATTEMPTS:
                raise
        time.sleep(0.01 * (attempt + 1))
