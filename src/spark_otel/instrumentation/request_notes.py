"""Notes a caller attaches to the next instrumented request in its context.

`stream_with_deadline` closes a stream when the deadline passes; the request span should say
it was cut off at a deadline (not merely closed) and how many findings were salvaged. The
helper opens `request_notes()` around its call; the instrumentation picks the notes up when
the request starts and applies them when the request's span finalizes.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from ..model import AttributeValue

__all__ = ["RequestNotes", "current_request_notes", "request_notes"]


@dataclass
class RequestNotes:
    error_type: str | None = None
    """Overrides the ``error.type`` the instrumentation would set (e.g. ``deadline``)."""
    attributes: dict[str, AttributeValue] = field(default_factory=dict)
    """Set on the request span at finalization."""


_current: contextvars.ContextVar[RequestNotes | None] = contextvars.ContextVar(
    "spark_otel_request_notes", default=None
)


def current_request_notes() -> RequestNotes | None:
    return _current.get()


@contextmanager
def request_notes() -> Iterator[RequestNotes]:
    notes = RequestNotes()
    token = _current.set(notes)
    try:
        yield notes
    finally:
        _current.reset(token)
