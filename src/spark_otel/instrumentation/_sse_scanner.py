"""What a raw ``/v1/*`` event stream said, watched without parsing it as it passes.

The raw httpx layer sees bytes, not SDK chunks. Parsing every chunk's JSON would cost more than
the rest of the instrumentation together, so the scanner takes the events from the shared
decoder (`spark_otel.wire.sse`), counts and times them, and keeps references to the few that
matter: the first chunk (id and model), chunks that carry a finish reason, the usage chunk and
an error event. Those are decoded once, at finalize (`SseScanner.summary`). Content events are
kept only when content capture is on.

A stream of one choice says its finish reason and usage in its last events (vLLM sends the
finish chunk, then the usage chunk, then ``[DONE]``; llama.cpp and SGLang one final chunk with
both), so for it the scanner keeps the last few events and looks for them there at the end,
instead of searching every event (the search was a third of the scanner's cost per chunk).
With several choices, which finish at different times, every event is searched as it comes.
"""

from __future__ import annotations

import json
import re
from array import array
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from .._clock import real_monotonic_ns
from ..wire.chunks import error_event_type
from ..wire.sse import DONE, SseDecoder

__all__ = ["SseScanner", "SseSummary"]

# An event matters when a key is followed (after at most one space) by a value that is not null:
# ``"finish_reason":"stop"``, ``"usage": {...}``. One regex scan per event finds either; only an
# event it matches (a few per stream) is then checked key by key.
_FINISH_KEY = b'"finish_reason":'
_USAGE_KEY = b'"usage":'
_MARKED = re.compile(rb'"(?:usage": ?\{|finish_reason": ?")')
# vLLM's mid-stream error event is ``{"error": {...}}``; older releases send the error response
# itself, ``{"object": "error", "message": ..., "type": ..., "code": ...}`` (``object`` first).
_ERROR_PREFIXES = (b'{"error"', b'{"object":"error"', b'{"object": "error"')
_SPECIAL_PREFIXES = (DONE, *_ERROR_PREFIXES)
_TAIL_EVENTS = 8
"""Events kept from the end of a one-choice stream: its finish and usage chunks are among them."""


@dataclass(slots=True)
class SseSummary:
    """What a scanned stream said, decoded from the few events the scanner kept."""

    response_id: str | None = None
    response_model: str | None = None
    reasons: dict[int, str] = field(default_factory=dict)
    input_tokens: int | None = None
    output_tokens: int | None = None
    error_type: str | None = None
    texts: dict[int, list[str]] | None = None


class SseScanner:
    """Feed it raw body blocks as they arrive; ask for the `summary` when the stream ends."""

    __slots__ = (
        "_decoder",
        "_tail",
        "chunks",
        "content_events",
        "done",
        "error_event",
        "finish_events",
        "first_event",
        "first_ns",
        "intervals",
        "last_ns",
        "usage_event",
    )

    def __init__(self, *, capture: bool, choices: int = 1) -> None:
        self._decoder = SseDecoder()
        self._tail: deque[bytes] | None = deque(maxlen=_TAIL_EVENTS) if choices == 1 else None
        self.chunks = 0
        self.first_ns = 0
        self.last_ns = 0
        self.intervals: array[int] = array("q")
        self.first_event: bytes | None = None
        self.usage_event: bytes | None = None
        self.error_event: bytes | None = None
        self.finish_events: list[bytes] = []
        self.content_events: list[bytes] | None = [] if capture else None
        self.done = False

    def feed(self, block: bytes) -> None:
        now = real_monotonic_ns()
        for data in self._decoder.feed_data(block):
            self._data(data, now)

    def flush(self) -> None:
        """A last event the server did not end with a blank line still counts."""
        now = real_monotonic_ns()
        for event in self._decoder.flush():
            self._data(event.data, now)

    def _data(self, data: bytes, now: int) -> None:
        if data.startswith(_SPECIAL_PREFIXES):  # one check for both on the common path
            if data.startswith(DONE):
                self.done = True
                return
            if data.startswith(_ERROR_PREFIXES):
                self.error_event = data
                return
        if self.first_ns:
            self.intervals.append(now - self.last_ns)
        else:
            self.first_ns = now
            self.first_event = data
        self.last_ns = now
        self.chunks += 1
        tail = self._tail
        if tail is not None:
            tail.append(data)
        else:
            self._mark(data)
        if self.content_events is not None:
            self.content_events.append(data)

    def _mark(self, data: bytes) -> None:
        """Keep ``data`` if it carries a usage object or a finish reason."""
        if _MARKED.search(data) is not None:
            if _followed_by(data, _USAGE_KEY, b"{"):
                self.usage_event = data
            if _followed_by(data, _FINISH_KEY, b'"'):
                self.finish_events.append(data)

    def summary(self, *, chat: bool) -> SseSummary:
        """Decode the kept events; a malformed one is skipped, never raised."""
        tail, self._tail = self._tail, None
        for data in tail or ():  # a one-choice stream's last events, searched once, at its end
            self._mark(data)
        out = SseSummary()
        if self.first_event is not None:
            first = _loads(self.first_event)
            if isinstance(first, dict):
                out.response_id = first.get("id")
                out.response_model = first.get("model")
        _add_reasons(out.reasons, self.finish_events)
        if self.usage_event is not None:
            body = _loads(self.usage_event)
            usage = body.get("usage") if isinstance(body, dict) else None
            if isinstance(usage, dict):
                out.input_tokens = usage.get("prompt_tokens")
                out.output_tokens = usage.get("completion_tokens")
        if self.error_event is not None:
            out.error_type = error_event_type(_loads(self.error_event))
        if self.content_events is not None:
            out.texts = _texts(self.content_events, chat=chat)
        return out


def _add_reasons(reasons: dict[int, str], finish_events: list[bytes]) -> None:
    """Each choice's finish reason, by its index; a later event's reason wins."""
    for data in finish_events:
        for choice in _choices(_loads(data)):
            reason = choice.get("finish_reason")
            if reason is not None:
                reasons[int(choice.get("index") or 0)] = str(reason)


def _texts(content_events: list[bytes], *, chat: bool) -> dict[int, list[str]]:
    """Each choice's content pieces, in order: a chat chunk's ``delta.content``, a completion's
    ``text``."""
    texts: dict[int, list[str]] = {}
    for data in content_events:
        for choice in _choices(_loads(data)):
            text = (choice.get("delta") or {}).get("content") if chat else choice.get("text")
            if isinstance(text, str) and text:
                texts.setdefault(int(choice.get("index") or 0), []).append(text)
    return texts


def _followed_by(data: bytes, key: bytes, opener: bytes) -> bool:
    """Whether some ``key`` in ``data`` is followed by ``opener``, directly or after one space."""
    i = data.find(key)
    while i >= 0:
        j = i + len(key)
        after = data[j : j + 1]
        if after == opener or (after == b" " and data[j + 1 : j + 2] == opener):
            return True
        i = data.find(key, j)
    return False


def _loads(data: bytes) -> Any:
    try:
        return json.loads(data)
    except ValueError:
        return None


def _choices(body: Any) -> list[dict[str, Any]]:
    if not isinstance(body, dict):
        return []
    choices = body.get("choices")
    return [c for c in choices if isinstance(c, dict)] if isinstance(choices, list) else []
