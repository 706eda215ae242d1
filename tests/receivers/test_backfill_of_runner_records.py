"""The example runner's own records, backfilled, give the cells spark-otel recorded live.

The runner (a real process on a simulated engine) writes one record per cell and, through
``spark_otel.cell``, the live cells; backfilling its records must place each cell where the live
one is (start, end, and so which cells were in flight beside it), not at the file's mtime.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from spark_otel._clock import NS_PER_S
from spark_otel.cli import main
from spark_otel.model import Cell
from spark_otel.store import Store

RUNNER = Path(__file__).parents[2] / "examples" / "eval_runner.py"
# The runner stamps a record just inside its cell block and rounds to the millisecond; between
# the two stamps a runner thread can wait for the GIL on a loaded 2-core machine (seen: 65 ms),
# which the runner's speed turns into model seconds: a quarter of a real second is allowed. A cell
# placed by the records' mtime instead (set to 2001 below) would be off by decades; one placed
# without its elapsed time, by its whole length (about a model minute).
SPEED = 40.0
TOLERANCE_S = 0.25 * SPEED


def _run(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "SPARK_OTEL_"))}
    return subprocess.run(
        [sys.executable, str(RUNNER), *args],
        check=False,
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _overlaps(cells: list[Cell]) -> dict[tuple[str, str], int]:
    """How long (ns) each pair of cells ran beside each other; negative: the gap between them."""
    return {
        (a.cell_id, b.cell_id): min(a.end_unix_ns, b.end_unix_ns) - max(a.start_unix_ns, b.start_unix_ns)
        for a in cells
        for b in cells
        if a.cell_id < b.cell_id
    }


def test_backfilled_runner_records_match_the_live_cells(tmp_path: Path) -> None:
    ran = _run(tmp_path, "--sim", "--speed", str(SPEED), "--cells", "6", "--concurrency", "2")
    assert ran.returncode == 0, ran.stderr
    live_store = tmp_path / "records" / "spark-otel.sqlite"
    assert f"cells:   {Path('records') / 'spark-otel.sqlite'}" in ran.stdout
    assert f"next:    spark-otel cells --store {Path('records') / 'spark-otel.sqlite'}" in ran.stdout

    # Touch the records as a copy or a later edit would: the mtime must not decide anything.
    records = sorted((tmp_path / "records").glob("*.json"))
    assert len(records) == 6
    for path in records:
        os.utime(path, (1_000_000_000, 1_000_000_000))
    backfilled_store = tmp_path / "backfilled.sqlite"
    code = main(
        ["backfill", *map(str, records), "--mapping", "spark-bench", "--store", str(backfilled_store)]
    )
    assert code == 0

    with Store(live_store, read_only=True) as store:
        live = {c.cell_id: c for c in store.cells(eval_name="golden-review")}
    with Store(backfilled_store, read_only=True) as store:
        backfilled = {c.cell_id: c for c in store.cells(eval_name="golden-review")}
    assert sorted(live) == sorted(backfilled) == [f"cell-{i}" for i in range(6)]
    for cell_id, cell in live.items():
        again = backfilled[cell_id]
        assert again.start_unix_ns == pytest.approx(cell.start_unix_ns, abs=TOLERANCE_S * NS_PER_S)
        assert again.end_unix_ns == pytest.approx(cell.end_unix_ns, abs=TOLERANCE_S * NS_PER_S)
        assert again.completion_tokens == cell.completion_tokens
        assert again.workers == cell.workers == 2
    # The cells that ran beside each other (two at a time) still do, and those apart still are:
    # each end may move by the tolerance, so pairs within twice it of touching are left out.
    slack = 2 * TOLERANCE_S * NS_PER_S
    again_overlaps = _overlaps(list(backfilled.values()))
    live_overlaps = _overlaps(list(live.values()))
    assert any(o > slack for o in live_overlaps.values())
    for pair, overlap in live_overlaps.items():
        if abs(overlap) > slack:
            assert (again_overlaps[pair] > 0) == (overlap > 0), (pair, overlap, again_overlaps[pair])


def test_runner_help_creates_nothing(tmp_path: Path) -> None:
    ran = _run(tmp_path, "--help")
    assert ran.returncode == 0
    assert "--store" in ran.stdout
    assert list(tmp_path.iterdir()) == []
