"""Incremental Server-Sent-Events scanner for raw ``/v1/*`` responses, parsing almost nothing.

The raw httpx layer sees bytes, not SDK chunks. Parsing every chunk's JSON would cost more than
the rest of the instrumentation together, so the scanner only finds ``data:`` lines, counts
and times them, and keeps references to the few lines that matter: the first chunk (id and
model), chunks that carry a finish reason, the usage chunk and an error event. Those are
decoded once, at finalize (`SseScanner.summary`). Content lines are kept only when content
capture is on.
"""

from __future__ import annotations

import json
import re
from array import array
from dataclasses import dataclass, field
from time import perf_counter_ns
from typing import Any

from .. import _semconv as sc

__all__ = ["SseScanner", "SseSummary"]

# A line matters when a key is followed (after at most one space) by a value that is not null:
# ``"finish_reason":"stop"``, ``"usage": {...}``. One regex scan per line finds either; only a
# line it matches (a few per stream) is then checked key by key.
_FINISH_KEY = b'"finish_reason":'
_USAGE_KEY = b'"usage":'
_MARKED = re.compile(rb'"(?:usage": ?\{|finish_reason": ?")')
# vLLM's mid-stream error event is ``{"error": {...}}``; older releases send the error response
# itself, ``{"object": "error", "message": ..., "type": ..., "code": ...}`` (``object`` first).
_ERROR_PREFIXES = tuple(
    lead + body
    for lead in (b"data: ", b"data:")
    for body in (b'{"error"', b'{"object":"error"', b'{"object": "error"')
)
_DONE_PREFIXES = (b"data: [DONE]", b"data:[DONE]")
_SPECIAL_PREFIXES = _DONE_PREFIXES + _ERROR_PREFIXES


@dataclass(slots=True)
class SseSummary:
    """What a scanned stream said, decoded from the few lines the scanner kept."""

    response_id: str | None = None
    response_model: str | None = None
    reasons: dict[int, str] = field(default_factory=dict)
    input_tokens: int | None = None
    output_tokens: int | None = None
    error_type: str | None = None
    texts: dict[int, list[str]] | None = None


def _json(line: bytes) -> Any:
    return json.loads(line[5:])


class SseScanner:
    """Feed it raw body blocks as they arrive; ask for the `summary` when the stream ends."""

    __slots__ = (
        "_partial",
        "chunks",
        "content_lines",
        "done",
        "error_line",
        "finish_lines",
        "first_line",
        "first_ns",
        "intervals",
        "last_ns",
        "usage_line",
    )

    def __init__(self, *, capture: bool) -> None:
        self._partial = b""
        self.chunks = 0
        self.first_ns = 0
        self.last_ns = 0
        self.intervals: array[int] = array("q")
        self.first_line: bytes | None = None
        self.usage_line: bytes | None = None
        self.error_line: bytes | None = None
        self.finish_lines: list[bytes] = []
        self.content_lines: list[bytes] | None = [] if capture else None
        self.done = False

    def feed(self, block: bytes) -> None:
        now = perf_counter_ns()
        if self._partial:
            block = self._partial + block
        elif block.endswith(b"\n\n") and block.find(b"\n", 0, -2) < 0:
            # The usual block, one event as vLLM sends it (``data: {...}\n\n``): no split, no list,
            # no copy (the kept line's trailing newlines are whitespace to `json.loads`).
            if block.startswith(b"data:"):
                self._data(block, now)
            return
        lines = block.split(b"\n")
        self._partial = lines.pop()
        for line in lines:
            if line.startswith(b"data:"):
                self._data(line, now)

    def flush(self) -> None:
        """A last line the server did not terminate still counts."""
        partial, self._partial = self._partial, b""
        if partial.startswith(b"data:"):
            self._data(partial, perf_counter_ns())

    def _data(self, line: bytes, now: int) -> None:
        if line.startswith(_SPECIAL_PREFIXES):  # one check for both on the common path
            if line.startswith(_DONE_PREFIXES):
                self.done = True
            else:
                self.error_line = line
            return
        if self.first_ns:
            self.intervals.append(now - self.last_ns)
        else:
            self.first_ns = now
            self.first_line = line
        self.last_ns = now
        self.chunks += 1
        if _MARKED.search(line) is not None:
            if _followed_by(line, _USAGE_KEY, b"{"):
                self.usage_line = line
            if _followed_by(line, _FINISH_KEY, b'"'):
                self.finish_lines.append(line)
        if self.content_lines is not None:
            self.content_lines.append(line)

    def summary(self, *, chat: bool) -> SseSummary:
        """Decode the kept lines; a malformed one is skipped, never raised."""
        out = SseSummary()
        if self.first_line is not None:
            first = _loads(self.first_line)
            if isinstance(first, dict):
                out.response_id = first.get("id")
                out.response_model = first.get("model")
        for line in self.finish_lines:
            for choice in _choices(_loads(line)):
                reason = choice.get("finish_reason")
                if reason is not None:
                    out.reasons[int(choice.get("index") or 0)] = str(reason)
        if self.usage_line is not None:
            body = _loads(self.usage_line)
            usage = body.get("usage") if isinstance(body, dict) else None
            if isinstance(usage, dict):
                out.input_tokens = usage.get("prompt_tokens")
                out.output_tokens = usage.get("completion_tokens")
        if self.error_line is not None:
            out.error_type = error_event_type(_loads(self.error_line))
        if self.content_lines is not None:
            texts: dict[int, list[str]] = {}
            for line in self.content_lines:
                for choice in _choices(_loads(line)):
                    text = (choice.get("delta") or {}).get("content") if chat else choice.get("text")
                    if isinstance(text, str) and text:
                        texts.setdefault(int(choice.get("index") or 0), []).append(text)
            out.texts = texts
        return out


def _followed_by(line: bytes, key: bytes, opener: bytes) -> bool:
    """Whether some ``key`` in ``line`` is followed by ``opener``, directly or after one space."""
    i = line.find(key)
    while i >= 0:
        j = i + len(key)
        after = line[j : j + 1]
        if after == opener or (after == b" " and line[j + 1 : j + 2] == opener):
            return True
        i = line.find(key, j)
    return False


def error_of(body: Any) -> Any:
    """The error an in-stream event reports, None for any other event. vLLM sends
    ``{"error": {...}}``; older releases send the error response itself (``object: error``)."""
    if not isinstance(body, dict):
        return None
    error = body.get("error")
    if error is None and body.get("object") == "error":
        error = body
    return error


def error_event_type(body: Any) -> str:
    """``error.type`` of an in-stream error event: its numeric code, else its type name."""
    error = error_of(body)
    if isinstance(error, dict):
        code = error.get("code")
        if isinstance(code, int):
            return str(code)
        kind = error.get("type")
        if isinstance(kind, str) and kind:
            return kind
    return sc.ERROR_TYPE_OTHER


def _loads(line: bytes) -> Any:
    try:
        return _json(line)
    except ValueError:
        return None


def _choices(body: Any) -> list[dict[str, Any]]:
    if not isinstance(body, dict):
        return []
    choices = body.get("choices")
    return [c for c in choices if isinstance(c, dict)] if isinstance(choices, list) else []
