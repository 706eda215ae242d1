"""Properties of the stream proxies: random interleavings of what a caller does to a stream.

The real openai client reads a mock-transport body (a few chunks, a usage chunk, then ``[DONE]``,
a transport error or an in-stream error event). A random program of ``next`` calls, ``close``,
a ``for`` loop left by ``break`` or by the caller's own exception, inside a ``with`` block or not
(and for the async proxy, task cancellation while a read waits) runs once on a bare client and
once instrumented. The caller must see exactly the same chunks and exceptions both times, and the
request span must end exactly once: when the first ending event happens (exhaustion, an error,
close, the ``with`` block's exit, cancellation), else when the dropped proxy is collected, with the
``error.type`` and chunk count that event implies, and with no span left open and nothing logged.
"""

from __future__ import annotations

import asyncio
import gc
import json
import logging
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from unittest.mock import patch

import httpx2
import openai
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from tests.support.metric_points import metric_points

import spark_otel
from spark_otel import _clock
from spark_otel import _semconv as sc
from spark_otel.instrumentation import _stream

MESSAGES = [{"role": "user", "content": "hi"}]


class Mine(Exception):
    """The caller's own exception, raised inside its loop or its ``with`` block."""


# -- the body ----------------------------------------------------------------------------------------
def _event(obj: Any) -> bytes:
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


def body_blocks(words: int, ending: str, usage: tuple[int, int]) -> list[bytes]:
    def chunk(choices: list[Any], **extra: Any) -> bytes:
        return _event({"id": "r1", "object": "chat.completion.chunk", "created": 1, "model": "m",
                       "choices": choices, **extra})  # fmt: skip

    blocks = [
        chunk(
            [{"index": 0, "delta": {"content": f"w{i}"}, "finish_reason": "stop" if i == words - 1 else None}]
        )
        for i in range(words)
    ]
    if ending == "error_event":
        return [*blocks, _event({"error": {"message": "engine died", "type": "InternalServerError"}})]
    prompt, completion = usage
    usage_obj = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }
    return [*blocks, chunk([], usage=usage_obj), b"data: [DONE]\n\n"]


class Clock:
    """A clock the body advances between reads, so that durations are exact in the figures test."""

    def __init__(self, steps: list[int]) -> None:
        self.now = 1_000_000_000
        self.steps = steps

    def advance(self, i: int) -> None:
        self.now += self.steps[i % len(self.steps)] if self.steps else 0


def sync_transport(blocks: list[bytes], fail: bool, clock: Clock | None = None) -> httpx2.MockTransport:
    class Body(httpx2.SyncByteStream):
        def __iter__(self) -> Iterator[bytes]:
            for i, block in enumerate(blocks):
                if clock is not None:
                    clock.advance(i)
                yield block
            if fail:
                raise httpx2.ReadError("peer reset")

    return httpx2.MockTransport(
        lambda request: httpx2.Response(200, headers={"content-type": "text/event-stream"}, stream=Body())
    )


def async_transport(blocks: list[bytes], fail: bool, gate: asyncio.Event) -> httpx2.MockTransport:
    class Body(httpx2.AsyncByteStream):
        async def __aiter__(self) -> AsyncIterator[bytes]:
            for block in blocks:
                await gate.wait()  # cleared while a cancellation is staged: the read waits here
                yield block
            await gate.wait()
            if fail:
                raise httpx2.ReadError("peer reset")

    async def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, stream=Body())

    return httpx2.MockTransport(handler)


# -- telemetry that counts ----------------------------------------------------------------------------
class Counting(SpanProcessor):
    def __init__(self) -> None:
        self.started: list[int] = []
        self.ended: list[int] = []

    def on_start(self, span: Span, parent_context: Any = None) -> None:
        self.started.append(span.context.span_id)

    def on_end(self, span: ReadableSpan) -> None:
        assert span.context is not None
        self.ended.append(span.context.span_id)


class Complaints(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@dataclass
class Telemetry:
    exporter: InMemorySpanExporter = field(default_factory=InMemorySpanExporter)
    counting: Counting = field(default_factory=Counting)
    reader: InMemoryMetricReader = field(default_factory=InMemoryMetricReader)
    complaints: Complaints = field(default_factory=Complaints)


@contextmanager
def instrumented() -> Iterator[Telemetry]:
    """spark-otel into fresh in-memory providers; the heap that was there before frozen, so that
    the collections that finalize a dropped proxy only walk what this example made."""
    gc.freeze()
    t = Telemetry()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(t.counting)
    tracer_provider.add_span_processor(SimpleSpanProcessor(t.exporter))
    meter_provider = MeterProvider(metric_readers=[t.reader])
    logger = logging.getLogger("spark_otel")
    logger.addHandler(t.complaints)
    spark_otel.instrument(tracer_provider=tracer_provider, meter_provider=meter_provider)
    try:
        yield t
    finally:
        spark_otel.uninstrument()
        logger.removeHandler(t.complaints)
        tracer_provider.shutdown()
        meter_provider.shutdown()
        gc.unfreeze()


# -- programs -----------------------------------------------------------------------------------------
_SYNC_STEPS = ["next", "close", "for_break", "for_raise", "list"]
_ASYNC_STEPS = [*_SYNC_STEPS, "cancel"]


@st.composite
def programs(draw: st.DrawFn, steps: list[str]) -> dict[str, Any]:
    return {
        "words": draw(st.integers(1, 4)),
        "ending": draw(st.sampled_from(["done", "done", "error_event", "reset"])),
        "with_block": draw(st.booleans()),
        "raise_out": draw(st.booleans()),
        "steps": draw(st.lists(st.tuples(st.sampled_from(steps), st.integers(1, 3)), max_size=5)),
    }


Log = list[tuple[Any, ...]]


def _text(chunk: Any) -> str:
    return "|".join(str(c.delta.content) for c in chunk.choices) or "usage"


def run_sync(program: dict[str, Any], probe: Callable[[], Any] = lambda: None) -> tuple[Log, Any]:
    blocks = body_blocks(program["words"], program["ending"], (3, program["words"]))
    http = httpx2.Client(transport=sync_transport(blocks, program["ending"] == "reset"))
    client = openai.OpenAI(base_url="http://127.0.0.1:9/v1", api_key="sk", http_client=http)
    # Only `box` holds the stream: when it is cleared, nothing else keeps the proxy alive.
    box: list[Any] = [client.chat.completions.create(model="m", messages=MESSAGES, stream=True)]  # type: ignore[arg-type]
    log: Log = []

    def step(kind: str, k: int) -> None:
        stream = box[0]
        try:
            if kind == "next":
                for _ in range(k):
                    log.append(("chunk", _text(next(stream))))
            elif kind == "close":
                stream.close()
                log.append(("closed",))
            elif kind == "list":
                for c in stream:  # as list() does, without losing what came before an error
                    log.append(("chunk", _text(c)))
                log.append(("exhausted",))
            else:
                for i, chunk in enumerate(stream, 1):
                    log.append(("chunk", _text(chunk)))
                    if i >= k:
                        if kind == "for_raise":
                            raise Mine
                        break
                else:
                    log.append(("exhausted",))
        except StopIteration:
            log.append(("exhausted",))
        except Mine:
            log.append(("mine",))
        except Exception as exc:
            log.append(("raised", type(exc).__name__))

    def steps() -> None:
        for kind, k in program["steps"]:
            step(kind, k)

    if program["with_block"]:
        try:
            with box[0]:
                steps()
                if program["raise_out"]:
                    raise Mine
        except Mine:
            log.append(("exit", "Mine"))
        else:
            log.append(("exit", None))
    else:
        steps()
    probed = probe()  # before the caller lets go of the stream
    box.clear()
    return log, probed


async def run_async(program: dict[str, Any], probe: Callable[[], Any] = lambda: None) -> tuple[Log, Any]:
    gate = asyncio.Event()
    gate.set()
    blocks = body_blocks(program["words"], program["ending"], (3, program["words"]))
    http = httpx2.AsyncClient(transport=async_transport(blocks, program["ending"] == "reset", gate))
    client = openai.AsyncOpenAI(base_url="http://127.0.0.1:9/v1", api_key="sk", http_client=http)
    box: list[Any] = [await client.chat.completions.create(model="m", messages=MESSAGES, stream=True)]  # type: ignore[arg-type]
    log: Log = []

    async def step(kind: str, k: int) -> None:
        stream = box[0]
        try:
            if kind == "next":
                for _ in range(k):
                    log.append(("chunk", _text(await stream.__anext__())))
            elif kind == "close":
                await (stream.close() if k == 1 else stream.aclose())
                log.append(("closed",))
            elif kind == "list":
                async for c in stream:
                    log.append(("chunk", _text(c)))
                log.append(("exhausted",))
            elif kind == "cancel":
                gate.clear()
                task = asyncio.ensure_future(stream.__anext__())
                for _ in range(5):
                    await asyncio.sleep(0)
                task.cancel()
                gate.set()
                try:
                    log.append(("chunk", _text(await task)))
                except asyncio.CancelledError:
                    log.append(("cancelled",))
            else:
                i = 0
                async for chunk in stream:
                    i += 1
                    log.append(("chunk", _text(chunk)))
                    if i >= k:
                        if kind == "for_raise":
                            raise Mine
                        break
                else:
                    log.append(("exhausted",))
        except StopAsyncIteration:
            log.append(("exhausted",))
        except Mine:
            log.append(("mine",))
        except Exception as exc:
            log.append(("raised", type(exc).__name__))

    async def steps() -> None:
        for kind, k in program["steps"]:
            await step(kind, k)

    if program["with_block"]:
        try:
            async with box[0]:
                await steps()
                if program["raise_out"]:
                    raise Mine
        except Mine:
            log.append(("exit", "Mine"))
        else:
            log.append(("exit", None))
    else:
        await steps()
    probed = probe()
    box.clear()
    await http.aclose()
    return log, probed


def ending_of(log: Log) -> tuple[str | None, int] | None:
    """The ``error.type`` and chunk count the first ending event in ``log`` implies; None when
    nothing ended the stream (it ends when the dropped proxy is collected)."""
    chunks = 0
    for entry in log:
        kind = entry[0]
        if kind == "chunk":
            chunks += 1
        elif kind == "exhausted":
            return None, chunks
        elif kind == "raised":
            return entry[1], chunks
        elif kind == "closed":
            return sc.ERROR_TYPE_STREAM_CLOSED, chunks
        elif kind == "cancelled":
            return sc.ERROR_TYPE_CANCELLED, chunks
        elif kind == "exit":
            return entry[1] or sc.ERROR_TYPE_STREAM_CLOSED, chunks
    return None


def check(t: Telemetry, log: Log, before_gc: tuple[int, int]) -> None:
    ending = ending_of(log)
    started, ended = before_gc
    assert started == 1
    # Ended by the first ending event, not later (and not by the collector); else only by it.
    assert ended == (1 if ending is not None else 0), log
    assert len(t.counting.started) == 1
    assert t.counting.ended == t.counting.started, "a span ended twice, or never"
    (span,) = t.exporter.get_finished_spans()
    attrs = span.attributes or {}
    chunks = sum(1 for e in log if e[0] == "chunk")
    expected_error, expected_chunks = (
        ending if ending is not None else (sc.ERROR_TYPE_STREAM_ABANDONED, chunks)
    )
    assert attrs.get(sc.ERROR_TYPE) == expected_error, log
    assert attrs[sc.REQUEST_CHUNKS] == expected_chunks, log
    (duration,) = metric_points(t.reader, sc.GEN_AI_CLIENT_OPERATION_DURATION)
    assert duration.count == 1
    assert duration.attributes.get(sc.ERROR_TYPE) == expected_error
    assert t.complaints.records == []


@settings(max_examples=100, deadline=None)
@given(program=programs(_SYNC_STEPS))
def test_sync_proxy_is_transparent_and_ends_its_span_once(program: dict[str, Any]) -> None:
    bare, _ = run_sync(program)
    with instrumented() as t:
        log, before_gc = run_sync(program, lambda: (len(t.counting.started), len(t.counting.ended)))
        gc.collect()
        assert log == bare
        check(t, log, before_gc)


@settings(max_examples=100, deadline=None)
@given(program=programs(_ASYNC_STEPS))
def test_async_proxy_is_transparent_and_ends_its_span_once(program: dict[str, Any]) -> None:
    bare, _ = asyncio.run(run_async(program))
    with instrumented() as t:
        log, before_gc = asyncio.run(
            run_async(program, lambda: (len(t.counting.started), len(t.counting.ended)))
        )
        gc.collect()
        assert log == bare
        check(t, log, before_gc)


# -- figures that must agree ---------------------------------------------------------------------------
def _one_sum(t: Telemetry, name: str, **attrs: Any) -> Any:
    points = [
        p for p in metric_points(t.reader, name) if all(p.attributes.get(k) == v for k, v in attrs.items())
    ]
    assert len(points) == 1, (name, attrs, points)
    return points[0]


@settings(max_examples=100, deadline=None)
@given(
    words=st.integers(1, 5),
    usage=st.tuples(st.integers(0, 10**6), st.integers(0, 10**6)),
    steps=st.lists(st.integers(0, 3 * 10**9), min_size=1, max_size=6),
)
def test_a_completed_streams_span_and_metrics_say_the_same_figures(
    words: int, usage: tuple[int, int], steps: list[int]
) -> None:
    """Span attribute and metric point of one quantity, in one unit (seconds, tokens), are equal.

    The clock is one the body advances by ``steps`` ns before each read, so every reading is
    known; the span's own duration (its end minus its start) is the metric's duration."""
    clock = Clock(steps)
    wall_epoch = 1_700_000_000 * 10**9
    with (
        instrumented() as t,
        patch.object(_clock, "real_monotonic_ns", lambda: clock.now),
        patch.object(_stream, "real_monotonic_ns", lambda: clock.now),
        patch.object(_clock, "wall_ns", lambda: wall_epoch + clock.now),
    ):
        blocks = body_blocks(words, "done", usage)
        http = httpx2.Client(transport=sync_transport(blocks, False, clock))
        client = openai.OpenAI(base_url="http://127.0.0.1:9/v1", api_key="sk", http_client=http)
        start = clock.now
        chunks = list(client.chat.completions.create(model="m", messages=MESSAGES, stream=True))  # type: ignore[arg-type]
        (span,) = t.exporter.get_finished_spans()
    attrs = span.attributes or {}
    assert len(chunks) == attrs[sc.REQUEST_CHUNKS] == words + 1  # the words and the usage chunk
    assert sc.ERROR_TYPE not in attrs

    input_tokens, output_tokens = usage
    assert attrs[sc.GEN_AI_USAGE_INPUT_TOKENS] == input_tokens
    assert attrs[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == output_tokens
    tokens = sc.GEN_AI_CLIENT_TOKEN_USAGE
    assert _one_sum(t, tokens, **{sc.GEN_AI_TOKEN_TYPE: sc.TOKEN_TYPE_INPUT}).sum == input_tokens
    assert _one_sum(t, tokens, **{sc.GEN_AI_TOKEN_TYPE: sc.TOKEN_TYPE_OUTPUT}).sum == output_tokens

    assert span.start_time is not None
    assert span.end_time is not None
    span_s = (span.end_time - span.start_time) / 1e9
    duration = _one_sum(t, sc.GEN_AI_CLIENT_OPERATION_DURATION)
    assert duration.count == 1
    assert duration.sum == pytest.approx(span_s, rel=1e-12, abs=1e-12)
    assert duration.sum == pytest.approx((clock.now - start) / 1e9, rel=1e-12, abs=1e-12)

    first = _one_sum(t, sc.GEN_AI_CLIENT_TIME_TO_FIRST_CHUNK)
    assert first.count == 1
    assert first.sum == pytest.approx(attrs[sc.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK], rel=1e-12, abs=1e-12)
    assert first.sum == pytest.approx(steps[0] / 1e9, rel=1e-12, abs=1e-12)  # the first read's wait
    per_chunk = _one_sum(t, sc.GEN_AI_CLIENT_TIME_PER_OUTPUT_CHUNK)
    # One interval between consecutive chunks; together they span the first chunk to the last.
    assert per_chunk.count == words
    gaps = sum(steps[i % len(steps)] for i in range(1, words + 1))
    assert per_chunk.sum == pytest.approx(gaps / 1e9, rel=1e-9, abs=1e-12)
