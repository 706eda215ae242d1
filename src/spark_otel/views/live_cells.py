"""The cells in flight now, in words: each one's elapsed time, tokens so far and live decode rate
as its runner last published them (`spark_otel.live_progress`), and the deadline-slack law's
verdict it was admitted on (`spark_otel.governor.state.AdmittedOn`), for `spark-otel lanes` and
its JSON (`spark_otel.governor.state.read_lanes` reads the facts). The JSON rounds the verdict's
figures as the cell span does (margin to 4 places, seconds and rates to 3)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..governor.state import AdmittedOn, LaneView
from ..live_progress import LiveProgress

__all__ = ["admitted_on_json", "admitted_on_text", "in_flight_json", "in_flight_table"]

_NOTES = {
    "elapsed s": "model seconds since the cell was admitted",
    "tokens": "completion tokens so far: its finished requests' plus one per chunk of its running streams",
    "live tok/s": "its streams' decode rate over the last 5 real seconds; '-': it has not streamed (no rate "
    "is guessed), or its runner published nothing within the lease",
    "admission verdict": "the deadline-slack law's verdict it started on: why, the protected cell it was "
    "judged against, that cell's projected finish (model s) and margin after the admission, at the rate "
    "used; '-': the law did not judge it (static rules only)",
}

_Row = tuple[str, str | None, LiveProgress | None, AdmittedOn | None]


def _cells(lane: LaneView) -> list[_Row]:
    n = len(lane.in_use)
    live = lane.in_use_live or [None] * n
    ids = lane.in_use_ids or [None] * n
    on = lane.in_use_admitted_on or [None] * n
    return [(c.eval_name, cell_id, p, a) for c, cell_id, p, a in zip(lane.in_use, ids, live, on, strict=True)]


def _round(value: float | None, places: int) -> float | None:
    return None if value is None else round(value, places)


def admitted_on_json(on: AdmittedOn | None) -> dict[str, Any] | None:
    """The verdict as the cell span's ``spark_otel.cell.adaptive.*`` attributes round it."""
    if on is None:
        return None
    return {
        "reason": on.reason,
        "protected_cell": on.protected,
        "projected_finish_s": _round(on.finish_s, 3),
        "margin": _round(on.margin, 4),
        "rate_used_tok_s": _round(on.rate_used, 3),
    }


def admitted_on_text(on: AdmittedOn | None) -> str:
    """One cell of the table: "slack: serial-1 to 1,260 s (margin 30%) at 8.0 tok/s"."""
    if on is None:
        return "-"
    if on.protected is None:
        return on.reason
    text = f"{on.reason}: {on.protected}"
    if on.finish_s is not None:
        text += f" to {on.finish_s:,.0f} s"
    if on.margin is not None:
        text += f" (margin {round(on.margin * 100)}%)"
    if on.rate_used is not None:
        text += f" at {on.rate_used:,.1f} tok/s"
    return text


def in_flight_json(lane: LaneView | None) -> list[dict[str, Any]]:
    """Each cell in use on the lane: eval, cell, and its published progress (nulls where none)."""
    if lane is None:
        return []
    return [
        {
            "eval": eval_name,
            "cell": cell_id,
            "elapsed_s": round(p.elapsed_s, 3) if p is not None else None,
            "tokens": p.tokens if p is not None else None,
            "rate_tok_s": round(p.rate, 3) if p is not None and p.rate is not None else None,
            "admitted_on": admitted_on_json(on),
        }
        for eval_name, cell_id, p, on in _cells(lane)
    ]


def in_flight_table(lanes: Sequence[LaneView]) -> tuple[list[str], list[list[Any]], dict[str, str]]:
    """Headers, rows and notes: one row per cell in use, by engine; the "admission verdict" column only
    where the law judged some cell in flight (static rules alone: nothing to say)."""
    headers = ["engine", "eval", "cell", "elapsed s", "tokens", "live tok/s", "admission verdict"]
    cells = [(lane.engine, row) for lane in lanes for row in _cells(lane)]
    rows = [
        [
            engine,
            eval_name,
            cell_id or "-",
            f"{p.elapsed_s:,.1f}" if p is not None else "-",
            f"{p.tokens:,}" if p is not None and p.tokens is not None else "-",
            f"{p.rate:,.1f}" if p is not None and p.rate is not None else "-",
            admitted_on_text(on),
        ]
        for engine, (eval_name, cell_id, p, on) in cells
    ]
    if all(on is None for _, (_, _, _, on) in cells):
        return (
            headers[:-1],
            [row[:-1] for row in rows],
            {k: v for k, v in _NOTES.items() if k != "admission verdict"},
        )
    return headers, rows, dict(_NOTES)
