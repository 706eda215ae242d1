"""The sync and async deadline drivers, for openai clients and raw httpx2 / httpx clients.

``client`` is an ``openai.OpenAI`` (chat when ``messages`` is given, a text completion when
``prompt`` is), or an ``httpx2.Client`` / ``httpx.Client`` with a ``base_url`` (raw HTTP to
``/v1/chat/completions`` or ``/v1/completions``, server-sent events). `astream_with_deadline`
is the twin for ``AsyncOpenAI`` and the async HTTP clients.

The deadline replaces the client's own timeout (sync and async alike): the request's timeout
is the time left on the deadline, so a gap between chunks longer than, say, httpx's 5 s default
read timeout ends nothing the deadline still allows. The deadline holds while the server sends
nothing at all. Sync: until the response headers arrive that timeout bounds the wait; after
that a watchdog thread shuts the connection's socket at expiry, which wakes the blocked read at
once (never after the stream has handed its connection back to the pool). Async: the stream
runs in a task that is cancelled at expiry. Either way a cut-off connection is closed, not
returned to the pool, and the server sees the disconnect. Deadlines are in model seconds
(`_clock`).

Inside `spark_otel.cell(...)` the result sets the cell's status, ``deadline_hit``, salvaged
findings and degraded flag; the request span (when `spark_otel.instrument()` is on) records
the cut-off through `request_notes`.
"""

from __future__ import annotations

import asyncio
import sys
import threading
from contextlib import aclosing, closing
from datetime import datetime
from typing import Any

import httpx2

from .. import _semconv as sc
from .._guard import guard
from ..instrumentation.request_notes import request_notes
from ..wire.sse import SseDecoder, SseError
from .arguments import make_plan
from .reading import take_events, take_sdk_chunk
from .results import DeadlineResult
from .run import StreamRun
from .salvage import ExtractorSpec

__all__ = ["astream_with_deadline", "stream_with_deadline"]


def _transport_errors() -> tuple[type[BaseException], ...]:
    """What a failing server or connection raises, in whichever clients are loaded.

    Read from ``sys.modules``: a client of a library never imported cannot be in use, and an
    import here would cost its first cut-off a noticeable part of the 100 ms it has."""
    errors: list[type[BaseException]] = [httpx2.HTTPError, httpx2.StreamError, OSError, SseError]
    httpx = sys.modules.get("httpx")
    if httpx is not None:
        errors += [httpx.HTTPError, httpx.StreamError]
    openai = sys.modules.get("openai")
    if openai is not None:
        errors.append(openai.APIError)
    return tuple(errors)


def _raw_path(client: Any, chat: bool) -> str:
    """Relative to the client's base_url, which may or may not end in /v1."""
    endpoint = "chat/completions" if chat else "completions"
    return endpoint if str(client.base_url.path).rstrip("/").endswith("/v1") else f"v1/{endpoint}"


def _http_error(response: Any) -> str:
    try:
        body = response.text
    except Exception:
        body = ""
    return f"HTTP {response.status_code}: {body.strip()}"


# --- sync -----------------------------------------------------------------------------------------


def _stream_openai(run: StreamRun, client: Any) -> None:
    errors = _transport_errors()
    api = client.with_options(max_retries=0)
    resource = api.chat.completions if run.plan.chat else api.completions
    kwargs = dict(run.plan.body)
    timeout = run.timeout_s()
    if timeout is not None:
        kwargs["timeout"] = timeout
    try:
        stream = resource.create(**kwargs)
    except errors as exc:
        run.fail(exc)
        return
    try:
        run.attach(stream.response)
        for chunk in stream:
            if not take_sdk_chunk(run, chunk):
                break
    except errors as exc:
        run.fail(exc)
    finally:
        run.detach()
        with guard("deadline stream close"):
            stream.close()


_JSON = {"content-type": "application/json"}


def _raw_timeout(client: Any, run: StreamRun, deadline_timeout: float | None) -> Any:
    """The deadline's timeout, else the caller's ``timeout=``, else the client's own."""
    if deadline_timeout is not None:
        return deadline_timeout
    return client.timeout if run.plan.request_timeout_s is None else run.plan.request_timeout_s


def _stream_raw(run: StreamRun, client: Any) -> None:
    errors = _transport_errors()
    timeout = run.timeout_s()
    request = client.build_request(
        "POST",
        _raw_path(client, run.plan.chat),
        content=run.plan.raw_content,
        headers=_JSON,
        timeout=_raw_timeout(client, run, timeout),
    )
    try:
        response = client.send(request, stream=True)
    except errors as exc:
        run.fail(exc)
        return
    try:
        run.attach(response)
        if response.status_code >= 400:
            response.read()
            run.fail(_http_error(response))
            return
        sse = SseDecoder()
        with closing(response.iter_bytes()) as reads:
            for raw in reads:
                if not take_events(run, sse.feed(raw)):
                    break
    except errors as exc:
        run.fail(exc)
    finally:
        run.detach()
        with guard("deadline stream close"):
            response.close()


def stream_with_deadline(
    client: Any,
    *,
    deadline_s: float | None = None,
    deadline_at: float | datetime | None = None,
    max_output_tokens: int | None = None,
    extractor: ExtractorSpec | None = "json",
    **create_kwargs: Any,
) -> DeadlineResult:
    """Streams one completion until it finishes, the deadline passes or the cap is reached.

    ``deadline_s`` is model seconds from now; ``deadline_at`` an absolute time (Unix seconds
    or a datetime). ``max_output_tokens`` is enforced here, counting streamed tokens; pass
    ``max_tokens`` to cap the engine itself. ``extractor`` salvages findings (`salvage`):
    ``"json"`` (default), ``"jsonl"``, a compiled pattern, an extractor or a callable.
    Everything else goes to the create call (``model``, ``messages`` or ``prompt``, ...);
    ``stream`` and ``stream_options.include_usage`` are set here, retries are off (a retry
    cannot fit a deadline) and the deadline replaces any ``timeout``.

    Never raises for what the server or connection does: an HTTP error, an error mid-stream
    or a dropped connection return status ``error`` with what arrived. Bad arguments raise
    `ConfigError`. A deadline already past returns status ``deadline`` without a request.
    """
    plan = make_plan(
        client,
        is_async=False,
        deadline_s=deadline_s,
        deadline_at=deadline_at,
        max_output_tokens=max_output_tokens,
        create_kwargs=create_kwargs,
    )
    run = StreamRun(plan, extractor)
    left = run.wall_left_s()
    if left is not None and left <= 0:
        run.expired = True
        return run.result()
    with request_notes() as notes:
        run.notes = notes
        run._note(sc.REQUEST_TOKENS_SOURCE, "streamed")
        run._note(sc.REQUEST_SALVAGED_FINDINGS, 0)
        watchdog = None
        if left is not None:
            watchdog = threading.Timer(left, run.expire)
            watchdog.daemon = True
            watchdog.start()
        try:
            if plan.kind == "openai":
                _stream_openai(run, client)
            else:
                _stream_raw(run, client)
        finally:
            if watchdog is not None:
                watchdog.cancel()
                watchdog.join()
    return run.result()


# --- async ----------------------------------------------------------------------------------------


async def _aclose_all(chunks: Any, stream: Any) -> None:
    """Close the SDK stream and the async generators behind it now: left to the garbage
    collector, each would be finalized by a task of its own, after we return."""
    for generator in (chunks, getattr(stream, "_iterator", None)):
        aclose = getattr(generator, "aclose", None)
        if aclose is not None:
            await aclose()
    await stream.close()


async def _astream_openai(run: StreamRun, client: Any) -> None:
    errors = _transport_errors()
    api = client.with_options(max_retries=0)
    resource = api.chat.completions if run.plan.chat else api.completions
    kwargs = dict(run.plan.body)
    timeout = run.timeout_s()
    if timeout is not None:
        kwargs["timeout"] = timeout
    try:
        stream = await resource.create(**kwargs)
    except errors as exc:
        run.fail(exc)
        return
    chunks = aiter(stream)
    try:
        async for chunk in chunks:
            if not take_sdk_chunk(run, chunk):
                break
    except errors as exc:
        run.fail(exc)
    finally:
        with guard("deadline stream close"):
            await _aclose_all(chunks, stream)


async def _astream_raw(run: StreamRun, client: Any) -> None:
    errors = _transport_errors()
    timeout = run.timeout_s()
    request = client.build_request(
        "POST",
        _raw_path(client, run.plan.chat),
        content=run.plan.raw_content,
        headers=_JSON,
        timeout=_raw_timeout(client, run, timeout),
    )
    try:
        response = await client.send(request, stream=True)
    except errors as exc:
        run.fail(exc)
        return
    try:
        if response.status_code >= 400:
            await response.aread()
            run.fail(_http_error(response))
            return
        sse = SseDecoder()
        async with aclosing(response.aiter_bytes()) as reads:
            async for raw in reads:
                if not take_events(run, sse.feed(raw)):
                    break
    except errors as exc:
        run.fail(exc)
    finally:
        with guard("deadline stream close"):
            await response.aclose()


async def astream_with_deadline(
    client: Any,
    *,
    deadline_s: float | None = None,
    deadline_at: float | datetime | None = None,
    max_output_tokens: int | None = None,
    extractor: ExtractorSpec | None = "json",
    **create_kwargs: Any,
) -> DeadlineResult:
    """The async twin of `stream_with_deadline`, for ``AsyncOpenAI`` and async HTTP clients.

    The stream runs in its own task; at the deadline the request span is told of the cut-off
    and the task is cancelled, which closes the connection. Cancelling the caller cancels the
    stream too, and the cancellation propagates.
    """
    plan = make_plan(
        client,
        is_async=True,
        deadline_s=deadline_s,
        deadline_at=deadline_at,
        max_output_tokens=max_output_tokens,
        create_kwargs=create_kwargs,
    )
    run = StreamRun(plan, extractor)
    left = run.wall_left_s()
    if left is not None and left <= 0:
        run.expired = True
        return run.result()
    with request_notes() as notes:
        run.notes = notes
        run._note(sc.REQUEST_TOKENS_SOURCE, "streamed")
        run._note(sc.REQUEST_SALVAGED_FINDINGS, 0)
        body = _astream_openai(run, client) if plan.kind == "openai" else _astream_raw(run, client)
        worker = asyncio.ensure_future(body)
        try:
            done, _ = await asyncio.wait({worker}, timeout=left)
            if not done:
                run.expire()
                worker.cancel()
                await asyncio.wait({worker})
        except BaseException:
            worker.cancel()
            await asyncio.wait({worker})
            raise
        if not worker.cancelled():
            worker.result()  # our own bug, if any, surfaces here rather than vanishing
    return run.result()
