"""The verdict of the deadline-slack law each cell in flight was admitted on, as `lanes` shows it
(`views.live_cells`): the projected finish rounded as the cell span rounds it, the margin as a
percentage, a blank for a cell the law did not judge beside one it did, and no column (nor its
note) where it judged none."""

from __future__ import annotations

import re
from typing import Any

from spark_otel.governor.decision import InFlight
from spark_otel.governor.state import AdmittedOn, LaneView
from spark_otel.views.live_cells import admitted_on_json, in_flight_table

JUDGED = AdmittedOn("slack", "serial-1", 0.9, 8.25, 1260.12345)


def _lane(*verdicts: AdmittedOn | None) -> LaneView:
    cells = [InFlight("qwen", f"ev-{i}", None, True) for i in range(len(verdicts))]
    return LaneView(
        engine="qwen",
        in_use=cells,
        waiting=[],
        present=[],
        in_use_ids=[f"c{i}" for i in range(len(verdicts))],
        in_use_admitted_on=list(verdicts),
    )


def _rows(*verdicts: AdmittedOn | None) -> tuple[list[dict[str, Any]], dict[str, str]]:
    headers, rows, notes = in_flight_table([_lane(*verdicts)])
    return [dict(zip(headers, row, strict=True)) for row in rows], notes


def test_the_verdicts_figures_are_rounded_as_the_cell_span_rounds_them() -> None:
    on = admitted_on_json(JUDGED)
    assert on is not None
    assert (on["projected_finish_s"], on["margin"], on["rate_used_tok_s"]) == (1260.123, 0.9, 8.25)


def test_the_margin_is_shown_as_a_percentage() -> None:
    [row], _ = _rows(JUDGED)
    assert re.findall(r"margin (\d+)%", row["admission verdict"]) == ["90"]


def test_a_cell_the_law_did_not_judge_is_blank_beside_one_it_did() -> None:
    rows, notes = _rows(JUDGED, None)
    assert [row["admission verdict"] for row in rows][1] == "-"
    assert "admission verdict" in notes


def test_where_the_law_judged_no_cell_neither_the_column_nor_its_note_is_shown() -> None:
    rows, notes = _rows(None, None)
    assert "admission verdict" not in rows[0]
    assert set(notes) == {"elapsed s", "tokens", "live tok/s"}
