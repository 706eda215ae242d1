"""The embedded store: one local SQLite file that keeps cells, requests, load windows,
metric samples and result documents, so a single machine needs no server.

Several processes may write at once (an eval runner, the receiver, the probe): the file runs
in WAL mode with a generous busy timeout, and every write is one short transaction. Writes
that lose the lock anyway are retried; nothing already handed to the store is dropped
silently. Rows are keyed by ``uid``, so re-ingesting the same records replaces, never
duplicates.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
import uuid
import weakref
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .._exceptions import StoreError
from ..model import Cell, LoadWindow, MetricSample, Request

__all__ = ["STORE_ENV", "Store", "default_store_path"]

STORE_ENV = "SPARK_OTEL_STORE"
SCHEMA_VERSION = 1
_BUSY_TIMEOUT_MS = 30_000
_WRITE_ATTEMPTS = 5

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS cells (
    uid TEXT PRIMARY KEY, eval_name TEXT NOT NULL, cell_id TEXT NOT NULL, engine TEXT,
    start_unix_ns INTEGER NOT NULL, end_unix_ns INTEGER NOT NULL,
    prompt_tokens INTEGER, completion_tokens INTEGER, status TEXT NOT NULL,
    deadline_s REAL, deadline_hit INTEGER NOT NULL, workers INTEGER,
    salvaged_findings INTEGER NOT NULL, degraded INTEGER NOT NULL,
    source TEXT NOT NULL, trace_id TEXT, attributes TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS cells_eval_start ON cells (eval_name, start_unix_ns);
CREATE INDEX IF NOT EXISTS cells_start ON cells (start_unix_ns);
CREATE TABLE IF NOT EXISTS requests (
    uid TEXT PRIMARY KEY, trace_id TEXT, cell_uid TEXT, eval_name TEXT, engine TEXT,
    operation TEXT NOT NULL, request_model TEXT, response_model TEXT,
    server_address TEXT, server_port INTEGER,
    start_unix_ns INTEGER NOT NULL, end_unix_ns INTEGER NOT NULL, streaming INTEGER NOT NULL,
    time_to_first_chunk_s REAL, input_tokens INTEGER, output_tokens INTEGER,
    finish_reasons TEXT NOT NULL, error_type TEXT
);
CREATE INDEX IF NOT EXISTS requests_start ON requests (start_unix_ns);
CREATE INDEX IF NOT EXISTS requests_cell ON requests (cell_uid);
CREATE TABLE IF NOT EXISTS load_windows (
    uid TEXT PRIMARY KEY, name TEXT NOT NULL, kind TEXT NOT NULL, engine TEXT,
    start_unix_ns INTEGER NOT NULL, end_unix_ns INTEGER NOT NULL, streams INTEGER,
    attributes TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS load_windows_start ON load_windows (start_unix_ns);
CREATE TABLE IF NOT EXISTS metric_samples (
    name TEXT NOT NULL, unix_ns INTEGER NOT NULL, value REAL NOT NULL, unit TEXT NOT NULL,
    attributes TEXT NOT NULL, source TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS metric_samples_name_time ON metric_samples (name, unix_ns);
CREATE TABLE IF NOT EXISTS documents (
    uid TEXT PRIMARY KEY, kind TEXT NOT NULL, name TEXT NOT NULL,
    created_unix_ns INTEGER NOT NULL, body TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS documents_kind ON documents (kind, created_unix_ns);
"""


_open_stores: weakref.WeakSet[Store] = weakref.WeakSet()


def _reopen_stores_after_fork() -> None:
    for store in list(_open_stores):
        try:
            store._reopen_after_fork()
        except StoreError:
            _open_stores.discard(store)


os.register_at_fork(after_in_child=_reopen_stores_after_fork)


def default_store_path() -> Path:
    """``$SPARK_OTEL_STORE``, else ``$XDG_DATA_HOME/spark-otel/store.sqlite``
    (``~/.local/share/spark-otel/store.sqlite``)."""
    explicit = os.environ.get(STORE_ENV)
    if explicit:
        return Path(explicit).expanduser()
    data_home = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(data_home) / "spark-otel" / "store.sqlite"


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


class Store:
    """A handle on one store file; safe to share between threads of one process."""

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.path = Path(path).expanduser() if path is not None else default_store_path()
        self._lock = threading.RLock()
        self._conn = self._connect()
        self._conn.executescript(_SCHEMA)
        self._conn.execute(
            "INSERT OR IGNORE INTO meta (key, value) VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),)
        )
        _open_stores.add(self)

    def _connect(self) -> sqlite3.Connection:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(
                self.path, timeout=_BUSY_TIMEOUT_MS / 1000, check_same_thread=False, isolation_level=None
            )
            conn.execute(f"PRAGMA busy_timeout={_BUSY_TIMEOUT_MS}")
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        except (sqlite3.Error, OSError) as exc:
            raise StoreError(f"{self.path}: cannot open the spark-otel store: {exc}") from exc
        return conn

    def _reopen_after_fork(self) -> None:
        """SQLite connections must not cross a fork: the child gets its own (the parent's is left
        alone, not closed, since the parent still uses it)."""
        self._lock = threading.RLock()
        self._conn = self._connect()

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
    def write_cells(self, cells: Iterable[Cell]) -> int:
        rows = [
            (
                c.uid,
                c.eval_name,
                c.cell_id,
                c.engine,
                c.start_unix_ns,
                c.end_unix_ns,
                c.prompt_tokens,
                c.completion_tokens,
                c.status.value,
                c.deadline_s,
                int(c.deadline_hit),
                c.workers,
                c.salvaged_findings,
                int(c.degraded),
                c.source,
                c.trace_id,
                _dumps(c.attributes),
            )
            for c in cells
        ]
        with self._transaction() as conn:
            conn.executemany("INSERT OR REPLACE INTO cells VALUES (" + ",".join("?" * 17) + ")", rows)
        return len(rows)

    def write_requests(self, requests: Iterable[Request]) -> int:
        rows = [
            (
                r.uid,
                r.trace_id,
                r.cell_uid,
                r.eval_name,
                r.engine,
                r.operation,
                r.request_model,
                r.response_model,
                r.server_address,
                r.server_port,
                r.start_unix_ns,
                r.end_unix_ns,
                int(r.streaming),
                r.time_to_first_chunk_s,
                r.input_tokens,
                r.output_tokens,
                _dumps(r.finish_reasons),
                r.error_type,
            )
            for r in requests
        ]
        with self._transaction() as conn:
            conn.executemany("INSERT OR REPLACE INTO requests VALUES (" + ",".join("?" * 18) + ")", rows)
        return len(rows)

    def write_windows(self, windows: Iterable[LoadWindow]) -> int:
        rows = [
            (w.uid, w.name, w.kind, w.engine, w.start_unix_ns, w.end_unix_ns, w.streams, _dumps(w.attributes))
            for w in windows
        ]
        with self._transaction() as conn:
            conn.executemany("INSERT OR REPLACE INTO load_windows VALUES (?,?,?,?,?,?,?,?)", rows)
        return len(rows)

    def write_samples(self, samples: Iterable[MetricSample]) -> int:
        rows = [(s.name, s.unix_ns, s.value, s.unit, _dumps(s.attributes), s.source) for s in samples]
        with self._transaction() as conn:
            conn.executemany("INSERT INTO metric_samples VALUES (?,?,?,?,?,?)", rows)
        return len(rows)

    def put_document(self, kind: str, name: str, body: dict[str, Any], *, uid: str | None = None) -> str:
        """Keep a result document (a probe run, an Nsight summary, a report) as JSON."""
        uid = uid or uuid.uuid4().hex
        with self._transaction() as conn:
            conn.execute(
                "INSERT OR REPLACE INTO documents VALUES (?,?,?,?,?)",
                (uid, kind, name, time.time_ns(), _dumps(body)),
            )
        return uid

    # -- reads ---------------------------------------------------------------------------------------
    def _select(self, sql: str, params: Sequence[Any]) -> list[sqlite3.Row]:
        with self._lock:
            cur = self._conn.execute(sql, params)
            cur.row_factory = sqlite3.Row
            return cur.fetchall()

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
        sql = f"SELECT * FROM cells{where} ORDER BY start_unix_ns {order}"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        return [
            Cell(
                uid=r["uid"],
                eval_name=r["eval_name"],
                cell_id=r["cell_id"],
                engine=r["engine"],
                start_unix_ns=r["start_unix_ns"],
                end_unix_ns=r["end_unix_ns"],
                prompt_tokens=r["prompt_tokens"],
                completion_tokens=r["completion_tokens"],
                status=r["status"],
                deadline_s=r["deadline_s"],
                deadline_hit=bool(r["deadline_hit"]),
                workers=r["workers"],
                salvaged_findings=r["salvaged_findings"],
                degraded=bool(r["degraded"]),
                source=r["source"],
                trace_id=r["trace_id"],
                attributes=json.loads(r["attributes"]),
            )
            for r in self._select(sql, params)
        ]

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
        rows = self._select(f"SELECT * FROM requests{where} ORDER BY start_unix_ns", params)
        return [
            Request(
                uid=r["uid"],
                trace_id=r["trace_id"],
                cell_uid=r["cell_uid"],
                eval_name=r["eval_name"],
                engine=r["engine"],
                operation=r["operation"],
                request_model=r["request_model"],
                response_model=r["response_model"],
                server_address=r["server_address"],
                server_port=r["server_port"],
                start_unix_ns=r["start_unix_ns"],
                end_unix_ns=r["end_unix_ns"],
                streaming=bool(r["streaming"]),
                time_to_first_chunk_s=r["time_to_first_chunk_s"],
                input_tokens=r["input_tokens"],
                output_tokens=r["output_tokens"],
                finish_reasons=json.loads(r["finish_reasons"]),
                error_type=r["error_type"],
            )
            for r in rows
        ]

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
        rows = self._select(f"SELECT * FROM load_windows{where} ORDER BY start_unix_ns", params)
        return [
            LoadWindow(
                uid=r["uid"],
                name=r["name"],
                kind=r["kind"],
                engine=r["engine"],
                start_unix_ns=r["start_unix_ns"],
                end_unix_ns=r["end_unix_ns"],
                streams=r["streams"],
                attributes=json.loads(r["attributes"]),
            )
            for r in rows
        ]

    def samples(
        self,
        name: str,
        *,
        since_unix_ns: int | None = None,
        until_unix_ns: int | None = None,
        source: str | None = None,
    ) -> list[MetricSample]:
        where, params = self._where({"name": name, "source": source}, since_unix_ns, until_unix_ns, "unix_ns")
        rows = self._select(f"SELECT * FROM metric_samples{where} ORDER BY unix_ns", params)
        return [
            MetricSample(
                name=r["name"],
                unix_ns=r["unix_ns"],
                value=r["value"],
                unit=r["unit"],
                attributes=json.loads(r["attributes"]),
                source=r["source"],
            )
            for r in rows
        ]

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
        rows = self._select(f"SELECT * FROM documents{where} ORDER BY created_unix_ns", params)
        return [
            {
                "uid": r["uid"],
                "name": r["name"],
                "created_unix_ns": r["created_unix_ns"],
                "body": json.loads(r["body"]),
            }
            for r in rows
        ]

    def eval_names(self) -> list[str]:
        return [r[0] for r in self._select("SELECT DISTINCT eval_name FROM cells ORDER BY eval_name", ())]
