"""Raw ``requests`` calls to /v1/*: one span per call with the engine's own tokens, streamed or
not, beside contrib's requests instrumentation in either order, and nothing left patched after."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from typing import Any

import pytest
import requests
import requests.adapters
from opentelemetry.instrumentation.requests import RequestsInstrumentor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind
from tests.support.engine_server import MODEL, ServerLog
from tests.support.finished_spans import one_span, request_spans
from tests.support.metric_points import metric_points
from tests.support.served import served_count, served_since

import spark_otel
from spark_otel import _semconv as sc

ENGINE = "qwen"
MESSAGES = [{"role": "user", "content": "Name three prime numbers."}]
SECRET = "sk-requests-secret"
USAGE_ON = {"stream": True, "stream_options": {"include_usage": True}}


def pinned(tokens: int) -> dict[str, Any]:
    """Exactly ``tokens`` tokens from the simulated engine (vLLM's ``min_tokens`` and ``ignore_eos``)."""
    return {"max_tokens": tokens, "min_tokens": tokens, "ignore_eos": True}


def _tokens(span: Any) -> tuple[int, int]:
    a = span.attributes or {}
    return a[sc.GEN_AI_USAGE_INPUT_TOKENS], a[sc.GEN_AI_USAGE_OUTPUT_TOKENS]


def test_posts_and_streams_carry_the_tokens_the_engine_served(
    live_box: Any,
    instrumented: None,
    span_exporter: InMemorySpanExporter,
    metric_reader: InMemoryMetricReader,
) -> None:
    url = live_box.url(ENGINE) + "/v1"
    auth = {"Authorization": f"Bearer {SECRET}"}
    before = served_count(live_box, ENGINE)
    chat = requests.post(
        f"{url}/chat/completions", json={"model": ENGINE, "messages": MESSAGES, **pinned(7)}, headers=auth
    )
    with requests.Session() as session:
        text = session.post(f"{url}/completions", json={"model": ENGINE, "prompt": "Once", **pinned(5)})
        with session.post(
            f"{url}/chat/completions",
            json={"model": ENGINE, "messages": MESSAGES, **pinned(9), **USAGE_ON},
            headers=auth,
            stream=True,
        ) as streamed:
            lines = [line for line in streamed.iter_lines() if line]
        with session.post(
            f"{url}/completions",
            json={"model": ENGINE, "prompt": "Twice", **pinned(6), **USAGE_ON},
            stream=True,
        ) as raw_read:
            body = raw_read.raw.read()  # past requests' own readers, straight from urllib3
    assert lines[-1] == b"data: [DONE]"
    assert body.endswith(b"data: [DONE]\n\n")
    served = served_since(live_box, ENGINE, before)
    spans = request_spans(span_exporter)
    assert [_tokens(s) for s in spans] == served
    assert [u["completion_tokens"] for u in (chat.json()["usage"], text.json()["usage"])] == [7, 5]
    assert [c for _, c in served] == [7, 5, 9, 6]
    assert {(s.attributes or {})[sc.REQUEST_LAYER] for s in spans} == {"requests"}
    assert [(s.attributes or {}).get(sc.GEN_AI_REQUEST_STREAM, False) for s in spans] == [
        False,
        False,
        True,
        True,
    ]
    assert [(s.attributes or {}).get(sc.REQUEST_CHUNKS) for s in spans] == [
        None,
        None,
        1 + 9 + 1,
        6 + 1,
    ]  # a chat stream opens with its role
    assert all(sc.ERROR_TYPE not in (s.attributes or {}) for s in spans)
    assert [s.attributes[sc.SERVER_PORT] for s in spans] == [live_box.port(ENGINE)] * 4  # type: ignore[index]
    assert SECRET not in repr([dict(s.attributes or {}) for s in spans])
    assert SECRET not in repr(metric_reader.get_metrics_data())
    outputs = [p for p in metric_points(metric_reader, sc.GEN_AI_CLIENT_TOKEN_USAGE) if _is_output(p)]
    assert sum(p.sum for p in outputs) == 7 + 5 + 9 + 6  # type: ignore[attr-defined]


def _is_output(point: Any) -> bool:
    return point.attributes[sc.GEN_AI_TOKEN_TYPE] == sc.TOKEN_TYPE_OUTPUT


def test_a_stream_is_passed_on_byte_for_byte(
    base_url: str,
    tracer_provider: TracerProvider,
    meter_provider: MeterProvider,
    span_exporter: InMemorySpanExporter,
) -> None:
    body = {"model": MODEL, "messages": MESSAGES, "max_tokens": 4, **USAGE_ON}

    def read() -> list[bytes]:
        with requests.post(f"{base_url}/chat/completions", json=body, stream=True) as r:
            return list(r.iter_content(chunk_size=7))

    bare = read()
    spark_otel.instrument(tracer_provider=tracer_provider, meter_provider=meter_provider)
    assert b"".join(read()) == b"".join(bare)
    assert one_span(span_exporter).attributes[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == 4  # type: ignore[index]


def test_a_stream_closed_early_a_failed_status_and_no_engine_are_error_types(
    base_url: str, free_port: int, instrumented: None, span_exporter: InMemorySpanExporter
) -> None:
    with requests.post(
        f"{base_url}/chat/completions",
        json={"model": MODEL, "messages": MESSAGES, "max_tokens": 50, "stream": True},
        stream=True,
    ) as r:
        next(r.iter_lines())
    missing = requests.post(f"{base_url}/completions", json={"model": "nope", "prompt": "x", "max_tokens": 2})
    with pytest.raises(requests.ConnectionError):
        requests.post(f"http://127.0.0.1:{free_port}/v1/completions", json={"model": MODEL, "prompt": "x"})
    requests.get(f"{base_url}/models")  # not a generation call: no span
    assert missing.status_code == 404
    errors = [(s.attributes or {})[sc.ERROR_TYPE] for s in request_spans(span_exporter)]
    assert errors == [sc.ERROR_TYPE_STREAM_CLOSED, "404", "ConnectionError"]


def test_a_stream_dropped_unread_is_abandoned(
    base_url: str, instrumented: None, span_exporter: InMemorySpanExporter
) -> None:
    response = requests.post(
        f"{base_url}/completions",
        json={"model": MODEL, "prompt": "x", "max_tokens": 3, "stream": True},
        stream=True,
    )
    assert request_spans(span_exporter) == []
    del response
    gc.collect()
    assert one_span(span_exporter).attributes[sc.ERROR_TYPE] == sc.ERROR_TYPE_STREAM_ABANDONED  # type: ignore[index]


def test_traceparent_reaches_the_engine_and_leaves_the_callers_request(
    base_url: str,
    server_log: ServerLog,
    tracer_provider: TracerProvider,
    meter_provider: MeterProvider,
    span_exporter: InMemorySpanExporter,
) -> None:
    spark_otel.instrument(
        tracer_provider=tracer_provider, meter_provider=meter_provider, inject_traceparent=True
    )
    response = requests.post(f"{base_url}/completions", json={"model": MODEL, "prompt": "x", "max_tokens": 2})
    span = one_span(span_exporter)
    sent = server_log.headers[-1]["traceparent"]
    assert sent.split("-")[2] == format(span.context.span_id, "016x")  # type: ignore[union-attr]
    assert "traceparent" not in response.request.headers


def test_requests_in_a_cell_add_up_in_the_cell(
    base_url: str, tracer_provider: TracerProvider, meter_provider: MeterProvider, instrumented: None
) -> None:
    with spark_otel.cell(
        "lm-eval-like", "doc-0", tracer_provider=tracer_provider, meter_provider=meter_provider
    ) as state:
        requests.post(f"{base_url}/completions", json={"model": MODEL, "prompt": "a b c", "max_tokens": 3})
        with requests.post(
            f"{base_url}/completions",
            json={"model": MODEL, "prompt": "d e", "max_tokens": 4, **USAGE_ON},
            stream=True,
        ) as r:
            r.content  # noqa: B018 - read the body as requests does
    assert (state.requests, state.prompt_tokens, state.completion_tokens) == (2, 5, 7)


# -- beside contrib's requests instrumentation -------------------------------------------------------


@pytest.fixture(params=["spark-first", "contrib-first"])
def beside_contrib(
    request: pytest.FixtureRequest, tracer_provider: TracerProvider, meter_provider: MeterProvider
) -> Iterator[None]:
    contrib = RequestsInstrumentor()

    def spark() -> None:
        spark_otel.instrument(tracer_provider=tracer_provider, meter_provider=meter_provider)

    def other() -> None:
        contrib.instrument(tracer_provider=tracer_provider, meter_provider=meter_provider)

    first, second = (spark, other) if request.param == "spark-first" else (other, spark)
    first()
    second()
    try:
        yield
    finally:
        contrib.uninstrument()
        spark_otel.uninstrument()


def test_beside_contrib_each_call_has_one_genai_span_below_contribs_http_span(
    beside_contrib: None, live_box: Any, span_exporter: InMemorySpanExporter
) -> None:
    url = live_box.url(ENGINE) + "/v1"
    before = served_count(live_box, ENGINE)
    requests.post(f"{url}/completions", json={"model": ENGINE, "prompt": "One", **pinned(3)})
    with requests.post(
        f"{url}/completions", json={"model": ENGINE, "prompt": "Two", **pinned(4), **USAGE_ON}, stream=True
    ) as r:
        list(r.iter_lines())
    spans = span_exporter.get_finished_spans()
    genai = request_spans(span_exporter)
    http = [s for s in spans if s not in genai]
    assert [s.instrumentation_scope.name for s in genai] == [sc.SCOPE_NAME] * 2  # type: ignore[union-attr]
    assert [_tokens(s) for s in genai] == served_since(live_box, ENGINE, before)
    assert [(s.name, s.kind) for s in http] == [("POST", SpanKind.CLIENT)] * 2
    assert [s.parent.span_id for s in genai] == [s.context.span_id for s in http]  # type: ignore[union-attr]


@pytest.mark.parametrize("order", ["spark-first", "contrib-first"])
@pytest.mark.parametrize("undo", ["last-first", "first-first"])
def test_uninstrument_in_any_order_restores_both_patched_functions(
    order: str,
    undo: str,
    base_url: str,
    tracer_provider: TracerProvider,
    meter_provider: MeterProvider,
    span_exporter: InMemorySpanExporter,
) -> None:
    originals = (requests.Session.send, requests.adapters.HTTPAdapter.send)
    contrib = RequestsInstrumentor()
    steps = {
        "spark": (
            lambda: spark_otel.instrument(tracer_provider=tracer_provider, meter_provider=meter_provider),
            spark_otel.uninstrument,
        ),
        "contrib": (
            lambda: contrib.instrument(tracer_provider=tracer_provider, meter_provider=meter_provider),
            contrib.uninstrument,
        ),
    }
    names = ["spark", "contrib"] if order == "spark-first" else ["contrib", "spark"]
    for name in names:
        steps[name][0]()
    for name in reversed(names) if undo == "last-first" else names:
        steps[name][1]()
    assert (requests.Session.send, requests.adapters.HTTPAdapter.send) == originals
    requests.post(f"{base_url}/completions", json={"model": MODEL, "prompt": "x", "max_tokens": 2})
    assert span_exporter.get_finished_spans() == ()
