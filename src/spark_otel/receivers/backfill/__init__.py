"""Backfill: eval records that already exist (JSON, JSON Lines, CSV, Inspect logs) as cells.

mapping     where a record keeps each cell field (`FieldMapping`), and the built-in layouts
values      where a field's value comes from: paths, templates, the enclosing document, sums, literals
conversions a record's numbers, counts, times and flags as a cell's, each refused naming its field
records     reading record files (regular files, under a cap) and turning each record into a `Cell`
columns     a file's records a field at a time, into a `CellBatch`; what does not plainly read, to `records`
inspect_log Inspect AI's logs (.eval, .json): one cell per sample and epoch
live_cells  Inspect samples the live hook already recorded: the log's cell takes the stored uid
lm_eval     lm-eval's --log_samples files, recognised and refused with what they lack
spans       backfilled cells as spans with their historical times
"""

from __future__ import annotations

from .live_cells import LiveAdoption, adopt_live_cells
from .mapping import BUILTIN_MAPPINGS, INSPECT, BuiltinReader, FieldMapping, Layout, load_mapping
from .records import (
    BackfillResult,
    RecordError,
    backfill_files,
    cell_from_record,
    error_lines,
    read_records,
)
from .spans import FixedIdGenerator, UnsentCounter, export_cells_as_spans

__all__ = [
    "BUILTIN_MAPPINGS",
    "INSPECT",
    "BackfillResult",
    "BuiltinReader",
    "FieldMapping",
    "FixedIdGenerator",
    "Layout",
    "LiveAdoption",
    "RecordError",
    "UnsentCounter",
    "adopt_live_cells",
    "backfill_files",
    "cell_from_record",
    "error_lines",
    "export_cells_as_spans",
    "load_mapping",
    "read_records",
]
