"""The store's columnar read (`Store.cell_columns`): the columns of the cells `Store.cells` reads
with the same options, in the same order, and requests standing in for cells merged in as
`with_requests_as_cells` merges them."""

from __future__ import annotations

import numpy as np
from tests.support.cell_columns import column_differences

from spark_otel import Cell, CellStatus, LoadWindow, Request
from spark_otel.analysis.request_cells import columns_with_requests_as_cells, with_requests_as_cells
from spark_otel.records.cell_columns import STATUSES, CellColumns
from spark_otel.store import Store

S = 1_000_000_000
T0 = 1_790_000_000 * S


def varied_cells() -> list[Cell]:
    """Every status, each nullable field both set and None, ties in start, out of start order."""
    cells = []
    for k, status in enumerate([*CellStatus, *CellStatus]):
        full = k % 2 == 0
        cells.append(
            Cell(
                uid=f"c{k}",
                eval_name="golden" if k % 3 else 'naïve "quoted"',
                cell_id=f"B#{k}",
                engine="qwen" if full else None,
                start_unix_ns=T0 + (7 - k // 2) * S,
                end_unix_ns=T0 + (7 - k // 2) * S + (0 if k == 3 else 9 * S),
                prompt_tokens=1000 + k if full else None,
                completion_tokens=None if k in (1, 6) else 0 if k == 2 else 500 + k,
                status=status,
                deadline_s=1800.5 if full else None,
                workers=None if k % 4 == 1 else k % 3,
                source="backfill" if k % 3 else "live",
            )
        )
    return cells


def test_the_columns_are_the_cells_read_as_rows(store: Store) -> None:
    store.write_cells(varied_cells())
    columns = store.cell_columns()
    assert column_differences(columns, CellColumns.from_cells(store.cells())) == []
    assert len(columns) == len(varied_cells())
    assert columns.start_unix_ns.tolist() == sorted(c.start_unix_ns for c in varied_cells())
    by_uid = {c.uid: c for c in varied_cells()}
    for k, uid in enumerate(columns.uid):
        want = by_uid[uid]
        assert STATUSES[columns.status[k]] is want.status
        assert (
            int(columns.completion_tokens[k]) if columns.completion_known[k] else None
        ) == want.completion_tokens
        assert (int(columns.workers[k]) if columns.workers_known[k] else None) == want.workers
        assert (None if np.isnan(columns.deadline_s[k]) else float(columns.deadline_s[k])) == want.deadline_s
    assert (columns.start_unix_ns.dtype, columns.status.dtype, columns.deadline_s.dtype) == (
        np.int64,
        np.int8,
        np.float64,
    )


def test_eval_engine_and_a_time_range_are_read_as_cells_reads_them(store: Store) -> None:
    store.write_cells(varied_cells())
    since, until = T0 + 2 * S, T0 + 5 * S
    for options in (
        {"eval_name": "golden"},
        {"engine": "qwen"},
        {"since_unix_ns": since},
        {"until_unix_ns": until},
        {"since_unix_ns": since, "until_unix_ns": until, "eval_name": "golden"},
        {"eval_name": "absent"},
    ):
        got = store.cell_columns(**options)  # type: ignore[arg-type]
        want = store.cells(**options)  # type: ignore[arg-type]
        assert column_differences(got, CellColumns.from_cells(want)) == [], options
    ranged = store.cell_columns(since_unix_ns=since, until_unix_ns=until)
    assert sorted(ranged.uid) == sorted(c.uid for c in varied_cells() if since <= c.start_unix_ns <= until)
    assert 0 < len(ranged) < len(varied_cells())


def test_an_empty_store_reads_no_columns(store: Store) -> None:
    columns = store.cell_columns()
    assert len(columns) == 0
    assert column_differences(columns, CellColumns.empty()) == []


def test_the_time_range_is_read_through_the_start_index(store: Store) -> None:
    plan = store._conn.execute(
        "EXPLAIN QUERY PLAN SELECT uid FROM cells WHERE start_unix_ns >= ? AND start_unix_ns <= ? "
        "ORDER BY start_unix_ns",
        (0, 1),
    ).fetchall()
    assert any("cells_start" in row[-1] for row in plan)


def test_requests_no_cell_holds_are_merged_in_as_the_rows_merge_them(store: Store) -> None:
    cells = varied_cells()
    requests = [
        Request(uid="r-held", cell_uid="c0", operation="chat", start_unix_ns=T0, end_unix_ns=T0 + S),
        Request(  # ties with c10/c11's start: after the cells, as a stable sort puts it
            uid="r-tie",
            engine="qwen",
            operation="chat",
            start_unix_ns=T0 + 2 * S,
            end_unix_ns=T0 + 3 * S,
            output_tokens=40,
        ),
        Request(
            uid="r-early", operation="chat", start_unix_ns=T0 - S, end_unix_ns=T0, error_type="ReadTimeout"
        ),
        Request(uid="r-load", engine="nemo", operation="chat", start_unix_ns=T0 + S, end_unix_ns=T0 + 2 * S),
    ]
    windows = [
        LoadWindow(
            uid="w", name="imposed", kind="load", engine="nemo", start_unix_ns=T0, end_unix_ns=T0 + 9 * S
        )
    ]
    store.write_cells(cells)
    rows = with_requests_as_cells(store.cells(), requests, windows=windows)
    columns = columns_with_requests_as_cells(store.cell_columns(), requests, windows=windows)
    assert column_differences(columns, CellColumns.from_cells(rows)) == []
    assert columns.uid[0] == "r-early"
    assert {"r-tie", "r-held", "r-load"} & set(columns.uid) == {"r-tie"}
    assert columns_with_requests_as_cells(store.cell_columns(), []).uid == store.cell_columns().uid


def test_an_overlapping_read_holds_every_cell_running_in_the_range(store: Store) -> None:
    store.write_cells(varied_cells())
    since, until = T0 + 4 * S + S // 2, T0 + 5 * S
    got = store.cell_columns(since_unix_ns=since, until_unix_ns=until, overlapping=True)
    want = [c for c in store.cells() if c.end_unix_ns >= since and c.start_unix_ns <= until]
    assert column_differences(got, CellColumns.from_cells(want)) == []
    assert len(got) > len(store.cell_columns(since_unix_ns=since, until_unix_ns=until))  # earlier starts too
    assert (
        column_differences(
            store.cell_columns(since_unix_ns=since, overlapping=True),
            CellColumns.from_cells([c for c in store.cells() if c.end_unix_ns >= since]),
        )
        == []
    )
    # A cell that ends at the range's first instant was running then (c0 and c1: 7 s to 16 s).
    edge = store.cell_columns(since_unix_ns=T0 + 16 * S, overlapping=True)
    assert sorted(edge.uid) == ["c0", "c1"]
