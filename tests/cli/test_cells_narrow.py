"""`spark-otel cells` on an 80-column terminal keeps one line per cell: it leaves out the
lower-priority columns and names them; `--wide` shows every column."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.support.snapshots import Snapshot

from spark_otel.cli import main
from spark_otel.model import Cell, CellStatus
from spark_otel.store import Store

S = 1_000_000_000


@pytest.fixture
def four_cells(tmp_path: Path) -> str:
    path = tmp_path / "s.sqlite"
    with Store(path) as store:
        store.write_cells(
            [
                Cell(
                    uid=f"u{i}",
                    eval_name="golden-review",
                    cell_id=f"B#{260 + i}",
                    engine="qwen",
                    start_unix_ns=1_790_000_000 * S + i * 600 * S,
                    end_unix_ns=1_790_000_000 * S + i * 600 * S + (500 + i) * S,
                    prompt_tokens=9000 + i,
                    completion_tokens=5800 + i * 10,
                    workers=8,
                    status=CellStatus.DEADLINE if i == 2 else CellStatus.OK,
                    salvaged_findings=2 if i == 2 else 0,
                    deadline_s=1800.0,
                )
                for i in range(4)
            ]
        )
    return str(path)


def test_at_80_columns_each_cell_is_one_line_and_the_left_out_columns_are_named(
    four_cells: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], snapshot: Snapshot
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["cells", "--store", four_cells]) == 0
    out = capsys.readouterr().out
    assert all(len(line) <= 80 for line in out.splitlines())
    table = [line for line in out.splitlines() if line.startswith("│")]
    assert len(table) == 4  # one line per cell
    snapshot(out)


def test_wide_shows_every_column(
    four_cells: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], snapshot: Snapshot
) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    assert main(["cells", "--store", four_cells, "--wide"]) == 0
    out = capsys.readouterr().out
    assert "left out" not in out
    snapshot(out)
