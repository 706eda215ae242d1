"""Every command documented as reading only changes no file's bytes and creates no file: run on
a real store, on a real governor state file, on each with a WAL a killed writer left beside it
(a read-write open would checkpoint it into the file when it closes), on another program's
SQLite file, a 0-byte file, a corrupt file, a directory and a path where nothing is. The file a
command reads is hashed before and after (with its WAL, where one was there), and the directory
listed: only SQLite's own ``-wal``/``-shm`` may appear beside a WAL-mode file, which a reader
needs to read one safely while writers run. A file that is not what the command reads is
refused in one line naming it, never an internal error."""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest
from tests.support.article import appendix_c_cells, appendix_d_loads

from spark_otel.cli import main
from spark_otel.governor.decision import InFlight
from spark_otel.governor.state import SharedState
from spark_otel.records.rules_file import parse_rules
from spark_otel.store import Store

EVAL = "qwen-thinking-review"

STORE_READERS: dict[str, list[str]] = {
    "cells": ["cells", "--store", "{path}"],
    "requests": ["requests", "--store", "{path}"],
    "concurrency": ["concurrency", "--store", "{path}"],
    "neighbour-cost": ["neighbour-cost", "--store", "{path}", "--eval", EVAL],
    "timeouts": ["timeouts", "--store", "{path}"],
    "instruments": ["instruments", "--store", "{path}"],
    "advise": ["advise", "--store", "{path}"],
    "store info": ["store", "info", "--store", "{path}"],
    "report": ["report", "--store", "{path}", "--out", "{out}"],
    "rules check --store": ["rules", "check", "{rules}", "--store", "{path}", "--json"],
}
STATE_READERS: dict[str, list[str]] = {"lanes": ["lanes", "--state", "{path}"]}


def _store(path: Path) -> None:
    probes, _ = appendix_d_loads()
    with Store(path) as store:
        store.write_cells(appendix_c_cells()[:10])
        store.write_windows(probes)


def _killed_writer(body: str, path: Path) -> None:
    """Run ``body`` (Python, ``path`` bound) in a process that kills itself with SIGKILL after."""
    code = textwrap.dedent(body) + "\nimport os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n"
    proc = subprocess.run([sys.executable, "-c", code, str(path)], env=os.environ.copy(), check=False)
    assert proc.returncode == -signal.SIGKILL
    assert Path(f"{path}-wal").stat().st_size > 0  # committed pages the file itself does not hold yet


def _store_with_a_wal(path: Path) -> None:
    _store(path)
    _killed_writer(
        """
        import sys
        from tests.support.article import appendix_c_cells
        from spark_otel.store import Store
        store = Store(sys.argv[1])
        store.write_cells(appendix_c_cells()[10:])
        """,
        path,
    )


RULES = parse_rules("[[lane]]\nengine = 'q'\ncells = 2\n", where="test")


def _state(path: Path) -> None:
    state = SharedState(path)
    try:
        cell = InFlight("q", "ev", None, False)
        decision = state.attempt(cell, "c1", RULES, ticket=None, waited_s=0.0)
        assert decision.slot is not None
        state.release(decision.slot, cell)
    finally:
        state.close()


def _state_with_a_wal(path: Path) -> None:
    """A runner killed holding a slot: its row (a gone pid) stays in a WAL the file does not hold yet."""
    _state(path)
    _killed_writer(
        """
        import sys
        from spark_otel.governor.decision import InFlight
        from spark_otel.governor.state import SharedState
        from spark_otel.records.rules_file import parse_rules
        rules = parse_rules("[[lane]]\\nengine = 'q'\\ncells = 2\\n", where="test")
        killed = InFlight("q", "killed", None, False)
        SharedState(sys.argv[1]).attempt(killed, "k1", rules, ticket=None, waited_s=0.0)
        """,
        path,
    )


def _another_programs(path: Path) -> None:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE notes (body TEXT)")
    conn.execute("INSERT INTO notes VALUES ('keep me')")
    conn.commit()
    conn.close()


KINDS: dict[str, Callable[[Path], None] | None] = {
    "store": _store,
    "store with a killed writer's WAL": _store_with_a_wal,
    "state": _state,
    "state with a killed runner's WAL": _state_with_a_wal,
    "another program's SQLite file": _another_programs,
    "0-byte file": lambda path: path.touch(),
    "corrupt file": lambda path: path.write_bytes(b"SQLite format 3\x00" + bytes(range(256)) * 16),
    "directory": lambda path: path.mkdir(),
    "missing": None,
}
READS = {**dict.fromkeys(STORE_READERS, "store"), **dict.fromkeys(STATE_READERS, "state")}


@pytest.fixture(scope="module")
def templates(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Each kind of file, made once; every test works on its own copy."""
    root = tmp_path_factory.mktemp("kinds")
    for n, make in enumerate(KINDS.values()):
        (root / str(n)).mkdir()
        if make is not None:
            make(root / str(n) / "file.sqlite")
    return root


def _snapshot(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` (directories too) with its bytes' digest; SQLite's ``-shm``
    only by name (its shared-memory index, which every opener of a WAL file, a reader included,
    rebuilds and marks)."""
    return {
        str(p.relative_to(folder)): "dir" if p.is_dir() else "shm" if p.name.endswith("-shm") else
        hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
    }  # fmt: skip


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("command", [*STORE_READERS, *STATE_READERS])
def test_a_reader_changes_no_byte_and_creates_no_file(
    command: str, kind: str, templates: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "box"
    shutil.copytree(templates / str(list(KINDS).index(kind)), folder)
    path = folder / "file.sqlite"
    before = _snapshot(folder)
    rules = tmp_path / "rules.toml"
    rules.write_text("[[lane]]\nengine = 'q'\ncells = 2\n")
    argv = [
        a.format(path=path, out=tmp_path / "report", rules=rules)
        for a in {**STORE_READERS, **STATE_READERS}[command]
    ]
    code = main(argv)
    out, err = capsys.readouterr()
    after = _snapshot(folder)
    # SQLite's shared-memory index and an empty WAL, beside a WAL-mode file only: nothing else.
    sidecars = {"file.sqlite-wal", "file.sqlite-shm"} if kind in ("store", "state") else set()
    assert set(after) - set(before) <= sidecars
    assert {name: after[name] for name in before} == before  # nothing changed, nothing removed
    assert all(
        after[name] == hashlib.sha256(b"").hexdigest()
        for name in after.keys() - before.keys() - {"file.sqlite-shm"}
    )
    if kind.startswith(READS[command]):
        assert code == 0, err
        return
    assert code == 1
    [line] = err.splitlines()
    assert line.startswith(f"spark-otel: error: {path}: "), line
    assert "internal error" not in line
    assert out == ""
