"""The embedded store: one local SQLite file that keeps cells, requests, load windows,
metric samples and result documents, so a single machine needs no server.

Several processes may write at once (an eval runner, the receiver, the probe): the file runs
in WAL mode with a generous busy timeout, and every write is one short transaction. Writes
that lose the lock anyway are retried; nothing already handed to the store is dropped
silently. Rows are keyed by ``uid``, so re-ingesting the same records replaces, never
duplicates.

Each file carries its schema version; every open reads it and decides, before anything is
written, whether this spark-otel uses the file as it is, migrates it (a writer only) or refuses
it: `versions` says what each open accepts. A refusal is a `StoreError` naming the file and the
problem, and leaves the file as it was.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import sqlite3
import threading
import time
import uuid
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import quote

from .. import _clock
from .._exceptions import StoreError
from .._sqlite import LOCK_NOTICE_MS, busy, use_wal
from ..model import Cell, LoadWindow, MetricSample, Request, ServerTiming
from . import energy_inputs, versions
from .schema import (
    CELLS,
    DOCUMENTS,
    LOAD_WINDOWS,
    METRIC_SAMPLES,
    REQUESTS,
    SERVER_TIMINGS,
    TABLES,
    Table,
    cell_batch_rows,
    collector_paused,
)
from .versions import MIGRATIONS, SCHEMA_VERSION, Migration

if TYPE_CHECKING:
    from ..records.cell_batch import CellBatch
    from ..records.cell_columns import CellColumns

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "STORE_ENV", "Migration", "Store", "default_store_path"]

STORE_ENV = "SPARK_OTEL_STORE"

_logger = logging.getLogger(__name__)

_BUSY_TIMEOUT_MS = 30_000
_WRITE_ATTEMPTS = 5
_BULK_CACHE_KIB = 64 * 1024
"""SQLite's page cache while a batch is written (its default is 2 MiB): a million cells' random
uids touch pages all over the key's index, which at the default spill to the WAL again and again
(at a million backfilled cells, 6.7 s of system time against 1.4 s with this cache)."""
_T = TypeVar("_T")


_open_stores: weakref.WeakSet[Store] = weakref.WeakSet()


_held_over_fork: list[Store] = []


def _hold_stores_before_fork() -> None:
    """Wait for every write under way to end before the process forks: a child inherits SQLite's
    record of the locks its parent's connections hold (kept per process, per file), so a fork in
    the middle of a transaction would leave the child's own connection waiting on a lock nobody
    in it can release."""
    for store in list(_open_stores):
        store._lock.acquire()
        _held_over_fork.append(store)


def _release_stores_after_fork() -> None:
    while _held_over_fork:
        _held_over_fork.pop()._lock.release()


def _reopen_stores_after_fork() -> None:
    _held_over_fork.clear()  # the child's locks are new ones
    for store in list(_open_stores):
        try:
            store._reopen_after_fork()
        except StoreError:
            _open_stores.discard(store)


_fork_hook = threading.Event()


def _reopen_in_forked_children() -> None:
    """Registered when the first store opens, so importing spark-otel registers nothing."""
    if not _fork_hook.is_set():
        _fork_hook.set()
        os.register_at_fork(
            before=_hold_stores_before_fork,
            after_in_parent=_release_stores_after_fork,
            after_in_child=_reopen_stores_after_fork,
        )


_ROOM_TO_OPEN = 1024 * 1024
"""Free bytes below which an open's "disk I/O error" is the disk being full: opening a WAL store
(a reader too) needs room for its ``-shm`` index (32 KiB) and ``-wal`` beside it."""


def _on_a_full_disk(path: Path, exc: StoreError) -> StoreError | None:
    """``exc`` named as a full disk where it is one: SQLite's own "database or disk is full", or
    the "disk I/O error" it says when it cannot make its ``-shm`` file on a disk with (almost) no
    room left. None where it is not."""
    cause = exc.__cause__
    if not isinstance(cause, sqlite3.Error):
        return None
    try:
        free = shutil.disk_usage(path.parent).free
    except OSError:
        return None
    full = (
        cause.sqlite_errorcode & 0xFF in (sqlite3.SQLITE_FULL, sqlite3.SQLITE_IOERR) and free < _ROOM_TO_OPEN
    )
    if not full:
        return None
    return StoreError(
        f"{path}: disk full: cannot open the spark-otel store ({cause}, {free:,} bytes free where SQLite "
        "needs room for the -wal and -shm files beside it); nothing was written: free some space"
    )


def default_store_path() -> Path:
    """``$SPARK_OTEL_STORE``, else ``$XDG_DATA_HOME/spark-otel/store.sqlite``
    (``~/.local/share/spark-otel/store.sqlite``)."""
    explicit = os.environ.get(STORE_ENV)
    if explicit:
        return Path(explicit).expanduser()
    data_home = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(data_home) / "spark-otel" / "store.sqlite"


@dataclass(frozen=True)
class _Document:
    """A result document as the documents table holds it."""

    uid: str
    kind: str
    name: str
    created_unix_ns: int
    body: dict[str, Any]


class Store:
    """A handle on one store file; safe to share between threads of one process.

    A writer (the default) creates the file and its tables when missing. ``read_only=True`` is
    for commands that only read: the file must exist and be a spark-otel store (else a
    `StoreError` naming it), and SQLite opens it read-only (``mode=ro``): nothing is created,
    added, switched or checkpointed, so pointed at another program's SQLite file, or at a store a
    crashed writer left a WAL beside, a read leaves its bytes as they were. (Reading a WAL file
    safely needs SQLite's ``-wal`` and ``-shm`` beside it: a reader may create those, never the
    file itself.) Only a writer
    migrates an older store (`versions` says what each open accepts).
    """

    def __init__(self, path: str | os.PathLike[str] | None = None, *, read_only: bool = False) -> None:
        self.path = Path(path).expanduser() if path is not None else default_store_path()
        self.read_only = read_only
        self._lock = threading.RLock()
        self._lock_noticed = False
        try:
            self._open()
        except StoreError as exc:
            if (full := _on_a_full_disk(self.path, exc)) is not None:
                raise full from exc
            raise
        _open_stores.add(self)
        _reopen_in_forked_children()

    def _open(self) -> None:
        self._conn = self._connect()
        try:
            shape = self._reading(lambda conn: versions.read_shape(conn, self.path))
            if versions.plan(self.path, shape, read_only=self.read_only).set_up:
                self._set_up()
            if not self.read_only:
                self._tune()
        except sqlite3.Error as exc:
            self._conn.close()
            raise StoreError(f"{self.path}: cannot open the spark-otel store: {exc}") from exc
        except BaseException:
            self._conn.close()
            raise

    def _connect(self) -> sqlite3.Connection:
        try:
            if self.read_only:
                if self.path.is_dir():
                    raise StoreError(f"{self.path}: a directory, not a store file (check --store)")
                if not self.path.is_file():
                    raise StoreError(
                        f"{self.path}: no such store (nothing was recorded there; check --store "
                        "or $SPARK_OTEL_STORE)"
                    )
                # mode=ro: SQLite neither creates nor writes the file (a read-write connection
                # would checkpoint a WAL a crashed writer left into it when it closes).
                conn = sqlite3.connect(
                    f"file:{quote(str(self.path.resolve()))}?mode=ro",
                    uri=True,
                    timeout=_BUSY_TIMEOUT_MS / 1000,
                    check_same_thread=False,
                    isolation_level=None,
                )
                conn.execute(f"PRAGMA busy_timeout={_BUSY_TIMEOUT_MS}")
            else:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                conn = sqlite3.connect(
                    self.path, timeout=_BUSY_TIMEOUT_MS / 1000, check_same_thread=False, isolation_level=None
                )
                conn.execute(f"PRAGMA busy_timeout={_BUSY_TIMEOUT_MS}")
        except (sqlite3.Error, OSError) as exc:
            raise StoreError(f"{self.path}: cannot open the spark-otel store: {exc}") from exc
        return conn

    def _tune(self) -> None:
        """A writer's settings, once the file is known to be a store it may write: WAL, so readers
        and writers of several processes do not block each other."""
        try:
            use_wal(self._conn)
            self._conn.execute("PRAGMA synchronous=NORMAL")
        except sqlite3.Error as exc:
            raise StoreError(f"{self.path}: cannot open the spark-otel store: {exc}") from exc

    def _set_up(self) -> None:
        """Create a new store, or complete or migrate this one, in one write transaction that first
        looks again: another process may have done it since the open read its shape."""
        with self._transaction() as conn:
            versions.set_up(conn, self.path)

    def _reopen_after_fork(self) -> None:
        """SQLite connections must not cross a fork: the child gets its own (the parent's is left
        alone, not closed, since the parent still uses it)."""
        self._lock = threading.RLock()
        self._conn = self._connect()
        if not self.read_only:
            self._tune()

    # -- lifecycle ---------------------------------------------------------------------------------
    def close(self) -> None:
        with self._lock:
            self._conn.close()
        _open_stores.discard(self)

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction, retried when another process holds the lock past the timeout."""
        if self.read_only:
            raise StoreError(f"{self.path}: opened for reading only; nothing is written")
        for attempt in range(_WRITE_ATTEMPTS):
            with self._lock:
                try:
                    self._begin()
                except sqlite3.Error as exc:
                    if "locked" in str(exc) and attempt + 1 < _WRITE_ATTEMPTS:
                        time.sleep(0.05 * (attempt + 1))
                        continue
                    raise StoreError(f"{self.path}: cannot write: {exc}") from exc
                try:
                    yield self._conn
                    self._conn.execute("COMMIT")
                except BaseException:
                    # SQLite may have rolled back by itself (a full disk): a second ROLLBACK would
                    # fail with "cannot rollback" and hide the error that ended the transaction.
                    if self._conn.in_transaction:
                        self._conn.execute("ROLLBACK")
                    raise
                return

    def _begin(self) -> None:
        """BEGIN IMMEDIATE. Another writer's lock held past `LOCK_NOTICE_MS` is said once per
        handle, naming the file, and then waited for as before (the busy timeout)."""
        if self._lock_noticed:
            self._conn.execute("BEGIN IMMEDIATE")
            return
        self._conn.execute(f"PRAGMA busy_timeout={LOCK_NOTICE_MS}")
        try:
            self._conn.execute("BEGIN IMMEDIATE")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc):
                raise
        finally:
            self._conn.execute(f"PRAGMA busy_timeout={_BUSY_TIMEOUT_MS}")
        self._lock_noticed = True
        _logger.warning(
            "%s: another process is writing to this store; waiting for its lock (up to %d s)",
            self.path,
            _BUSY_TIMEOUT_MS * _WRITE_ATTEMPTS // 1000,
        )
        self._conn.execute("BEGIN IMMEDIATE")

    # -- writes --------------------------------------------------------------------------------------
    def _write(self, table: Table, records: Iterable[Any]) -> int:
        rows = [table.row(r) for r in records]
        with self._transaction() as conn:
            conn.executemany(table.insert_sql, rows)
        return len(rows)

    def write_cells(self, cells: Iterable[Cell], *, replacing: Iterable[str] = ()) -> int:
        """Write ``cells`` (a stored cell of the same uid is replaced), and remove the cells whose
        uids are in ``replacing`` in the same transaction (cells these stand for under other uids)."""
        gone = [(uid,) for uid in replacing]
        if not gone:
            return self._write(CELLS, cells)
        rows = [CELLS.row(c) for c in cells]
        with self._transaction() as conn:
            conn.executemany(f"DELETE FROM {CELLS.name} WHERE uid = ?", gone)
            conn.executemany(CELLS.insert_sql, rows)
        return len(rows)

    def write_cell_batch(self, batch: CellBatch, *, replacing: Iterable[str] = ()) -> int:
        """`write_cells` of a batch's cells, with no `Cell` made of each: the rows `CELLS` would
        make of them, a column at a time (`schema.cell_batch_rows`), a column every cell shares
        written once in the statement rather than bound on each row."""
        gone = [(uid,) for uid in replacing]
        sql, rows = cell_batch_rows(batch)
        with self._transaction() as conn:
            cache = conn.execute("PRAGMA cache_size").fetchone()[0]
            conn.execute(f"PRAGMA cache_size=-{_BULK_CACHE_KIB}")
            try:
                if gone:
                    conn.executemany(f"DELETE FROM {CELLS.name} WHERE uid = ?", gone)
                conn.executemany(sql, rows)
            finally:
                conn.execute(f"PRAGMA cache_size={int(cache)}")
        return len(batch)

    def write_requests(self, requests: Iterable[Request]) -> int:
        return self._write(REQUESTS, requests)

    def write_windows(self, windows: Iterable[LoadWindow]) -> int:
        return self._write(LOAD_WINDOWS, windows)

    def write_samples(self, samples: Iterable[MetricSample]) -> int:
        return self._write(METRIC_SAMPLES, samples)

    def write_server_timings(self, timings: Iterable[ServerTiming]) -> int:
        return self._write(SERVER_TIMINGS, timings)

    def put_document(self, kind: str, name: str, body: dict[str, Any], *, uid: str | None = None) -> str:
        """Keep a result document (a probe run, an Nsight summary, a report) as JSON."""
        uid = uid or uuid.uuid4().hex
        document = _Document(uid=uid, kind=kind, name=name, created_unix_ns=_clock.wall_ns(), body=body)
        with self._transaction() as conn:
            conn.execute(DOCUMENTS.insert_sql, DOCUMENTS.row(document))
        return uid

    # -- reads ---------------------------------------------------------------------------------------
    def _reading(self, read: Callable[[sqlite3.Connection], _T]) -> _T:
        """``read`` on the connection. Another process's lock on the file (a writer's commit on a
        store not in WAL mode, a connection in exclusive locking mode) is waited for as a write
        waits: past `LOCK_NOTICE_MS` that is said once per handle, naming the file, and past the
        busy timeout the read fails naming the file and the wait (a `StoreError`, not SQLite's
        "database is locked"). Only reads go through it, so a read tried again changes nothing."""
        with self._lock:
            if not self._lock_noticed:
                self._conn.execute(f"PRAGMA busy_timeout={LOCK_NOTICE_MS}")
                try:
                    return read(self._conn)
                except (sqlite3.OperationalError, StoreError) as exc:
                    if not busy(exc):
                        raise
                finally:
                    self._conn.execute(f"PRAGMA busy_timeout={_BUSY_TIMEOUT_MS}")
                self._lock_noticed = True
                _logger.warning(
                    "%s: another process holds a lock on this store; waiting for it (up to %g s)",
                    self.path,
                    _BUSY_TIMEOUT_MS / 1000,
                )
            try:
                return read(self._conn)
            except (sqlite3.OperationalError, StoreError) as exc:
                if not busy(exc):
                    raise
                waited = _BUSY_TIMEOUT_MS / 1000
                raise StoreError(
                    f"{self.path}: another process held a lock on this store for {waited:g} s; nothing was "
                    "read (is a process that writes it stopped or stuck? try again once it ends)"
                ) from exc

    def _select(self, sql: str, params: Sequence[Any]) -> list[Any]:
        return self._reading(lambda conn: conn.execute(sql, params).fetchall())

    def _records(self, table: Table, clauses: str, params: Sequence[Any]) -> list[Any]:
        """Rows of ``table`` (``clauses``: WHERE, ORDER BY, LIMIT) as its records."""
        sql = table.select_sql + clauses
        return self._reading(lambda conn: table.records(conn.execute(sql, params)))

    @staticmethod
    def _where(
        clauses: dict[str, Any], since: int | None, until: int | None, time_col: str
    ) -> tuple[str, list[Any]]:
        parts: list[str] = []
        params: list[Any] = []
        for column, value in clauses.items():
            if value is not None:
                parts.append(f"{column} = ?")
                params.append(value)
        if since is not None:
            parts.append(f"{time_col} >= ?")
            params.append(since)
        if until is not None:
            parts.append(f"{time_col} <= ?")
            params.append(until)
        return (" WHERE " + " AND ".join(parts)) if parts else "", params

    def cells(
        self,
        *,
        eval_name: str | None = None,
        engine: str | None = None,
        source: str | None = None,
        since_unix_ns: int | None = None,
        until_unix_ns: int | None = None,
        limit: int | None = None,
        newest_first: bool = False,
    ) -> list[Cell]:
        where, params = self._where(
            {"eval_name": eval_name, "engine": engine, "source": source},
            since_unix_ns,
            until_unix_ns,
            "start_unix_ns",
        )
        order = "DESC" if newest_first else "ASC"
        clauses = f"{where} ORDER BY start_unix_ns {order}"
        if limit is not None:
            clauses += f" LIMIT {int(limit)}"
        return self._records(CELLS, clauses, params)

    def cell_columns(
        self,
        *,
        eval_name: str | None = None,
        engine: str | None = None,
        since_unix_ns: int | None = None,
        until_unix_ns: int | None = None,
        overlapping: bool = False,
    ) -> CellColumns:
        """The cells `cells` reads with the same options, oldest first, as columns: only the fields
        the analyses over columns use, straight from the rows into arrays, with no `Cell` per row
        (`records.cell_columns`; needs numpy, the ``cli`` extra). ``since``/``until`` bound the
        cells' start, read through the start index; with ``overlapping``, they bound the cells'
        time instead (every cell running at some instant of the range: ending at or after
        ``since``, starting at or before ``until``), which is what counts cells in flight at the
        range's edges."""
        from ..records.cell_columns import COLUMNS, CellColumns

        where, params = self._where(
            {"eval_name": eval_name, "engine": engine},
            None if overlapping else since_unix_ns,
            until_unix_ns,
            "start_unix_ns",
        )
        if overlapping and since_unix_ns is not None:
            where += f"{' AND' if where else ' WHERE'} end_unix_ns >= ?"
            params.append(since_unix_ns)
        sql = f"SELECT {', '.join(COLUMNS)} FROM {CELLS.name}{where} ORDER BY start_unix_ns"
        with collector_paused():  # the rows' tuples make no cycles (see `collector_paused`)
            return CellColumns.from_rows(self._select(sql, params))

    def requests(
        self,
        *,
        cell_uid: str | None = None,
        eval_name: str | None = None,
        since_unix_ns: int | None = None,
        until_unix_ns: int | None = None,
        limit: int | None = None,
        newest_first: bool = False,
    ) -> list[Request]:
        where, params = self._where(
            {"cell_uid": cell_uid, "eval_name": eval_name}, since_unix_ns, until_unix_ns, "start_unix_ns"
        )
        clauses = f"{where} ORDER BY start_unix_ns {'DESC' if newest_first else 'ASC'}"
        if limit is not None:
            clauses += f" LIMIT {int(limit)}"
        return self._records(REQUESTS, clauses, params)

    def requests_outside_cells(self) -> list[Request]:
        """The requests no stored cell holds (made outside any `cell()`, or in one not stored),
        oldest first: what stands in for cells where no cell was recorded."""
        outside = " WHERE cell_uid IS NULL OR cell_uid NOT IN (SELECT uid FROM cells)"
        return self._records(REQUESTS, f"{outside} ORDER BY start_unix_ns", [])

    def cells_by_uid(self, uids: Iterable[str]) -> dict[str, Cell]:
        """The stored cells among ``uids``, by uid."""
        return {c.uid: c for c in self._keyed(CELLS, "uid", uids)}

    def cells_with_attribute(self, name: str, values: Iterable[str]) -> list[Cell]:
        """The stored cells whose attribute ``name`` is one of ``values`` (an Inspect sample's
        uuid, say): read from the attributes' JSON, so any attribute can be asked for."""
        wanted = list(dict.fromkeys(values))
        path = "$." + json.dumps(name)  # quoted: attribute names hold dots
        cells: list[Cell] = []
        for k in range(0, len(wanted), 500):  # under SQLite's bound-parameter limit
            chunk = wanted[k : k + 500]
            clauses = f" WHERE json_extract(attributes, ?) IN ({', '.join('?' * len(chunk))})"
            cells += self._records(CELLS, clauses, [path, *chunk])
        return cells

    def row_counts(self) -> dict[str, int]:
        """Rows in each of the store's tables (meta aside)."""
        return {
            t.name: int(self._select(f"SELECT count(*) FROM {t.name}", [])[0][0])
            for t in TABLES
            if t.name != "meta"
        }

    def schema_version(self) -> int:
        """The schema the file is at (1 for a store from before the version was recorded)."""
        row = self._select("SELECT value FROM meta WHERE key = 'schema_version'", [])
        return int(row[0][0]) if row else 1

    def server_timings(self, request_uids: Iterable[str] | None = None) -> dict[str, ServerTiming]:
        """The engine's split of requests, by the client request's uid (all of them by default)."""
        return {t.request_uid: t for t in self._keyed(SERVER_TIMINGS, "request_uid", request_uids)}

    def energy_inputs(self, cell_uids: Iterable[str] | None = None) -> tuple[list[Cell], list[MetricSample]]:
        """What the GPU energy of the cells ``cell_uids`` (all cells for None) rests on: every cell
        that ran beside them and each GPU's readings around them (`energy_inputs`). Priced by
        `analysis.energy.attribute`, these give each named cell the share it has over the whole
        store."""
        uids = None if cell_uids is None else list(cell_uids)
        return self._reading(lambda conn: energy_inputs.neighbourhood(conn, uids))

    def _keyed(self, table: Table, key: str, keys: Iterable[str] | None) -> list[Any]:
        """The records of ``table`` whose ``key`` is one of ``keys`` (all of them for None)."""
        if keys is None:
            return self._records(table, "", [])
        wanted = list(dict.fromkeys(keys))
        rows = []
        for k in range(0, len(wanted), 500):  # under SQLite's bound-parameter limit
            chunk = wanted[k : k + 500]
            rows += self._records(table, f" WHERE {key} IN ({', '.join('?' * len(chunk))})", chunk)
        return rows

    def windows(
        self,
        *,
        kind: str | None = None,
        engine: str | None = None,
        since_unix_ns: int | None = None,
        until_unix_ns: int | None = None,
    ) -> list[LoadWindow]:
        where, params = self._where(
            {"kind": kind, "engine": engine}, since_unix_ns, until_unix_ns, "start_unix_ns"
        )
        return self._records(LOAD_WINDOWS, f"{where} ORDER BY start_unix_ns", params)

    def samples(
        self,
        name: str,
        *,
        since_unix_ns: int | None = None,
        until_unix_ns: int | None = None,
        source: str | None = None,
    ) -> list[MetricSample]:
        where, params = self._where({"name": name, "source": source}, since_unix_ns, until_unix_ns, "unix_ns")
        return self._records(METRIC_SAMPLES, f"{where} ORDER BY unix_ns", params)

    def has_samples(
        self,
        name: str,
        *,
        since_unix_ns: int | None = None,
        until_unix_ns: int | None = None,
        source: str | None = None,
    ) -> bool:
        """Whether `samples` with these filters would return any, without reading them."""
        where, params = self._where({"name": name, "source": source}, since_unix_ns, until_unix_ns, "unix_ns")
        return bool(self._select(f"SELECT EXISTS(SELECT 1 FROM metric_samples{where})", params)[0][0])

    def sample_names(self) -> list[str]:
        return [r[0] for r in self._select("SELECT DISTINCT name FROM metric_samples ORDER BY name", ())]

    def documents(self, kind: str, *, name: str | None = None) -> list[dict[str, Any]]:
        """Result documents of one kind, oldest first, each with ``uid``, ``name``, ``created_unix_ns``
        and its ``body``."""
        where, params = self._where({"kind": kind, "name": name}, None, None, "created_unix_ns")
        sql = f"{DOCUMENTS.select_sql}{where} ORDER BY created_unix_ns"
        documents = (DOCUMENTS.fields(row) for row in self._select(sql, params))
        return [{key: doc[key] for key in ("uid", "name", "created_unix_ns", "body")} for doc in documents]

    def engine_urls(self) -> dict[str, str]:
        """Each engine's address as its requests reached it (the most used, when several): what a
        command printed to measure the engine names."""
        rows = self._select(
            "SELECT engine, server_address, server_port, count(*) AS n FROM requests "
            "WHERE engine IS NOT NULL AND server_address IS NOT NULL "
            "GROUP BY engine, server_address, server_port ORDER BY engine, n",
            (),
        )
        urls: dict[str, str] = {}
        for engine, address, port, _n in rows:  # ascending counts: the most used is written last
            host = f"[{address}]" if ":" in address and not address.startswith("[") else address  # IPv6
            urls[engine] = f"http://{host}:{port}" if port else f"http://{host}"
        return urls

    def eval_names(self) -> list[str]:
        return [r[0] for r in self._select("SELECT DISTINCT eval_name FROM cells ORDER BY eval_name", ())]
