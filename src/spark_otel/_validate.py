"""The bounds every number spark-otel reads must keep, in one place and one wording.

Readers (backfill, OTLP JSON, Nsight, the store) and the library's arguments check the same
things: a number is finite, a count is a whole number below 2**53 (past it a float cannot hold
every count, and no eval produced one), a time lands in 2000-2100 (outside it is a unit
mix-up, never a real cell). The checks raise ``ValueError`` naming ``what`` so each caller
adds its own place (``FILE:LINE``, ``table row``) in front.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

from ._clock import NS_PER_S
from ._exceptions import ConfigError

__all__ = [
    "EARLIEST_NS",
    "LATEST_NS",
    "MAX_COUNT",
    "check_cell_arguments",
    "check_count",
    "check_time_ns",
    "finite_number",
    "year_of",
]

MAX_COUNT = 2**53
EARLIEST_NS = int(datetime(2000, 1, 1, tzinfo=UTC).timestamp()) * NS_PER_S
LATEST_NS = int(datetime(2100, 1, 1, tzinfo=UTC).timestamp()) * NS_PER_S


def finite_number(value: Any, what: str) -> float:
    """``value`` as a finite float; booleans, text, NaN and infinities are refused."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{what} is {value!r}, not a number")
    try:
        number = float(value)
    except OverflowError:
        raise ValueError(f"{what} is {value!r}, too large for a number") from None
    if not math.isfinite(number):
        raise ValueError(f"{what} is {value!r}; expected a finite number")
    return number


def check_count(value: Any, what: str) -> int:
    """A whole number 0 <= n < 2**53 (a token count, a worker count)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{what} is {value!r}, not a number")
    if isinstance(value, float) and (not math.isfinite(value) or value != int(value)):
        raise ValueError(f"{what} is {value!r}, not a whole number")
    number = int(value)
    if not 0 <= number < MAX_COUNT:
        raise ValueError(f"{what} is {value!r}; expected a whole number from 0 to 2**53")
    return number


def year_of(ns: int) -> str:
    try:
        # Whole seconds: a float of them rounds 1 ns before 2000 up to 2000.
        return str(datetime.fromtimestamp(ns // NS_PER_S, tz=UTC).year)
    except (OverflowError, ValueError, OSError):
        years = 1970 + ns / NS_PER_S / 31_556_952
        return f"~{years:.3g}" if abs(years) >= 1e6 else f"~{years:.0f}"


def check_time_ns(ns: Any, what: str) -> int:
    """Unix nanoseconds in 2000-2100; anything else names the year it would read as."""
    if isinstance(ns, bool) or not isinstance(ns, int):
        raise ValueError(f"{what} is {ns!r}, not a whole number of nanoseconds")
    if not EARLIEST_NS <= ns < LATEST_NS:
        raise ValueError(f"{what} reads as the year {year_of(ns)}, outside 2000-2100")
    return ns


def check_cell_arguments(
    eval_name: Any,
    cell_id: Any = None,
    *,
    engine: Any = None,
    deadline_s: Any = None,
    workers: Any = None,
    prompt_tokens: Any = None,
    max_tokens: Any = None,
) -> None:
    """`spark_otel.cell`'s arguments, checked before the cell starts: a bad one raises
    `ConfigError` naming it, so a typo fails at once instead of recording a cell no reader can
    place (an empty eval name, a negative ceiling, zero workers)."""
    if not isinstance(eval_name, str) or not eval_name.strip():
        raise ConfigError(f"cell(eval_name={eval_name!r}): expected a non-empty string")
    if cell_id is not None and (not isinstance(cell_id, str) or not cell_id.strip()):
        raise ConfigError(f"cell(cell_id={cell_id!r}): expected a non-empty string or None")
    if engine is not None and (not isinstance(engine, str) or not engine.strip()):
        raise ConfigError(f"cell(engine={engine!r}): expected a non-empty string or None")
    if deadline_s is not None and (
        isinstance(deadline_s, bool)
        or not isinstance(deadline_s, int | float)
        or not math.isfinite(deadline_s)
        or deadline_s <= 0
    ):
        raise ConfigError(f"cell(deadline_s={deadline_s!r}): expected a finite number of seconds > 0")
    if workers is not None and (
        isinstance(workers, bool) or not isinstance(workers, int) or not 1 <= workers < MAX_COUNT
    ):
        raise ConfigError(f"cell(workers={workers!r}): expected a whole number >= 1")
    if prompt_tokens is not None and (
        isinstance(prompt_tokens, bool) or not isinstance(prompt_tokens, int) or prompt_tokens < 0
    ):
        raise ConfigError(f"cell(prompt_tokens={prompt_tokens!r}): expected a whole number >= 0 or None")
    if max_tokens is not None and (
        isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1
    ):
        raise ConfigError(f"cell(max_tokens={max_tokens!r}): expected a whole number >= 1 or None")
