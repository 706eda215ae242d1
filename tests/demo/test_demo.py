"""The demo's own store: beside the report unless --store is given, replaced on a rerun, never a foreign one
(the command-line tests of `spark-otel demo` are in tests/cli/test_demo.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from spark_otel.cli import main
from spark_otel.demo import clear_own_store, demo_store_path
from spark_otel.model import Cell
from spark_otel.store import Store


def test_the_demo_store_is_its_own_file_unless_store_is_given(tmp_path: Path) -> None:
    assert demo_store_path(None, tmp_path / "out") == tmp_path / "out" / "store.sqlite"
    assert demo_store_path(tmp_path / "mine.sqlite", tmp_path / "out") == tmp_path / "mine.sqlite"


def test_a_rerun_replaces_the_demo_store_but_never_a_store_the_demo_did_not_write(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    own = tmp_path / "demo" / "store.sqlite"
    with Store(own) as store:
        store.put_document(
            "demo", "20261130-000000-abcd", {"serial_eval": "demo-serial-20261130-000000-abcd"}
        )
        store.write_cells([_cell("demo-serial-20261130-000000-abcd")])
    clear_own_store(own)
    assert not own.exists()

    foreign = tmp_path / "real" / "store.sqlite"
    with Store(foreign) as store:
        store.write_cells([_cell("golden-review")])
    assert main(["demo", "--quick", "--out", str(foreign.parent)]) == 2
    assert "was not written by spark-otel demo" in capsys.readouterr().err
    with Store(foreign) as store:
        assert [c.eval_name for c in store.cells()] == ["golden-review"]


def _cell(eval_name: str) -> Cell:
    return Cell(
        uid=eval_name, eval_name=eval_name, cell_id="1", engine="qwen", start_unix_ns=0, end_unix_ns=1
    )
