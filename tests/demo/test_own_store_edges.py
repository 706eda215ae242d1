"""The demo's own store where nothing else is open (`demo.own_store`): a closed store, without
the WAL files or journal SQLite keeps only while it is in use, is removed all the same; and the
store a demo writes is the one given, else its own in the output directory."""

from __future__ import annotations

from pathlib import Path

from spark_otel.demo.own_store import STORE_FILE, clear_own_store, demo_store_path
from spark_otel.model import Cell
from spark_otel.store import Store


def test_a_closed_store_with_nothing_beside_it_is_removed(tmp_path: Path) -> None:
    own = tmp_path / "store.sqlite"
    with Store(own) as store:
        store.put_document("demo", "ab12", {"serial_eval": "demo-serial-ab12"})
        store.write_cells(
            [Cell(uid="u", eval_name="demo-serial-ab12", cell_id="1", start_unix_ns=0, end_unix_ns=1)]
        )
    for suffix in ("-wal", "-shm", "-journal"):
        Path(f"{own}{suffix}").unlink(missing_ok=True)
    assert [p.name for p in tmp_path.iterdir()] == ["store.sqlite"]
    clear_own_store(own)
    assert list(tmp_path.iterdir()) == []


def test_the_store_given_else_the_demos_own_in_its_output_directory(tmp_path: Path) -> None:
    assert demo_store_path(None, tmp_path) == tmp_path / STORE_FILE
    assert demo_store_path(tmp_path / "mine.sqlite", tmp_path / "out") == tmp_path / "mine.sqlite"
