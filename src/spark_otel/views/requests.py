"""Requests in words: what ``spark-otel requests`` lists (one row per request, like ``cells``), the
line every answer adds when some of its cells are requests standing in for cells, and the refusal
of a command that found no cells, naming what the store does hold and the command that reads it."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from .._clock import NS_PER_S
from ..analysis.request_cells import request_engine, request_eval, request_status
from ..model import Cell, Request

__all__ = [
    "REQUESTS_COMMAND",
    "cell_label",
    "no_cells",
    "outside_cells_hint",
    "requests_as_cells_line",
    "requests_as_cells_phrase",
    "requests_json",
    "requests_list",
    "requests_outside_cells_hint",
    "requests_title",
]

REQUESTS_COMMAND = "spark-otel requests"

_PRIORITIES = (0, 0, 1, 3, 2, 0, 2, 1, 1, 0, 3, 4, 2)
"""Which columns a narrow terminal leaves out first (highest first): the eval, the request, its
status and rate always stay; then tokens and time, the cell and engine, the model and first
chunk, then the start."""

_HOLDINGS = (
    ("cells", "cell", "spark-otel cells"),
    ("requests", "request", REQUESTS_COMMAND),
    ("load_windows", "load window", "spark-otel report"),
    ("metric_samples", "metric sample", "spark-otel instruments"),
    ("documents", "probe document", "spark-otel report"),
)
"""A table of the store, its noun, and the command that reads it."""


def requests_as_cells_phrase(n: int, of: int) -> str:
    """ "7 of the 8 cells are requests no cell() recorded" (or "all 7 cells are ...")."""
    which = f"all {of:,} cells" if n == of else f"{n:,} of the {of:,} cells"
    return f"{which} are requests no cell() recorded"


def requests_as_cells_line(n: int, of: int) -> str | None:
    """The line an answer adds where ``n`` of its ``of`` cells are requests standing in for cells;
    None where none are."""
    if not n:
        return None
    return (
        f"requests standing in for cells: {requests_as_cells_phrase(n, of)}, each counted as a cell of "
        "its own, grouped into evals by SPARK_OTEL_EVAL or the service name (else by engine); their "
        f"ceiling and worker count are unknown. `{REQUESTS_COMMAND}` lists them"
    )


def no_cells(
    source: str,
    counts: Mapping[str, int],
    *,
    scope: str = "",
    evals: Sequence[str] = (),
    stand_ins: int = 0,
    what: str = "cells",
) -> str:
    """The refusal of a command with no ``what`` to answer from (``scope``: " of eval 'x'" or " on
    engine 'y'"): what ``source`` does hold (``counts``: `Store.row_counts`; ``evals``: the evals
    it holds; ``stand_ins``: its requests no cell holds) and the command that reads each."""
    held = []
    for table, noun, command in _HOLDINGS:
        n = counts.get(table, 0)
        if n:
            aside = f"{stand_ins:,} outside any cell, standing in for cells: " if table == "requests" else ""
            held.append(f"{n:,} {noun}{'' if n == 1 else 's'} ({aside}`{command}`)")
    message = f"{source}: no {what}{scope}"
    if not held:
        return (
            f"{message}; nothing is recorded there: instrument an eval (spark_otel.instrument(), with "
            "spark_otel.cell() per cell) or run `spark-otel backfill` first"
        )
    message += f"; it holds {', '.join(held)}"
    if evals:
        message += f"; evals: {', '.join(evals)}"
    if not (counts.get("cells") or stand_ins):
        message += "; to answer, instrument an eval or run `spark-otel backfill`"
    return message


def cell_label(cell_id: str, *, request_as_cell: bool) -> str:
    """A cell's id in a list of cells, marked where the cell is a request standing in for one."""
    return f"{cell_id} (request)" if request_as_cell else cell_id


def requests_outside_cells_hint(n: int) -> str | None:
    """What ``spark-otel cells`` adds where it lists no cell and the store holds ``n`` requests no
    cell holds; None where it holds none."""
    if not n:
        return None
    return (
        f"no cells here, but the store holds {n:,} request{'' if n == 1 else 's'} outside any cell: "
        f"`{REQUESTS_COMMAND}` lists them, and the answers count each as a cell of its own"
    )


def requests_title(n: int, outside: int) -> str:
    """The title of ``spark-otel requests``' list: how many, and how many no cell holds."""
    return f"{n:,} most recent requests, {outside:,} outside any cell"


def outside_cells_hint(standing: int, in_loads: int) -> str | None:
    """What the answers do with the listed requests no cell holds: ``standing`` count as cells of
    their own, ``in_loads`` are a recorded load's; None where there are neither."""
    parts = []
    if standing:
        parts.append(
            f"{standing:,} of these requests no cell holds (cell: none): concurrency, neighbour-cost, "
            "advise, timeouts and report count each as a cell of its own, standing in for a cell"
        )
    if in_loads:
        parts.append(
            f"{in_loads:,} ran inside a recorded load or probe window on their engine (cell: load), "
            "which counts them as load"
        )
    return "; ".join(parts) or None


def _when(unix_ns: int) -> str:
    return datetime.fromtimestamp(unix_ns / NS_PER_S, UTC).strftime("%Y-%m-%d %H:%M:%S")


def _eval_and_engine(request: Request, engine_urls: Mapping[str, str]) -> tuple[str, str | None]:
    engine = request_engine(request, engine_urls)
    return request_eval(request, engine), engine


def _cell_column(request: Request, cells: Mapping[str, Cell], standing: Collection[str]) -> str:
    cell = cells.get(request.cell_uid) if request.cell_uid else None
    if cell is not None:
        return cell.cell_id
    return "none" if request.uid in standing else "load"


def requests_list(
    requests: Sequence[Request],
    cells: Mapping[str, Cell],
    engine_urls: Mapping[str, str],
    standing: Collection[str],
) -> tuple[list[str], list[list[str]], tuple[int, ...]]:
    """The columns, one row per request, and each column's priority in a narrow terminal. The
    cell column: its cell's id (``cells`` by uid), "none" where it stands in for a cell (its uid in
    ``standing``), else "load" (it ran inside a recorded load or probe window, which counts it)."""
    columns = [
        "eval",
        "request",
        "cell",
        "engine",
        "model",
        "status",
        "prompt tok",
        "output tok",
        "elapsed s",
        "tok/s",
        "first chunk s",
        "started (UTC)",
        "stream",
    ]
    rows = []
    for r in requests:
        eval_name, engine = _eval_and_engine(r, engine_urls)
        rate = r.output_tokens / r.elapsed_s if r.output_tokens and r.elapsed_s > 0 else None
        rows.append(
            [
                eval_name,
                r.uid,
                _cell_column(r, cells, standing),
                engine or "",
                r.response_model or r.request_model or "",
                request_status(r).value,
                "" if r.input_tokens is None else str(r.input_tokens),
                "" if r.output_tokens is None else str(r.output_tokens),
                f"{r.elapsed_s:.2f}",
                "-" if rate is None else f"{rate:.2f}",
                "-" if r.time_to_first_chunk_s is None else f"{r.time_to_first_chunk_s:.3f}",
                _when(r.start_unix_ns),
                "yes" if r.streaming else "no",
            ]
        )
    return columns, rows, _PRIORITIES


def requests_json(
    requests: Sequence[Request],
    cells: Mapping[str, Cell],
    engine_urls: Mapping[str, str],
    standing: Collection[str],
) -> list[dict[str, Any]]:
    """The requests as the store keeps them, each with the eval and engine it counts in, its status
    as a cell's, its cell's id (None: in no stored cell), whether it stands in for a cell (its uid
    in ``standing``) and its elapsed time."""
    out = []
    for r in requests:
        eval_name, engine = _eval_and_engine(r, engine_urls)
        cell = cells.get(r.cell_uid) if r.cell_uid else None
        out.append(
            r.model_dump(mode="json")
            | {
                "eval": eval_name,
                "counted_engine": engine,
                "status": request_status(r).value,
                "cell_id": None if cell is None else cell.cell_id,
                "stands_in_for_cell": r.uid in standing,
                "elapsed_s": r.elapsed_s,
            }
        )
    return out
