"""A full disk, named as such: `receive` stops with exit 1 and one error line saying "disk full",
every sample it stored before is still there, and the store passes SQLite's integrity check; an
output file (a report, a probe document, a rules file) is written whole or not at all, so the one
there before is kept byte for byte.

The disk is a real full filesystem where this machine allows one (a tmpfs mounted in a namespace
of its own, `tests.support.hostile_files.on_a_full_disk`); where it does not, those tests skip and
the ones below them, with SQLite's full-disk error raised by a stand-in store, still run."""

from __future__ import annotations

import errno
import json
import logging
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from tests.support.hostile_files import FILL, on_a_full_disk
from tests.support.metrics_pages import counting_text
from tests.support.metrics_server import MetricsServer
from tests.support.scripted_engine import ScriptedEngine

import spark_otel
from spark_otel._exceptions import StoreError
from spark_otel._files import disk_full
from spark_otel.cli import main
from spark_otel.receivers.receiver import Receiver
from spark_otel.store import Store
from spark_otel.telemetry import configure

RECEIVE = (
    FILL
    + """
import json, os, sqlite3, subprocess, sys
directory = os.environ["FULL_DIR"]
store = os.path.join(directory, "s.sqlite")
engine = "m=" + os.environ["ENGINE_URL"]
receive = [sys.executable, "-m", "spark_otel", "receive", "--engine", engine, "--store", store]

def rows():
    with sqlite3.connect(store) as conn:
        found = conn.execute("SELECT name, unix_ns, value FROM metric_samples ORDER BY 2, 1").fetchall()
        check = conn.execute("PRAGMA integrity_check").fetchone()[0]
    return found, check

first = subprocess.run([*receive, "--once"], capture_output=True, text=True, timeout=60)
before, _ = rows()
fill(directory, 96 * 1024)
loop = ["--interval", "0.02", "--duration", "60"]
second = subprocess.run([*receive, *loop], capture_output=True, text=True, timeout=90)
os.remove(os.path.join(directory, "filler"))
after, check = rows()
print(json.dumps({
    "first": first.returncode, "code": second.returncode, "err": second.stderr,
    "before": before, "after": after, "check": check,
}))
"""
)


def test_receive_on_a_full_disk_stops_with_exit_1_naming_it_and_keeps_every_sample_stored_before() -> None:
    with MetricsServer() as server:
        server.text_fn = counting_text
        found = json.loads(on_a_full_disk(RECEIVE, env={"ENGINE_URL": server.url}))
    assert found["first"] == 0
    assert found["code"] == 1
    err = found["err"]
    assert "Traceback" not in err
    assert err.count("\n") == 1, err
    assert err.startswith("spark-otel: error: ")
    assert "s.sqlite: disk full: " in err
    assert found["check"] == "ok"
    before = [tuple(r) for r in found["before"]]
    after = [tuple(r) for r in found["after"]]
    assert before  # the first receive stored its scrape
    assert set(before) <= set(after)
    assert len(after) > len(before)  # scrapes were stored until the disk filled


BACKFILL = (
    FILL
    + """
import json, os, sqlite3, subprocess, sys
directory = os.environ["FULL_DIR"]
store = os.path.join(directory, "s.sqlite")
first = os.path.join(directory, "first.csv")
with open(first, "w") as f:
    f.write("cell_id,start,elapsed_s,completion_tokens\\nfirst,2026-09-19T01:00:00Z,10,100\\n")
many = os.path.join(os.environ["ROWS_DIR"], "many.csv")
with open(many, "w") as f:
    f.write("cell_id,start,elapsed_s,completion_tokens\\n")
    f.writelines(f"c{i},2026-09-19T02:{i % 60:02d}:00Z,10,{i}\\n" for i in range(20_000))
backfill = [sys.executable, "-m", "spark_otel", "backfill", "--mapping", "generic-csv", "--eval", "e",
            "--engine", "q", "--store", store]
cells = [sys.executable, "-m", "spark_otel", "cells", "--store", store, "--json"]
runs = {"first": subprocess.run([*backfill, first], capture_output=True, text=True, timeout=60)}
fill(directory, 256 * 1024)  # room to open the store, none for 20,000 cells
runs["write"] = subprocess.run([*backfill, many], capture_output=True, text=True, timeout=60)
os.remove(os.path.join(directory, "filler"))
fill(directory, 0)  # no room for the -shm file an open makes
runs["open"] = subprocess.run([*backfill, many], capture_output=True, text=True, timeout=60)
runs["read"] = subprocess.run(cells, capture_output=True, text=True, timeout=60)
os.remove(os.path.join(directory, "filler"))
with sqlite3.connect(store) as conn:
    stored = [r[0] for r in conn.execute("SELECT cell_id FROM cells")]
    check = conn.execute("PRAGMA integrity_check").fetchone()[0]
ran = {k: [r.returncode, r.stderr] for k, r in runs.items()}
print(json.dumps({"runs": ran, "stored": stored, "check": check, "store": store}))
"""
)


def test_backfill_and_a_reader_on_a_full_disk_say_disk_full_exit_1_and_lose_nothing(tmp_path: Path) -> None:
    """On a full disk a write fails inside its transaction (SQLite rolls it back), and with no
    room left even opening the store fails: SQLite then says "disk I/O error", named here as the
    full disk it is, for a writer and a reader alike."""
    found = json.loads(on_a_full_disk(BACKFILL, env={"ROWS_DIR": str(tmp_path)}))
    runs, store = found["runs"], found["store"]
    assert runs["first"] == [0, ""]
    code, err = runs["write"]
    assert code == 1
    assert err.count("\n") == 1, err
    assert err.startswith("spark-otel: error: disk full (database or disk is full)"), (
        err
    )  # not "cannot rollback"
    assert err.endswith("nothing written before was lost; free some space and run it again\n")
    opened = f"spark-otel: error: {store}: disk full: cannot open the spark-otel store (disk I/O error, "
    for run in ("open", "read"):
        code, err = runs[run]
        assert code == 1
        assert err.count("\n") == 1, err
        assert err.startswith(opened), err
    assert found["stored"] == ["first"]
    assert found["check"] == "ok"


WRITE = (
    FILL
    + """
import json, os
from spark_otel._files import write_output
directory = os.environ["FULL_DIR"]
target = os.path.join(directory, "report.html")
write_output(target, "the earlier report\\n")
fill(directory, 0)
try:
    write_output(target, "x" * 200_000)
    outcome = None
except OSError as exc:
    outcome = [exc.errno, exc.filename]
print(json.dumps({"outcome": outcome, "kept": open(target).read(), "files": sorted(os.listdir(directory))}))
"""
)


def test_an_output_on_a_full_disk_raises_enospc_naming_it_and_keeps_the_earlier_file() -> None:
    found = json.loads(on_a_full_disk(WRITE))
    assert found["outcome"][0] == errno.ENOSPC
    assert found["outcome"][1].endswith("/report.html")
    assert found["kept"] == "the earlier report\n"
    assert found["files"] == ["filler", "report.html"]  # no temporary file left behind


# -- where no filesystem can be filled: SQLite's full-disk error from a stand-in store ---------------


def _full() -> sqlite3.OperationalError:
    """What a write on a full disk raises through `Store`: SQLite rolled back by itself, so the
    store's ROLLBACK fails, raised while handling SQLITE_FULL."""
    try:
        try:
            raise sqlite3.OperationalError("database or disk is full")
        except sqlite3.OperationalError:
            raise sqlite3.OperationalError("cannot rollback - no transaction is active")  # noqa: B904
    except sqlite3.OperationalError as exc:
        return exc


def test_disk_full_reads_the_error_chain_and_nothing_else() -> None:
    assert disk_full(_full())
    assert disk_full(OSError(errno.ENOSPC, "No space left on device"))
    assert disk_full(OSError(errno.EDQUOT, "Disk quota exceeded"))
    assert not disk_full(sqlite3.OperationalError("database is locked"))
    assert not disk_full(OSError(errno.EACCES, "Permission denied"))


class _FullStore(Store):
    """A real store whose writes fail as a full disk makes them fail, after ``room`` of them."""

    room = 1

    def write_samples(self, samples: Any) -> int:
        if self.room <= 0:
            raise _full()
        self.room -= 1
        return super().write_samples(samples)


def test_a_receiver_whose_store_fills_stops_by_itself_and_says_so_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with MetricsServer() as server, _FullStore(tmp_path / "s.sqlite") as store:
        server.text_fn = counting_text
        receiver = Receiver({"m": server.url}, interval_s=0.01, store=store)
        with caplog.at_level(logging.WARNING, logger="spark_otel"), receiver:
            assert receiver.wait(30)
        kept = store.samples("spark_otel.engine.generation_tokens")
    assert isinstance(receiver.fatal, StoreError)
    assert str(receiver.fatal).startswith(f"{store.path}: disk full: ")
    # spark-otel's own lines (the SDK may warn of a provider an earlier test shut down)
    assert [r.getMessage() for r in caplog.records if r.name.startswith("spark_otel")] == [
        str(receiver.fatal)
    ]
    assert [s.value for s in kept] == [100.0]  # the one scrape stored before the disk filled


def test_receive_exits_1_with_one_error_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(Store, "write_samples", lambda self, samples: (_ for _ in ()).throw(_full()))
    with MetricsServer() as server:
        server.text_fn = counting_text
        code = main(
            ["receive", "--engine", f"m={server.url}", "--once", "--store", str(tmp_path / "s.sqlite")]
        )
    assert code == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert err.startswith(f"spark-otel: error: {tmp_path / 's.sqlite'}: disk full: ")


def test_a_command_that_meets_a_full_disk_says_so_instead_of_an_internal_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`probe -o` on a full disk: exit 1, "disk full" naming the file, the report there before kept."""
    out = tmp_path / "probe.json"
    out.write_text("the report before\n")

    def full(path: Any, data: Any) -> Path:
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr("spark_otel.records.probe_report.write_output", full)
    with ScriptedEngine() as engine:
        argv = ["probe", "--engine", f"q={engine.url}", "--streams", "1", "--tokens", "4", "--gpu", "none"]
        assert main([*argv, "--no-store", "--json", "-o", str(out)]) == 1
    err = capsys.readouterr().err
    assert "internal error" not in err
    assert "Traceback" not in err
    assert err.splitlines()[-1].startswith(f"spark-otel: error: disk full: cannot write {out} ")
    assert out.read_text() == "the report before\n"


def test_the_store_exporter_in_a_runner_warns_once_in_one_line_and_the_runner_goes_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A runner's cells reach the store through its span exporter: on a full disk each export
    fails (FAILURE, to the SDK), one warning names the store, and no traceback is logged."""
    monkeypatch.setattr(Store, "write_cells", lambda self, cells: (_ for _ in ()).throw(_full()))
    telemetry = configure(service_name="runner", store=tmp_path / "s.sqlite", set_global=False)
    try:
        with caplog.at_level(logging.DEBUG, logger="spark_otel"):
            for n in range(3):
                with spark_otel.cell("e", f"c{n}", tracer_provider=telemetry.tracer_provider):
                    pass
                telemetry.tracer_provider.force_flush()
    finally:
        telemetry.shutdown()
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert [r.getMessage() for r in warnings] == [
        f"spark_otel: {tmp_path / 's.sqlite'}: disk full: 1 spans (and any after them while it stays full) "
        "were not stored; everything stored before is kept"
    ]
    assert not any(r.exc_info for r in warnings)
