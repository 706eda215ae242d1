"""The embedded store: round trips, idempotent rewrites, several writer processes, bad files."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from spark_otel import Cell, CellStatus, LoadWindow, MetricSample, Request, StoreError
from spark_otel.store import Store, default_store_path

T0 = 1_790_000_000_000_000_000


def make_cell(i: int, **over: object) -> Cell:
    fields: dict[str, object] = {
        "uid": f"c{i}",
        "eval_name": "golden",
        "cell_id": f"B#{i}",
        "engine": "qwen",
        "start_unix_ns": T0 + i * 10**9,
        "end_unix_ns": T0 + (i + 100) * 10**9,
        "prompt_tokens": 1000 + i,
        "completion_tokens": 500 + i,
        "workers": 1,
        "attributes": {"pr": f"B#{i}", "angle": "tests"},
    }
    fields.update(over)
    return Cell(**fields)  # type: ignore[arg-type]


def test_cells_round_trip_every_field(store: Store) -> None:
    cells = [
        make_cell(1),
        make_cell(
            2,
            status=CellStatus.DEADLINE,
            completion_tokens=None,
            deadline_s=1800.0,
            salvaged_findings=3,
            trace_id="ab" * 16,
        ),
    ]
    store.write_cells(cells)
    assert store.cells() == cells
    assert store.cells(eval_name="nope") == []
    assert [c.uid for c in store.cells(newest_first=True, limit=1)] == ["c2"]


def test_rewriting_a_cell_replaces_it_instead_of_duplicating(store: Store) -> None:
    store.write_cells([make_cell(1)])
    store.write_cells([make_cell(1, completion_tokens=7)])
    (only,) = store.cells()
    assert only.completion_tokens == 7


def test_requests_windows_samples_and_documents_round_trip(store: Store) -> None:
    request = Request(
        uid="r1",
        trace_id="t",
        cell_uid="c1",
        eval_name="golden",
        engine="qwen",
        operation="chat",
        request_model="m",
        response_model="m",
        server_address="127.0.0.1",
        server_port=8011,
        start_unix_ns=T0,
        end_unix_ns=T0 + 5,
        streaming=True,
        time_to_first_chunk_s=0.25,
        input_tokens=10,
        output_tokens=20,
        finish_reasons=["stop"],
        error_type=None,
    )
    window = LoadWindow(
        uid="w1",
        name="probe 8 streams",
        kind="probe",
        engine="qwen",
        start_unix_ns=T0,
        end_unix_ns=T0 + 10,
        streams=8,
        attributes={"repeat": 1},
    )
    samples = [
        MetricSample(
            name="spark_otel.gpu.power",
            unix_ns=T0 + i,
            value=36.5 + i,
            unit="W",
            attributes={"spark_otel.gpu.id": "0"},
            source="nvml",
        )
        for i in range(3)
    ]
    store.write_requests([request])
    store.write_windows([window])
    store.write_samples(samples)
    uid = store.put_document("probe", "qwen", {"levels": [1, 2]})
    assert store.requests() == [request]
    assert store.requests(cell_uid="other") == []
    assert store.windows(kind="probe") == [window]
    assert store.samples("spark_otel.gpu.power", since_unix_ns=T0 + 1) == samples[1:]
    assert store.sample_names() == ["spark_otel.gpu.power"]
    (doc,) = store.documents("probe")
    assert doc["uid"] == uid
    assert doc["body"] == {"levels": [1, 2]}


def test_two_processes_writing_at_once_lose_nothing(tmp_path: Path) -> None:
    path = tmp_path / "shared.sqlite"
    Store(path).close()
    writer = textwrap.dedent(
        """
        import sys
        from spark_otel import Cell
        from spark_otel.store import Store
        tag = sys.argv[2]
        with Store(sys.argv[1]) as store:
            for i in range(200):
                store.write_cells([Cell(uid=f"{tag}{i}", eval_name=tag, cell_id=str(i),
                                        start_unix_ns=i, end_unix_ns=i + 1)])
        """
    )
    procs = [subprocess.Popen([sys.executable, "-c", writer, str(path), tag]) for tag in ("a", "b")]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    with Store(path) as store:
        assert len(store.cells(eval_name="a")) == 200
        assert len(store.cells(eval_name="b")) == 200


def test_a_file_that_is_not_sqlite_gets_a_clear_error(tmp_path: Path) -> None:
    bogus = tmp_path / "notes.txt"
    bogus.write_text("this is not a database\n" * 100)
    with pytest.raises(StoreError, match=r"notes\.txt: cannot open the spark-otel store"):
        Store(bogus)
    assert bogus.read_text().startswith("this is not a database")


def test_default_path_follows_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("SPARK_OTEL_STORE", str(tmp_path / "x.sqlite"))
    assert default_store_path() == tmp_path / "x.sqlite"
    monkeypatch.delenv("SPARK_OTEL_STORE")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    assert default_store_path() == tmp_path / "spark-otel" / "store.sqlite"
    monkeypatch.delenv("XDG_DATA_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_store_path() == tmp_path / "home" / ".local" / "share" / "spark-otel" / "store.sqlite"


def test_the_default_store_and_governor_state_are_the_test_sessions_own(tests_data_home: Path) -> None:
    """tests/conftest.py moves the default data home for the session: a test that leaves a store
    path to its default writes there, never into the user's own store (a child process too)."""
    from spark_otel.governor.state import default_state_path

    own = tests_data_home / "spark-otel"
    assert (default_store_path(), default_state_path()) == (own / "store.sqlite", own / "governor.sqlite")
    child = subprocess.run(
        [sys.executable, "-c", "import spark_otel.store as s; print(s.default_store_path())"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert child.stdout == f"{own / 'store.sqlite'}\n"


def test_every_record_field_has_its_one_column_and_nothing_else() -> None:
    from spark_otel.model import Cell, LoadWindow, MetricSample, Request, ServerTiming
    from spark_otel.store.schema import (
        CELLS,
        LOAD_WINDOWS,
        METRIC_SAMPLES,
        REQUESTS,
        SERVER_TIMINGS,
    )

    for table, record in (
        (CELLS, Cell),
        (REQUESTS, Request),
        (LOAD_WINDOWS, LoadWindow),
        (METRIC_SAMPLES, MetricSample),
        (SERVER_TIMINGS, ServerTiming),
    ):
        # A derived column is written from the record's computed field of that name.
        derived = {c.name for c in table.columns if c.derived}
        assert derived == set(record.model_computed_fields), table.name
        assert set(table.column_names) - derived == set(record.model_fields), table.name


def test_a_store_file_keeps_the_schema_it_always_had(tmp_path: Path) -> None:
    """Derived DDL: the columns, in order, and their types are those of schema version 4 (schema 1's,
    then the time budget; the cells' energy table of schema 3 dropped again)."""
    import sqlite3

    with Store(tmp_path / "s.sqlite"):
        pass
    conn = sqlite3.connect(tmp_path / "s.sqlite")
    columns = {
        table: [
            (row[1], row[2], bool(row[3]), bool(row[5]))
            for row in conn.execute(f"PRAGMA table_info({table})")
        ]
        for table in ("cells", "cell_energy", "documents")  # cell_energy: none, so no columns
    }
    conn.close()
    assert [name for name, *_ in columns["cells"]] == [
        "uid", "eval_name", "cell_id", "engine", "start_unix_ns", "end_unix_ns", "prompt_tokens",
        "completion_tokens", "status", "deadline_s", "deadline_hit", "workers", "salvaged_findings",
        "degraded", "source", "trace_id", "attributes", "first_token_s", "decode_s", "unsplit_s", "other_s",
    ]  # fmt: skip
    assert columns["cells"][-1] == ("other_s", "REAL", False, False)
    assert columns["cells"][0] == ("uid", "TEXT", False, True)
    assert columns["cells"][3] == ("engine", "TEXT", False, False)
    assert columns["cells"][8] == ("status", "TEXT", True, False)
    assert columns["cell_energy"] == []
    assert columns["documents"] == [
        ("uid", "TEXT", False, True), ("kind", "TEXT", True, False), ("name", "TEXT", True, False),
        ("created_unix_ns", "INTEGER", True, False), ("body", "TEXT", True, False),
    ]  # fmt: skip


def test_engine_urls_are_where_each_engine_answered_most(tmp_path: Path) -> None:
    def request(uid: str, engine: str, host: str, port: int | None) -> Request:
        return Request(
            uid=uid, operation="chat", engine=engine, server_address=host, server_port=port,
            start_unix_ns=1, end_unix_ns=2,
        )  # fmt: skip

    with Store(tmp_path / "s.sqlite") as store:
        store.write_requests(
            [
                request("1", "qwen", "127.0.0.1", 8011),
                request("2", "qwen", "127.0.0.1", 8011),
                request("3", "qwen", "box.lan", 9000),
                request("4", "nemotron", "127.0.0.1", 8012),
                request("5", "llama", "llama.lan", None),
                request("6", "phi", "::1", 8013),
            ]
        )
        assert store.engine_urls() == {
            "qwen": "http://127.0.0.1:8011",
            "nemotron": "http://127.0.0.1:8012",
            "llama": "http://llama.lan",
            "phi": "http://[::1]:8013",  # a URL a rules file takes (EngineInfo checks it)
        }


def test_reading_a_missing_store_is_an_error_and_creates_nothing(tmp_path: Path) -> None:
    path = tmp_path / "nowhere" / "store.sqlite"
    with pytest.raises(StoreError) as refused:
        Store(path, read_only=True)
    assert str(refused.value) == (
        f"{path}: no such store (nothing was recorded there; check --store or $SPARK_OTEL_STORE)"
    )
    assert not path.exists()
    assert not path.parent.exists()


def test_reading_another_programs_sqlite_file_changes_nothing(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "theirs.sqlite"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE notes (body TEXT)")
    conn.execute("INSERT INTO notes VALUES ('keep me')")
    conn.commit()
    conn.close()
    before = path.read_bytes()
    with pytest.raises(StoreError, match="not a spark-otel store"):
        Store(path, read_only=True)
    assert path.read_bytes() == before
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"  # never switched to WAL
    assert [r[0] for r in conn.execute("SELECT name FROM sqlite_master")] == ["notes"]
    conn.close()


def test_a_store_opened_for_reading_reads_and_refuses_writes(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    cell = Cell(uid="u", eval_name="e", cell_id="c", start_unix_ns=1, end_unix_ns=2)
    with Store(path) as store:
        store.write_cells([cell])
    with Store(path, read_only=True) as reader:
        assert reader.cells() == [cell]
        with pytest.raises(StoreError, match="reading only"):
            reader.write_cells([cell])


def test_a_writer_makes_the_folders_of_a_new_store_and_names_a_path_it_cannot_open(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "store.sqlite"
    Store(path).close()
    assert path.is_file()
    with pytest.raises(StoreError) as refused:
        Store(tmp_path / "a")  # a folder, not a file
    assert str(refused.value).startswith(f"{tmp_path / 'a'}: cannot open the spark-otel store: ")


def test_a_store_is_in_wal_and_opens_beside_another_writers_transaction(tmp_path: Path) -> None:
    """Readers and writers of several processes must not block each other: a new store is in WAL,
    and opening one while another process holds its write lock does not wait for that lock (asking
    to switch to WAL again would)."""
    import sqlite3
    import time

    path = tmp_path / "s.sqlite"
    Store(path).close()
    other = sqlite3.connect(path, isolation_level=None)
    assert other.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    other.execute("BEGIN IMMEDIATE")
    try:
        t0 = time.monotonic()
        with Store(path) as store:
            assert store.cells() == []
        assert time.monotonic() - t0 < 5  # the busy timeout is 30 s
    finally:
        other.execute("ROLLBACK")
        other.close()


def test_one_store_handle_serves_every_thread(tmp_path: Path) -> None:
    """The SDK's exporters write from their own threads into the store the eval opened."""
    import threading

    with Store(tmp_path / "s.sqlite") as store:
        threads = [threading.Thread(target=store.write_cells, args=([make_cell(i)],)) for i in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)
        assert sorted(c.uid for c in store.cells()) == ["c0", "c1", "c2", "c3"]
    with Store(tmp_path / "s.sqlite", read_only=True) as reader:  # a report's worker threads
        found: list[int] = []
        thread = threading.Thread(target=lambda: found.append(len(reader.cells())))
        thread.start()
        thread.join(timeout=30)
        assert found == [4]


def test_reads_by_key_take_more_keys_than_sqlite_binds_at_once(tmp_path: Path) -> None:
    """SQLite binds at most a few hundred parameters a statement: 1,200 keys go in chunks, and
    every record asked for comes back, none other."""
    from spark_otel.model import ServerTiming

    timings = [
        ServerTiming(request_uid=f"r{i}", trace_id="t", span_uid=f"s{i}", arrival_unix_ns=T0 + i)
        for i in range(1_300)
    ]
    with Store(tmp_path / "s.sqlite") as store:
        store.write_server_timings(timings)
        wanted = [f"r{i}" for i in range(0, 1_300, 13)] + [f"r{i}" for i in range(100, 1_300)]
        got = store.server_timings(wanted)
        assert sorted(got) == sorted(set(wanted))
        assert got["r1299"] == timings[1299]
        assert len(store.server_timings()) == 1_300
        assert store.server_timings([]) == {}


def test_a_process_forked_while_another_thread_writes_can_write_itself(tmp_path: Path) -> None:
    """A pool worker forked while the exporter thread is inside a write: SQLite keeps the locks a
    process's connections hold in one record per file, which a child inherits, so a fork in the
    middle of that transaction would leave the child's own connection waiting on a lock nobody in
    it can release. The store holds forks until the write ends, and reopens in the child."""
    import os
    import signal
    import threading
    import time

    path = tmp_path / "s.sqlite"
    store = Store(path)
    batch = [make_cell(i) for i in range(3, 40_003)]  # a long transaction (a fraction of a second)
    writer = threading.Thread(target=store.write_cells, args=(batch,))
    writer.start()
    time.sleep(0.1)
    pid = os.fork()
    if pid == 0:  # the child: write through the handle it inherited, or give up after 20 s
        signal.alarm(20)
        code = 1
        try:
            store.write_cells([make_cell(1), make_cell(2)])
            code = 0
        finally:
            os._exit(code)
    try:
        writer.join(timeout=60)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0  # -14: the alarm, its write never went through
        after = threading.Thread(target=store.write_cells, args=([make_cell(40_003)],))
        after.start()  # the parent's other threads write on once the fork is done
        after.join(timeout=30)
        assert not after.is_alive()
        assert store.row_counts()["cells"] == 40_003
    finally:
        store.close()
