"""The probe's timing loop: one request, timed and nothing more.

A stream's loop stamps the first byte, counts ``data:`` events and keeps the last few raw
chunks; the usage chunk is parsed once, after the stream ends, so the client's own work stays
small next to what it measures.
"""

from __future__ import annotations

import json
import time
from collections import deque
from typing import Any

import httpx2

from ..analysis.probe_levels import StreamTiming
from .results import ProbeSettings

__all__ = ["plain_once", "probe_prompt", "request_body", "stream_once", "usage_from_tail"]

_TAIL_CHUNKS = 8


def probe_prompt(chars: int) -> str:
    """A fixed, plain prompt of exactly ``chars`` characters (no chat template, so no thinking)."""
    seed = "Write a long, detailed essay on the history of measurement and the instruments people built. "
    return (seed * (chars // len(seed) + 1))[:chars]


def usage_from_tail(tail: bytes) -> dict[str, Any] | None:
    """The ``usage`` object of the last SSE event that carries one (the final usage chunk)."""
    for event in reversed(tail.split(b"data:")):
        payload = event.strip()
        if not payload or payload == b"[DONE]" or b'"usage"' not in payload:
            continue
        try:
            usage = json.loads(payload).get("usage")
        except ValueError:
            return None  # the usage chunk was cut in the kept tail
        if isinstance(usage, dict):
            return usage
    return None


async def stream_once(client: httpx2.AsyncClient, body: bytes) -> StreamTiming:
    perf = time.perf_counter_ns
    st = StreamTiming(start_ns=perf())
    tail: deque[bytes] = deque(maxlen=_TAIL_CHUNKS)
    try:
        async with client.stream("POST", "/v1/completions", content=body) as response:
            if response.status_code != 200:
                text = (await response.aread())[:200].decode("utf-8", "replace")
                st.error = f"HTTP {response.status_code}: {text}"
                return st
            async for chunk in response.aiter_raw():
                if not st.first_ns:
                    st.first_ns = perf()
                st.events += chunk.count(b"data:")
                tail.append(chunk)
        st.end_ns = perf()
    except Exception as exc:
        st.error = f"{type(exc).__name__}: {exc}"
        return st
    usage = usage_from_tail(b"".join(tail))
    if usage is None:
        st.error = "no usage chunk at the end of the stream (is stream_options.include_usage supported?)"
    else:
        st.completion_tokens = int(usage.get("completion_tokens") or 0)
    return st


async def plain_once(client: httpx2.AsyncClient, body: bytes) -> StreamTiming:
    perf = time.perf_counter_ns
    st = StreamTiming(start_ns=perf())
    try:
        response = await client.post("/v1/completions", content=body)
        st.end_ns = st.first_ns = perf()
        if response.status_code != 200:
            st.error = f"HTTP {response.status_code}: {response.text[:200]}"
            return st
        usage = response.json().get("usage") or {}
        st.completion_tokens = int(usage.get("completion_tokens") or 0)
    except Exception as exc:
        st.error = f"{type(exc).__name__}: {exc}"
    return st


def request_body(settings: ProbeSettings, model: str, tokens: int) -> bytes:
    body: dict[str, Any] = {
        "model": model,
        "prompt": probe_prompt(settings.prompt_chars),
        "max_tokens": tokens,
        "min_tokens": tokens,
        "ignore_eos": True,
        "temperature": 0.0,
        "stream": settings.mode == "stream",
    }
    if settings.mode == "stream":
        body["stream_options"] = {"include_usage": True}
    return json.dumps(body).encode()
