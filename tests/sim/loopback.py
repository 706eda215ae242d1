"""A minimal probe-style client over raw loopback sockets, so a measurement weighs the server, not the client.

`probe_level` opens ``n`` connections first (as a keep-alive pool would), then fires ``n``
pinned completions at once (``min_tokens = max_tokens``, ``ignore_eos``, as Appendix A's probe
does), and reads each stream to ``data: [DONE]``. Per-stream rate in model time is
``tokens / (wall x speed)``, the article's "completion's own token count over its wall time".
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import statistics
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass


@dataclass(frozen=True)
class StreamResult:
    tokens: int
    wall_s: float
    body: bytes

    def rate(self, speed: float) -> float:
        return self.tokens / (self.wall_s * speed)


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
    tail = b""
    try:
        writer.write(request)
        while True:
            data = await reader.read(65536)
            if not data:
                break
            parts.append(data)
            if end is None and b"data: [DONE]" in tail + data:
                end = time.perf_counter()
            tail = data[-16:]
    finally:
        writer.close()  # also when cancelled: the server sees the client leave
    body = b"".join(parts)
    if end is None:
        end = time.perf_counter()
    tokens = body.count(b'"text": "') + body.count(b'"delta": {"content": "') - body.count(b'"content": ""')
    return StreamResult(tokens, end - start, body)


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


def probe_level(port: int, model: str, n: int, tokens: int, speed: float) -> float:
    """Median per-stream tok/s (model time) of ``n`` concurrent pinned streams."""
    results = asyncio.run(stream_many(port, [pinned(model, tokens) for _ in range(n)]))
    assert all(r.tokens == tokens for r in results), [r.tokens for r in results]
    return statistics.median(r.rate(speed) for r in results)


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
