"""How the curves and the advisor group cells over columns: `_cell_windows`' spans cover what a
per-cell grouping by eval, engine and worker count covers, `members_by_eval` keeps each eval's
cells in their order, and `engine_codes` names each cell's engine as the analyses do, on
generated cells (evals, engines and worker counts that tie, unknown ones, zero-length cells)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_otel.analysis.advisor.classes import members_by_eval
from spark_otel.analysis.curve_candidates import _cell_windows, _union, codes_of, engine_codes
from spark_otel.model import Cell
from spark_otel.records.cell_columns import CellColumns

S = 1_000_000_000


def per_cell_windows(cols: CellColumns, among: list[int], gap_ns: int) -> tuple[list[int], list[int]]:
    """`_cell_windows` spelled out per cell: a run per group while each start is within the gap."""
    groups: dict[tuple[str, str | None, int | None], list[int]] = {}
    for k in among:
        if cols.end_unix_ns[k] > cols.start_unix_ns[k]:
            key = (cols.eval_name[k], cols.engine[k], int(cols.workers[k]) if cols.workers_known[k] else None)
            groups.setdefault(key, []).append(k)
    starts, ends = [], []
    for positions in groups.values():
        spans = sorted((int(cols.start_unix_ns[k]), int(cols.end_unix_ns[k])) for k in positions)
        run_start, reach = spans[0]
        for s, e in spans[1:]:
            if s > reach + gap_ns:
                starts.append(run_start)
                ends.append(reach)
                run_start, reach = s, e
            else:
                reach = max(reach, e)
        starts.append(run_start)
        ends.append(reach)
    return starts, ends


@st.composite
def cells(draw: st.DrawFn) -> list[Cell]:
    out = []
    for k in range(draw(st.integers(0, 12))):
        a = draw(st.integers(0, 100))
        b = a + draw(st.integers(0, 20))
        out.append(
            Cell(
                uid=f"u{k}",
                eval_name=draw(st.sampled_from(["e1", "e2", "b"])),
                cell_id=f"c{k}",
                engine=draw(st.sampled_from(["q", "n", None])),
                start_unix_ns=a * S,
                end_unix_ns=b * S,
                completion_tokens=draw(st.none() | st.sampled_from([0, 100])),
                workers=draw(st.none() | st.integers(-1, 3)),
            )
        )
    return out


@settings(max_examples=200, deadline=None)
@given(cells=cells(), gap_s=st.sampled_from([0, 5, 60]), keep=st.integers(0, 3))
def test_cell_windows_cover_what_the_per_cell_grouping_covered(
    cells: list[Cell], gap_s: int, keep: int
) -> None:
    cols = CellColumns.from_cells(cells)
    among = [k for k in range(len(cells)) if k % 4 != keep]  # a subset, as for another engine's cells
    got = _union(*_cell_windows(cols, np.array(among, dtype=np.intp), gap_s * S))
    starts, ends = per_cell_windows(cols, among, gap_s * S)
    expected = _union(np.array(starts, dtype=np.int64), np.array(ends, dtype=np.int64))
    assert got[0].tolist() == expected[0].tolist()
    assert got[1].tolist() == expected[1].tolist()


@settings(max_examples=100, deadline=None)
@given(cells=cells(), eval_name=st.none() | st.sampled_from(["e1", "b"]))
def test_members_by_eval_keeps_each_evals_cells_in_their_order(
    cells: list[Cell], eval_name: str | None
) -> None:
    cols = CellColumns.from_cells(cells)
    found = members_by_eval(cols, eval_name)
    assert list(found) == sorted(found)
    usable = {
        c.uid
        for c in cells
        if (eval_name is None or c.eval_name == eval_name)
        and (c.status.value == "deadline" or (c.completion_tokens and c.end_unix_ns > c.start_unix_ns))
    }
    for name, members in found.items():
        assert members.cell_id == [c.cell_id for c in cells if c.eval_name == name and c.uid in usable]
    assert sum(len(m) for m in found.values()) == len(usable)


def test_codes_of_gives_equal_values_one_code() -> None:
    codes, distinct = codes_of(["b", None, "a", "b", None])
    assert [distinct[c] for c in codes.tolist()] == ["b", None, "a", "b", None]
    assert len(distinct) == 3


def test_engine_codes_name_a_cell_without_an_engine_as_the_unknown_one() -> None:
    engines = [None, "unknown", "q", None, "", "q"]
    cols = CellColumns.from_cells(
        [
            Cell(uid=f"u{k}", eval_name="e", cell_id="c", engine=e, start_unix_ns=0, end_unix_ns=S)
            for k, e in enumerate(engines)
        ]
    )
    codes, names = engine_codes(cols)
    assert [names[c] for c in codes.tolist()] == ["unknown", "unknown", "q", "unknown", "unknown", "q"]
    assert sorted(names) == ["q", "unknown"]
