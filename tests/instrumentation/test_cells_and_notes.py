"""Requests inside a cell nest under it and add up in it; request notes reach the span."""

from __future__ import annotations

import asyncio
import contextlib

import openai
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode
from tests.support.engine_server import MODEL
from tests.support.finished_spans import cell_span, one_span, request_spans

from spark_otel import ContextThreadPoolExecutor, cell
from spark_otel import _semconv as sc
from spark_otel.instrumentation.request_notes import request_notes

MESSAGES = [{"role": "user", "content": "one two"}]


def test_requests_in_worker_threads_nest_under_the_cell_and_sum_tokens(
    base_url: str,
    instrumented: None,
    tracer_provider: TracerProvider,
    meter_provider: MeterProvider,
    span_exporter: InMemorySpanExporter,
) -> None:
    client = openai.OpenAI(base_url=base_url, api_key="sk")

    def ask(n: int) -> int:
        result = client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=n)  # type: ignore[arg-type]
        return result.usage.completion_tokens  # type: ignore[union-attr]

    with (
        cell(
            "golden",
            "B#1",
            engine="qwen",
            workers=3,
            tracer_provider=tracer_provider,
            meter_provider=meter_provider,
        ) as state,
        ContextThreadPoolExecutor(max_workers=3) as pool,
    ):
        got = list(pool.map(ask, [2, 3, 4]))
    assert got == [2, 3, 4]
    assert state.requests == 3
    assert state.completion_tokens == 9
    assert state.prompt_tokens == 6
    parent = cell_span(span_exporter)
    for span in request_spans(span_exporter):
        assert span.parent is not None
        assert span.parent.span_id == parent.context.span_id
        assert span.context.trace_id == parent.context.trace_id
        a = span.attributes or {}
        assert a[sc.EVAL_NAME] == "golden"
        assert a[sc.CELL_ID] == "B#1"
        assert a[sc.ENGINE] == "qwen"
        assert a[sc.CELL_UID] == state.uid
    assert parent.attributes[sc.CELL_COMPLETION_TOKENS] == 9  # type: ignore[index]


async def test_streams_in_tasks_inside_an_async_cell_add_up_when_they_end(
    base_url: str,
    instrumented: None,
    tracer_provider: TracerProvider,
    meter_provider: MeterProvider,
    span_exporter: InMemorySpanExporter,
) -> None:
    client = openai.AsyncOpenAI(base_url=base_url, api_key="sk")

    async def stream(n: int) -> int:
        s = await client.completions.create(
            model=MODEL, prompt="a b c", max_tokens=n, stream=True, stream_options={"include_usage": True}
        )
        return len([c async for c in s if c.choices])

    async with cell("golden", "B#2", tracer_provider=tracer_provider, meter_provider=meter_provider) as state:
        counts = await asyncio.gather(*(asyncio.create_task(stream(n)) for n in (3, 5)))
    assert counts == [3, 5]
    assert state.completion_tokens == 8
    assert state.prompt_tokens == 6
    parent = cell_span(span_exporter)
    spans = request_spans(span_exporter)
    assert len(spans) == 2
    assert all(s.parent is not None and s.parent.span_id == parent.context.span_id for s in spans)


def test_failed_request_counts_as_failed_in_the_cell(
    base_url: str,
    instrumented: None,
    tracer_provider: TracerProvider,
    meter_provider: MeterProvider,
) -> None:
    client = openai.OpenAI(base_url=base_url, api_key="sk", max_retries=0)
    with (
        cell("golden", "B#3", tracer_provider=tracer_provider, meter_provider=meter_provider) as state,
        contextlib.suppress(openai.NotFoundError),
    ):
        client.completions.create(model="missing", prompt="x")
    assert state.requests == 1
    assert state.failed_requests == 1
    assert state.completion_tokens is None


def test_request_notes_set_error_type_and_attributes_on_a_cut_off_stream(
    base_url: str, instrumented: None, span_exporter: InMemorySpanExporter
) -> None:
    client = openai.OpenAI(base_url=base_url, api_key="sk")
    with request_notes() as notes:
        stream = client.chat.completions.create(
            model=MODEL,
            messages=MESSAGES,
            max_tokens=100,
            stream=True,  # type: ignore[arg-type]
        )
    # The deadline helper fills its notes after the call started, then closes the stream.
    next(stream)
    notes.error_type = sc.ERROR_TYPE_DEADLINE
    notes.attributes[sc.REQUEST_SALVAGED_FINDINGS] = 2
    stream.close()
    span = one_span(span_exporter)
    assert span.attributes[sc.ERROR_TYPE] == "deadline"  # type: ignore[index]
    assert span.attributes[sc.REQUEST_SALVAGED_FINDINGS] == 2  # type: ignore[index]
    assert span.status.status_code is StatusCode.ERROR


def test_notes_apply_only_to_requests_started_inside_them(
    base_url: str, instrumented: None, span_exporter: InMemorySpanExporter
) -> None:
    client = openai.OpenAI(base_url=base_url, api_key="sk")
    with request_notes() as notes:
        notes.error_type = sc.ERROR_TYPE_DEADLINE
    client.completions.create(model=MODEL, prompt="x", max_tokens=1)
    assert sc.ERROR_TYPE not in (one_span(span_exporter).attributes or {})
