"""The one swallow-and-log boundary that instrumentation code runs under.

Instrumentation lives inside the user's eval; its own failures must never reach the user's
call. `guard` catches ``Exception`` (never ``BaseException``, so cancellation still passes),
logs the first failure of each kind at WARNING and the rest at DEBUG. Hot paths that cannot
afford a generator per call catch ``Exception`` themselves and hand it to `report_failure`,
which shares the same once-per-kind record.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

from ._exceptions import SparkOtelError

__all__ = ["guard", "report_failure", "warn_once"]

_logger = logging.getLogger("spark_otel")
_warned: set[str] = set()


def report_failure(what: str, exc: BaseException) -> None:
    """Log the first failure of kind ``what`` at WARNING, the rest at DEBUG. One of spark-otel's
    own errors already says what is wrong with what input (an unusable store names its file), so
    it is one line; anything else is a bug, logged with its traceback."""
    if what in _warned:
        _logger.debug("spark_otel: %s failed", what, exc_info=exc)
        return
    _warned.add(what)
    if isinstance(exc, SparkOtelError):
        _logger.warning("spark_otel: %s failed; the call goes on untouched: %s", what, exc)
    else:
        _logger.warning("spark_otel: %s failed; the call goes on untouched", what, exc_info=exc)


def warn_once(what: str, message: str) -> None:
    """Log ``message`` at WARNING the first time ``what`` happens in this process, at DEBUG after:
    a setting spark-otel replaced, say, is named once, not on every cell."""
    if what in _warned:
        _logger.debug("spark_otel: %s", message)
        return
    _warned.add(what)
    _logger.warning("spark_otel: %s", message)


@contextmanager
def guard(what: str) -> Iterator[None]:
    try:
        yield
    except Exception as exc:
        report_failure(what, exc)
