"""The probe's timing loop: one request, timed and nothing more.

A stream's loop stamps the first byte, counts the events the shared SSE decoder yields and
keeps the data of the last few; the usage chunk is parsed once, after the stream ends, so the
client's own work stays small next to what it measures.

A request that meets a kept-alive connection the engine has just closed is sent once more, on a
new connection, and timed from there: the engine never saw it. llama.cpp's server closes the
connection after each stream while its headers still say keep-alive, so the next request the
pool sends on it at once reads "Server disconnected without sending a response".
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Iterable
from typing import Any

import httpx2

from .._clock import real_monotonic_ns
from .._validate import check_count
from ..analysis.probe_levels import StreamTiming
from ..records.probe_report import ProbeSettings
from ..wire.chunks import error_of
from ..wire.sse import DONE, SseDecoder

__all__ = ["plain_once", "probe_prompt", "request_body", "stream_once", "usage_from_tail"]

_TAIL_EVENTS = 4


def probe_prompt(chars: int) -> str:
    """A fixed, plain prompt of exactly ``chars`` characters (no chat template, so no thinking)."""
    seed = "Write a long, detailed essay on the history of measurement and the instruments people built. "
    return (seed * (chars // len(seed) + 1))[:chars]


def usage_from_tail(events: Iterable[bytes]) -> dict[str, Any] | None:
    """The ``usage`` object of the last event (its data) that carries one: the final usage chunk."""
    for data in reversed(list(events)):
        if data == DONE or b'"usage"' not in data:
            continue
        try:
            usage = json.loads(data).get("usage")
        except (ValueError, AttributeError):
            return None
        if isinstance(usage, dict):
            return usage
    return None


def _error_event(events: Iterable[bytes]) -> str | None:
    """What an error event the engine sent in place of its answer says (vLLM and SGLang send
    ``data: {"error": {...}}`` when a request fails mid-stream); None where none did."""
    for data in events:
        if data == DONE or b"error" not in data:
            continue
        try:
            error = error_of(json.loads(data))
        except ValueError:
            continue
        if error is not None:
            said = error.get("message") or error if isinstance(error, dict) else error
            return f"the engine sent an error event: {said}"
    return None


async def stream_once(client: httpx2.AsyncClient, body: bytes) -> StreamTiming:
    return await _stream(client, body, again=True)


async def plain_once(client: httpx2.AsyncClient, body: bytes) -> StreamTiming:
    return await _plain(client, body, again=True)


async def _stream(client: httpx2.AsyncClient, body: bytes, *, again: bool) -> StreamTiming:
    clock = real_monotonic_ns
    st = StreamTiming(start_ns=clock())
    decoder = SseDecoder()
    tail: deque[bytes] = deque(maxlen=_TAIL_EVENTS)
    head = b""
    kind = "no content type"
    try:
        async with client.stream("POST", "/v1/completions", content=body) as response:
            if response.status_code != 200:
                text = (await response.aread())[:200].decode("utf-8", "replace")
                st.error = f"HTTP {response.status_code}: {text}"
                return st
            kind = response.headers.get("content-type") or kind
            async for chunk in response.aiter_raw():
                if not st.first_ns:
                    st.first_ns = clock()
                if len(head) < 200:
                    head += chunk[: 200 - len(head)]
                events = decoder.feed_data(chunk)
                if events:
                    st.events += len(events)
                    tail.extend(events)
            last = decoder.flush()
            st.events += len(last)
            tail.extend(event.data for event in last)
        st.end_ns = clock()
    except httpx2.RemoteProtocolError as exc:
        if again and _unanswered(exc):
            return await _stream(client, body, again=False)
        st.error = f"{type(exc).__name__}: {exc}"
        return st
    except Exception as exc:
        st.error = f"{type(exc).__name__}: {exc}"
        return st
    _count_or_say_why_not(st, tail, head, kind)
    return st


def _count_or_say_why_not(st: StreamTiming, tail: deque[bytes], head: bytes, kind: str) -> None:
    """The stream's tokens from its usage chunk; else its error, naming what the engine sent
    instead: an error event, something that is not an event stream (an HTML error page, a JSON
    error: its type and first 200 bytes), a stream without usage, or one cut off."""
    usage = usage_from_tail(tail)
    if usage is not None:
        _count_tokens(st, usage)
    elif (error := _error_event(tail)) is not None:
        st.error = error
    elif not st.events and head and not kind.lower().startswith("text/event-stream"):  # an HTML page
        st.error = f"the engine answered {kind}, not an event stream: {head.decode('utf-8', 'replace')}"
    elif tail and tail[-1] == DONE:
        st.error = "no usage chunk before [DONE] (is stream_options.include_usage supported?)"
    else:
        st.error = "the stream ended without [DONE]: the engine closed it mid-stream"


async def _plain(client: httpx2.AsyncClient, body: bytes, *, again: bool) -> StreamTiming:
    clock = real_monotonic_ns
    st = StreamTiming(start_ns=clock())
    try:
        response = await client.post("/v1/completions", content=body)
        st.end_ns = st.first_ns = clock()
        if response.status_code != 200:
            st.error = f"HTTP {response.status_code}: {response.text[:200]}"
            return st
        try:
            answer = response.json()
        except ValueError:  # an HTML error page behind a proxy, a truncated body
            kind = response.headers.get("content-type") or "no content type"
            st.error = f"the engine answered {kind}, not JSON: {response.text[:200]}"
            return st
        usage = answer.get("usage") if isinstance(answer, dict) else None
        if usage is not None and not isinstance(usage, dict):
            st.error = f"the engine's usage is {usage!r}, not a JSON object"
            return st
        _count_tokens(st, usage or {})
    except httpx2.RemoteProtocolError as exc:
        if again and _unanswered(exc):
            return await _plain(client, body, again=False)
        st.error = f"{type(exc).__name__}: {exc}"
    except Exception as exc:
        st.error = f"{type(exc).__name__}: {exc}"
    return st


def _count_tokens(st: StreamTiming, usage: dict[str, Any]) -> None:
    """``usage.completion_tokens`` as the stream's count; a value that is not a whole number (text,
    a fraction, a negative or huge one) is the stream's error, naming the field and the value."""
    value = usage.get("completion_tokens")
    try:
        st.completion_tokens = 0 if value is None else check_count(value, "usage.completion_tokens")
    except ValueError as exc:
        st.error = f"the engine's {exc}"


def _unanswered(exc: httpx2.RemoteProtocolError) -> bool:
    """The connection closed before the response's first byte (httpcore's own words for it)."""
    return str(exc) == "Server disconnected without sending a response."


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
