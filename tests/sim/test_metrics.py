"""``/metrics`` in vLLM V1 exposition, counters equal to the tokens served; the GPU readout."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import httpx
import openai
import pytest
from prometheus_client.parser import text_string_to_metric_families
from tests.support.loopback import in_flight, pinned, stream_many, until

from spark_otel import _semconv as sc
from spark_otel.sim import MOE, run_box

REAL_SCRAPE = Path(__file__).parents[1] / "data" / "sim" / "metrics-0.10.x-ngc25.09.txt"
OUR_FAMILIES = {
    # family name as the parser reports it -> type
    "vllm:prompt_tokens": "counter",
    "vllm:generation_tokens": "counter",
    "vllm:request_success": "counter",
    "vllm:num_requests_running": "gauge",
    "vllm:num_requests_waiting": "gauge",
    "vllm:kv_cache_usage_perc": "gauge",
    "vllm:time_to_first_token_seconds": "histogram",
    "vllm:inter_token_latency_seconds": "histogram",
    "vllm:e2e_request_latency_seconds": "histogram",
    "vllm:request_queue_time_seconds": "histogram",
    "vllm:request_prefill_time_seconds": "histogram",
    "vllm:request_decode_time_seconds": "histogram",
    "vllm:request_inference_time_seconds": "histogram",
    "vllm:request_prompt_tokens": "histogram",
    "vllm:request_generation_tokens": "histogram",
}


def _scrape(url: str) -> dict[str, dict[tuple, float]]:
    """{sample name: {sorted labels: value}} from one scrape, parsed by prometheus_client."""
    text = httpx.get(url + "/metrics").text
    samples: dict[str, dict[tuple, float]] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            samples.setdefault(s.name, {})[tuple(sorted(s.labels.items()))] = s.value
    return samples


def _one(samples: dict[str, dict[tuple, float]], name: str, **labels: str) -> float:
    matches = [v for k, v in samples[name].items() if all((lk, lv) in k for lk, lv in labels.items())]
    assert len(matches) == 1, (name, labels, samples[name])
    return matches[0]


def test_families_names_and_types_match_vllm() -> None:
    with run_box({"qwen": "dense"}, speed=1000) as box:
        text = httpx.get(box.url("qwen") + "/metrics").text
    ours = {f.name: f.type for f in text_string_to_metric_families(text)}
    assert {k: v for k, v in ours.items() if not k.endswith("_created")} == OUR_FAMILIES
    real = {f.name: f.type for f in text_string_to_metric_families(REAL_SCRAPE.read_text())}
    for name, kind in OUR_FAMILIES.items():
        if name == "vllm:inter_token_latency_seconds":
            continue  # 0.11 renamed time_per_output_token_seconds; the 0.10 scrape predates it
        assert real.get(name) == kind, name
    assert real["vllm:time_per_output_token_seconds"] == "histogram"
    # Histogram buckets are vLLM's.
    les = [
        float(s.labels["le"])
        for f in text_string_to_metric_families(text)
        for s in f.samples
        if s.name == "vllm:time_to_first_token_seconds_bucket"
    ]
    assert tuple(les[:-1]) == sc.VLLM_TTFT_BUCKETS_S


def test_counters_equal_the_tokens_served_exactly() -> None:
    speed = 400.0
    with run_box({"qwen": "dense", "nemotron": "moe"}, speed=speed, seed=3) as box:
        served_out = served_in = 0
        reasons = {"stop": 0, "length": 0}
        with openai.OpenAI(base_url=box.url("nemotron") + "/v1", api_key="unused", max_retries=0) as client:
            for i in range(4):
                r = client.completions.create(model=MOE.model_id, prompt="p" * (37 * i + 5), max_tokens=400)
                assert r.usage is not None
                served_out += r.usage.completion_tokens
                served_in += r.usage.prompt_tokens
                reasons[r.choices[0].finish_reason] += 1
            stream = client.chat.completions.create(
                model=MOE.model_id,
                messages=[{"role": "user", "content": "q" * 99}],
                max_tokens=30,
                stream=True,
                stream_options={"include_usage": True},
                extra_body={"min_tokens": 30},
            )
            final = list(stream)[-1]
            assert final.usage is not None
            served_out += final.usage.completion_tokens
            served_in += final.usage.prompt_tokens
            reasons["length"] += 1
        results = asyncio.run(stream_many(box.port("nemotron"), [pinned(MOE.model_id, 64) for _ in range(6)]))
        served_out += sum(r.tokens for r in results)
        served_in += 6 * 50
        reasons["length"] += 6
        samples = _scrape(box.url("nemotron"))
        idle = _scrape(box.url("qwen"))

    labels = {"engine": "0", "model_name": MOE.model_id}
    assert _one(samples, sc.VLLM_GENERATION_TOKENS_TOTAL, **labels) == served_out
    assert _one(samples, sc.VLLM_PROMPT_TOKENS_TOTAL, **labels) == served_in
    for reason, count in reasons.items():
        assert _one(samples, sc.VLLM_REQUEST_SUCCESS_TOTAL, finished_reason=reason, **labels) == count
    assert _one(samples, sc.VLLM_REQUEST_SUCCESS_TOTAL, finished_reason="abort", **labels) == 0
    requests = sum(reasons.values())
    assert _one(samples, sc.VLLM_TIME_TO_FIRST_TOKEN + "_count", **labels) == requests
    assert _one(samples, sc.VLLM_E2E_REQUEST_LATENCY + "_count", **labels) == requests
    assert _one(samples, sc.VLLM_INTER_TOKEN_LATENCY + "_count", **labels) == served_out - requests
    assert _one(samples, sc.VLLM_NUM_REQUESTS_RUNNING, **labels) == 0
    # Latencies are in model time: six 64-token MoE streams alone take seconds, not milliseconds.
    e2e_mean = _one(samples, sc.VLLM_E2E_REQUEST_LATENCY + "_sum", **labels) / requests
    assert e2e_mean > 0.5
    itl_mean = _one(samples, sc.VLLM_INTER_TOKEN_LATENCY + "_sum", **labels) / (served_out - requests)
    assert 1 / MOE.per_stream_rate(1) * 0.9 <= itl_mean <= 1 / MOE.per_stream_rate(6) * 1.5
    # The idle engine's scrape is separate (its own registry) and still zero.
    assert _one(idle, sc.VLLM_GENERATION_TOKENS_TOTAL, engine="0", model_name="qwen3.8-27b") == 0


def test_running_gauge_and_kv_cache_follow_streams_in_flight() -> None:
    with run_box({"qwen": "dense"}, speed=50) as box:

        async def during() -> dict:
            async with in_flight(box.port("qwen"), [pinned("qwen", 5000) for _ in range(3)]):
                await until(lambda: box.stats("qwen").decoding == 3)
                return await asyncio.to_thread(_scrape, box.url("qwen"))

        samples = asyncio.run(during())
    assert _one(samples, sc.VLLM_NUM_REQUESTS_RUNNING) == 3
    assert _one(samples, sc.VLLM_NUM_REQUESTS_WAITING) == 0
    assert 0 < _one(samples, sc.VLLM_KV_CACHE_USAGE_PERC) < 1


def _gpu(url: str) -> dict:
    return httpx.get(url + "/sim/gpu").json()


def test_gpu_readout_pins_utilization_and_keeps_power_flat_until_moe_thrashes() -> None:
    speed = 50.0
    with run_box({"qwen": "dense", "nemotron": "moe"}, speed=speed) as box:
        idle = _gpu(box.url("qwen"))
        assert idle["utilization_gpu_pct"] == 0
        assert set(idle) == {
            "utilization_gpu_pct", "power_w", "energy_j", "sm_clock_mhz",
            "memory_used_bytes", "memory_total_bytes", "unix_ns",
        }  # fmt: skip

        async def readouts_under(engine: str, n: int) -> tuple[dict, dict]:
            async with in_flight(box.port(engine), [pinned(engine, 100_000) for _ in range(n)]):
                await until(lambda: box.stats(engine).decoding == n)
                first = await asyncio.to_thread(_gpu, box.url("qwen"))
                await asyncio.sleep(0.2)
                second = await asyncio.to_thread(_gpu, box.url("nemotron"))  # same box, any port
            await until(lambda: box.stats(engine).running == 0)
            return first, second

        one_a, one_b = asyncio.run(readouts_under("qwen", 1))
        many_a, _ = asyncio.run(readouts_under("qwen", 32))
        thrash_a, _ = asyncio.run(readouts_under("nemotron", 16))

    for readout in (one_a, one_b, many_a, thrash_a):
        assert 95 <= readout["utilization_gpu_pct"] <= 97  # pinned near 96% under any decode load
    assert 33 <= one_a["power_w"] <= 36
    assert 38 <= many_a["power_w"] <= 41  # 32 streams: 17x the tokens, a few watts more
    assert many_a["power_w"] - one_a["power_w"] < 7
    assert 60 <= thrash_a["power_w"] <= 70  # the only time power tracks load
    # Energy integrates power over model time; unix_ns runs `speed` times faster than the wall.
    model_s = (one_b["unix_ns"] - one_a["unix_ns"]) / 1e9
    assert model_s > 0.2 * speed * 0.8
    assert one_b["energy_j"] - one_a["energy_j"] == pytest.approx(one_a["power_w"] * model_s, rel=0.1)


def test_gpu_unix_ns_reads_model_time() -> None:
    # Bracketed by the wall clock around each read, so a slow request on a loaded machine widens
    # the bounds instead of failing: the readout's clock advances speed x wall, no more, no less.
    speed = 100
    with run_box({"qwen": "dense"}, speed=speed) as box:
        before_first = time.perf_counter()
        first = _gpu(box.url("qwen"))
        after_first = time.perf_counter()
        time.sleep(0.1)
        before_second = time.perf_counter()
        second = _gpu(box.url("qwen"))
        after_second = time.perf_counter()
    model_s = (second["unix_ns"] - first["unix_ns"]) / 1e9
    assert (
        (before_second - after_first) * speed * 0.999
        <= model_s
        <= (after_second - before_first) * speed * 1.001
    )
    assert model_s >= 0.1 * speed * 0.999
