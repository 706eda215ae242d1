"""SSE bodies built by hand: one chat-completion chunk event, and a transport that streams given
blocks then raises (what a real peer cannot produce on demand)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx2


def sse_transport(blocks: list[bytes], *, fail: BaseException | None = None) -> httpx2.MockTransport:
    """An SSE body of ``blocks``, then ``fail`` raised mid-stream: what a real peer cannot
    produce on demand (a reset, a KeyboardInterrupt, events split at chosen bytes)."""

    class Body(httpx2.SyncByteStream):
        def __iter__(self) -> Iterator[bytes]:
            yield from blocks
            if fail is not None:
                raise fail

    def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, stream=Body())

    return httpx2.MockTransport(handler)


def sse_chunk(text: str, reason: str | None = None) -> bytes:
    """One chat-completion chunk event carrying ``text``."""
    choice = {"index": 0, "delta": {"content": text}, "finish_reason": reason}
    body = {"id": "r1", "object": "chat.completion.chunk", "created": 1, "model": "m", "choices": [choice]}
    return b"data: " + json.dumps(body).encode() + b"\n\n"
