"""Timeout verdicts over columns are `timeout_verdicts`' verdicts, field for field: on the article's
Appendix D (slowed by a load, re-runs, one queued), on cells made to hit each rule's edge and on
generated boxes; the governor's wait, which the columns do not carry, comes from the cut-off
cells' records (`cut_off_uids`)."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.support.article import D_EVAL, appendix_d_cells, appendix_d_loads
from tests.support.cells import cell
from tests.support.neighbour_boxes import boxes

from spark_otel import _semconv as sc
from spark_otel.analysis.request_cells import REQUEST_SOURCE
from spark_otel.analysis.timeouts import (
    TimeoutKind,
    cut_off_uids,
    timeout_verdicts,
    timeout_verdicts_of_columns,
)
from spark_otel.model import Cell, CellStatus, LoadWindow
from spark_otel.records.cell_columns import CellColumns


def both(cells: list[Cell], windows: list[LoadWindow], eval_name: str | None = None) -> list[TimeoutKind]:
    """The verdicts over columns equal the row path's; the kinds, to check the case was met."""
    want = timeout_verdicts(cells, windows, eval_name=eval_name)
    columns = CellColumns.from_cells(cells)
    uids = cut_off_uids(columns, eval_name=eval_name)
    assert uids == [c.uid for c in cells if c.deadline_hit and eval_name in (None, c.eval_name)]
    waits = {c.uid: c.admission_s for c in cells if c.uid in set(uids) and c.admission_s is not None}
    found = timeout_verdicts_of_columns(columns, windows, eval_name=eval_name, admissions=waits)
    assert found == want
    return [v.kind for v in found]


def test_appendix_d_gives_the_same_verdicts() -> None:
    probes, others = appendix_d_loads()
    cells = appendix_d_cells() + others
    assert both(cells, probes, eval_name=D_EVAL) == [TimeoutKind.SLOWED] * 3
    both(cells, probes)
    both(cells, [])
    renamed = [c.model_copy(update={"cell_id": "F #11 correctness"}) for c in cells]  # a re-run
    both(renamed, probes, eval_name=D_EVAL)


def test_every_edge_the_rules_name() -> None:
    hit = CellStatus.DEADLINE
    cells = [
        cell("a", 0, 100, 1000, workers=1),
        cell("b", 0, 100, 1100, workers=1, cell_id="x"),
        cell("c", 200, 400, 2100, workers=1, status=hit, deadline_s=200.0),  # long by itself
        cell("d", 500, 700, None, workers=1, status=hit, cell_id="x"),  # no tokens, ran again after
        cell("e", 800, 900, 1500, workers=1, cell_id="x"),  # the re-run
        cell("f", 900, 1000, 500, workers=1, status=hit, attributes={sc.CELL_QUEUE_WAIT_S: 50}),  # queued
        cell("g", 1100, 1300, None, workers=1, status=hit),  # nothing to judge by
        cell("h", 1100, 1300, None, workers=1, status=hit, source=REQUEST_SOURCE),
        cell("i", 1400, 1400, None, workers=1, status=hit),  # zero length
        cell("n1", 550, 650, 10, eval_name="other", workers=4, engine="n"),
        cell("n2", 2000, 2001, 10, eval_name="alone", workers=1, status=hit),  # an eval without a baseline
        cell("n3", 2000, 2001, 10, eval_name="alone", workers=1),
        cell("n4", 2000, 2001, 10, eval_name="other", workers=1, engine="n"),
    ]
    kinds = both(cells, [])
    assert {TimeoutKind.LONG, TimeoutKind.QUEUED, TimeoutKind.UNKNOWN} <= set(kinds)
    both(cells, [], eval_name="g")
    both(cells, [], eval_name="absent")
    both(list(reversed(cells)), [])  # out of start order
    assert timeout_verdicts_of_columns(CellColumns.empty()) == []


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(box=boxes(), eval_name=st.none() | st.sampled_from(["e1", "e2"]))
def test_generated_boxes_give_the_same_verdicts(
    box: tuple[list[Cell], list[LoadWindow]], eval_name: str | None
) -> None:
    cells, windows = box
    both(cells, windows, eval_name=eval_name)
