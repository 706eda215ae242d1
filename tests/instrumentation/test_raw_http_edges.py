"""The raw layer's edges: what a response says decides what is read from it, exactly. Bodies a
real peer cannot be made to send on demand (no content type, a body of exactly the JSON cap, an
SSE body where one choice finishes long before the other) come from httpx2's `MockTransport`."""

from __future__ import annotations

import gzip
import json
import logging
import sys
import types
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx2
import pytest
from opentelemetry import context as otel_context
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode
from tests.support.engine_server import MODEL
from tests.support.finished_spans import one_span

import spark_otel
from spark_otel import _semconv as sc
from spark_otel.instrumentation import _httpx_patch, _raw_http

URL = "http://engine:8000/v1/chat/completions"
USAGE = {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}
ANSWER = {
    "id": "r1",
    "object": "chat.completion",
    "model": "m",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}],
    "usage": USAGE,
}


def _client(*responses: httpx2.Response) -> httpx2.Client:
    queue = list(responses)
    return httpx2.Client(transport=httpx2.MockTransport(lambda request: queue.pop(0)))


def _post(client: httpx2.Client, **body: Any) -> httpx2.Response:
    return client.post(URL, json={"model": "m", "messages": [{"role": "user", "content": "x"}], **body})


def _event(obj: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


def _chunk(index: int, text: str, reason: str | None = None) -> bytes:
    choice = {"index": index, "delta": {"content": text}, "finish_reason": reason}
    return _event({"id": "r1", "model": "m", "choices": [choice]})


class Blocks(httpx2.SyncByteStream):
    def __init__(self, blocks: list[bytes]) -> None:
        self.blocks = blocks

    def __iter__(self) -> Iterator[bytes]:
        yield from self.blocks


@pytest.mark.parametrize("status", [400, 401, 500])
def test_a_read_response_of_4xx_or_5xx_is_an_error_of_its_status(
    status: int, instrumented: None, span_exporter: InMemorySpanExporter
) -> None:
    with _client(httpx2.Response(status, json={"error": {"message": "bad"}, "usage": USAGE})) as client:
        assert _post(client).status_code == status
    a = one_span(span_exporter).attributes or {}
    assert a[sc.ERROR_TYPE] == str(status)
    assert sc.GEN_AI_USAGE_INPUT_TOKENS not in a  # an error body's figures are not the answer's


def test_a_read_response_of_399_is_read_as_an_answer(
    instrumented: None, span_exporter: InMemorySpanExporter
) -> None:
    with _client(httpx2.Response(399, json=ANSWER)) as client:
        _post(client)
    a = one_span(span_exporter).attributes or {}
    assert sc.ERROR_TYPE not in a
    assert a[sc.GEN_AI_USAGE_INPUT_TOKENS] == 5


def test_a_json_answer_without_a_content_type_is_read_as_json(
    instrumented: None, span_exporter: InMemorySpanExporter, caplog: pytest.LogCaptureFixture
) -> None:
    with (
        caplog.at_level(logging.WARNING),
        _client(httpx2.Response(200, content=json.dumps(ANSWER).encode())) as c,
    ):
        _post(c)
    a = one_span(span_exporter).attributes or {}
    assert (a[sc.GEN_AI_USAGE_INPUT_TOKENS], a[sc.GEN_AI_USAGE_OUTPUT_TOKENS]) == (5, 2)
    assert list(a[sc.GEN_AI_RESPONSE_FINISH_REASONS]) == ["stop"]  # type: ignore[arg-type]
    assert caplog.records == []


def test_an_sse_body_read_in_one_go_is_captured_when_asked(
    capturing: None, span_exporter: InMemorySpanExporter
) -> None:
    body = _chunk(0, "Hel") + _chunk(0, "lo", "stop") + b"data: [DONE]\n\n"
    sse = httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=body)
    with _client(sse) as client:
        _post(client, stream=True)
    a = one_span(span_exporter).attributes or {}
    assert a[sc.GEN_AI_RESPONSE_MODEL] == "m"
    messages = json.loads(a[sc.GEN_AI_OUTPUT_MESSAGES])  # type: ignore[arg-type]
    assert messages == [
        {"role": "assistant", "parts": [{"type": "text", "content": "Hello"}], "finish_reason": "stop"}
    ]


def test_an_sse_body_read_in_one_go_keeps_each_choice_s_reason_however_early_it_came(
    instrumented: None, span_exporter: InMemorySpanExporter
) -> None:
    """With ``n`` choices every event is searched (one choice's reason can come long before the
    end), not only the last few the single-choice path keeps."""
    body = _chunk(0, "a", "stop") + b"".join(_chunk(1, f"w{i}") for i in range(20)) + _chunk(1, "z", "length")
    sse = httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=body)
    with _client(sse) as client:
        _post(client, stream=True, n=2)
    a = one_span(span_exporter).attributes or {}
    assert list(a[sc.GEN_AI_RESPONSE_FINISH_REASONS]) == ["stop", "length"]  # type: ignore[arg-type]
    assert a[sc.REQUEST_CHUNKS] == 22


def test_a_streamed_json_body_closed_after_its_last_byte_keeps_both_its_figures_and_the_close(
    instrumented: None, span_exporter: InMemorySpanExporter
) -> None:
    answer = httpx2.Response(
        200, headers={"content-type": "application/json"}, stream=Blocks([json.dumps(ANSWER).encode()])
    )
    with (
        _client(answer) as client,
        client.stream("POST", URL, json={"model": "m", "messages": []}) as response,
    ):
        for _ in response.iter_raw():
            break  # every byte is here, the body's end never read
    a = one_span(span_exporter).attributes or {}
    assert a[sc.ERROR_TYPE] == sc.ERROR_TYPE_STREAM_CLOSED
    assert (a[sc.GEN_AI_USAGE_INPUT_TOKENS], a[sc.GEN_AI_USAGE_OUTPUT_TOKENS]) == (5, 2)


@pytest.mark.parametrize(("padding", "read"), [(0, True), (1, False)], ids=["at-the-cap", "past-it"])
def test_a_streamed_json_body_is_read_up_to_its_cap_and_no_further(
    padding: int,
    read: bool,
    instrumented: None,
    span_exporter: InMemorySpanExporter,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cap = 4096
    monkeypatch.setattr(_raw_http, "MAX_JSON_BODY", cap)
    text = json.dumps(ANSWER).encode()
    text += b" " * (cap - len(text) + padding)  # JSON allows trailing blanks: the same answer
    blocks = [text[i : i + 1000] for i in range(0, len(text), 1000)]
    answer = httpx2.Response(200, headers={"content-type": "application/json"}, stream=Blocks(blocks))
    with (
        _client(answer) as client,
        client.stream("POST", URL, json={"model": "m", "messages": []}) as response,
    ):
        assert response.read() == text
    a = one_span(span_exporter).attributes or {}
    assert (sc.GEN_AI_USAGE_INPUT_TOKENS in a) is read
    assert sc.ERROR_TYPE not in a


def test_trace_headers_a_transport_already_took_off_are_not_a_failure(
    tracer_provider: TracerProvider,
    meter_provider: MeterProvider,
    span_exporter: InMemorySpanExporter,
    caplog: pytest.LogCaptureFixture,
) -> None:
    spark_otel.instrument(
        tracer_provider=tracer_provider, meter_provider=meter_provider, inject_traceparent=True
    )
    seen: list[str | None] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        seen.append(request.headers.pop("traceparent", None))
        return httpx2.Response(200, json=ANSWER)

    request = httpx2.Request("POST", URL, json={"model": "m", "messages": []})
    with caplog.at_level(logging.WARNING), httpx2.Client(transport=httpx2.MockTransport(handler)) as client:
        client.send(request)
    spark_otel.uninstrument()
    assert seen[0] is not None  # it was sent
    assert "traceparent" not in request.headers
    assert caplog.records == []
    assert one_span(span_exporter).attributes[sc.GEN_AI_USAGE_INPUT_TOKENS] == 5  # type: ignore[index]


@pytest.mark.parametrize("status", [400, 401])
def test_a_streamed_response_of_4xx_is_an_error_of_its_status(
    status: int, instrumented: None, span_exporter: InMemorySpanExporter
) -> None:
    refused = httpx2.Response(status, headers={"content-type": "text/event-stream"}, content=_chunk(0, "x"))
    with (
        _client(refused) as client,
        client.stream("POST", URL, json={"model": "m", "stream": True}) as response,
    ):
        response.read()
    a = one_span(span_exporter).attributes or {}
    assert a[sc.ERROR_TYPE] == str(status)
    assert sc.REQUEST_CHUNKS not in a  # an error's body is not read as the answer's stream


@pytest.mark.parametrize(
    "key", ["_SUPPRESS_INSTRUMENTATION_KEY", "_SUPPRESS_HTTP_INSTRUMENTATION_KEY"], ids=["all", "http"]
)
def test_a_call_under_suppress_instrumentation_makes_no_span(
    key: str, instrumented: None, span_exporter: InMemorySpanExporter
) -> None:
    token = otel_context.attach(otel_context.set_value(getattr(otel_context, key), True))
    try:
        with _client(httpx2.Response(200, json=ANSWER)) as client:
            assert _post(client).json() == ANSWER
    finally:
        otel_context.detach(token)
    assert span_exporter.get_finished_spans() == ()


def test_a_body_that_is_no_json_object_still_makes_the_call_s_span(
    instrumented: None, span_exporter: InMemorySpanExporter, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING), _client(httpx2.Response(200, json=ANSWER)) as client:
        client.post(URL, json=[{"model": "m"}])
    a = one_span(span_exporter).attributes or {}
    assert a[sc.GEN_AI_USAGE_INPUT_TOKENS] == 5
    assert sc.GEN_AI_REQUEST_MODEL not in a
    assert caplog.records == []


def test_a_compressed_body_closed_early_is_closed_and_claims_no_figures(
    instrumented: None, span_exporter: InMemorySpanExporter
) -> None:
    packed = gzip.compress(json.dumps(ANSWER).encode())
    headers = {"content-type": "application/json", "content-encoding": "gzip"}
    answer = httpx2.Response(200, headers=headers, stream=Blocks([packed[:10], packed[10:]]))
    with (
        _client(answer) as client,
        client.stream("POST", URL, json={"model": "m", "messages": []}) as response,
    ):
        for _ in response.iter_raw():
            break
    a = one_span(span_exporter).attributes or {}
    assert a[sc.ERROR_TYPE] == sc.ERROR_TYPE_STREAM_CLOSED
    assert sc.GEN_AI_USAGE_INPUT_TOKENS not in a


def test_a_failing_finalize_keeps_the_close_as_the_error_and_is_reported_once(
    instrumented: None,
    span_exporter: InMemorySpanExporter,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    def failing(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("injected into finish_sse")

    monkeypatch.setattr(_raw_http, "finish_sse", failing)
    sse = httpx2.Response(
        200, headers={"content-type": "text/event-stream"}, stream=Blocks([_chunk(0, "a")] * 3)
    )
    with (
        caplog.at_level(logging.WARNING),
        _client(sse) as client,
        client.stream("POST", URL, json={"model": "m", "stream": True}) as response,
    ):
        for _ in response.iter_raw():
            break
    assert one_span(span_exporter).attributes[sc.ERROR_TYPE] == sc.ERROR_TYPE_STREAM_CLOSED  # type: ignore[index]
    assert [r.getMessage() for r in caplog.records] == [
        "spark_otel: httpx response finalize failed; the call goes on untouched"
    ]
    assert str(caplog.records[0].exc_info[1]) == "injected into finish_sse"  # type: ignore[index]


FOREIGN_SCOPE = "opentelemetry.instrumentation.genai.openai"


@pytest.mark.parametrize("mode", ["read", "streamed", "sse-read"])
def test_a_raw_call_under_another_instrumentation_s_span_is_counted_in_the_cell_on_that_span(
    mode: str,
    base_url: str,
    instrumented: None,
    tracer_provider: TracerProvider,
    meter_provider: MeterProvider,
    span_exporter: InMemorySpanExporter,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Another GenAI instrumentation's span is current (its package imported): the raw layer makes
    no span of its own, puts the cell's attributes on that one and counts the call in the cell."""
    monkeypatch.setitem(sys.modules, FOREIGN_SCOPE, types.ModuleType(FOREIGN_SCOPE))
    foreign = tracer_provider.get_tracer(FOREIGN_SCOPE)
    body = {"model": MODEL, "messages": [{"role": "user", "content": "one two"}], "max_tokens": 3}
    if mode != "read":
        body |= {"stream": True, "stream_options": {"include_usage": True}}
    with (
        spark_otel.cell(
            "golden", "B#1", tracer_provider=tracer_provider, meter_provider=meter_provider
        ) as state,
        foreign.start_as_current_span(f"chat {MODEL}"),
        httpx2.Client() as client,
    ):
        if mode == "streamed":
            with client.stream("POST", f"{base_url}/chat/completions", json=body) as response:
                response.read()
        else:
            client.post(f"{base_url}/chat/completions", json=body)
    (span,) = [s for s in span_exporter.get_finished_spans() if s.name == f"chat {MODEL}"]
    assert span.instrumentation_scope.name == FOREIGN_SCOPE  # type: ignore[union-attr]
    assert (span.attributes or {})[sc.CELL_ID] == state.cell_id
    assert (state.requests, state.failed_requests, state.prompt_tokens, state.completion_tokens) == (
        1,
        0,
        2,
        3,
    )


@pytest.mark.parametrize(("url", "port"), [("http://engine/v1", 80), ("https://engine/v1", 443)])
def test_a_url_without_a_port_records_its_scheme_s_port(
    url: str, port: int, instrumented: None, span_exporter: InMemorySpanExporter
) -> None:
    seen: list[str | None] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        seen.append(request.headers.get("traceparent"))
        return httpx2.Response(200, json=ANSWER)

    with httpx2.Client(transport=httpx2.MockTransport(handler)) as client:
        client.post(f"{url}/chat/completions", json={"model": "m", "messages": []})
    a = one_span(span_exporter).attributes or {}
    assert (a[sc.SERVER_ADDRESS], a[sc.SERVER_PORT]) == ("engine", port)
    assert seen == [None]  # no trace header unless asked for


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
async def test_a_request_passed_by_keyword_is_traced_like_one_passed_by_position(
    is_async: bool, instrumented: None, span_exporter: InMemorySpanExporter
) -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": "x"}]}
    transport = httpx2.MockTransport(lambda request: httpx2.Response(200, json=ANSWER))
    if is_async:
        async with httpx2.AsyncClient(transport=transport) as aclient:
            response = await aclient.send(request=aclient.build_request("POST", URL, json=body))
    else:
        with httpx2.Client(transport=transport) as client:
            response = client.send(request=client.build_request("POST", URL, json=body))
    assert response.json() == ANSWER
    a = one_span(span_exporter).attributes or {}
    assert (a[sc.GEN_AI_USAGE_INPUT_TOKENS], a[sc.GEN_AI_USAGE_OUTPUT_TOKENS]) == (5, 2)


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
async def test_a_send_without_a_request_raises_what_it_raises_bare(
    is_async: bool, tracer_provider: TracerProvider, meter_provider: MeterProvider,
    span_exporter: InMemorySpanExporter,
) -> None:  # fmt: skip
    async def attempt() -> BaseException:
        try:
            if is_async:
                async with httpx2.AsyncClient() as aclient:
                    await aclient.send()  # type: ignore[call-arg]
            else:
                with httpx2.Client() as client:
                    client.send()  # type: ignore[call-arg]
        except BaseException as exc:
            return exc
        raise AssertionError("send() without a request did not raise")

    bare = await attempt()
    spark_otel.instrument(tracer_provider=tracer_provider, meter_provider=meter_provider)
    instrumented = await attempt()
    assert (type(instrumented), str(instrumented)) == (type(bare), str(bare))
    assert span_exporter.get_finished_spans() == ()


def _streamed(client: httpx2.Client, **body: Any) -> Any:
    return client.stream("POST", URL, json={"model": "m", "messages": [], **body})


def test_a_streamed_sse_body_keeps_each_choice_s_reason_however_early_it_came(
    instrumented: None, span_exporter: InMemorySpanExporter
) -> None:
    blocks = [_chunk(0, "a", "stop"), *(_chunk(1, f"w{i}") for i in range(20)), _chunk(1, "z", "length")]
    sse = httpx2.Response(200, headers={"content-type": "text/event-stream"}, stream=Blocks(blocks))
    with _client(sse) as client, _streamed(client, stream=True, n=2) as response:
        assert response.read() == b"".join(blocks)
    a = one_span(span_exporter).attributes or {}
    assert list(a[sc.GEN_AI_RESPONSE_FINISH_REASONS]) == ["stop", "length"]  # type: ignore[arg-type]
    assert a[sc.REQUEST_CHUNKS] == 22


def test_a_streamed_answer_without_a_content_type_is_read_as_json(
    instrumented: None, span_exporter: InMemorySpanExporter, caplog: pytest.LogCaptureFixture
) -> None:
    answer = httpx2.Response(200, stream=Blocks([json.dumps(ANSWER).encode()]))
    with caplog.at_level(logging.WARNING), _client(answer) as client, _streamed(client) as response:
        response.read()
    a = one_span(span_exporter).attributes or {}
    assert (a[sc.GEN_AI_USAGE_INPUT_TOKENS], a[sc.GEN_AI_USAGE_OUTPUT_TOKENS]) == (5, 2)
    assert sc.ERROR_TYPE not in a
    assert caplog.records == []


def test_a_streamed_body_that_is_no_json_closed_early_is_closed(
    instrumented: None, span_exporter: InMemorySpanExporter
) -> None:
    text = httpx2.Response(200, headers={"content-type": "text/plain"}, stream=Blocks([b"not", b" json"]))
    with _client(text) as client, _streamed(client) as response:
        for _ in response.iter_raw():
            break
    a = one_span(span_exporter).attributes or {}
    assert a[sc.ERROR_TYPE] == sc.ERROR_TYPE_STREAM_CLOSED
    assert sc.GEN_AI_USAGE_OUTPUT_TOKENS not in a


@pytest.mark.parametrize("streamed", [False, True], ids=["read", "streamed"])
@pytest.mark.parametrize(("n", "choices"), [(None, 1), (2, 2)])
def test_the_sse_scanner_is_told_the_choices_asked_for(
    streamed: bool, n: int | None, choices: int, instrumented: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One choice keeps only the last events to find its reason (the cheap path); only ``n > 1``
    searches every event."""
    told: list[int] = []

    class Recording(_httpx_patch.SseScanner):
        def __init__(self, *, capture: bool, choices: int = 1) -> None:
            told.append(choices)
            super().__init__(capture=capture, choices=choices)

    monkeypatch.setattr(_httpx_patch, "SseScanner", Recording)  # a body read at once
    monkeypatch.setattr(_raw_http, "SseScanner", Recording)  # a body observed as it streams
    body = {"stream": True} if n is None else {"stream": True, "n": n}
    events, headers = _chunk(0, "a", "stop") + b"data: [DONE]\n\n", {"content-type": "text/event-stream"}
    if streamed:
        sse = httpx2.Response(200, headers=headers, stream=Blocks([events]))
        with _client(sse) as client, _streamed(client, **body) as response:
            response.read()
    else:
        with _client(httpx2.Response(200, headers=headers, content=events)) as client:
            _post(client, **body)
    assert told == [choices]


class AsyncBlocks(httpx2.AsyncByteStream):
    def __init__(self, blocks: list[bytes]) -> None:
        self.blocks = blocks

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for block in self.blocks:
            yield block


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
async def test_a_streamed_call_under_suppress_instrumentation_streams_as_bare(
    is_async: bool, instrumented: None, span_exporter: InMemorySpanExporter
) -> None:
    """Suppressed, the call is passed through with every argument: ``stream=True`` included, so
    the body is still unread when the caller iterates it."""
    blocks = [b'{"id": ', b'"r1"}']
    headers = {"content-type": "application/json"}
    body = {"model": "m", "messages": [], "stream": True}
    token = otel_context.attach(otel_context.set_value(otel_context._SUPPRESS_INSTRUMENTATION_KEY, True))
    try:
        if is_async:
            astream = AsyncBlocks(blocks)
            atransport = httpx2.MockTransport(lambda r: httpx2.Response(200, headers=headers, stream=astream))
            async with (
                httpx2.AsyncClient(transport=atransport) as aclient,
                aclient.stream("POST", URL, json=body) as aresponse,
            ):
                got = [block async for block in aresponse.aiter_raw()]
            async with httpx2.AsyncClient(transport=atransport) as aclient:  # the request by position
                request = aclient.build_request("POST", URL, json=body)
                assert (await aclient.send(request)).status_code == 200
        else:
            transport = httpx2.MockTransport(
                lambda r: httpx2.Response(200, headers=headers, stream=Blocks(blocks))
            )
            with httpx2.Client(transport=transport) as client, _streamed(client, stream=True) as response:
                got = list(response.iter_raw())
            with httpx2.Client(transport=transport) as client:
                assert client.send(client.build_request("POST", URL, json=body)).status_code == 200
    finally:
        otel_context.detach(token)
    assert got == blocks
    assert span_exporter.get_finished_spans() == ()


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
async def test_a_transport_failure_is_raised_as_bare_and_is_the_span_s_error(
    is_async: bool, instrumented: None, span_exporter: InMemorySpanExporter
) -> None:
    def refuse(request: httpx2.Request) -> httpx2.Response:
        raise httpx2.ConnectError("connection refused", request=request)

    body = {"model": "m", "messages": []}
    if is_async:
        async with httpx2.AsyncClient(transport=httpx2.MockTransport(refuse)) as aclient:
            with pytest.raises(httpx2.ConnectError, match=r"^connection refused$"):
                await aclient.post(URL, json=body)
    else:
        with (
            httpx2.Client(transport=httpx2.MockTransport(refuse)) as client,
            pytest.raises(httpx2.ConnectError, match=r"^connection refused$"),
        ):
            client.post(URL, json=body)
    span = one_span(span_exporter)
    assert (span.attributes or {})[sc.ERROR_TYPE] == "ConnectError"
    assert span.status.status_code is StatusCode.ERROR
