"""Inspect samples the live hook already recorded: a backfilled sample takes the stored cell's uid,
so writing it replaces that cell instead of adding a second one beside it.

The live Inspect hook and the log reader both mark a cell with the sample's uuid
(``spark_otel.inspect.sample_uuid``, Inspect's ``EvalSample.uuid``); a backfilled cell whose
uuid a stored cell carries takes that cell's uid and trace. The log's version wins for what the
sample measured (Inspect's own timestamps, tokens, status, working time and waits, and the time
budget they give). What only the live cell knew stays: its requests (linked by the uid and trace
kept); its names, unless the backfill names them (the engine's host, which a log whose model URL
came from the environment does not record; an eval named in the eval's metadata); the
concurrency Inspect adapted to; the grader's tokens, the retries and the governor's wait.

A live cell recorded on a model clock (``spark_otel.time_scale`` other than 1: a run against a
simulated engine) is kept as it is: the log's real times would leave its requests behind.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ... import _semconv as sc
from ...model import Cell
from ...store import Store

__all__ = ["LiveAdoption", "adopt_live_cells"]

_LOG_DECIDES = frozenset({sc.CELL_BUDGET_SCORING_S, sc.TIME_SCALE, sc.ERROR_TYPE})
"""The live cell's attributes the log's version replaces even where the log has none: its time
budget (the log's phases add up to the log's elapsed time), its clock and its outcome."""


@dataclass
class LiveAdoption:
    """The cells to write, and how many replace a live one or were left to the live one."""

    cells: list[Cell] = field(default_factory=list)
    replaced_live: int = 0
    """Cells that take the uid of a cell the live hook recorded (each replaces that cell)."""
    kept_live: int = 0
    """Samples the live hook recorded on a model clock: left as recorded, the log's not written."""
    superseded: list[str] = field(default_factory=list)
    """The uids the log's cells would have had where a stored cell's uid is taken instead: a cell
    stored under one (a backfill from before the live cells were marked) is the same sample twice,
    and goes (`Store.write_cells`'s ``replacing``)."""


def adopt_live_cells(
    cells: Sequence[Cell], store: Store, *, eval_named: bool = False, engine_named: bool = False
) -> LiveAdoption:
    """``cells`` with each Inspect sample that ``store`` already holds given the stored cell's uid
    (and what only it knew); the others as they are. ``eval_named`` and ``engine_named``: the
    backfill named the eval or the engine (``--eval``, ``--engine``), and its names win."""
    uuids = [u for c in cells if isinstance(u := c.attributes.get(sc.INSPECT_SAMPLE_UUID), str)]
    stored: dict[str, list[Cell]] = {}
    for found in store.cells_with_attribute(sc.INSPECT_SAMPLE_UUID, uuids):
        stored.setdefault(str(found.attributes[sc.INSPECT_SAMPLE_UUID]), []).append(found)
    adoption = LiveAdoption()
    for c in cells:
        uuid = c.attributes.get(sc.INSPECT_SAMPLE_UUID)
        candidates = stored.get(uuid, []) if isinstance(uuid, str) else []
        # The live cell first, then one a backfill already gave the live cell's uid.
        before = max(candidates, key=lambda s: (s.source == "live", s.uid != c.uid), default=None)
        if before is None or before.uid == c.uid:
            adoption.cells.append(c)
            continue
        adoption.superseded.append(c.uid)
        if before.attributes.get(sc.TIME_SCALE, 1.0) != 1.0:
            adoption.kept_live += 1
            continue
        adoption.replaced_live += int(before.source == "live")
        kept = {k: v for k, v in before.attributes.items() if k not in _LOG_DECIDES}
        update = {
            "uid": before.uid,
            "trace_id": before.trace_id,
            "eval_name": c.eval_name if eval_named else before.eval_name,
            "engine": c.engine if engine_named else before.engine,
            "workers": before.workers if before.workers is not None else c.workers,
            "attributes": kept | c.attributes,
        }
        adoption.cells.append(c.model_copy(update=update))
    return adoption
