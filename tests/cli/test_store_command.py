"""`spark-otel store`: info reads only; migrate brings a schema-1 store to the current schema in
place, keeping its rows, and refuses what it must not touch."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from tests.support.store_versions import CELL, V, build_1, version_row

from spark_otel.cli import main
from spark_otel.store import Store


def test_migrate_brings_a_schema_1_store_forward_and_info_then_reads_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "old.sqlite"
    before = build_1(path)
    assert main(["store", "info", "--store", str(path)]) != 0
    err = capsys.readouterr().err
    assert f"`spark-otel store migrate --store {path}` migrates it in place" in err
    assert path.read_bytes() == before  # info only reads

    assert main(["store", "migrate", "--store", str(path)]) == 0
    assert capsys.readouterr().out == f"{path}: migrated from store schema 1 to {V}; 1 cells kept\n"
    assert version_row(path) == [(str(V),)]
    with Store(path, read_only=True) as store:
        assert store.cells() == [CELL]

    assert main(["store", "migrate", "--store", str(path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {
        "store": str(path), "from_schema": V, "schema_version": V, "migrated": False,
    }  # fmt: skip
    assert main(["store", "info", "--store", str(path), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["schema_version"] == V
    assert {k: info["rows"][k] for k in ("cells", "documents", "server_timings")} == {
        "cells": 1, "documents": 1, "server_timings": 0,
    }  # fmt: skip


def test_migrate_creates_nothing_and_leaves_another_programs_file_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nowhere.sqlite"
    assert main(["store", "migrate", "--store", str(missing)]) != 0
    assert capsys.readouterr().err == (
        f"spark-otel: error: {missing}: no store there; nothing to migrate (recording creates one)\n"
    )
    assert not missing.exists()
    theirs = tmp_path / "theirs.sqlite"
    conn = sqlite3.connect(theirs)
    conn.execute("CREATE TABLE notes (body TEXT)")
    conn.commit()
    conn.close()
    before = theirs.read_bytes()
    assert main(["store", "migrate", "--store", str(theirs)]) != 0
    assert "not a spark-otel store" in capsys.readouterr().err
    assert theirs.read_bytes() == before
