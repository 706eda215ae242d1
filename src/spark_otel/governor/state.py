"""Admission state shared by every runner process on the box: one SQLite file, no daemon.

Three tables: ``slots`` (cells admitted and running), ``waiting`` (cells queued, in ticket
order: FIFO), ``present`` (when each eval's last cell on an engine ended, for the rules that
hold while an eval runs). Each row carries its process's pid, host and a lease; a live process
renews its leases about every second (`Lease`), and every transaction first drops the rows of
processes that are gone: a pid on this host that no longer exists at once, any other row when
its lease lapses (a few seconds). A runner killed with SIGKILL so frees its slots by the next
admission anywhere on the box.

Every decision is one ``BEGIN IMMEDIATE`` transaction (SQLite's write lock, which works across
processes on a local filesystem), so two runners never take the same slot. Times are real Unix
nanoseconds (`_clock.real_wall_ns`): the state is shared by processes whose model clocks may
differ.
"""

from __future__ import annotations

import os
import socket
import sqlite3
import threading
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from .. import _clock
from .._clock import NS_PER_S
from .._sqlite import use_wal
from ..records.rules_file import RulesFile
from .decision import InFlight, admitted_in_order, holding_rule

__all__ = ["LEASE_S", "Decision", "LaneView", "Lease", "SharedState", "default_state_path"]

LEASE_S = 4.0
"""A row outlives its process by at most this long where the process cannot be asked directly."""
_RENEW_S = 1.0
_BUSY_TIMEOUT_MS = 2_000
_SCHEMA = """
CREATE TABLE IF NOT EXISTS slots (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    host TEXT NOT NULL, pid INTEGER NOT NULL, lease_until_ns INTEGER NOT NULL,
    engine TEXT NOT NULL, eval_name TEXT NOT NULL, cell_class TEXT, has_deadline INTEGER NOT NULL,
    cell_id TEXT, admitted_ns INTEGER NOT NULL, waited_s REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS waiting (
    ticket INTEGER PRIMARY KEY AUTOINCREMENT,
    host TEXT NOT NULL, pid INTEGER NOT NULL, lease_until_ns INTEGER NOT NULL,
    engine TEXT NOT NULL, eval_name TEXT NOT NULL, cell_class TEXT, has_deadline INTEGER NOT NULL,
    cell_id TEXT, since_ns INTEGER NOT NULL, rule TEXT
);
CREATE TABLE IF NOT EXISTS present (
    engine TEXT NOT NULL, eval_name TEXT NOT NULL, cell_class TEXT, has_deadline INTEGER NOT NULL,
    last_end_ns INTEGER NOT NULL, PRIMARY KEY (engine, eval_name)
);
"""


def default_state_path() -> Path:
    """Beside the embedded store: ``$SPARK_OTEL_STORE``'s directory, else spark-otel's data directory."""
    from ..store import default_store_path

    return default_store_path().parent / "governor.sqlite"


@dataclass(frozen=True, slots=True)
class Decision:
    """One admission attempt: ``slot`` when admitted, else the ticket and the rule holding it."""

    slot: int | None
    ticket: int | None
    rule: str | None


@dataclass(frozen=True, slots=True)
class LaneView:
    """One engine's lane as `spark-otel lanes` shows it."""

    engine: str
    in_use: list[InFlight]
    waiting: list[tuple[InFlight, str | None, float]]
    """Each waiting cell, the rule holding it back, and how long it has waited (real s)."""
    present: list[InFlight]


def _host() -> str:
    return socket.gethostname()


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive
        return True
    return True


def _cell(row: sqlite3.Row) -> InFlight:
    return InFlight(row["engine"], row["eval_name"], row["cell_class"], bool(row["has_deadline"]))


class SharedState:
    """The state file. One instance per process and path; its connection is used under a lock
    (threads of one runner share it) and opened again after a fork."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._pid = os.getpid()
        self.host = _host()

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None or self._pid != os.getpid():
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(self.path, timeout=_BUSY_TIMEOUT_MS / 1000, isolation_level=None,
                                   check_same_thread=False)  # fmt: skip
            conn.row_factory = sqlite3.Row
            use_wal(conn)
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.executescript(_SCHEMA)
            self._conn, self._pid = conn, os.getpid()
        return self._conn

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            conn = self._connection()
            conn.execute("BEGIN IMMEDIATE")
            try:
                self._drop_the_gone(conn)
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    def _drop_the_gone(self, conn: sqlite3.Connection) -> None:
        now = _clock.real_wall_ns()
        for table in ("slots", "waiting"):
            conn.execute(f"DELETE FROM {table} WHERE lease_until_ns < ?", (now,))
            pids = {
                r[0] for r in conn.execute(f"SELECT DISTINCT pid FROM {table} WHERE host = ?", (self.host,))
            }
            gone = [p for p in pids if not _pid_alive(p)]
            if gone:
                marks = ",".join("?" * len(gone))
                conn.execute(f"DELETE FROM {table} WHERE host = ? AND pid IN ({marks})", (self.host, *gone))

    def _lease(self) -> int:
        return _clock.real_wall_ns() + int(LEASE_S * NS_PER_S)

    def attempt(
        self, cell: InFlight, cell_id: str | None, rules: RulesFile, *, ticket: int | None, waited_s: float
    ) -> Decision:
        """Admit ``cell`` if the rules and the queue allow it now; else queue it (or keep its
        ``ticket``) and say which rule holds it."""
        with self._transaction() as conn:
            now = _clock.real_wall_ns()
            flying = [_cell(r) for r in conn.execute("SELECT * FROM slots")]
            gap_ns = int(rules.eval_gap_s * NS_PER_S)
            present = [
                _cell(r)
                for r in conn.execute("SELECT * FROM present WHERE last_end_ns >= ?", (now - gap_ns,))
            ]
            if (
                ticket is not None
                and conn.execute("SELECT 1 FROM waiting WHERE ticket = ?", (ticket,)).fetchone() is None
            ):
                ticket = None  # dropped as gone (the process stalled past its lease): queue again
            if ticket is None:
                ticket = self._insert(conn, "waiting", cell, cell_id, since_ns=now)
            queue = list(
                conn.execute("SELECT * FROM waiting WHERE engine = ? ORDER BY ticket", (cell.engine,))
            )
            mine = next(i for i, r in enumerate(queue) if r["ticket"] == ticket)
            verdicts = admitted_in_order(
                [_cell(r) for r in queue[: mine + 1]], flying, rules, present=present
            )
            if verdicts[-1]:
                conn.execute("DELETE FROM waiting WHERE ticket = ?", (ticket,))
                slot = self._insert(conn, "slots", cell, cell_id, admitted_ns=now, waited_s=waited_s)
                return Decision(slot, None, None)
            held = holding_rule(cell, flying, rules, present=present)
            rule = held.describe() if held is not None else "an earlier cell in the queue for this lane"
            conn.execute("UPDATE waiting SET rule = ? WHERE ticket = ?", (rule, ticket))
            return Decision(None, ticket, rule)

    def _insert(
        self, conn: sqlite3.Connection, table: str, cell: InFlight, cell_id: str | None, **more: float
    ) -> int:
        """A row of ``table`` for ``cell``, held by this process under a fresh lease."""
        values: dict[str, object] = {
            "host": self.host,
            "pid": os.getpid(),
            "lease_until_ns": self._lease(),
            "engine": cell.engine,
            "eval_name": cell.eval_name,
            "cell_class": cell.cell_class,
            "has_deadline": int(cell.has_deadline),
            "cell_id": cell_id,
            **more,
        }
        sql = f"INSERT INTO {table} ({', '.join(values)}) VALUES ({', '.join('?' * len(values))})"
        row = conn.execute(sql, tuple(values.values())).lastrowid
        assert row is not None
        return row

    def release(self, slot: int, cell: InFlight) -> None:
        """The cell ended: free its slot and note when its eval last ran on its engine."""
        with self._transaction() as conn:
            conn.execute("DELETE FROM slots WHERE id = ?", (slot,))
            conn.execute(
                "INSERT INTO present (engine, eval_name, cell_class, has_deadline, last_end_ns)"
                " VALUES (?, ?, ?, ?, ?) ON CONFLICT (engine, eval_name) DO UPDATE SET"
                " last_end_ns = excluded.last_end_ns, has_deadline = excluded.has_deadline,"
                " cell_class = excluded.cell_class",
                (cell.engine, cell.eval_name, cell.cell_class, int(cell.has_deadline), _clock.real_wall_ns()),
            )

    def withdraw(self, ticket: int) -> None:
        """A waiting cell gave up (cancelled, interrupted): leave the queue."""
        with self._transaction() as conn:
            conn.execute("DELETE FROM waiting WHERE ticket = ?", (ticket,))

    def renew(self) -> None:
        """Extend this process's leases."""
        with self._transaction() as conn:
            lease = self._lease()
            for table in ("slots", "waiting"):
                conn.execute(
                    f"UPDATE {table} SET lease_until_ns = ? WHERE host = ? AND pid = ?",
                    (lease, self.host, os.getpid()),
                )

    def lanes(self, rules: RulesFile | None = None) -> list[LaneView]:
        """Every lane with a cell in use, waiting or present, for `spark-otel lanes`."""
        with self._transaction() as conn:
            now = _clock.real_wall_ns()
            gap_ns = int((rules.eval_gap_s if rules else 2.0) * NS_PER_S)
            slots = list(conn.execute("SELECT * FROM slots ORDER BY id"))
            waiting = list(conn.execute("SELECT * FROM waiting ORDER BY ticket"))
            present = list(conn.execute("SELECT * FROM present WHERE last_end_ns >= ?", (now - gap_ns,)))
        engines = sorted({r["engine"] for r in (*slots, *waiting, *present)})
        return [
            LaneView(
                engine=e,
                in_use=[_cell(r) for r in slots if r["engine"] == e],
                waiting=[
                    (_cell(r), r["rule"], (now - r["since_ns"]) / NS_PER_S)
                    for r in waiting
                    if r["engine"] == e
                ],
                present=[_cell(r) for r in present if r["engine"] == e],
            )
            for e in engines
        ]

    def close(self) -> None:
        with self._lock:
            if self._conn is not None and self._pid == os.getpid():
                self._conn.close()
            self._conn = None


class Lease:
    """Renews a process's leases about every second while it holds a slot or a ticket: one
    daemon thread per state, started on first hold and stopped when nothing is held."""

    def __init__(self, state: SharedState, on_error: Callable[[BaseException], None]) -> None:
        self._state = weakref.ref(state)
        self._on_error = on_error
        self._held = 0
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._pid = os.getpid()

    def hold(self) -> None:
        with self._cond:
            self._held += 1
            if self._thread is None or not self._thread.is_alive() or self._pid != os.getpid():
                self._pid = os.getpid()
                self._thread = threading.Thread(
                    target=self._run, name="spark-otel-governor-lease", daemon=True
                )
                self._thread.start()

    def drop(self) -> None:
        with self._cond:
            self._held = max(0, self._held - 1)
            self._cond.notify_all()

    def _run(self) -> None:
        while True:
            with self._cond:
                if self._held == 0:
                    self._thread = None
                    return
                self._cond.wait(_RENEW_S)
                if self._held == 0:
                    self._thread = None
                    return
            state = self._state()
            if state is None:
                return
            try:
                state.renew()
            except (sqlite3.Error, OSError) as exc:
                self._on_error(exc)
