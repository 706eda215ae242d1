"""How a row left out of an export is described: the bad value quoted, one line per table.

Shared by the metadata tables and the row scans, so every ``skipped`` line reads the same way.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["left_out", "not_integer", "shown"]


def shown(value: Any) -> str:
    """A database value as a message quotes it: NULL, a blob's size, text cut short."""
    if value is None:
        return "NULL"
    if isinstance(value, bytes):
        return f"a {len(value)}-byte blob"
    if isinstance(value, str):
        return repr(value if len(value) <= 40 else value[:40] + "...")
    return repr(value)


def not_integer(column: str, value: Any) -> str | None:
    return None if isinstance(value, int) else f"{column} is {shown(value)}, not an integer"


def left_out(path: Path, table: str, rowid: Any, problem: str, *, bad: int, total: int | None) -> str:
    """``FILE: TABLE row N: what is wrong (k rows of n left out)``: one line for all the rows."""
    where = f"{table} row {rowid}" if rowid is not None else table
    of = f" of {total:,}" if total is not None else ""
    return f"{path}: {where}: {problem} ({bad:,} row{'s' if bad != 1 else ''}{of} left out)"
