"""The one swallow-and-log boundary that instrumentation code runs under.

Instrumentation lives inside the user's eval; its own failures must never reach the user's
call. `guard` catches ``Exception`` (never ``BaseException``, so cancellation still passes),
logs the first failure of each kind at WARNING and the rest at DEBUG.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

_logger = logging.getLogger("spark_otel")
_warned: set[str] = set()


@contextmanager
def guard(what: str) -> Iterator[None]:
    try:
        yield
    except Exception:
        if what in _warned:
            _logger.debug("spark_otel: %s failed", what, exc_info=True)
        else:
            _warned.add(what)
            _logger.warning("spark_otel: %s failed; the call goes on untouched", what, exc_info=True)
