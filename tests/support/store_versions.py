"""Store files of a given schema built as real SQLite files: the current one as this spark-otel
writes it, a genuine schema-1 store, and their schema version read back."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from spark_otel import Cell
from spark_otel.store import Store, versions
from spark_otel.store.schema import CELL_BUDGET_COLUMNS

V = versions.SCHEMA_VERSION


CELL = Cell(uid="c1", eval_name="golden", cell_id="B#1", engine="qwen", start_unix_ns=1, end_unix_ns=2)


def execute(path: Path, *statements: str) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        for statement in statements:
            conn.execute(statement)
    finally:
        conn.close()


def query(path: Path, sql: str) -> list[tuple]:
    conn = sqlite3.connect(path)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def version_row(path: Path) -> list[tuple]:
    return query(path, "SELECT value FROM meta WHERE key = 'schema_version'")


def build(path: Path, *changes: str) -> bytes:
    """A store of the current schema as this spark-otel writes it, holding a cell and a document, then
    ``changes`` made to it, in rollback-journal mode (so a switch to WAL would show); its bytes."""
    with Store(path) as store:
        store.write_cells([CELL])
        store.put_document("probe", "qwen", {"levels": [1, 2]}, uid="d1")
    execute(path, "PRAGMA journal_mode=DELETE", *changes)
    return path.read_bytes()


def build_1(path: Path, *changes: str) -> bytes:
    """A genuine schema-1 store (cells without the time budget, no server_timings table), with the
    same cell and document, then ``changes``; its bytes."""
    build(path)
    execute(
        path,
        *(f"ALTER TABLE cells DROP COLUMN {column.name}" for column in CELL_BUDGET_COLUMNS),
        "DROP TABLE server_timings",
        "UPDATE meta SET value = '1' WHERE key = 'schema_version'",
        "VACUUM",
        *changes,
    )
    return path.read_bytes()
