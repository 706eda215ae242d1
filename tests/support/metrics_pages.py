"""Engine /metrics pages: the recorded ones under tests/data/receivers, by name, and a vLLM page
whose counters grow with each scrape."""

from __future__ import annotations

from tests.support.data_files import RECEIVER_DATA


def fixture_text(name: str) -> str:
    return (RECEIVER_DATA / name).read_text(encoding="utf-8")


VLLM = "metrics-0.10.x-ngc25.09.txt"


SGLANG = "metrics-docs-example.txt"


def counting_text(hits: int) -> str:
    """A vLLM engine that generated 100 tokens more at every scrape."""
    return (
        "# TYPE vllm:generation_tokens_total counter\n"
        f'vllm:generation_tokens_total{{engine="0",model_name="m"}} {100.0 * hits}\n'
        "# TYPE vllm:prompt_tokens_total counter\n"
        f'vllm:prompt_tokens_total{{engine="0",model_name="m"}} {10.0 * hits}\n'
        "# TYPE vllm:num_requests_running gauge\n"
        'vllm:num_requests_running{engine="0",model_name="m"} 3\n'
        "# TYPE vllm:kv_cache_usage_perc gauge\n"
        'vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.5\n'
    )
