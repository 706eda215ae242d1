"""The one incremental server-sent-events decoder: bytes in, frozen events out.

Instrumentation, the deadline helper and the probe all read OpenAI-compatible streams through
it, so a framing detail (a ``data:`` field without its space, CRLF or bare CR line ends, a
comment, a multi-line ``data``, an event split across reads at any byte) reads the same
everywhere. It follows the WHATWG event-stream rules: lines end in LF, CRLF or CR; a line
starting with ``:`` is a comment; ``field:value`` loses one leading space of its value; a blank
line dispatches the event if it has data; a BOM that starts the stream is dropped. ``retry`` is
ignored (nothing here reconnects).

Data stays bytes: callers decode JSON straight from them (``json.loads`` takes bytes), and the
hot path of the instrumentation never pays for a UTF-8 decode it does not need. A pending line
or event larger than ``max_event_bytes`` raises `SseError` naming the limit, so a server that
never ends a line cannot grow memory without bound.

The usual read from vLLM holds exactly one ``data: {...}\\n\\n`` event; `SseDecoder.feed` takes
that case without splitting or copying the block more than once.
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["DEFAULT_MAX_EVENT_BYTES", "DONE", "SseDecoder", "SseError", "SseEvent"]

_new_event = tuple.__new__  # builds an `SseEvent` without the Python-level __new__ of a NamedTuple

DEFAULT_MAX_EVENT_BYTES = 16 * 1024 * 1024
"""Far above any chunk an engine sends (a few KB), far below what would hurt the machine."""
_CR = ord("\r")
_BOM = b"\xef\xbb\xbf"
"""U+FEFF in UTF-8: one at the start of the stream is ignored, as the spec says."""
DONE = b"[DONE]"
"""The data of the OpenAI stream's last event."""


class SseEvent(NamedTuple):
    """One dispatched event: its ``data`` lines joined by LF, and its ``event`` and ``id`` fields."""

    data: bytes
    event: str | None = None
    id: str | None = None


class SseError(ValueError):
    """The stream is not one this decoder can read within its limits."""


class SseDecoder:
    """Feed it the body's reads as they arrive; each call returns the events they completed."""

    __slots__ = ("_bom", "_clean", "_data", "_event", "_id", "_partial", "_skip_lf", "max_event_bytes")

    def __init__(self, *, max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES) -> None:
        self.max_event_bytes = max_event_bytes
        self._partial = b""
        self._data: list[bytes] | None = None
        self._event: str | None = None
        self._id: str | None = None
        self._skip_lf = False
        self._bom = True
        """The stream's first bytes are still to come: a leading BOM is dropped from them."""
        self._clean = False
        """Nothing pending (no partial line, no event under way, the first read seen): the fast
        path may apply."""

    def feed(self, block: bytes) -> list[SseEvent]:
        """The events this read completed."""
        value = self._one_event(block) if self._clean else None
        if value is not None:
            return [_new_event(SseEvent, (value, None, self._id))]
        return self._feed(block)

    def feed_data(self, block: bytes) -> list[bytes]:
        """The data of each event this read completed: `feed` for a reader that needs no more
        (the instrumentation and the probe, on every chunk of every stream)."""
        value = self._one_event(block) if self._clean else None
        if value is not None:
            return [value]
        return [event.data for event in self._feed(block)]

    def _one_event(self, block: bytes) -> bytes | None:
        """The data of a read that is one whole event of one data line, its only line breaks the
        two LFs at its end (the common read), without splitting it; None for any other read."""
        end = len(block) - 2
        # `13 in block` is a tenth of the cost of `b"\r" in block` (a one-byte needle takes
        # bytes' general search path); this runs on every chunk of every stream.
        if block.find(b"\n") != end or not block.endswith(b"\n\n") or _CR in block:
            return None
        if block.startswith(b"data: "):
            value = block[6:end]
        elif block.startswith(b"data:"):
            value = block[5:end]
        else:
            return None
        if len(value) > self.max_event_bytes:  # the event's data, as the general path measures it
            raise self._too_large()
        return value

    def _feed(self, block: bytes) -> list[SseEvent]:
        if self._skip_lf and block:  # an empty read between a CR and its LF changes nothing
            self._skip_lf = False
            if block.startswith(b"\n"):
                block = block[1:]
        if self._partial:
            block = self._partial + block
            self._partial = b""
        if self._bom:
            if len(block) < len(_BOM) and _BOM.startswith(block):
                self._partial = block  # maybe the start of a BOM split across reads
                return []
            self._bom = False
            block = block.removeprefix(_BOM)
        lines = block.splitlines(keepends=True)
        if lines and not lines[-1].endswith((b"\n", b"\r")):
            self._partial = lines.pop()
            if len(self._partial) > self.max_event_bytes:
                self._partial = b""
                raise self._too_large()
        elif block.endswith(b"\r"):
            self._skip_lf = True  # a CRLF may be split across reads: drop the LF that may follow
        events: list[SseEvent] = []
        for line in lines:
            self._line(line.rstrip(b"\r\n"), events)
        self._clean = not (
            self._partial or self._skip_lf or self._data is not None or self._event is not None
        )
        return events

    def flush(self) -> list[SseEvent]:
        """At the end of the body: an event the server did not end with a blank line still counts
        (some servers close right after the last ``data:`` line)."""
        events: list[SseEvent] = []
        partial, self._partial = self._partial, b""
        if partial:
            self._line(partial.rstrip(b"\r\n"), events)
        self._line(b"", events)
        self._skip_lf = False
        self._clean = True
        return events

    def _line(self, line: bytes, events: list[SseEvent]) -> None:
        if not line:
            data = self._data
            if data is not None:
                events.append(SseEvent(b"\n".join(data), self._event, self._id))
            self._data = None
            self._event = None
            return
        if line.startswith(b":"):
            return  # a comment (servers send them as keep-alives)
        field, colon, value = line.partition(b":")
        if colon and value.startswith(b" "):
            value = value[1:]
        if field == b"data":
            data = self._data
            if data is None:
                self._data = [value]
            else:
                data.append(value)
                if sum(map(len, data)) > self.max_event_bytes:
                    self._data = None
                    raise self._too_large()
            if len(value) > self.max_event_bytes:
                self._data = None
                raise self._too_large()
        elif field == b"event":
            self._event = value.decode("utf-8", "replace")
        elif field == b"id" and b"\0" not in value:  # an id with NUL is ignored, as the spec says
            self._id = value.decode("utf-8", "replace")

    def _too_large(self) -> SseError:
        return SseError(
            f"a server-sent event is larger than {self.max_event_bytes:,} bytes "
            "(is this an event stream?); the stream is not read further"
        )
