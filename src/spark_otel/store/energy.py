"""The cells' energy as the store keeps it (the ``cell_energy`` table): each cell's share of the
box's GPU energy under `analysis.energy`'s rule, rewritten inside the transaction of every write
that changes it.

Why kept, when rates are derived: a cell's joules are what it cost, and a query of the store
alone (sqlite3, a notebook, a script) should find them on the cell's uid. Why rewritten on write
rather than stamped once: a cell's share depends on the cells beside it and on GPU readings past
its end, which usually arrive later and from another process (the sampler writes readings, the
eval writes cells, a backfill writes cells of long ago). So a write of cells rewrites the rows of
the cells that overlap them, and a write of GPU readings those of the cells whose lifetimes the
new readings (and the one before them) reach. Each is computed from what the store holds in that
transaction: a row always equals what `analysis.energy.attribute` gives over the whole store at
that moment, and a cell has a row once readings cover it from before its start to after its end.

A cell's share needs only the cells that overlap it and the readings around its lifetime, so a
write reads a neighbourhood, not the store: the cells overlapping the written span, every cell
overlapping those, and each GPU's readings from its last one before to its first one after.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import TYPE_CHECKING

from .. import _semconv as sc
from ..model import Cell, EnergyShare, MetricSample
from .schema import CELL_ENERGY, CELLS, GPU_ID_SQL, METRIC_SAMPLES, gpu_readings_index

if TYPE_CHECKING:
    from ..analysis.energy import EnergyReport

__all__ = ["EVERYTHING", "GPU_READINGS", "refresh", "refresh_all", "span_of_cells", "span_of_readings"]

GPU_READINGS = (sc.GPU_ENERGY, sc.GPU_POWER)
"""The samples a cell's energy rests on (`analysis.energy.box_energy`)."""

EVERYTHING = (-(2**63), 2**63 - 1)
"""The span of every cell: a write that changes them all."""

_ALL = object()
_CELL_COLUMNS = ", ".join(CELLS.column_names)
_SAMPLE_COLUMNS = ", ".join(METRIC_SAMPLES.column_names)


def span_of_cells(conn: sqlite3.Connection, cells: Sequence[Cell]) -> tuple[int, int] | None:
    """The time a write of ``cells`` (before it is inserted) can change energy shares in: from the
    first start to the last end, of the cells and of the rows they replace (a cell re-ingested at
    other times leaves its old neighbours); None for no cells."""
    if not cells:
        return None
    low = min(c.start_unix_ns for c in cells)
    high = max(c.end_unix_ns for c in cells)
    uids = list({c.uid for c in cells})
    for k in range(0, len(uids), 500):  # under SQLite's bound-parameter limit
        chunk = uids[k : k + 500]
        marks = ", ".join("?" * len(chunk))
        old_low, old_high = conn.execute(
            f"SELECT min(start_unix_ns), max(end_unix_ns) FROM cells WHERE uid IN ({marks})", chunk
        ).fetchone()
        low = low if old_low is None else min(low, old_low)
        high = high if old_high is None else max(high, old_high)
    return low, high


def span_of_readings(conn: sqlite3.Connection, samples: Sequence[MetricSample]) -> tuple[int, int] | None:
    """The time a write of ``samples`` (already inserted) can change energy shares in: for each
    GPU, from its reading before the first new one to its reading after the last (the stretches
    whose interpolation the new ones change); None when it holds no GPU reading. A GPU's first
    readings ever change every share (the box's energy is summed where all its GPUs have
    readings, `analysis.energy.box_energy`): `EVERYTHING`."""
    new: dict[tuple[str, object], list[int]] = {}
    for s in samples:
        if s.name in GPU_READINGS:
            new.setdefault((s.name, s.attributes.get(sc.GPU_ID)), []).append(s.unix_ns)
    if not new:
        return None
    lows, highs = [], []
    for (name, gpu), times in new.items():
        before = _nearest(conn, name, gpu, min(times) - 1, before=True)
        after = _nearest(conn, name, gpu, max(times) + 1, before=False)
        if before is None and after is None:
            return EVERYTHING
        lows.append(min(times) if before is None else before)
        highs.append(max(times) if after is None else after)
    return min(lows), max(highs)


def _overlapping(conn: sqlite3.Connection, low: int, high: int) -> list[Cell]:
    """Cells that ran inside (low, high) (the end index finds the few that end after low); one that
    only touches it shares no stretch with it."""
    rows = conn.execute(
        f"SELECT {_CELL_COLUMNS} FROM cells INDEXED BY cells_end WHERE end_unix_ns > ? AND start_unix_ns < ?",
        (low, high),
    ).fetchall()
    return [CELLS.record(row) for row in rows]


def _from(name: str, gpu: object = _ALL) -> tuple[str, tuple[object, ...]]:
    """``FROM ... WHERE ...`` for readings of ``name`` (one GPU's, or every GPU's with an id),
    through that metric's GPU index (`schema.gpu_readings_index`), spelled as it is so SQLite
    can use it, and named so it does."""
    clause = f"FROM metric_samples INDEXED BY {gpu_readings_index(name).name} WHERE name = '{name}' AND "
    if gpu is _ALL:
        return clause + f"{GPU_ID_SQL} IS NOT NULL", ()
    if gpu is None:
        return clause + f"{GPU_ID_SQL} IS NULL", ()
    return clause + f"{GPU_ID_SQL} = ?", (gpu,)


def _nearest(conn: sqlite3.Connection, name: str, gpu: object, t: int, *, before: bool) -> int | None:
    """The time of one GPU's last reading of ``name`` at or before ``t`` (or its first at or after)."""
    aggregate, compare = ("max", "<=") if before else ("min", ">=")
    where, params = _from(name, gpu)
    found: int | None = conn.execute(
        f"SELECT {aggregate}(unix_ns) {where} AND unix_ns {compare} ?", (*params, t)
    ).fetchone()[0]
    return found


def _gpus(conn: sqlite3.Connection, name: str) -> list[object]:
    """The GPUs that have readings of ``name``, one index seek each (None: readings naming none)."""
    found: list[object] = []
    where, _ = _from(name, None)
    if conn.execute(f"SELECT 1 {where} LIMIT 1").fetchone():
        found.append(None)
    where, _ = _from(name)
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
            where, params = _from(name, gpu)
            rows = conn.execute(
                f"SELECT {_SAMPLE_COLUMNS} {where} AND unix_ns BETWEEN ? AND ?",
                (*params, low if lower is None else lower, high if upper is None else upper),
            )
            out += [METRIC_SAMPLES.record(row) for row in rows]
    return out


def _attribute(cells: Sequence[Cell], readings: Sequence[MetricSample]) -> EnergyReport | None:
    # Imported here: the analysis package is not needed to record cells, only to price them.
    from ..analysis.energy import attribute

    return attribute(cells, readings)


def refresh(conn: sqlite3.Connection, span: tuple[int, int] | None) -> int:
    """Rewrite the energy rows of the cells whose lifetime meets ``span``, inside the caller's
    write transaction; returns how many cells have energy after it."""
    if span is None:
        return 0
    targets = _overlapping(conn, *span)
    if not targets:
        return 0
    low = min(c.start_unix_ns for c in targets)
    high = max(c.end_unix_ns for c in targets)
    report = _attribute(_overlapping(conn, low, high), _readings(conn, low, high))
    return _rewrite(conn, {c.uid for c in targets}, report)


def refresh_all(conn: sqlite3.Connection) -> int:
    """Rewrite every cell's energy row (a migrated store's first), inside the caller's transaction."""
    return refresh(conn, EVERYTHING)


def _rewrite(conn: sqlite3.Connection, uids: set[str], report: EnergyReport | None) -> int:
    shares = (
        []
        if report is None
        else [
            EnergyShare(cell_uid=c.uid, box_j=c.box_j, share_j=c.share_j, estimated=report.estimated)
            for c in report.cells
            if c.uid in uids and c.box_j is not None and c.share_j is not None
        ]
    )
    gone = uids - {s.cell_uid for s in shares}
    conn.executemany("DELETE FROM cell_energy WHERE cell_uid = ?", [(uid,) for uid in gone])
    conn.executemany(CELL_ENERGY.insert_sql, [CELL_ENERGY.row(s) for s in shares])
    return len(shares)
