"""Which store a rerun may replace, with every file SQLite keeps beside it, and the run tag a
new run takes (read from the store it is given, which it leaves as it was): the demo's own records
go, anything the demo did not write stays."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pytest

from spark_otel import ConfigError
from spark_otel.demo import clear_own_store
from spark_otel.demo import own_store as demo_store
from spark_otel.demo.own_store import run_tag
from spark_otel.model import Cell
from spark_otel.store import Store


def _cell(eval_name: str) -> Cell:
    return Cell(
        uid=eval_name, eval_name=eval_name, cell_id="1", engine="qwen", start_unix_ns=0, end_unix_ns=1
    )


def _refusal(path: Path) -> str:
    return (
        f"{path} exists and was not written by spark-otel demo; pass --out with another directory, "
        "or --store to add the demo's records to that store"
    )


def test_a_rerun_removes_the_old_store_and_the_files_sqlite_keeps_beside_it(tmp_path: Path) -> None:
    own = tmp_path / "store.sqlite"
    with Store(own) as store:
        store.put_document("demo", "ab12", {"serial_eval": "demo-serial-ab12"})
        store.write_cells([_cell("demo-serial-ab12")])
    # A report still reading the old run keeps its WAL files; a crash left a rollback journal.
    reader = sqlite3.connect(own)
    try:
        assert reader.execute("SELECT count(*) FROM cells").fetchone() == (1,)
        Path(f"{own}-journal").write_bytes(b"")
        assert sorted(p.name for p in tmp_path.iterdir()) == [
            "store.sqlite",
            "store.sqlite-journal",
            "store.sqlite-shm",
            "store.sqlite-wal",
        ]
        clear_own_store(own)
        assert sorted(p.name for p in tmp_path.iterdir()) == []
    finally:
        reader.close()


def test_nothing_to_clear_on_a_first_run(tmp_path: Path) -> None:
    clear_own_store(tmp_path / "store.sqlite")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("document", "evals"),
    [
        ("demo", ["demo-serial-ab12", "golden-review"]),  # the demo's document, and a real eval beside it
        ("probe", ["demo-serial-ab12"]),  # demo-like eval names, but no demo ever ran here
    ],
)
def test_a_store_holding_anything_but_the_demos_own_records_is_refused(
    tmp_path: Path, document: str, evals: list[str]
) -> None:
    path = tmp_path / "store.sqlite"
    with Store(path) as store:
        store.put_document(document, "ab12", {"note": "written before"})
        store.write_cells([_cell(name) for name in evals])
    with pytest.raises(ConfigError) as refused:
        clear_own_store(path)
    assert str(refused.value) == _refusal(path)
    with Store(path, read_only=True) as store:
        assert sorted(store.eval_names()) == sorted(evals)


def test_the_run_tag_is_four_hex_digits_no_eval_in_the_store_ends_with(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "store.sqlite"
    with Store(path) as store:
        store.write_cells([_cell("demo-serial-ab12"), _cell("golden-review")])
    # The tags the random source would give, in order: the first is taken.
    drawn = iter(["ab12", "cd34"])
    sizes: list[int] = []

    def token_hex(nbytes: int) -> str:
        sizes.append(nbytes)
        return next(drawn)

    monkeypatch.setattr(demo_store.secrets, "token_hex", token_hex)
    assert run_tag(path) == "cd34"
    assert sizes == [2, 2]
    with Store(path, read_only=True) as store:
        assert sorted(store.eval_names()) == ["demo-serial-ab12", "golden-review"]


def test_a_first_run_takes_the_first_tag_drawn(tmp_path: Path) -> None:
    tag = run_tag(tmp_path / "store.sqlite")
    assert re.fullmatch(r"[0-9a-f]{4}", tag), tag
    assert list(tmp_path.iterdir()) == []  # nothing created to find it


def test_the_run_tag_reads_the_store_it_is_given_not_the_default_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    default, given = tmp_path / "default.sqlite", tmp_path / "given.sqlite"
    with Store(default) as store:
        store.write_cells([_cell("demo-serial-ab12")])
    with Store(given) as store:
        store.write_cells([_cell("demo-serial-cd34")])
    monkeypatch.setenv("SPARK_OTEL_STORE", str(default))
    drawn = iter(["cd34", "ab12"])
    monkeypatch.setattr(demo_store.secrets, "token_hex", lambda nbytes: next(drawn))
    assert run_tag(given) == "ab12"


def test_the_run_tag_leaves_the_store_as_it_was(tmp_path: Path) -> None:
    # A reader: a writer's open would switch the store to WAL (and would create or migrate it).
    path = tmp_path / "store.sqlite"
    with Store(path) as store:
        store.write_cells([_cell("demo-serial-ab12")])
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode=DELETE").fetchone() == ("delete",)
    conn.close()
    run_tag(path)
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("delete",)
    conn.close()
    assert list(tmp_path.iterdir()) == [path]
