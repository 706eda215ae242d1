"""The cells in flight now, in words: each one's elapsed time, tokens so far and live decode rate
as its runner last published them (`spark_otel.live_progress`), for `spark-otel lanes` and its
JSON (`spark_otel.governor.state.read_lanes` reads the facts)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..governor.state import LaneView
from ..live_progress import LiveProgress

__all__ = ["in_flight_json", "in_flight_table"]

_NOTES = {
    "elapsed s": "model seconds since the cell was admitted",
    "tokens": "completion tokens so far: its finished requests' plus one per chunk of its running streams",
    "live tok/s": "its streams' decode rate over the last 5 real seconds; '-': it has not streamed (no rate "
    "is guessed), or its runner published nothing within the lease",
}


def _cells(lane: LaneView) -> list[tuple[str, str | None, LiveProgress | None]]:
    live = lane.in_use_live or [None] * len(lane.in_use)
    ids = lane.in_use_ids or [None] * len(lane.in_use)
    return [(c.eval_name, cell_id, p) for c, cell_id, p in zip(lane.in_use, ids, live, strict=True)]


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
        }
        for eval_name, cell_id, p in _cells(lane)
    ]


def in_flight_table(lanes: Sequence[LaneView]) -> tuple[list[str], list[list[Any]], dict[str, str]]:
    """Headers, rows and notes: one row per cell in use, by engine."""
    headers = ["engine", "eval", "cell", "elapsed s", "tokens", "live tok/s"]
    rows = [
        [
            lane.engine,
            eval_name,
            cell_id or "-",
            f"{p.elapsed_s:,.1f}" if p is not None else "-",
            f"{p.tokens:,}" if p is not None and p.tokens is not None else "-",
            f"{p.rate:,.1f}" if p is not None and p.rate is not None else "-",
        ]
        for lane in lanes
        for eval_name, cell_id, p in _cells(lane)
    ]
    return headers, rows, _NOTES
