"""Cells built from plain figures, for tests that read what is derived from them; and a recent cell
on an engine, for the probe to match its engine name against."""

from __future__ import annotations

import time
from typing import Any

from spark_otel.model import Cell

S = 1_000_000_000


def cell(
    uid: str,
    start_s: float,
    end_s: float,
    tokens: int | None = None,
    *,
    eval_name: str = "g",
    engine: str | None = "q",
    cell_id: str | None = None,
    workers: int | None = None,
    t0_ns: int = 0,
    **fields: Any,
) -> Cell:
    """A cell of eval g on engine q, ``start_s`` to ``end_s`` seconds after ``t0_ns``, its cell id
    its uid unless given; ``fields`` set the rest (status, prompt tokens, attributes)."""
    return Cell(
        uid=uid,
        eval_name=eval_name,
        cell_id=cell_id or uid,
        engine=engine,
        workers=workers,
        start_unix_ns=t0_ns + int(start_s * S),
        end_unix_ns=t0_ns + int(end_s * S),
        completion_tokens=tokens,
        **fields,
    )


def recent_cell(engine: str) -> Cell:
    """A cell of eval golden on ``engine`` that ended a second ago."""
    now = time.time_ns()
    return Cell(
        uid=f"c-{engine}", eval_name="golden", cell_id="1", engine=engine,
        start_unix_ns=now - 60 * 10**9, end_unix_ns=now - 10**9, completion_tokens=600,
    )  # fmt: skip
