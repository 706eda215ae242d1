"""Generated boxes for the analyses that price load (neighbour cost, timeouts): cells of a few evals
on a few engines and recorded windows, for comparing the columnar paths with the row paths."""

from __future__ import annotations

from hypothesis import strategies as st

from spark_otel import _semconv as sc
from spark_otel.analysis.neighbour import CellRate, NeighbourReport
from spark_otel.analysis.request_cells import REQUEST_SOURCE
from spark_otel.model import AttributeValue, Cell, CellStatus, LoadWindow

S = 1_000_000_000

_statuses = st.sampled_from(list(CellStatus))
_WAITS: list[dict[str, AttributeValue]] = [
    {},
    {sc.CELL_QUEUE_WAIT_S: 400.0},
    {sc.CELL_QUEUE_WAIT_S: 1},
]
"""No governor wait, one that names the cell queued (a share of any ceiling up to 3,600 s), one
too short to."""


@st.composite
def boxes(draw: st.DrawFn) -> tuple[list[Cell], list[LoadWindow]]:
    """Cells of a few evals on a few engines and recorded windows, starts and ends drawn from a
    few instants so that ties, shared endpoints, zero lengths and equal names are common."""
    instants = draw(st.lists(st.integers(0, 5_000 * S), min_size=1, max_size=12))

    def interval() -> tuple[int, int]:
        a, b = sorted((draw(st.sampled_from(instants)), draw(st.sampled_from(instants))))
        return a, b

    cells = []
    for k in range(draw(st.integers(0, 40))):
        a, b = interval()
        cells.append(
            Cell(
                uid=f"u{k}",
                eval_name=draw(st.sampled_from(["e1", "e2", "e3"])),
                cell_id=draw(st.sampled_from(["c1", "c2", f"c{k}"])),
                engine=draw(st.sampled_from(["q", "n", None, ""])),
                start_unix_ns=a,
                end_unix_ns=b,
                completion_tokens=draw(st.none() | st.integers(0, 50_000)),
                status=draw(_statuses),
                deadline_s=draw(st.none() | st.floats(1, 3600)),
                workers=draw(st.none() | st.integers(0, 4)),
                source=draw(st.sampled_from(["live", REQUEST_SOURCE])),
                attributes=draw(
                    st.sampled_from([{}, {sc.CELL_QUEUE_WAIT_S: 400.0}, {sc.CELL_QUEUE_WAIT_S: 1}])
                ),
            )
        )
    windows = []
    for k in range(draw(st.integers(0, 8))):
        a, b = interval()
        attributes = draw(st.sampled_from([{}, {sc.EVAL_NAME: "e1"}, {sc.EVAL_NAME: "e2"}]))
        windows.append(
            LoadWindow(
                uid=f"w{k}",
                name=draw(st.sampled_from(["load", "probe level 1", "e1", "e2", "e3 eval on q"])),
                kind=draw(st.sampled_from(["load", "probe", "eval"])),
                engine=draw(st.sampled_from(["q", "n", None])),
                start_unix_ns=a,
                end_unix_ns=b,
                streams=draw(st.none() | st.integers(1, 8)),
                attributes=attributes,
            )
        )
    ordered = draw(st.booleans())
    return (sorted(cells, key=lambda c: c.start_unix_ns) if ordered else cells), windows


def rows_no_baseline_reads(report: NeighbourReport) -> list[CellRate]:
    """The cells a report without per-cell rows keeps: those `no_baseline_reason` reads (the
    cells that ran alone, where they give no baseline)."""
    return [c for c in report.cells if c.baseline] if report.baseline.median is None else []
