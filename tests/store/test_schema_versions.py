"""A versioned store: each file carries its schema version; a writer migrates an older one in
place in one transaction, a reader never does; a newer one, a damaged one and tables with columns
spark-otel does not know are refused with a message naming the file and the problem, and the file
is left as it was. Each kind of store is built as a real SQLite file.

The machinery is tested with a hypothetical next schema (documents gain a ``tag`` column) put in
with monkeypatch over the current one, ``V``; the real step from schema 1 (the cells' time budget)
is tested on a genuine schema-1 store.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from tests.support.store_versions import CELL, V, build, build_1, execute, query, version_row

from spark_otel import StoreError
from spark_otel.store import Store, embedded, versions
from spark_otel.store.schema import CELL_BUDGET_COLUMNS, DOCUMENTS, TABLES, Column, Table

NOTHING = "nothing was read or changed"


# -- building stores ------------------------------------------------------------------------------
def columns(path: Path, table: str) -> list[str]:
    return [row[1] for row in query(path, f"PRAGMA table_info({table})")]


def journal_mode(path: Path) -> str:
    return str(query(path, "PRAGMA journal_mode")[0][0])


def assert_unchanged(path: Path, before: bytes) -> None:
    assert path.read_bytes() == before
    assert journal_mode(path) == "delete"


def refusal(path: Path, *, read_only: bool) -> str:
    with pytest.raises(StoreError) as caught:
        Store(path, read_only=read_only)
    return str(caught.value)


# -- a hypothetical next schema ----------------------------------------------------------------------
TAG = Column("tag", "TEXT", nullable=True)
DOCUMENTS_2 = Table("documents", (*DOCUMENTS.columns, TAG), DOCUMENTS.indexes)


def add_tag(conn: sqlite3.Connection) -> None:
    conn.execute("ALTER TABLE documents ADD COLUMN tag TEXT")
    conn.execute("UPDATE documents SET tag = 'from 1'")


def use_schema(
    monkeypatch: pytest.MonkeyPatch,
    version: int,
    migrations: dict[int, Callable[[sqlite3.Connection], None]],
    documents: Table = DOCUMENTS_2,
) -> None:
    monkeypatch.setattr(versions, "SCHEMA_VERSION", version)
    monkeypatch.setattr(versions, "MIGRATIONS", migrations)
    monkeypatch.setattr(versions, "TABLES", tuple(documents if t.name == "documents" else t for t in TABLES))


# -- the current schema ---------------------------------------------------------------------------
def test_a_new_store_records_the_schema_version_and_each_older_one_has_its_step(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    Store(path).close()
    assert version_row(path) == [(str(versions.SCHEMA_VERSION),)]
    assert versions.SCHEMA_VERSION == 4
    assert set(versions.MIGRATIONS) == set(range(1, versions.SCHEMA_VERSION))


def schema_queries(monkeypatch: pytest.MonkeyPatch, path: Path, *, read_only: bool) -> list[str]:
    """The statements one open of ``path`` runs, leaving out the connection's settings (and the
    "-- " lines SQLite traces for what a table-valued pragma runs inside a query)."""
    statements: list[str] = []
    connect = sqlite3.connect

    def traced(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        conn = connect(*args, **kwargs)
        conn.set_trace_callback(statements.append)
        return conn

    with monkeypatch.context() as patch:
        patch.setattr(sqlite3, "connect", traced)
        Store(path, read_only=read_only).close()
    settings = ("PRAGMA busy_timeout", "PRAGMA journal_mode", "PRAGMA synchronous", "BEGIN", "COMMIT", "--")
    return [s for s in statements if not s.startswith(settings)]


@pytest.mark.parametrize("read_only", [False, True], ids=["writer", "reader"])
def test_opening_a_current_store_writes_nothing_and_reads_its_schema_in_two_queries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, read_only: bool
) -> None:
    path = tmp_path / "s.sqlite"
    before = build(path, "PRAGMA journal_mode=WAL")
    queries = schema_queries(monkeypatch, path, read_only=read_only)
    assert len(queries) == 2, queries
    assert all(q.startswith("SELECT") for q in queries), queries
    assert path.read_bytes() == before


def test_a_store_whose_tables_were_laid_out_otherwise_opens_as_one_made_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As an earlier spark-otel wrote them (one column a line), or with quoted names: the same
    columns. The first is known by its text (two queries); the second is asked for its columns."""
    path = tmp_path / "s.sqlite"
    statements = [
        t.create_sql.replace("(", "(\n    ", 1).replace(", ", ",\n    ")
        for t in TABLES
        if t.name != "documents"
    ]
    statements.append(
        'CREATE TABLE "documents" ("uid" TEXT PRIMARY KEY, "kind" TEXT NOT NULL, "name" TEXT NOT NULL, '
        '"created_unix_ns" INTEGER NOT NULL, "body" TEXT NOT NULL)'
    )
    execute(path, *statements, f"INSERT INTO meta VALUES ('schema_version', '{V}')")
    before = path.read_bytes()
    with Store(path, read_only=True) as reader:
        assert reader.cells() == []
    assert_unchanged(path, before)
    queries = schema_queries(monkeypatch, path, read_only=True)
    assert len(queries) == 3, queries
    assert "pragma_table_info" in queries[1]
    execute(path, "DROP TABLE documents", DOCUMENTS.create_sql)
    assert len(schema_queries(monkeypatch, path, read_only=True)) == 2
    with Store(path) as writer:
        writer.write_cells([CELL])
        assert writer.cells() == [CELL]


@pytest.mark.parametrize(
    "change", ["DELETE FROM meta", "DROP TABLE meta"], ids=["no schema_version", "no meta table"]
)
def test_a_store_from_before_the_version_was_recorded_is_schema_1(tmp_path: Path, change: str) -> None:
    path = tmp_path / "s.sqlite"
    before = build_1(path, change)
    assert "store schema 1 is older" in refusal(path, read_only=True)
    assert_unchanged(path, before)
    with Store(path) as writer:
        assert writer.cells() == [CELL]
        writer.write_cells([CELL.model_copy(update={"uid": "c2"})])
    assert version_row(path) == [(str(V),)]
    assert [row[0] for row in query(path, "SELECT uid FROM cells ORDER BY uid")] == ["c1", "c2"]


# -- newer and unreadable versions --------------------------------------------------------------------
@pytest.mark.parametrize("read_only", [False, True], ids=["writer", "reader"])
def test_a_store_of_a_newer_schema_is_refused_naming_both_versions(tmp_path: Path, read_only: bool) -> None:
    path = tmp_path / "s.sqlite"
    before = build(
        path,
        "UPDATE meta SET value = '7' WHERE key = 'schema_version'",
        "ALTER TABLE cells ADD COLUMN v7 TEXT",
    )
    assert refusal(path, read_only=read_only) == (
        f"{path}: written by a newer spark-otel (store schema 7; this spark-otel reads up to schema {V}): "
        f"upgrade spark-otel to use it; {NOTHING}"
    )
    assert_unchanged(path, before)


@pytest.mark.parametrize("read_only", [False, True], ids=["writer", "reader"])
def test_a_schema_version_that_is_not_a_number_is_refused(tmp_path: Path, read_only: bool) -> None:
    path = tmp_path / "s.sqlite"
    before = build(path, "UPDATE meta SET value = 'two' WHERE key = 'schema_version'")
    assert refusal(path, read_only=read_only) == (
        f"{path}: its schema_version 'two' (in the meta table) is not a store schema; {NOTHING}"
    )
    assert_unchanged(path, before)


# -- migrating an older store -------------------------------------------------------------------------
@pytest.mark.parametrize(
    "change", ["SELECT 1", "DELETE FROM meta"], ids=["schema_version V", "no schema_version"]
)
def test_a_writer_migrates_an_older_store_in_place_keeping_its_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, change: str
) -> None:
    path = tmp_path / "s.sqlite"
    build(path, change)
    use_schema(monkeypatch, V + 1, {**versions.MIGRATIONS, V: add_tag})
    with Store(path) as writer:
        assert writer.cells() == [CELL]
        assert [d["uid"] for d in writer.documents("probe")] == ["d1"]
        writer.put_document("probe", "nemotron", {}, uid="d2")
    assert version_row(path) == [(str(V + 1),)]
    assert columns(path, "documents") == [*DOCUMENTS.column_names, "tag"]
    assert query(path, "SELECT uid, tag FROM documents ORDER BY uid") == [("d1", "from 1"), ("d2", None)]
    with Store(path, read_only=True) as reader:  # a migrated store is read, and migrated once only
        assert reader.cells() == [CELL]
    with Store(path):
        pass
    assert version_row(path) == [(str(V + 1),)]


def test_a_writer_runs_each_step_an_older_store_needs_in_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "s.sqlite"
    build(path)
    documents_3 = Table("documents", (*DOCUMENTS_2.columns, Column("tag_length", "INTEGER", nullable=True)))

    def add_tag_length(conn: sqlite3.Connection) -> None:  # reads the column step 1 added
        conn.execute("ALTER TABLE documents ADD COLUMN tag_length INTEGER")
        conn.execute("UPDATE documents SET tag_length = length(tag)")

    use_schema(monkeypatch, V + 2, {V + 1: add_tag_length, V: add_tag}, documents_3)
    Store(path).close()
    assert version_row(path) == [(str(V + 2),)]
    assert query(path, "SELECT uid, tag, tag_length FROM documents") == [("d1", "from 1", 6)]


def test_a_reader_never_migrates_and_refuses_an_older_store_it_cannot_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "s.sqlite"
    before = build(path)
    use_schema(monkeypatch, V + 1, {**versions.MIGRATIONS, V: add_tag})
    assert refusal(path, read_only=True) == (
        f"{path}: store schema {V} is older than this spark-otel's ({V + 1}) and cannot be read before it "
        f"is migrated (table documents lacks column tag): `spark-otel store migrate --store {path}` "
        f"migrates it in place (as any command that writes to it does); {NOTHING}"
    )
    assert_unchanged(path, before)
    assert version_row(path) == [(str(V),)]


def test_a_reader_reads_an_older_store_that_has_all_it_reads_and_leaves_it_older(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A next schema that only adds an index: the current tables read as they are."""
    path = tmp_path / "s.sqlite"
    before = build(path)

    def index_engines(conn: sqlite3.Connection) -> None:
        conn.execute("CREATE INDEX cells_engine ON cells (engine)")

    use_schema(monkeypatch, V + 1, {V: index_engines}, DOCUMENTS)
    with Store(path, read_only=True) as reader:
        assert reader.cells() == [CELL]
        assert [d["uid"] for d in reader.documents("probe")] == ["d1"]
    assert_unchanged(path, before)
    assert version_row(path) == [(str(V),)]


def test_a_migration_that_fails_midway_leaves_the_store_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "s.sqlite"
    before = build(path)

    def half_done(conn: sqlite3.Connection) -> None:
        add_tag(conn)
        conn.execute("DELETE FROM cells")
        conn.execute("UPDATE documents SET no_such_column = 1")

    use_schema(monkeypatch, V + 1, {V: half_done})
    assert refusal(path, read_only=False) == (
        f"{path}: cannot migrate the store from schema {V} to {V + 1}: step {V} -> {V + 1} failed (no such "
        f"column: no_such_column); the store is left at schema {V}, as it was"
    )
    assert_unchanged(path, before)
    assert version_row(path) == [(str(V),)]
    assert columns(path, "documents") == list(DOCUMENTS.column_names)
    assert query(path, "SELECT uid FROM cells") == [("c1",)]

    use_schema(
        monkeypatch, V + 1, {**versions.MIGRATIONS, V: add_tag}
    )  # the step fixed, the next writer migrates it
    Store(path).close()
    assert version_row(path) == [(str(V + 1),)]
    assert query(path, "SELECT uid FROM cells") == [("c1",)]


def test_a_missing_step_or_one_that_leaves_other_columns_migrates_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "s.sqlite"
    before = build(path)
    use_schema(monkeypatch, V + 2, {V: add_tag})
    assert refusal(path, read_only=False) == (
        f"{path}: cannot migrate the store from schema {V} to {V + 2}: this spark-otel has no step from "
        f"schema {V + 1}; the store is left at schema {V}, as it was"
    )
    assert_unchanged(path, before)

    use_schema(monkeypatch, V + 1, {V: lambda conn: None})  # forgets the tag column
    assert refusal(path, read_only=False) == (
        f"{path}: cannot migrate the store from schema {V} to {V + 1}: after its steps, table documents "
        f"lacks column tag; the store is left at schema {V}, as it was"
    )
    assert_unchanged(path, before)


def test_two_writers_opening_an_older_store_at_once_migrate_it_once(tmp_path: Path) -> None:
    """The step adds a column, so running it twice would fail: the second writer must find the
    store migrated once it holds the write lock."""
    path = tmp_path / "s.sqlite"
    build(path)
    opener = textwrap.dedent(
        """
        import sys, time
        from pathlib import Path
        from spark_otel.store import Store, versions
        from spark_otel.store.schema import DOCUMENTS, TABLES, Column, Table

        def add_tag(conn):
            conn.execute("ALTER TABLE documents ADD COLUMN tag TEXT")
            time.sleep(0.3)

        documents = Table("documents", (*DOCUMENTS.columns, Column("tag", "TEXT", nullable=True)))
        current = versions.SCHEMA_VERSION
        versions.SCHEMA_VERSION = current + 1
        versions.MIGRATIONS = {current: add_tag}
        versions.TABLES = tuple(documents if t.name == "documents" else t for t in TABLES)
        here, other = Path(sys.argv[1] + "." + sys.argv[2]), Path(sys.argv[1] + "." + sys.argv[3])
        here.touch()
        deadline = time.monotonic() + 60
        while not other.exists() and time.monotonic() < deadline:
            time.sleep(0.001)
        with Store(sys.argv[1]) as store:
            assert [c.uid for c in store.cells()] == ["c1"]
        """
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", opener, str(path), me, other])
        for me, other in (("a", "b"), ("b", "a"))
    ]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    assert version_row(path) == [(str(V + 1),)]
    assert columns(path, "documents") == [*DOCUMENTS.column_names, "tag"]


# -- tables that are not as declared --------------------------------------------------------------
def test_a_writer_refuses_columns_it_does_not_know_and_a_reader_reads_around_them(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    before = build(
        path,
        "ALTER TABLE cells ADD COLUMN note TEXT NOT NULL DEFAULT ''",
        "ALTER TABLE cells ADD COLUMN reviewer TEXT",
        "ALTER TABLE documents ADD COLUMN pinned INTEGER",
    )
    assert refusal(path, read_only=False) == (
        f"{path}: table cells has columns note, reviewer spark-otel does not know; table documents has "
        "column pinned spark-otel does not know: not written through (a replaced row would lose their "
        f"values); drop the unknown columns, or pass another --store; {NOTHING}"
    )
    assert_unchanged(path, before)
    with Store(path, read_only=True) as reader:
        assert reader.cells() == [CELL]
        assert [d["uid"] for d in reader.documents("probe")] == ["d1"]
    assert_unchanged(path, before)


@pytest.mark.parametrize("read_only", [False, True], ids=["writer", "reader"])
def test_a_table_without_a_declared_column_is_a_damaged_store(tmp_path: Path, read_only: bool) -> None:
    path = tmp_path / "s.sqlite"
    before = build(
        path,
        "ALTER TABLE cells DROP COLUMN trace_id",
        "ALTER TABLE cells DROP COLUMN degraded",
        "ALTER TABLE cells ADD COLUMN note TEXT",
    )
    assert refusal(path, read_only=read_only) == (
        f"{path}: a damaged store of schema {V} (table cells lacks columns degraded, trace_id); {NOTHING}"
    )
    assert_unchanged(path, before)


def test_a_missing_table_is_damage_to_a_reader_and_made_again_by_a_writer(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    before = build(path, "DROP TABLE load_windows")
    assert refusal(path, read_only=True) == (
        f"{path}: a damaged store of schema {V} (no load_windows table); {NOTHING}"
    )
    assert_unchanged(path, before)
    with Store(path) as writer:
        assert writer.windows() == []
        assert writer.cells() == [CELL]
    assert columns(path, "load_windows") == list(embedded.LOAD_WINDOWS.column_names)


def test_a_writer_adds_nothing_to_another_programs_sqlite_file(tmp_path: Path) -> None:
    path = tmp_path / "theirs.sqlite"
    execute(path, "CREATE TABLE notes (body TEXT)", "INSERT INTO notes VALUES ('keep me')")
    before = path.read_bytes()
    assert refusal(path, read_only=False) == (
        f"{path}: not a spark-otel store (no cells, requests, load_windows, metric_samples, documents "
        f"tables); {NOTHING}"
    )
    assert_unchanged(path, before)
    assert query(path, "SELECT name FROM sqlite_master") == [("notes",)]


def test_a_writer_makes_a_store_of_an_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "empty.sqlite"
    path.touch()
    with Store(path) as store:
        store.write_cells([CELL])
        assert store.cells() == [CELL]
    assert version_row(path) == [(str(V),)]


# -- the real step: schema 1 -> 2, the cells' time budget -------------------------------------------
def test_a_schema_1_store_is_migrated_to_the_time_budget_keeping_its_cells_unsplit(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    before = build_1(path)
    assert refusal(path, read_only=True) == (
        f"{path}: store schema 1 is older than this spark-otel's ({V}) and cannot be read before it is "
        "migrated (table cells lacks columns first_token_s, decode_s, unsplit_s, other_s; no "
        f"server_timings table): `spark-otel store migrate --store {path}` migrates it in place (as any "
        f"command that writes to it does); {NOTHING}"
    )
    assert_unchanged(path, before)
    with Store(path) as writer:
        assert writer.cells() == [CELL]  # recorded before the budget: unsplit, not zero
        assert not writer.cells()[0].has_budget
        assert writer.server_timings() == {}
    assert version_row(path) == [(str(V),)]
    assert columns(path, "cells")[-4:] == [c.name for c in CELL_BUDGET_COLUMNS]
    with Store(path, read_only=True) as reader:
        assert reader.cells() == [CELL]


def test_every_table_is_checked_past_a_missing_one_and_two_missing_are_named_together(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    before = build(path, "DROP TABLE server_timings", "ALTER TABLE documents DROP COLUMN name")
    assert refusal(path, read_only=False) == (  # the writer would make server_timings, not documents
        f"{path}: a damaged store of schema {V} (table documents lacks column name); {NOTHING}"
    )
    assert_unchanged(path, before)
    other = tmp_path / "t.sqlite"
    before = build(other, "DROP TABLE load_windows", "DROP TABLE server_timings")
    assert refusal(other, read_only=True) == (
        f"{other}: a damaged store of schema {V} (no load_windows, server_timings tables); {NOTHING}"
    )
    assert_unchanged(other, before)


def test_a_damaged_store_names_each_problem(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    before = build(path, "ALTER TABLE cells DROP COLUMN trace_id", "ALTER TABLE documents DROP COLUMN name")
    assert refusal(path, read_only=True) == (
        f"{path}: a damaged store of schema {V} (table cells lacks column trace_id; table documents lacks "
        f"column name); {NOTHING}"
    )
    assert_unchanged(path, before)
