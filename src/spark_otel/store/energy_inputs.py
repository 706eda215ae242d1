"""What a cell's GPU energy rests on, read from the store: the cells that ran beside it and each
GPU's readings around its lifetime. The store only reads them; `analysis.energy.attribute` prices
them, on read, wherever a cell's energy is shown (so it is never stale and never written).

A cell's share needs only the cells that overlap it and the readings around its lifetime, so a
read takes a neighbourhood, not the store: the cells overlapping the named ones, every cell
overlapping those, and each GPU's readings from its last one before to its first one after.
Priced, those give each named cell exactly the share it has over the whole store.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from .. import _semconv as sc
from ..model import Cell, MetricSample
from .schema import CELLS, GPU_ID_SQL, METRIC_SAMPLES, gpu_readings_index

__all__ = ["EVERYTHING", "GPU_READINGS", "neighbourhood"]

GPU_READINGS = (sc.GPU_ENERGY, sc.GPU_POWER)
"""The samples a cell's energy rests on (`analysis.energy.box_energy`)."""

EVERYTHING = (-(2**63), 2**63 - 1)
"""The span of every cell."""

_ALL = object()
_CELL_COLUMNS = ", ".join(CELLS.read_names)
_SAMPLE_COLUMNS = ", ".join(METRIC_SAMPLES.read_names)


def neighbourhood(
    conn: sqlite3.Connection, cell_uids: Sequence[str] | None
) -> tuple[list[Cell], list[MetricSample]]:
    """The cells and GPU readings the energy of ``cell_uids`` (every cell for None) rests on;
    nothing for no named cell the store holds."""
    span = EVERYTHING if cell_uids is None else _span_of(conn, cell_uids)
    if span is None:
        return [], []
    cells = _overlapping(conn, *span)
    if not cells:
        return [], []
    low = min(c.start_unix_ns for c in cells)
    high = max(c.end_unix_ns for c in cells)
    return cells, _readings(conn, low, high)


def _span_of(conn: sqlite3.Connection, uids: Sequence[str]) -> tuple[int, int] | None:
    """From the first start to the last end of the cells ``uids``; None where it holds none."""
    low: int | None = None
    high: int | None = None
    unique = list(dict.fromkeys(uids))
    for k in range(0, len(unique), 500):  # under SQLite's bound-parameter limit
        chunk = unique[k : k + 500]
        marks = ", ".join("?" * len(chunk))
        first, last = conn.execute(
            f"SELECT min(start_unix_ns), max(end_unix_ns) FROM cells WHERE uid IN ({marks})", chunk
        ).fetchone()
        if first is not None:
            low = first if low is None else min(low, first)
            high = last if high is None else max(high, last)
    return None if low is None or high is None else (low, high)


def _indexed_by(conn: sqlite3.Connection, index: str) -> str:
    """``INDEXED BY index`` where the store has it (schema 3 on), so SQLite takes the index these
    reads are shaped for; nothing in a store a reader opened before migration, which lacks it."""
    found = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'index' AND name = ?", (index,)).fetchone()
    return f"INDEXED BY {index}" if found else ""


def _overlapping(conn: sqlite3.Connection, low: int, high: int) -> list[Cell]:
    """Cells that ran inside (low, high) (the end index finds the few that end after low); one that
    only touches it shares no stretch with it."""
    rows = conn.execute(
        f"SELECT {_CELL_COLUMNS} FROM cells {_indexed_by(conn, 'cells_end')} "
        "WHERE end_unix_ns > ? AND start_unix_ns < ?",
        (low, high),
    )
    return CELLS.records(rows)


def _from(conn: sqlite3.Connection, name: str, gpu: object = _ALL) -> tuple[str, tuple[object, ...]]:
    """``FROM ... WHERE ...`` for readings of ``name`` (one GPU's, or every GPU's with an id),
    through that metric's GPU index (`schema.gpu_readings_index`), spelled as it is so SQLite
    can use it, and named so it does."""
    clause = (
        f"FROM metric_samples {_indexed_by(conn, gpu_readings_index(name).name)} WHERE name = '{name}' AND "
    )
    if gpu is _ALL:
        return clause + f"{GPU_ID_SQL} IS NOT NULL", ()
    if gpu is None:
        return clause + f"{GPU_ID_SQL} IS NULL", ()
    return clause + f"{GPU_ID_SQL} = ?", (gpu,)


def _nearest(conn: sqlite3.Connection, name: str, gpu: object, t: int, *, before: bool) -> int | None:
    """The time of one GPU's last reading of ``name`` at or before ``t`` (or its first at or after)."""
    aggregate, compare = ("max", "<=") if before else ("min", ">=")
    where, params = _from(conn, name, gpu)
    found: int | None = conn.execute(
        f"SELECT {aggregate}(unix_ns) {where} AND unix_ns {compare} ?", (*params, t)
    ).fetchone()[0]
    return found


def _gpus(conn: sqlite3.Connection, name: str) -> list[object]:
    """The GPUs that have readings of ``name``, one index seek each (None: readings naming none)."""
    found: list[object] = []
    where, _ = _from(conn, name, None)
    if conn.execute(f"SELECT 1 {where} LIMIT 1").fetchone():
        found.append(None)
    where, _ = _from(conn, name)
    gpu = conn.execute(f"SELECT min({GPU_ID_SQL}) {where}").fetchone()[0]
    while gpu is not None:
        found.append(gpu)
        gpu = conn.execute(f"SELECT min({GPU_ID_SQL}) {where} AND {GPU_ID_SQL} > ?", (gpu,)).fetchone()[0]
    return found


def _readings(conn: sqlite3.Connection, low: int, high: int) -> list[MetricSample]:
    """Each GPU's energy and power readings from its last one at or before ``low`` to its first one
    at or after ``high`` (those inside where it has none beyond): all `box_energy` reads of them
    for cells inside [low, high]."""
    out: list[MetricSample] = []
    for name in GPU_READINGS:
        for gpu in _gpus(conn, name):
            lower = _nearest(conn, name, gpu, low, before=True)
            upper = _nearest(conn, name, gpu, high, before=False)
            where, params = _from(conn, name, gpu)
            rows = conn.execute(
                f"SELECT {_SAMPLE_COLUMNS} {where} AND unix_ns BETWEEN ? AND ?",
                (*params, low if lower is None else lower, high if upper is None else upper),
            )
            out += METRIC_SAMPLES.records(rows)
    return out
