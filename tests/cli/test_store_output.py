"""`spark-otel store`'s whole output: info's table and --json, and every line migrate prints: a
current store left as it is, a store from before the version was recorded (schema 1), the store
that $SPARK_OTEL_STORE or a ``~`` path names, and a file that is not a database.

The command's first tests migrate a store that records schema 1 and check its outcome; here each
other path through migrate is pinned, so a store without a version row read as another schema, an
error that names no file, a default path ignored, or the "nothing changed" line lost, fails.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.support.energy_samples import power
from tests.support.store_versions import V, build, build_1, version_row

from spark_otel.cli import main
from spark_otel.store import Store

TABLES = ["cells", "requests", "load_windows", "metric_samples", "server_timings", "documents"]


def _title_and_rows(out: str) -> tuple[str, list[list[str]]]:
    """The table's title (rich wraps it to the table's width: its lines joined again) and its
    header and body rows as stripped cells."""
    title: list[str] = []
    rows: list[list[str]] = []
    for line in out.splitlines():
        if line.startswith(("┃", "│")):
            rows.append([cell.strip() for cell in line[1:-1].replace("┃", "│").split("│")])
        elif not line.startswith(("┏", "┡", "└")):
            assert not rows, f"a line after the table: {line!r}"
            title.append(line.strip())
    return " ".join(title), rows


def test_info_lists_every_table_with_thousands_separated_and_json_says_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)  # a short path, so the title wraps at spaces only
    path = Path("s.sqlite")
    build(path)  # a cell and a document
    with Store(path) as store:
        store.write_samples(power(100.0, 1_199, every=1))  # 1,200 samples
    assert main(["store", "info", "--store", str(path)]) == 0
    counts = {name: 0 for name in TABLES} | {"cells": 1, "documents": 1, "metric_samples": 1_200}
    assert _title_and_rows(capsys.readouterr().out) == (
        f"{path}: store schema {V} (this spark-otel reads and writes {V})",
        [
            ["table", "rows"],
            ["cells", "1"],
            ["requests", "0"],
            ["load_windows", "0"],
            ["metric_samples", "1,200"],
            ["server_timings", "0"],
            ["documents", "1"],
        ],
    )
    assert main(["store", "info", "--store", str(path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"store": str(path), "schema_version": V, "rows": counts}


def test_migrate_leaves_a_current_store_as_it_is_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "s.sqlite"
    build(path)
    assert main(["store", "migrate", "--store", str(path)]) == 0
    assert capsys.readouterr().out == f"{path}: already at store schema {V}; nothing changed\n"


def test_a_store_from_before_the_version_was_recorded_migrates_from_schema_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "s.sqlite"
    build_1(path, "DELETE FROM meta")  # no schema_version row: a store from before it was kept
    assert main(["store", "migrate", "--store", str(path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {
        "store": str(path), "from_schema": 1, "schema_version": V, "migrated": True,
    }  # fmt: skip
    assert version_row(path) == [(str(V),)]


def test_migrate_finds_the_store_that_the_environment_or_a_home_path_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "old.sqlite"
    build_1(path)
    monkeypatch.setenv("SPARK_OTEL_STORE", str(path))
    assert main(["store", "migrate"]) == 0
    assert capsys.readouterr().out == f"{path}: migrated from store schema 1 to {V}; 1 cells kept\n"
    monkeypatch.setenv("HOME", str(tmp_path))
    assert main(["store", "migrate", "--store", "~/old.sqlite"]) == 0
    assert capsys.readouterr().out == f"{path}: already at store schema {V}; nothing changed\n"


def test_migrate_of_a_file_that_is_not_a_database_names_it_and_leaves_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bogus.sqlite"
    path.write_bytes(b"\x00garbage" * 512)
    assert main(["store", "migrate", "--store", str(path)]) == 1
    captured = capsys.readouterr()
    assert (captured.out, captured.err) == (
        "",
        f"spark-otel: error: {path}: cannot open the spark-otel store: file is not a database\n",
    )
    assert path.read_bytes() == b"\x00garbage" * 512
