"""Backfill: eval records that already exist (JSON, JSON Lines, CSV) as cells with their real times.

mapping   where a record keeps each cell field (`FieldMapping`), and the built-in layouts
records   reading record files and turning each record into a `Cell`
spans     backfilled cells as spans with their historical times
"""

from __future__ import annotations

from .mapping import BUILTIN_MAPPINGS, FieldMapping, load_mapping
from .records import (
    BackfillResult,
    RecordError,
    backfill_files,
    cell_from_record,
    error_lines,
    read_records,
)
from .spans import FixedIdGenerator, export_cells_as_spans

__all__ = [
    "BUILTIN_MAPPINGS",
    "BackfillResult",
    "FieldMapping",
    "FixedIdGenerator",
    "RecordError",
    "backfill_files",
    "cell_from_record",
    "error_lines",
    "export_cells_as_spans",
    "load_mapping",
    "read_records",
]
