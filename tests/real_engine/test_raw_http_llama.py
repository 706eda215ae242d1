"""`instrument()`'s ``requests`` and ``aiohttp`` layers against llama.cpp's server: a plain POST
and a stream with ``include_usage``, to chat and to completions. Each call is one span whose
tokens are the usage in the server's own body, made by the right layer, with the API key nowhere
in the telemetry; the caller gets the body the server sent.

Each call opens its own connection: llama.cpp closes the connection after a streamed response
(docs/sim.md, "keep-alive"), which a pooled client notices only when it reuses it."""

from __future__ import annotations

import json
from typing import Any

import aiohttp
import pytest
import requests
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from tests.support.finished_spans import request_spans
from tests.support.llama_server import LlamaServer

from spark_otel import _semconv as sc

KEY = "sk-llama-raw-secret"
AUTH = {"Authorization": f"Bearer {KEY}"}
TOKENS = 16
STREAM = {"stream": True, "stream_options": {"include_usage": True}}


def _body(kind: str, stream: bool) -> dict[str, Any]:
    """A request pinned to ``TOKENS`` tokens (llama.cpp honours ``ignore_eos``, not ``min_tokens``)."""
    body: dict[str, Any] = {"model": "tiny-llama", "max_tokens": TOKENS, "ignore_eos": True}
    if kind == "chat":
        body["messages"] = [{"role": "user", "content": "say something"}]
    else:
        body["prompt"] = "Once upon a time"
    return {**body, **STREAM} if stream else body


def _path(kind: str) -> str:
    return "/v1/chat/completions" if kind == "chat" else "/v1/completions"


def _streamed_usage(raw: bytes) -> dict[str, Any]:
    """The usage of the one SSE event that carries it (the stream must end with ``[DONE]``)."""
    events = [line.removeprefix(b"data: ") for line in raw.splitlines() if line.startswith(b"data: ")]
    assert events[-1] == b"[DONE]"
    (usage,) = [e["usage"] for e in map(json.loads, events[:-1]) if e.get("usage")]
    return dict(usage)


def _usages(spans: list[ReadableSpan]) -> list[tuple[Any, Any]]:
    attributes = [dict(s.attributes or {}) for s in spans]
    return [(a[sc.GEN_AI_USAGE_INPUT_TOKENS], a[sc.GEN_AI_USAGE_OUTPUT_TOKENS]) for a in attributes]


def _check(
    spans: list[ReadableSpan],
    served: list[dict[str, Any]],
    layer: str,
    llama: LlamaServer,
    metric_reader: InMemoryMetricReader,
) -> None:
    """One span per call, in order: the server's usage, the layer, the port, no key, no error."""
    assert [u["completion_tokens"] for u in served] == [TOKENS, TOKENS]
    assert _usages(spans) == [(u["prompt_tokens"], u["completion_tokens"]) for u in served]
    attributes = [dict(s.attributes or {}) for s in spans]
    assert [a[sc.REQUEST_LAYER] for a in attributes] == [layer, layer]
    assert [a.get(sc.GEN_AI_REQUEST_STREAM, False) for a in attributes] == [False, True]
    assert [a[sc.SERVER_PORT] for a in attributes] == [int(llama.url.rsplit(":", 1)[1])] * 2
    assert all(sc.ERROR_TYPE not in a for a in attributes)
    assert KEY not in repr(attributes)
    assert not any("authorization" in k.lower() for a in attributes for k in a)
    assert KEY not in repr([e.attributes for s in spans for e in s.events])
    assert KEY not in repr(metric_reader.get_metrics_data())


@pytest.mark.parametrize("kind", ["chat", "completions"])
def test_requests_posts_carry_the_servers_usage(
    llama: LlamaServer,
    instrumented: None,
    span_exporter: InMemorySpanExporter,
    metric_reader: InMemoryMetricReader,
    kind: str,
) -> None:
    url = llama.url + _path(kind)
    plain = requests.post(url, json=_body(kind, stream=False), headers=AUTH, timeout=60)
    plain.raise_for_status()
    with requests.post(url, json=_body(kind, stream=True), headers=AUTH, stream=True, timeout=60) as streamed:
        streamed.raise_for_status()
        raw = b"".join(streamed.iter_content(chunk_size=None))
    _check(
        request_spans(span_exporter),
        [plain.json()["usage"], _streamed_usage(raw)],
        "requests",
        llama,
        metric_reader,
    )


@pytest.mark.parametrize("kind", ["chat", "completions"])
async def test_aiohttp_posts_carry_the_servers_usage(
    llama: LlamaServer,
    instrumented: None,
    span_exporter: InMemorySpanExporter,
    metric_reader: InMemoryMetricReader,
    kind: str,
) -> None:
    url = llama.url + _path(kind)
    timeout = aiohttp.ClientTimeout(total=60)
    async with (
        aiohttp.ClientSession(timeout=timeout) as session,
        session.post(url, json=_body(kind, stream=False), headers=AUTH) as plain,
    ):
        plain.raise_for_status()
        plain_usage = (await plain.json())["usage"]
    async with (
        aiohttp.ClientSession(timeout=timeout) as session,
        session.post(url, json=_body(kind, stream=True), headers=AUTH) as streamed,
    ):
        streamed.raise_for_status()
        raw = b"".join([line async for line in streamed.content])
    _check(request_spans(span_exporter), [plain_usage, _streamed_usage(raw)], "aiohttp", llama, metric_reader)
