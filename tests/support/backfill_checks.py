"""The checks every `backfill_files` result must pass, for the record and mapping fuzz suites."""

from __future__ import annotations

from pathlib import Path

from tests.support.fuzzing import finite_or_none, timed

from spark_otel._validate import EARLIEST_NS, LATEST_NS, MAX_COUNT
from spark_otel.model import Cell
from spark_otel.receivers.backfill import BackfillResult, FieldMapping, backfill_files


def backfill(path: Path, mapping: FieldMapping, eval_name: str | None = "fuzz") -> BackfillResult:
    """`backfill_files` on one file, within the time bound, checking what every result must hold."""
    result = timed(lambda: backfill_files([path], mapping, eval_name=eval_name), f"backfill of {path.name}")
    assert isinstance(result, BackfillResult)
    for error in result.errors:
        assert error.file == str(path), error
        assert str(error).startswith(f"{path}"), error
        assert error.message, error
        assert "\n" not in error.message, error
    for cell in result.cells:
        assert_placeable(cell)
    return result


def assert_placeable(cell: Cell) -> None:
    where = f"cell {cell.cell_id!r}"
    assert EARLIEST_NS <= cell.start_unix_ns <= cell.end_unix_ns < LATEST_NS, where
    for count in (cell.prompt_tokens, cell.completion_tokens, cell.workers):
        assert count is None or 0 <= count < MAX_COUNT, where
    assert finite_or_none(cell.deadline_s), where
    assert cell.eval_name, where
    assert cell.cell_id, where
