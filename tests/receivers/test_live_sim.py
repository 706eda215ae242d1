"""The receivers against the live simulated two-engine box: real HTTP, the real openai client."""

from __future__ import annotations

import time
from typing import Any

import httpx2
import openai
import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from prometheus_client.parser import text_string_to_metric_families
from tests.support.metric_points import metric_points
from tests.support.waiting import wait_for

from spark_otel import _semconv as sc
from spark_otel.receivers import counter_delta, scrape_engine
from spark_otel.receivers.gpu import SimGpuSource
from spark_otel.receivers.receiver import Receiver
from spark_otel.store import Store


def _complete(live_box: Any, engine: str, tokens: int) -> Any:
    client = openai.OpenAI(base_url=live_box.url(engine) + "/v1", api_key="unused")
    model = client.models.list().data[0].id
    return client.completions.create(
        model=model,
        prompt="Review this diff for correctness.",
        max_tokens=tokens,
        extra_body={"min_tokens": tokens, "ignore_eos": True},
    )


def test_counter_delta_counts_exactly_the_tokens_a_completion_produced(live_box: Any) -> None:
    qwen_before = scrape_engine(live_box.url("qwen"))
    nemo_before = scrape_engine(live_box.url("nemotron") + "/v1")
    result = _complete(live_box, "qwen", 48)
    qwen_after = scrape_engine(live_box.url("qwen"))
    nemo_after = scrape_engine(live_box.url("nemotron"))
    assert qwen_after.kind == "vllm"
    assert qwen_after.model_names == ("qwen3.8-27b",)
    delta = counter_delta(qwen_before, qwen_after)
    assert result.usage.completion_tokens == 48
    assert delta.generation_tokens == 48
    assert delta.prompt_tokens == result.usage.prompt_tokens
    assert not delta.reset
    assert delta.generation_rate is not None
    assert delta.generation_rate > 0
    assert counter_delta(nemo_before, nemo_after).generation_tokens == 0


def test_receiver_serves_both_engines_and_the_simulated_gpu(
    live_box: Any, meter_provider: MeterProvider, metric_reader: InMemoryMetricReader, store: Store
) -> None:
    gpu = SimGpuSource(live_box.url("qwen"))
    with Receiver(
        {"qwen": live_box.url("qwen"), "nemotron": live_box.url("nemotron")},
        interval_s=0.05,
        meter_provider=meter_provider,
        store=store,
        gpu=gpu,
        close_gpu=True,
    ) as receiver:
        wait_for(
            lambda: receiver.rate("qwen") and receiver.rate("nemotron") and receiver.gpu_readings(),
            "rates of both engines and a GPU reading",
            30.0,
            0.02,
        )
        # Read the baseline before the request: a scrape landing between the engine counting
        # the tokens and the client returning would otherwise already hold them.
        before = receiver.latest("nemotron")
        assert before is not None
        _complete(live_box, "nemotron", 32)
        wait_for(
            lambda: (
                (latest := receiver.latest("nemotron")) is not None
                and latest.generation_tokens == before.generation_tokens + 32
            ),  # type: ignore[operator]
            "the 32 completed tokens in a scrape",
            30.0,
            0.02,
        )
        points = metric_points(metric_reader, sc.ENGINE_GENERATION_TOKENS)
    assert {p.attributes[sc.ENGINE] for p in points} == {"qwen", "nemotron"}
    by_engine = {p.attributes[sc.ENGINE]: p.value for p in points}
    assert by_engine["nemotron"] >= 32
    util = metric_points(metric_reader, sc.GPU_UTILIZATION)
    assert len(util) == 1
    assert 0.0 <= util[0].value <= 1.0
    stored = store.samples(sc.ENGINE_GENERATION_TOKENS)
    assert {s.attributes[sc.ENGINE] for s in stored} == {"qwen", "nemotron"}
    assert store.samples(sc.GPU_POWER)


def _histogram_state(url: str, name: str) -> tuple[float, float, dict[float, float]]:
    """The sim's own histogram ``name``, read straight from its /metrics: sum, count, cumulative buckets."""
    text = httpx2.get(url + "/metrics", timeout=10).text
    total = count = 0.0
    buckets: dict[float, float] = {}
    for family in text_string_to_metric_families(text):
        if family.name != name:
            continue
        for sample in family.samples:
            if sample.name == name + "_sum":
                total += sample.value
            elif sample.name == name + "_count":
                count += sample.value
            elif sample.name == name + "_bucket":
                le = float(sample.labels["le"])
                buckets[le] = buckets.get(le, 0.0) + sample.value
    return total, count, buckets


def _bounds_of_new_observations(before: dict[float, float], after: dict[float, float]) -> tuple[float, float]:
    """Lowest and highest bucket edges that enclose every observation made between two reads."""
    edges = sorted(after)
    gained = [after[le] - before.get(le, 0.0) for le in edges]
    per_bucket = [gained[0]] + [gained[i] - gained[i - 1] for i in range(1, len(gained))]
    hit = [i for i, n in enumerate(per_bucket) if n > 0]
    return (edges[hit[0] - 1] if hit[0] > 0 else 0.0), edges[hit[-1]]


def test_receiver_mean_latencies_match_the_sims_own_histograms(
    live_box: Any, meter_provider: MeterProvider, metric_reader: InMemoryMetricReader
) -> None:
    sim_names = {
        sc.ENGINE_TIME_TO_FIRST_TOKEN: sc.VLLM_TIME_TO_FIRST_TOKEN,
        sc.ENGINE_INTER_TOKEN_LATENCY: sc.VLLM_INTER_TOKEN_LATENCY,
        sc.ENGINE_E2E_LATENCY: sc.VLLM_E2E_REQUEST_LATENCY,
    }
    url = live_box.url("qwen")
    receiver = Receiver({"qwen": url}, meter_provider=meter_provider, timeout_s=10)
    try:
        sim_before = {name: _histogram_state(url, sim) for name, sim in sim_names.items()}
        assert not isinstance(receiver.scrape_once()["qwen"], Exception)
        longest_wall_s = 0.0
        for tokens in (16, 24, 40):
            started = time.monotonic()
            assert _complete(live_box, "qwen", tokens).usage.completion_tokens == tokens
            longest_wall_s = max(longest_wall_s, time.monotonic() - started)
        assert not isinstance(receiver.scrape_once()["qwen"], Exception)
        sim_after = {name: _histogram_state(url, sim) for name, sim in sim_names.items()}
        got = {}
        for name in sim_names:
            points = metric_points(metric_reader, name)
            assert [p.attributes[sc.ENGINE] for p in points] == ["qwen"], name
            got[name] = points[0].value
            (sum0, count0, buckets0), (sum1, count1, buckets1) = sim_before[name], sim_after[name]
            assert count1 > count0, name
            assert got[name] == pytest.approx((sum1 - sum0) / (count1 - count0)), name
            low, high = _bounds_of_new_observations(buckets0, buckets1)
            assert low <= got[name] <= high, (name, low, got[name], high)
        # the three requests finished in the window, each counted once in TTFT and e2e
        assert sim_after[sc.ENGINE_E2E_LATENCY][1] - sim_before[sc.ENGINE_E2E_LATENCY][1] == 3
        assert sim_after[sc.ENGINE_TIME_TO_FIRST_TOKEN][1] - sim_before[sc.ENGINE_TIME_TO_FIRST_TOKEN][1] == 3
        ttft, itl, e2e = (got[n] for n in sim_names)
        assert 0 < ttft < e2e
        assert 0 < itl < e2e
        # model seconds: no request took longer, in model time, than the slowest one the client saw
        assert e2e <= longest_wall_s * live_box.speed * 1.5
    finally:
        receiver.stop()
