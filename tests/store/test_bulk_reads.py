"""The store's bulk read (`Table.records`): rows become records equal to the validated ones they
were written from, field by field and type by type, with the cyclic collector paused only while
they are built."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from spark_otel import Cell, CellStatus, Request
from spark_otel.store import Store
from spark_otel.store.schema import CELLS, collector_paused

T0 = 1_790_000_000_000_000_000


def varied_cells() -> list[Cell]:
    """Every status, each optional field both set and None, attributes of every value type,
    empty attributes, and text JSON must escape."""
    cells = []
    for k, status in enumerate([*CellStatus, *CellStatus]):
        full = k % 2 == 0
        cells.append(
            Cell(
                uid=f"c{k}",
                eval_name="golden" if full else 'naïve "quoted" {eval}',
                cell_id=f"B#{k}",
                engine="qwen" if full else None,
                start_unix_ns=T0 + k * 10**9,
                end_unix_ns=T0 + k * 10**9 + (0 if k == 3 else 7 * 10**9),
                prompt_tokens=1000 + k if full else None,
                completion_tokens=None if k in (1, 6) else 0 if k == 2 else 500 + k,
                status=status,
                deadline_s=1800.5 if full else None,
                workers=4 if full else None,
                salvaged_findings=k % 3,
                source="backfill" if k % 3 else "live",
                trace_id="ab" * 16 if full else None,
                first_token_s=0.25 if full else None,
                decode_s=6.5 if full else None,
                unsplit_s=0.0 if full else None,
                other_s=0.25 if full else None,
                attributes=(
                    {
                        "text": 'x\n"y" ü',
                        "count": 3,
                        "ratio": 1.0,
                        "big": 2**62,
                        "flag": True,
                        "off": False,
                        "spark_otel.cell.queue_wait_s": 2.5,
                    }
                    if full
                    else {}
                ),
            )
        )
    return cells


def test_cells_read_back_equal_the_validated_cells_they_were_written_from(store: Store) -> None:
    cells = varied_cells()
    store.write_cells(cells)
    read = store.cells()
    assert read == cells
    for got, want in zip(read, cells, strict=True):
        assert got.model_dump() == want.model_dump()
        assert type(got.status) is CellStatus
        assert {k: type(v) for k, v in got.attributes.items()} == {
            k: type(v) for k, v in want.attributes.items()
        }
        assert (got.deadline_hit, got.degraded, got.decode_rate, got.admission_s, got.has_budget) == (
            want.deadline_hit,
            want.degraded,
            want.decode_rate,
            want.admission_s,
            want.has_budget,
        )
    empty = [c.attributes for c in read if not c.attributes]
    assert len(empty) == 4
    assert len({id(a) for a in empty}) == 4  # each cell its own dict, as validation gives


def test_requests_finish_reasons_read_back_as_lists(store: Store) -> None:
    requests = [
        Request(uid=f"r{k}", operation="chat", start_unix_ns=T0, end_unix_ns=T0 + k, finish_reasons=reasons)
        for k, reasons in enumerate([[], ["stop"], ["stop", "length"]])
    ]
    store.write_requests(requests)
    assert store.requests() == requests


def test_a_row_the_record_rejects_fails_as_validation_does(store: Store) -> None:
    store.write_cells(varied_cells()[:1])
    (row,) = store._select(CELLS.select_sql, [])
    bad = [None if name == "eval_name" else value for name, value in zip(CELLS.read_names, row, strict=True)]
    with pytest.raises(ValueError, match="eval_name"):
        CELLS.records([bad])


def _watching(rows: Sequence[Sequence[Any]], seen: list[bool]) -> Iterator[Sequence[Any]]:
    for row in rows:
        seen.append(gc.isenabled())
        yield row


@pytest.mark.parametrize("enabled", [True, False])
def test_the_collector_is_off_while_records_are_built_and_as_it_was_after(
    store: Store, enabled: bool
) -> None:
    store.write_cells(varied_cells()[:2])
    rows = store._select(CELLS.select_sql, [])
    seen: list[bool] = []
    (gc.enable if enabled else gc.disable)()
    try:
        CELLS.records(_watching(rows, seen))
        assert gc.isenabled() is enabled
    finally:
        gc.enable()
    assert seen == [False, False]


def test_overlapping_pauses_restore_the_collector_when_the_last_ends() -> None:
    assert gc.isenabled()
    inside = threading.Event()
    leave = threading.Event()

    def other() -> None:
        with collector_paused():
            inside.set()
            leave.wait(10)

    thread = threading.Thread(target=other)
    with collector_paused():
        thread.start()
        assert inside.wait(10)
    assert not gc.isenabled()  # the other read still builds
    leave.set()
    thread.join(10)
    assert gc.isenabled()
