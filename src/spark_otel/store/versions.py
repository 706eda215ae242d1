"""The store's schema versions: reading a file's shape (its schema_version and each spark-otel
table's columns), deciding what an open does with it, and the steps that migrate an older store.

A concept of its own, apart from the `Store` that keeps and reads records: the decisions are
those of docs/decisions.md, "Bad input and a versioned store". Each file carries its schema
version (``meta.schema_version``). Every open reads it and the columns of the store's tables
(two queries) and decides before anything is written:

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

import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from .._exceptions import StoreError
from .schema import CELL_BUDGET_COLUMNS, CELLS, META, METRIC_SAMPLES, TABLES

__all__ = [
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "Migration",
    "Plan",
    "Shape",
    "inspect",
    "plan",
    "read_shape",
    "set_up",
]

SCHEMA_VERSION = 4
"""The store schema this code reads and writes, and the newest it opens. Raised by one with each
change to the tables `schema` declares, with the step from the version before in `MIGRATIONS`."""

Migration = Callable[[sqlite3.Connection], None]


def _add_cell_budget(conn: sqlite3.Connection) -> None:
    """1 -> 2: the cells' time budget (issue 17); cells recorded before stay unsplit (NULL). The
    server_timings table is new, created from its declaration."""
    present = {row[1] for row in conn.execute("PRAGMA table_info(cells)")}
    for column in CELL_BUDGET_COLUMNS:
        if column.name not in present:  # a store from before versioning may be of any age
            conn.execute(f"ALTER TABLE cells ADD COLUMN {column.ddl}")


def _add_energy_indexes(conn: sqlite3.Connection) -> None:
    """2 -> 3: the indexes a cell's energy is read through (issue 15): the cells that end after an
    instant, each GPU's readings by time. (Schema 3 also kept each cell's energy in a table, which
    schema 4 drops: it is computed on read.)"""
    for statement in (*CELLS.statements[1:], *METRIC_SAMPLES.statements[1:]):
        conn.execute(statement)


def _drop_cell_energy(conn: sqlite3.Connection) -> None:
    """3 -> 4: the ``cell_energy`` table goes (issue 35): each cell's energy is computed where it is
    read, from the cells and GPU readings the store holds, so the write path only stores."""
    conn.execute("DROP TABLE IF EXISTS cell_energy")


MIGRATIONS: dict[int, Migration] = {1: _add_cell_budget, 2: _add_energy_indexes, 3: _drop_cell_energy}
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


@dataclass(frozen=True)
class Shape:
    """What a file holds, as one open reads it."""

    columns: dict[str, list[str]]
    """Each table of `TABLES` the file holds: its columns, in order."""
    version_text: str | None
    """``meta.schema_version`` as written; None where there is none."""
    empty: bool
    """Holds no table, index or view at all: a new file."""


@dataclass(frozen=True)
class Plan:
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


def inspect(conn: sqlite3.Connection) -> Shape:
    """The columns of spark-otel's tables and the schema_version, in two queries: a table whose
    CREATE text is its declaration's (laid out alike) has the declared columns; only others
    (altered, or made another way) are asked for theirs, in a third."""
    declared = {table.name: table for table in TABLES}
    marks = ", ".join("?" * len(declared))
    rows = conn.execute(
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
        for name, column in conn.execute(
            "SELECT m.name, p.name FROM sqlite_master AS m JOIN pragma_table_info(m.name) AS p "
            f"WHERE m.type = 'table' AND m.name IN ({', '.join('?' * len(others))}) ORDER BY p.cid",
            others,
        ):
            columns.setdefault(name, []).append(column)
    version_text = None
    if {"key", "value"} <= set(columns.get(META.name, ())):
        row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        version_text = None if row is None else str(row[0])
    empty = not columns and not conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
    return Shape(columns, version_text, bool(empty))


def read_shape(conn: sqlite3.Connection, path: Path) -> Shape:
    """`inspect` in one read transaction, so a store another process migrates meanwhile is
    seen before or after, never half."""
    try:
        conn.execute("BEGIN")
        shape = inspect(conn)
        conn.execute("COMMIT")
    except sqlite3.Error as exc:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise StoreError(f"{path}: cannot open the spark-otel store: {exc}") from exc
    return shape


def _problems(shape: Shape, *, unknown: bool) -> tuple[list[str], list[str]]:
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


def plan(path: Path, shape: Shape, *, read_only: bool) -> Plan:
    """What an open of ``path`` (a reader's when ``read_only``) does with the file, or the
    `StoreError` saying why it does nothing."""
    version: int | None = None
    if shape.version_text is not None:
        try:
            version = int(shape.version_text)
        except ValueError:
            version = 0
        if version < 1:
            raise StoreError(
                f"{path}: its schema_version {shape.version_text!r} (in the meta table) is not "
                f"a store schema; {_NOTHING_DONE}"
            )
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"{path}: written by a newer spark-otel (store schema {version}; this spark-otel "
                f"reads up to schema {SCHEMA_VERSION}): upgrade spark-otel to use it; {_NOTHING_DONE}"
            )
    elif shape.empty and not read_only:
        return Plan(None, set_up=True)
    elif missing := [name for name in _SCHEMA_1_TABLES if name not in shape.columns]:
        raise StoreError(f"{path}: not a spark-otel store (no {_tables(missing)}); {_NOTHING_DONE}")
    # A store from before the version was recorded is schema 1.
    version = version or 1
    absent = [table.name for table in TABLES if table.name not in shape.columns and table is not META]
    if version < SCHEMA_VERSION:
        if not read_only:
            return Plan(version, set_up=True)  # its columns are checked once migrated
        lacking, _ = _problems(shape, unknown=False)
        if absent or lacking:
            what = "; ".join(lacking + ([f"no {_tables(absent)}"] if absent else []))
            raise StoreError(
                f"{path}: store schema {version} is older than this spark-otel's ({SCHEMA_VERSION}) "
                f"and cannot be read before it is migrated ({what}): `spark-otel store migrate --store "
                f"{path}` migrates it in place (as any command that writes to it does); {_NOTHING_DONE}"
            )
        return Plan(version, set_up=False)
    lacking, unknowns = _problems(shape, unknown=not read_only)
    if absent and read_only:  # a writer creates a missing table: it held no rows
        lacking.append(f"no {_tables(absent)}")
    if lacking:
        raise StoreError(
            f"{path}: a damaged store of schema {version} ({'; '.join(lacking)}); {_NOTHING_DONE}"
        )
    if unknowns:
        raise StoreError(
            f"{path}: {'; '.join(unknowns)}: not written through (a replaced row would lose their "
            f"values); drop the unknown columns, or pass another --store; {_NOTHING_DONE}"
        )
    return Plan(version, set_up=not read_only and (bool(absent) or shape.version_text is None))


def set_up(conn: sqlite3.Connection, path: Path) -> None:
    """Create a new store, or complete or migrate this one, inside the write transaction ``conn``
    holds (``BEGIN IMMEDIATE``), looking again first: another process may have done it since
    `read_shape`."""
    found = plan(path, inspect(conn), read_only=False)
    if not found.set_up:
        return
    start = found.version
    if start is not None:
        left = f"the store is left at schema {start}, as it was"
        for k in range(start, SCHEMA_VERSION):
            step = MIGRATIONS.get(k)
            if step is None:
                raise StoreError(
                    f"{path}: cannot migrate the store from schema {start} to {SCHEMA_VERSION}: "
                    f"this spark-otel has no step from schema {k}; {left}"
                )
            try:
                step(conn)
            except Exception as exc:
                raise StoreError(
                    f"{path}: cannot migrate the store from schema {start} to {SCHEMA_VERSION}: "
                    f"step {k} -> {k + 1} failed ({exc}); {left}"
                ) from exc
    for table in TABLES:
        for statement in table.statements:
            conn.execute(statement)
    conn.execute(
        "INSERT OR REPLACE INTO meta (key, value) VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),)
    )
    if start is not None and start < SCHEMA_VERSION:
        lacking, unknowns = _problems(inspect(conn), unknown=True)
        if lacking or unknowns:
            raise StoreError(
                f"{path}: cannot migrate the store from schema {start} to {SCHEMA_VERSION}: "
                f"after its steps, {'; '.join(lacking + unknowns)}; {left}"
            )
