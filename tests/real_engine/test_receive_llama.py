"""The receivers against llama.cpp's own ``/metrics``: its names map to the engine's concepts, its
counters count exactly the tokens the server reported in ``usage``, and the rates the receiver
stores, times the intervals between its scrapes, add up to those counters' growth.

Two ways llama.cpp's counters differ from vLLM's (and the simulated engine's), pinned here and
written down in docs/receivers.md: its generated-token counter grows when a request finishes,
all at once, not token by token while it streams; and its prompt counter leaves out the prompt
tokens it reused from its cache, which vLLM's counts."""

from __future__ import annotations

import httpx2
import openai
import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from tests.support.llama_server import LlamaServer
from tests.support.metric_points import metric_points
from tests.support.waiting import wait_for

from spark_otel import _semconv as sc
from spark_otel._clock import NS_PER_S
from spark_otel.receivers import counter_delta, scrape_engine
from spark_otel.receivers.receiver import Receiver
from spark_otel.store import Store

TOKENS = (16, 24, 40)


def _complete(llama: LlamaServer, tokens: int, k: int) -> openai.types.Completion:
    client = openai.OpenAI(base_url=llama.url + "/v1", api_key="none", max_retries=0)
    return client.completions.create(
        model=llama.model,
        prompt=f"Request {k}: review this diff for correctness.",
        max_tokens=tokens,
        extra_body={"ignore_eos": True},
    )


def test_a_scrape_reads_llama_cpps_counters_as_the_server_counted(llama: LlamaServer) -> None:
    before = scrape_engine(llama.url)
    assert before.kind == "llamacpp"
    assert before.requests_running == 0
    assert before.requests_waiting == 0
    usages = [_complete(llama, n, k).usage for k, n in enumerate(TOKENS)]
    after = scrape_engine(llama.url + "/v1")
    delta = counter_delta(before, after)
    assert not delta.reset
    assert [u.completion_tokens for u in usages if u is not None] == list(TOKENS)
    assert delta.generation_tokens == sum(TOKENS)
    assert delta.generation_rate == sum(TOKENS) / ((after.unix_ns - before.unix_ns) / NS_PER_S)


def test_the_receivers_rates_add_up_to_the_tokens_generated(
    llama: LlamaServer, meter_provider: MeterProvider, metric_reader: InMemoryMetricReader, store: Store
) -> None:
    with Receiver(
        {"tiny": llama.url}, interval_s=0.1, meter_provider=meter_provider, store=store
    ) as receiver:
        wait_for(lambda: receiver.rate("tiny"), "a rate from two scrapes", 30.0, 0.02)
        start = receiver.latest("tiny")
        assert start is not None
        assert start.generation_tokens is not None
        for k, n in enumerate(TOKENS):
            _complete(llama, n, k)
        wait_for(
            lambda: (
                (latest := receiver.latest("tiny")) is not None
                and latest.generation_tokens == start.generation_tokens + sum(TOKENS)
            ),  # type: ignore[operator]
            "the completed tokens in a scrape",
            30.0,
            0.02,
        )
        exported = metric_points(metric_reader, sc.ENGINE_GENERATION_TOKENS)
    counts = [s for s in store.samples(sc.ENGINE_GENERATION_TOKENS) if s.attributes[sc.ENGINE] == "tiny"]
    rates = {s.unix_ns: s.value for s in store.samples(sc.ENGINE_GENERATION_TOKEN_RATE)}
    assert {s.attributes[sc.ENGINE_KIND] for s in counts} == {"llamacpp"}
    # Each rate covers the interval since the scrape before it: rate x interval is that interval's
    # tokens, and from the scrape that read `start` on they add up to the tokens completed.
    counts.sort(key=lambda s: s.unix_ns)
    first = next(i for i, s in enumerate(counts) if s.unix_ns == start.unix_ns)
    generated = sum(
        rates[b.unix_ns] * (b.unix_ns - a.unix_ns) / NS_PER_S
        for a, b in zip(counts[first:], counts[first + 1 :], strict=False)
    )
    assert generated == pytest.approx(sum(TOKENS))
    assert counts[-1].value - counts[first].value == sum(TOKENS)
    # The same counter reaches OpenTelemetry, labelled with the engine's name and kind.
    (point,) = exported
    assert dict(point.attributes) == {sc.ENGINE: "tiny", sc.ENGINE_KIND: "llamacpp"}
    assert point.value >= start.generation_tokens + sum(TOKENS)


def test_llama_cpps_token_counter_grows_when_a_request_finishes_not_while_it_streams(
    llama: LlamaServer,
) -> None:
    before = scrape_engine(llama.url)
    body = {"model": llama.model, "prompt": "Tell a long story.", "max_tokens": 200, "stream": True}
    with (
        httpx2.Client(timeout=60) as http,
        http.stream("POST", llama.url + "/v1/completions", json={**body, "ignore_eos": True}) as response,
    ):
        lines = response.iter_lines()
        tokens = 0
        while tokens < 50:
            tokens += next(lines).startswith("data: {")
        during = scrape_engine(llama.url)
        rest = [line for line in lines if line]
    after = scrape_engine(llama.url)
    assert rest[-1] == "data: [DONE]"
    assert during.requests_running == 1
    assert during.generation_tokens == before.generation_tokens  # 50 tokens read, none counted yet
    assert counter_delta(before, after).generation_tokens == 200  # all of them at the finish


def test_llama_cpps_prompt_counter_leaves_out_the_prompt_tokens_it_reused(llama: LlamaServer) -> None:
    client = openai.OpenAI(base_url=llama.url + "/v1", api_key="none", max_retries=0)
    prompt = "The same prompt twice: once computed, then mostly reused from the slot's cache."
    computed = []
    for _ in range(2):
        before = scrape_engine(llama.url)
        usage = client.completions.create(model=llama.model, prompt=prompt, max_tokens=1).usage
        assert usage is not None
        assert usage.prompt_tokens_details is not None
        cached = usage.prompt_tokens_details.cached_tokens or 0
        delta = counter_delta(before, scrape_engine(llama.url))
        assert delta.prompt_tokens == usage.prompt_tokens - cached
        computed.append((usage.prompt_tokens, cached))
    (total, _), (again, cached_again) = computed
    assert again == total
    assert 0 < cached_again < total  # the second time most of the prompt came from the cache
