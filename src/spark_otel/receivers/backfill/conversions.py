"""A record's values as a cell's: numbers, counts, times and flags, each refused with a message
naming the field where it does not fit. The one place these rules live: a record read on its own
(`records.cell_from_record`) and a file's records read a field at a time (`columns`) both use them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from ... import _semconv as sc
from ..._clock import NS_PER_S
from ..._validate import EARLIEST_NS, LATEST_NS, MAX_COUNT, year_of
from ...model import AttributeValue, CellStatus

__all__ = [
    "BUDGET_SLACK",
    "FLAG_WORDS",
    "MAX_ELAPSED_S",
    "SECONDS_PER_UNIT",
    "UNIT_HINT",
    "cell_attributes",
    "check_era",
    "count",
    "flag",
    "iso_ns",
    "number",
    "short",
    "time_ns",
    "unix_ns",
]

SECONDS_PER_UNIT = {"s": 1.0, "ms": 1e-3, "ns": 1e-9}
"""Seconds in one of each ``elapsed_unit`` (the unit of every duration field)."""

UNIT_HINT = "is elapsed_unit right?"
"""What a time made from an elapsed time that lands outside 2000-2100 most likely means."""

BUDGET_SLACK = 1e-3
"""The share (and seconds) by which a record's first-token and decode times may pass its elapsed
time, for rounding in the record: more is a unit mistake."""

MAX_ELAPSED_S = (LATEST_NS - EARLIEST_NS) / NS_PER_S
"""The longest elapsed time a cell can have and still start and end in 2000-2100."""

FLAG_WORDS = ("1", "true", "yes", "y", "t")
"""A flag written as text is true for these (stripped, any case)."""


def number(value: Any, what: str) -> float:
    if isinstance(value, bool):
        raise ValueError(f"{what} is a boolean, not a number")
    if isinstance(value, dict | list):
        raise ValueError(f"{what} is {short(value)}, not a number")
    try:
        found = float(value) if isinstance(value, int | float) else float(str(value).replace(",", "").strip())
    except OverflowError:
        raise ValueError(f"{what} is {short(value)}, too large for a number") from None
    except ValueError:
        raise ValueError(f"{what} is {short(value)}, not a number") from None
    if not math.isfinite(found) or found < 0:
        raise ValueError(f"{what} is {short(value)}; expected a finite, non-negative number")
    return found


def short(value: Any, most: int = 40) -> str:
    """``repr(value)``, cut to ``most`` characters: a message stays one readable line."""
    text = repr(value)
    return text if len(text) <= most else text[: most - 3] + "..."


def count(value: Any, what: str) -> int:
    """A count: a whole number from 0 to 2**53 (past it a float cannot hold every count)."""
    found = number(value, what)
    if found != int(found):
        raise ValueError(f"{what} is {short(value)}, not a whole number")
    if found >= MAX_COUNT:
        raise ValueError(f"{what} is {short(value)}; expected a whole number from 0 to 2**53")
    return int(found)


def time_ns(value: Any, what: str) -> int:
    """ISO 8601 (naive means UTC) or a Unix time in s, ms, µs or ns (told apart by magnitude).

    A time outside 2000-2100 is refused rather than guessed at: it means a unit this cannot
    tell apart, and a cell placed decades off would corrupt every window it lands in.
    """
    ns = _parse_time_ns(value, what)
    check_era(ns, f"{what} {short(value)}")
    return ns


def check_era(ns: int, what: str, hint: str = "expected ISO 8601 or Unix seconds, ms, µs or ns") -> None:
    if not EARLIEST_NS <= ns < LATEST_NS:
        raise ValueError(f"{what} reads as the year {year_of(ns)}, outside 2000-2100; {hint}")


def _parse_time_ns(value: Any, what: str) -> int:
    if isinstance(value, str):
        text = value.strip()
        try:
            found: float | None = float(text)
        except ValueError:
            found = None
        if found is None:
            try:
                return iso_ns(text)
            except ValueError:
                raise ValueError(f"{what} is {short(value)}, neither ISO 8601 nor a Unix time") from None
        value = found
    return unix_ns(number(value, what))


def iso_ns(text: str) -> int:
    """An ISO 8601 time (stripped; naive means UTC) in Unix ns, to the µs; ValueError if it is none."""
    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return round(moment.timestamp() * 1_000_000) * 1000


def unix_ns(seconds_or_finer: float) -> int:
    """A Unix time in s, ms, µs or ns (a finite number >= 0), told apart by magnitude, in ns."""
    if seconds_or_finer >= 1e17:
        return int(seconds_or_finer)
    if seconds_or_finer >= 1e14:
        return round(seconds_or_finer * 1_000)
    if seconds_or_finer >= 1e11:
        return round(seconds_or_finer * 1_000_000)
    return round(seconds_or_finer * NS_PER_S)


def flag(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in FLAG_WORDS
    return bool(value)


MAPPING_ATTRIBUTE = "spark_otel.backfill.mapping"
"""The attribute naming the mapping a backfilled cell was read with."""


def cell_attributes(
    mapping_name: str, mapped: Iterable[tuple[str, Any]], status: CellStatus, queue_wait: float | None
) -> dict[str, AttributeValue]:
    """The mapping's name, the record's scalar attribute fields (``mapped``: each attribute's
    name and the value its path found) and its queue wait, and ``error.type`` as a live cell
    records it (cells.py): its span, and so the cell stored from it, carry it."""
    attributes: dict[str, AttributeValue] = {MAPPING_ATTRIBUTE: mapping_name}
    for attr, value in mapped:
        if isinstance(value, str | int | float | bool):
            attributes[attr] = value
    if queue_wait is not None:
        attributes[sc.CELL_QUEUE_WAIT_S] = queue_wait
    if status is CellStatus.DEADLINE:
        attributes[sc.ERROR_TYPE] = sc.ERROR_TYPE_DEADLINE
    elif status is CellStatus.ERROR:
        attributes.setdefault(sc.ERROR_TYPE, sc.ERROR_TYPE_OTHER)
    return attributes
