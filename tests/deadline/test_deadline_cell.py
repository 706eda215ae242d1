"""The deadline result inside a cell, and on the request span when instrumentation is on."""

from __future__ import annotations

from typing import Any

import httpx2
import openai
import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from tests.support.deadline_server import FINDINGS, HALF, SALVAGE_DEADLINE_S, MisbehavingServer
from tests.support.finished_spans import cell_span, request_spans

import spark_otel
from spark_otel import _semconv as sc
from spark_otel.deadline import DeadlineStatus, astream_with_deadline, stream_with_deadline

MESSAGES = [{"role": "user", "content": "find the bugs"}]


def _cell(tracer_provider: TracerProvider, meter_provider: MeterProvider, seed: str) -> Any:
    return spark_otel.cell(
        "finder",
        seed,
        engine="qwen",
        deadline_s=0.4,
        tracer_provider=tracer_provider,
        meter_provider=meter_provider,
    )


def test_cut_off_seed_with_findings_is_a_degraded_deadline_cell(
    test_server: MisbehavingServer,
    tracer_provider: TracerProvider,
    meter_provider: MeterProvider,
    span_exporter: InMemorySpanExporter,
) -> None:
    with httpx2.Client(base_url=test_server.url) as client, _cell(tracer_provider, meter_provider, "seed-1"):
        result = stream_with_deadline(
            client, model="stall_body", messages=MESSAGES, test={"text": HALF}, deadline_s=SALVAGE_DEADLINE_S
        )
    assert result.status is DeadlineStatus.DEADLINE
    attrs = cell_span(span_exporter).attributes
    assert attrs[sc.CELL_STATUS] == "deadline"
    assert attrs[sc.CELL_DEADLINE_HIT] is True
    assert attrs[sc.CELL_SALVAGED_FINDINGS] == 2
    assert attrs[sc.CELL_DEGRADED] is True
    # Only server-reported tokens count in a cell, and a cut-off stream has none.
    assert sc.CELL_COMPLETION_TOKENS not in attrs
    # Not instrumented: the helper places its stream in the cell's time budget itself.
    first_token, decode = attrs[sc.CELL_BUDGET_FIRST_TOKEN_S], attrs[sc.CELL_BUDGET_DECODE_S]
    assert first_token == pytest.approx(result.timings.time_to_first_token_s, abs=0.005)
    assert decode > 0
    assert first_token + decode + attrs[sc.CELL_BUDGET_OTHER_S] == pytest.approx(
        attrs[sc.CELL_ELAPSED_S], abs=1e-9
    )
    assert attrs[sc.CELL_BUDGET_OTHER_S] < 0.02


def test_finished_seed_is_an_ok_cell_with_its_findings_counted(
    test_server: MisbehavingServer,
    tracer_provider: TracerProvider,
    meter_provider: MeterProvider,
    span_exporter: InMemorySpanExporter,
) -> None:
    with httpx2.Client(base_url=test_server.url) as client, _cell(tracer_provider, meter_provider, "seed-2"):
        result = stream_with_deadline(client, model="findings", messages=MESSAGES, deadline_s=30)
    assert result.status is DeadlineStatus.COMPLETE
    attrs = cell_span(span_exporter).attributes
    assert attrs[sc.CELL_STATUS] == "ok"
    assert attrs[sc.CELL_DEADLINE_HIT] is False
    assert attrs[sc.CELL_SALVAGED_FINDINGS] == len(FINDINGS)
    assert attrs[sc.CELL_DEGRADED] is False
    # Not instrumented: the helper counts the server's usage in the cell itself.
    assert attrs[sc.CELL_COMPLETION_TOKENS] == result.usage.completion_tokens
    assert attrs[sc.CELL_PROMPT_TOKENS] == 7


async def test_async_seed_that_fails_mid_stream_is_an_error_cell(
    test_server: MisbehavingServer,
    tracer_provider: TracerProvider,
    meter_provider: MeterProvider,
    span_exporter: InMemorySpanExporter,
) -> None:
    async with (
        httpx2.AsyncClient(base_url=test_server.url) as client,
        _cell(tracer_provider, meter_provider, "seed-3"),
    ):
        result = await astream_with_deadline(
            client, model="error_mid", messages=MESSAGES, test={"text": HALF}, deadline_s=30
        )
    assert result.status is DeadlineStatus.ERROR
    attrs = cell_span(span_exporter).attributes
    assert attrs[sc.CELL_STATUS] == "error"
    assert attrs[sc.CELL_DEADLINE_HIT] is False
    assert attrs[sc.CELL_DEGRADED] is False


def _assert_deadline_request_span(span: ReadableSpan) -> None:
    assert span.attributes[sc.ERROR_TYPE] == sc.ERROR_TYPE_DEADLINE
    assert span.attributes[sc.REQUEST_DEADLINE_STATUS] == "deadline"
    assert span.attributes[sc.REQUEST_SALVAGED_FINDINGS] == 2
    assert span.attributes[sc.REQUEST_TOKENS_SOURCE] == "streamed"


@pytest.mark.usefixtures("instrumented")
def test_instrumented_sync_cut_off_is_recorded_on_the_request_span(
    test_server: MisbehavingServer,
    tracer_provider: TracerProvider,
    meter_provider: MeterProvider,
    span_exporter: InMemorySpanExporter,
) -> None:
    with (
        openai.OpenAI(base_url=test_server.url + "/v1", api_key="k") as client,
        _cell(tracer_provider, meter_provider, "seed-4"),
    ):
        result = stream_with_deadline(
            client,
            model="stall_body",
            messages=MESSAGES,
            extra_body={"test": {"text": HALF}},
            deadline_s=SALVAGE_DEADLINE_S,
        )
    assert result.status is DeadlineStatus.DEADLINE
    assert result.findings == FINDINGS[:2]
    (span,) = request_spans(span_exporter)
    _assert_deadline_request_span(span)
    assert span.parent is not None
    assert span.parent.span_id == cell_span(span_exporter).context.span_id


@pytest.mark.usefixtures("instrumented")
@pytest.mark.parametrize("kind", ["openai", "httpx2"])
async def test_instrumented_async_cut_off_is_recorded_on_the_request_span(
    test_server: MisbehavingServer, span_exporter: InMemorySpanExporter, kind: str
) -> None:
    if kind == "openai":
        client: Any = openai.AsyncOpenAI(base_url=test_server.url + "/v1", api_key="k")
        extra: dict[str, Any] = {"extra_body": {"test": {"text": HALF}}}
    else:
        client = httpx2.AsyncClient(base_url=test_server.url)
        extra = {"test": {"text": HALF}}
    async with client:
        result = await astream_with_deadline(
            client, model="stall_body", messages=MESSAGES, deadline_s=SALVAGE_DEADLINE_S, **extra
        )
    assert result.status is DeadlineStatus.DEADLINE
    (span,) = request_spans(span_exporter)
    _assert_deadline_request_span(span)


def test_instrumentation_does_not_change_the_result(
    test_server: MisbehavingServer, tracer_provider: TracerProvider, meter_provider: MeterProvider
) -> None:
    def once() -> Any:
        with httpx2.Client(base_url=test_server.url) as client:
            return stream_with_deadline(client, model="findings", messages=MESSAGES, deadline_s=30)

    bare = once()
    spark_otel.instrument(tracer_provider=tracer_provider, meter_provider=meter_provider)
    try:
        instrumented = once()
    finally:
        spark_otel.uninstrument()
    keep = {"status", "text", "usage", "findings", "finish_reason", "model", "error"}
    assert instrumented.model_dump(include=keep) == bare.model_dump(include=keep)


@pytest.mark.usefixtures("instrumented")
def test_instrumented_cell_counts_the_tokens_once(
    test_server: MisbehavingServer,
    tracer_provider: TracerProvider,
    meter_provider: MeterProvider,
    span_exporter: InMemorySpanExporter,
) -> None:
    with httpx2.Client(base_url=test_server.url) as client, _cell(tracer_provider, meter_provider, "seed-5"):
        result = stream_with_deadline(client, model="findings", messages=MESSAGES, deadline_s=30)
    assert result.usage.source == "usage"
    attrs = cell_span(span_exporter).attributes
    assert attrs[sc.CELL_COMPLETION_TOKENS] == result.usage.completion_tokens
    assert attrs[sc.CELL_PROMPT_TOKENS] == 7
