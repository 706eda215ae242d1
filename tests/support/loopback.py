"""A minimal probe-style client over raw loopback sockets, so a measurement weighs the server, not the client.

`probe_level` opens ``n`` connections first (as a keep-alive pool would), then fires ``n``
pinned completions at once (``min_tokens = max_tokens``, ``ignore_eos``, as Appendix A's probe
does), and reads each stream to ``data: [DONE]``. `StreamResult.decode_rate` is the per-stream
rate in model time from the first token read to the last, ``tokens / (wall x speed)``: TTFT and the
wait before the server took the request are left out, so a late handler moves it only by how late
the first and last reads came against the whole decode, a small fraction when a level lasts seconds.
The server's own model-time stamps (`Box.timings`) are the truth it is checked against.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass


@dataclass(frozen=True)
class StreamResult:
    tokens: int
    #: From writing the request to reading ``data: [DONE]``: TTFT and every delay on the way included.
    wall_s: float
    #: From the read that brought the first token to the read that brought the last one, and the
    #: tokens read after the first read: the decode phase as the client saw it, TTFT excluded.
    decode_wall_s: float
    decode_tokens: int
    body: bytes

    def decode_rate(self, speed: float) -> float:
        """Per-stream tok/s (model time) from first token to last, as read by the client."""
        return self.decode_tokens / (self.decode_wall_s * speed)


_TOKEN_MARKS = (b'"text": "', b'"delta": {"content": "')
_EMPTY_CONTENT = b'"content": ""'


def _count_tokens(events: bytes) -> int:
    return sum(events.count(mark) for mark in _TOKEN_MARKS) - events.count(_EMPTY_CONTENT)


def _request(path: str, body: dict) -> bytes:
    payload = json.dumps(body).encode()
    head = (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(payload)}\r\nConnection: close\r\n\r\n"
    )
    return head.encode() + payload


async def _run_one(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: bytes
) -> StreamResult:
    start = time.perf_counter()
    parts: list[bytes] = []
    end: float | None = None
    pending = b""  # bytes after the last complete event
    tokens = 0
    first: tuple[float, int] | None = None  # (when, tokens counted by then) at the first token
    last = start
    try:
        writer.write(request)
        while True:
            data = await reader.read(65536)
            now = time.perf_counter()
            if not data:
                break
            parts.append(data)
            complete, sep, pending = (pending + data).rpartition(b"\n\n")
            if sep:
                seen = _count_tokens(complete)
                if seen:
                    tokens += seen
                    last = now
                    if first is None:
                        first = (now, tokens)
                if end is None and b"data: [DONE]" in complete:
                    end = now
    finally:
        writer.close()  # also when cancelled: the server sees the client leave
    if end is None:
        end = time.perf_counter()
    first_at, first_tokens = first if first is not None else (last, tokens)
    return StreamResult(tokens, end - start, last - first_at, tokens - first_tokens, b"".join(parts))


async def stream_many(port: int, bodies: list[tuple[str, dict]]) -> list[StreamResult]:
    """Open one connection per body, then send them all at once and read every stream to its end."""
    conns = await asyncio.gather(*(asyncio.open_connection("127.0.0.1", port) for _ in bodies))
    requests = [_request(path, body) for path, body in bodies]
    return list(
        await asyncio.gather(*(_run_one(r, w, req) for (r, w), req in zip(conns, requests, strict=True)))
    )


def pinned(model: str, tokens: int, prompt: str = "x" * 200) -> tuple[str, dict]:
    body = {"model": model, "prompt": prompt, "max_tokens": tokens, "min_tokens": tokens, "ignore_eos": True}
    return "/v1/completions", {**body, "stream": True}


def probe_level(port: int, model: str, n: int, tokens: int) -> list[StreamResult]:
    """``n`` concurrent pinned streams of ``tokens`` each, read to their ends."""
    results = asyncio.run(stream_many(port, [pinned(model, tokens) for _ in range(n)]))
    assert all(r.tokens == tokens for r in results), [r.tokens for r in results]
    return results


async def until(predicate: Callable[[], bool], timeout_s: float = 10.0) -> None:
    """Wait for box state that lives on the box's own thread, where there is no event to await."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("the box never reached the expected state")
        await asyncio.sleep(0.005)


@asynccontextmanager
async def in_flight(port: int, bodies: list[tuple[str, dict]]) -> AsyncIterator[asyncio.Task]:
    """Streams running in the background for the block; leaving it hangs up on them."""
    task = asyncio.create_task(stream_many(port, bodies))
    try:
        yield task
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
