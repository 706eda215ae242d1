"""The embedded store: one local SQLite file that keeps cells, requests, load windows,
metric samples and result documents, so a single machine needs no server.

Several processes may write at once (an eval runner, the receiver, the probe): the file runs
in WAL mode with a generous busy timeout, and every write is one short transaction. Writes
that lose the lock anyway are retried; nothing already handed to the store is dropped
silently. Rows are keyed by ``uid``, so re-ingesting the same records replaces, never
duplicates.

Each file carries its schema version (``meta.schema_version``). Every open reads it and the
columns of the store's tables (two queries) and decides before anything is written:

- a newer schema than `SCHEMA_VERSION` is refused, naming both versions, by readers and writers;
- an older one is migrated forward in place by a writer, through `MIGRATIONS`, in one
  transaction; a reader never migrates, and reads an older store only when every table and
  column it reads is already there (else it says which commands migrate it);
- a file with spark-otel's tables and no schema_version is a store from before the version was
  recorded: schema 1;
- a table that lacks a declared column is a damaged store, refused by readers and writers; a
  table with columns spark-otel does not know is refused by writers (``INSERT OR REPLACE``
  would drop their values from every replaced row, and a NOT NULL one would fail every insert)
  and read by readers, whose SELECTs name their columns, so the unknown ones are neither read
  nor changed;
- a writer pointed at another program's SQLite file (tables, none of them spark-otel's) refuses
  it rather than adding its tables there.

A refusal is a `StoreError` naming the file and the problem, and leaves the file as it was.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
import uuid
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from .. import _clock
from .._exceptions import StoreError
from ..model import Cell, LoadWindow, MetricSample, Request
from .schema import CELLS, DOCUMENTS, LOAD_WINDOWS, META, METRIC_SAMPLES, REQUESTS, TABLES, Table

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "STORE_ENV", "Migration", "Store", "default_store_path"]

STORE_ENV = "SPARK_OTEL_STORE"
SCHEMA_VERSION = 1
"""The store schema this code reads and writes, and the newest it opens. Raised by one with each
change to the tables `schema` declares, with the step from the version before in `MIGRATIONS`."""

Migration = Callable[[sqlite3.Connection], None]

MIGRATIONS: dict[int, Migration] = {}
"""Step ``k`` turns a store of schema ``k`` into one of schema ``k + 1`` (add a column, fill it).
A writer runs the steps an older store needs in order, then creates the tables and indexes new
since (from their declarations: a new table needs no step) and records the new schema_version,
all in one ``BEGIN IMMEDIATE`` transaction: a step that fails leaves the store as it was, and of
two processes opening the same old store at once, the second finds it already migrated. A step
runs its statements with ``conn.execute`` (``executescript`` would commit midway)."""

_SCHEMA_1_TABLES = ("cells", "requests", "load_windows", "metric_samples", "documents")
"""Schema 1's tables besides meta: a file that holds all of them and no schema_version is a
store from before the version was recorded (read as schema 1)."""

_NOTHING_DONE = "nothing was read or changed"
_BUSY_TIMEOUT_MS = 30_000
_WRITE_ATTEMPTS = 5


_open_stores: weakref.WeakSet[Store] = weakref.WeakSet()


def _reopen_stores_after_fork() -> None:
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
        os.register_at_fork(after_in_child=_reopen_stores_after_fork)


def default_store_path() -> Path:
    """``$SPARK_OTEL_STORE``, else ``$XDG_DATA_HOME/spark-otel/store.sqlite``
    (``~/.local/share/spark-otel/store.sqlite``)."""
    explicit = os.environ.get(STORE_ENV)
    if explicit:
        return Path(explicit).expanduser()
    data_home = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(data_home) / "spark-otel" / "store.sqlite"


@dataclass(frozen=True)
class _Shape:
    """What a file holds, as one open reads it."""

    columns: dict[str, list[str]]
    """Each table of `TABLES` the file holds: its columns, in order."""
    version_text: str | None
    """``meta.schema_version`` as written; None where there is none."""
    empty: bool
    """Holds no table, index or view at all: a new file."""


@dataclass(frozen=True)
class _Plan:
    """What an open does with a file it accepts."""

    version: int | None
    """The file's schema (1 for a store from before versioning); None: a new file."""
    set_up: bool
    """A writer creates, completes or migrates it before use."""


def _layout_free(sql: str) -> str:
    """A CREATE TABLE statement without its layout (white space runs as one space, none just
    inside the parentheses), as `Table.create_sql` is written."""
    return " ".join(sql.split()).replace("( ", "(").replace(" )", ")")


def _columns(names: Sequence[str]) -> str:
    return f"column{'s' if len(names) > 1 else ''} {', '.join(names)}"


def _tables(names: Sequence[str]) -> str:
    return f"{', '.join(names)} table{'s' if len(names) > 1 else ''}"


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
    `StoreError` naming it), and nothing is created, added or switched (no tables, no journal
    mode): pointed at another program's SQLite file, a read leaves it as it was. Only a writer
    migrates an older store (see the module's docstring for what each open accepts).
    """

    def __init__(self, path: str | os.PathLike[str] | None = None, *, read_only: bool = False) -> None:
        self.path = Path(path).expanduser() if path is not None else default_store_path()
        self.read_only = read_only
        self._lock = threading.RLock()
        self._conn = self._connect()
        try:
            if self._plan(self._read_shape()).set_up:
                self._set_up()
            if not read_only:
                self._tune()
        except sqlite3.Error as exc:
            self._conn.close()
            raise StoreError(f"{self.path}: cannot open the spark-otel store: {exc}") from exc
        except BaseException:
            self._conn.close()
            raise
        _open_stores.add(self)
        _reopen_in_forked_children()

    def _connect(self) -> sqlite3.Connection:
        try:
            if self.read_only:
                if not self.path.is_file():
                    raise StoreError(
                        f"{self.path}: no such store (nothing was recorded there; check --store "
                        "or $SPARK_OTEL_STORE)"
                    )
                # mode=rw: never creates the file; nothing below writes to it.
                conn = sqlite3.connect(
                    f"file:{quote(str(self.path.resolve()))}?mode=rw",
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
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA synchronous=NORMAL")
        except sqlite3.Error as exc:
            raise StoreError(f"{self.path}: cannot open the spark-otel store: {exc}") from exc

    # -- the schema ----------------------------------------------------------------------------------
    def _inspect(self) -> _Shape:
        """The columns of spark-otel's tables and the schema_version, in two queries: a table whose
        CREATE text is its declaration's (laid out alike) has the declared columns; only others
        (altered, or made another way) are asked for theirs, in a third."""
        declared = {table.name: table for table in TABLES}
        marks = ", ".join("?" * len(declared))
        rows = self._conn.execute(
            f"SELECT name, sql FROM sqlite_master WHERE type = 'table' AND name IN ({marks})", list(declared)
        ).fetchall()
        columns: dict[str, list[str]] = {}
        others = []
        for name, sql in rows:
            create_sql = declared[name].create_sql
            if sql == create_sql or (isinstance(sql, str) and _layout_free(sql) == create_sql):
                columns[name] = list(declared[name].column_names)
            else:
                others.append(name)
        if others:
            for name, column in self._conn.execute(
                "SELECT m.name, p.name FROM sqlite_master AS m JOIN pragma_table_info(m.name) AS p "
                f"WHERE m.type = 'table' AND m.name IN ({', '.join('?' * len(others))}) ORDER BY p.cid",
                others,
            ):
                columns.setdefault(name, []).append(column)
        version_text = None
        if {"key", "value"} <= set(columns.get(META.name, ())):
            row = self._conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
            version_text = None if row is None else str(row[0])
        empty = not columns and not self._conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
        return _Shape(columns, version_text, bool(empty))

    def _read_shape(self) -> _Shape:
        """`_inspect` in one read transaction, so a store another process migrates meanwhile is
        seen before or after, never half."""
        try:
            self._conn.execute("BEGIN")
            shape = self._inspect()
            self._conn.execute("COMMIT")
        except sqlite3.Error as exc:
            if self._conn.in_transaction:
                self._conn.execute("ROLLBACK")
            raise StoreError(f"{self.path}: cannot open the spark-otel store: {exc}") from exc
        return shape

    def _problems(self, shape: _Shape, *, unknown: bool) -> tuple[list[str], list[str]]:
        """Declared columns the file's tables lack, and (``unknown``) columns they have that are not
        declared, each as "table T lacks column C" / "table T has column C spark-otel does not know"."""
        lacking, unknowns = [], []
        for table in TABLES:
            found = shape.columns.get(table.name)
            if found is None:
                continue
            if missing := [c for c in table.column_names if c not in found]:
                lacking.append(f"table {table.name} lacks {_columns(missing)}")
            if unknown and (extra := [c for c in found if c not in table.column_names]):
                unknowns.append(f"table {table.name} has {_columns(extra)} spark-otel does not know")
        return lacking, unknowns

    def _plan(self, shape: _Shape) -> _Plan:
        """What this open does with the file, or the `StoreError` saying why it does nothing."""
        version: int | None = None
        if shape.version_text is not None:
            try:
                version = int(shape.version_text)
            except ValueError:
                version = 0
            if version < 1:
                raise StoreError(
                    f"{self.path}: its schema_version {shape.version_text!r} (in the meta table) is not "
                    f"a store schema; {_NOTHING_DONE}"
                )
            if version > SCHEMA_VERSION:
                raise StoreError(
                    f"{self.path}: written by a newer spark-otel (store schema {version}; this spark-otel "
                    f"reads up to schema {SCHEMA_VERSION}): upgrade spark-otel to use it; {_NOTHING_DONE}"
                )
        elif shape.empty and not self.read_only:
            return _Plan(None, set_up=True)
        elif missing := [name for name in _SCHEMA_1_TABLES if name not in shape.columns]:
            raise StoreError(f"{self.path}: not a spark-otel store (no {_tables(missing)}); {_NOTHING_DONE}")
        # A store from before the version was recorded is schema 1.
        version = version or 1
        absent = [table.name for table in TABLES if table.name not in shape.columns and table is not META]
        if version < SCHEMA_VERSION:
            if not self.read_only:
                return _Plan(version, set_up=True)  # its columns are checked once migrated
            lacking, _ = self._problems(shape, unknown=False)
            if absent or lacking:
                what = "; ".join(lacking + ([f"no {_tables(absent)}"] if absent else []))
                raise StoreError(
                    f"{self.path}: store schema {version} is older than this spark-otel's ({SCHEMA_VERSION}) "
                    f"and cannot be read before it is migrated ({what}); a command that writes to the "
                    f"store (backfill, ingest-nsight, probe) migrates it in place; {_NOTHING_DONE}"
                )
            return _Plan(version, set_up=False)
        lacking, unknowns = self._problems(shape, unknown=not self.read_only)
        if absent and self.read_only:  # a writer creates a missing table: it held no rows
            lacking.append(f"no {_tables(absent)}")
        if lacking:
            raise StoreError(
                f"{self.path}: a damaged store of schema {version} ({'; '.join(lacking)}); {_NOTHING_DONE}"
            )
        if unknowns:
            raise StoreError(
                f"{self.path}: {'; '.join(unknowns)}: not written through (a replaced row would lose their "
                f"values); drop the unknown columns, or pass another --store; {_NOTHING_DONE}"
            )
        return _Plan(version, set_up=not self.read_only and (bool(absent) or shape.version_text is None))

    def _set_up(self) -> None:
        """Create a new store, or complete or migrate this one, in one write transaction that first
        looks again: another process may have done it since `_read_shape`."""
        with self._transaction() as conn:
            plan = self._plan(self._inspect())
            if not plan.set_up:
                return
            start = plan.version
            if start is not None:
                left = f"the store is left at schema {start}, as it was"
                for k in range(start, SCHEMA_VERSION):
                    step = MIGRATIONS.get(k)
                    if step is None:
                        raise StoreError(
                            f"{self.path}: cannot migrate the store from schema {start} to {SCHEMA_VERSION}: "
                            f"this spark-otel has no step from schema {k}; {left}"
                        )
                    try:
                        step(conn)
                    except Exception as exc:
                        raise StoreError(
                            f"{self.path}: cannot migrate the store from schema {start} to {SCHEMA_VERSION}: "
                            f"step {k} -> {k + 1} failed ({exc}); {left}"
                        ) from exc
            for table in TABLES:
                for statement in table.statements:
                    conn.execute(statement)
            conn.execute(
                "INSERT OR REPLACE INTO meta (key, value) VALUES ('schema_version', ?)",
                (str(SCHEMA_VERSION),),
            )
            if start is not None and start < SCHEMA_VERSION:
                lacking, unknowns = self._problems(self._inspect(), unknown=True)
                if lacking or unknowns:
                    raise StoreError(
                        f"{self.path}: cannot migrate the store from schema {start} to {SCHEMA_VERSION}: "
                        f"after its steps, {'; '.join(lacking + unknowns)}; {left}"
                    )

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
                    self._conn.execute("BEGIN IMMEDIATE")
                except sqlite3.Error as exc:
                    if "locked" in str(exc) and attempt + 1 < _WRITE_ATTEMPTS:
                        time.sleep(0.05 * (attempt + 1))
                        continue
                    raise StoreError(f"{self.path}: cannot write: {exc}") from exc
                try:
                    yield self._conn
                except BaseException:
                    self._conn.execute("ROLLBACK")
                    raise
                else:
                    self._conn.execute("COMMIT")
                return

    # -- writes --------------------------------------------------------------------------------------
    def _write(self, table: Table, records: Iterable[Any]) -> int:
        rows = [table.row(r) for r in records]
        with self._transaction() as conn:
            conn.executemany(table.insert_sql, rows)
        return len(rows)

    def write_cells(self, cells: Iterable[Cell]) -> int:
        return self._write(CELLS, cells)

    def write_requests(self, requests: Iterable[Request]) -> int:
        return self._write(REQUESTS, requests)

    def write_windows(self, windows: Iterable[LoadWindow]) -> int:
        return self._write(LOAD_WINDOWS, windows)

    def write_samples(self, samples: Iterable[MetricSample]) -> int:
        return self._write(METRIC_SAMPLES, samples)

    def put_document(self, kind: str, name: str, body: dict[str, Any], *, uid: str | None = None) -> str:
        """Keep a result document (a probe run, an Nsight summary, a report) as JSON."""
        uid = uid or uuid.uuid4().hex
        document = _Document(uid=uid, kind=kind, name=name, created_unix_ns=_clock.wall_ns(), body=body)
        with self._transaction() as conn:
            conn.execute(DOCUMENTS.insert_sql, DOCUMENTS.row(document))
        return uid

    # -- reads ---------------------------------------------------------------------------------------
    def _select(self, sql: str, params: Sequence[Any]) -> list[Any]:
        with self._lock:
            return self._conn.execute(sql, params).fetchall()

    def _records(self, table: Table, clauses: str, params: Sequence[Any]) -> list[Any]:
        """Rows of ``table`` (``clauses``: WHERE, ORDER BY, LIMIT) as its records."""
        sql = f"SELECT {', '.join(table.column_names)} FROM {table.name}{clauses}"
        return [table.record(row) for row in self._select(sql, params)]

    @staticmethod
    def _where(
        clauses: dict[str, Any], since: int | None, until: int | None, time_col: str
    ) -> tuple[str, list]:
        parts, params = [], []
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

    def requests(
        self,
        *,
        cell_uid: str | None = None,
        eval_name: str | None = None,
        since_unix_ns: int | None = None,
        until_unix_ns: int | None = None,
    ) -> list[Request]:
        where, params = self._where(
            {"cell_uid": cell_uid, "eval_name": eval_name}, since_unix_ns, until_unix_ns, "start_unix_ns"
        )
        return self._records(REQUESTS, f"{where} ORDER BY start_unix_ns", params)

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
        sql = f"SELECT {', '.join(DOCUMENTS.column_names)} FROM documents{where} ORDER BY created_unix_ns"
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
        for engine, host, port, _n in rows:  # ascending counts: the most used is written last
            urls[engine] = f"http://{host}:{port}" if port else f"http://{host}"
        return urls

    def eval_names(self) -> list[str]:
        return [r[0] for r in self._select("SELECT DISTINCT eval_name FROM cells ORDER BY eval_name", ())]
