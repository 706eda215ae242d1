"""Each stream a cell reads counts in its live progress while it runs, through either layer (the
openai SDK's stream, a raw httpx2 SSE body), and gives way to the server's count when it ends;
a non-streamed call counts only when it returns. Against the simulated box over real HTTP."""

from __future__ import annotations

from collections.abc import Iterator

import httpx2
import openai
import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.trace import TracerProvider

from spark_otel import cell
from spark_otel.sim import Box, run_box

TOKENS = 64
PINNED = {"ignore_eos": True}


@pytest.fixture(scope="module")
def box() -> Iterator[Box]:
    with run_box({"qwen": "dense"}, speed=50.0, seed=0) as b:
        yield b


def _model(box: Box) -> str:
    return str(httpx2.get(box.url("qwen") + "/sim/info").json()["model"])


def test_an_openai_stream_counts_its_chunks_then_the_servers_tokens(
    box: Box, instrumented: None, tracer_provider: TracerProvider, meter_provider: MeterProvider
) -> None:
    client = openai.OpenAI(base_url=box.url("qwen") + "/v1", api_key="none")
    with cell("live", "c1", tracer_provider=tracer_provider, meter_provider=meter_provider) as state:
        assert state.live_progress().tokens is None
        stream = client.chat.completions.create(
            model=_model(box),
            messages=[{"role": "user", "content": "count"}],
            max_tokens=TOKENS,
            stream=True,
            stream_options={"include_usage": True},
            extra_body=PINNED,
        )
        read = 0
        for _chunk in stream:
            read += 1
            if read == 10:
                assert state.live_progress().tokens == 10  # the role chunk and nine tokens
        assert read == TOKENS + 2  # the role chunk, the tokens, the usage chunk
        progress = state.live_progress()
    assert progress.tokens == TOKENS  # the server's count, once the stream ended


def test_a_raw_sse_body_counts_its_events_as_it_is_read(
    box: Box, instrumented: None, tracer_provider: TracerProvider, meter_provider: MeterProvider
) -> None:
    body = {
        "model": _model(box),
        "prompt": "count",
        "max_tokens": TOKENS,
        "stream": True,
        "stream_options": {"include_usage": True},
        **PINNED,
    }
    url = box.url("qwen") + "/v1/completions"
    with cell("live", "c2", tracer_provider=tracer_provider, meter_provider=meter_provider) as state:
        with httpx2.Client() as client, client.stream("POST", url, json=body) as r:
            seen = 0
            for line in r.iter_lines():
                if line.startswith("data: {"):
                    seen += 1
                    if seen == TOKENS // 2:
                        # Blocks arrive batched: the scanner has seen at least what was handed on.
                        mid = state.live_progress().tokens
                        assert mid is not None
                        assert seen <= mid <= TOKENS + 1
        assert state.live_progress().tokens == TOKENS


def test_a_call_not_streamed_counts_when_it_returns_and_gives_no_rate(
    box: Box, instrumented: None, tracer_provider: TracerProvider, meter_provider: MeterProvider
) -> None:
    client = openai.OpenAI(base_url=box.url("qwen") + "/v1", api_key="none")
    with cell("live", "c3", tracer_provider=tracer_provider, meter_provider=meter_provider) as state:
        client.chat.completions.create(
            model=_model(box),
            messages=[{"role": "user", "content": "count"}],
            max_tokens=TOKENS,
            extra_body=PINNED,
        )
        progress = state.live_progress()
    assert (progress.tokens, progress.rate) == (TOKENS, None)
