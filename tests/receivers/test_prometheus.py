"""Engine counter snapshots and deltas from real /metrics text, served over real HTTP."""

from __future__ import annotations

import httpx
import httpx2
import pytest
from tests.support.metrics_pages import SGLANG, VLLM, fixture_text
from tests.support.metrics_server import MetricsServer

from spark_otel import EngineError
from spark_otel.receivers import (
    ascrape_engine,
    counter_delta,
    metrics_url,
    parse_metrics,
    scrape_engine,
)
from spark_otel.receivers.prometheus import EngineSnapshot

LLAMACPP = "metrics-b9041.txt"


def _vllm(
    gen: dict[str, float], *, prompt: float = 10.0, kv_new: float | None = None, kv_old: float | None = None
) -> str:
    """vLLM V1 text with one series per (engine, model) in ``gen``; keys are 'engine/model'."""
    lines = ["# TYPE vllm:generation_tokens_total counter"]
    for key, value in gen.items():
        engine, model = key.split("/")
        lines.append(f'vllm:generation_tokens_total{{engine="{engine}",model_name="{model}"}} {value}')
    lines.append("# TYPE vllm:prompt_tokens_total counter")
    for key in gen:
        engine, model = key.split("/")
        lines.append(f'vllm:prompt_tokens_total{{engine="{engine}",model_name="{model}"}} {prompt}')
    lines.append("# TYPE vllm:num_requests_running gauge")
    for i, key in enumerate(gen):
        engine, model = key.split("/")
        lines.append(f'vllm:num_requests_running{{engine="{engine}",model_name="{model}"}} {i + 1}')
    if kv_old is not None:
        lines += [
            "# TYPE vllm:gpu_cache_usage_perc gauge",
            f'vllm:gpu_cache_usage_perc{{engine="0"}} {kv_old}',
        ]
    if kv_new is not None:
        lines += ["# TYPE vllm:kv_cache_usage_perc gauge", f'vllm:kv_cache_usage_perc{{engine="0"}} {kv_new}']
    return "\n".join(lines) + "\n"


def test_real_vllm_scrape_reads_v1_counters_and_prefers_the_new_kv_name() -> None:
    snap = parse_metrics(fixture_text(VLLM), url="u", unix_ns=5)
    assert snap.kind == "vllm"
    assert snap.generation_tokens == 1739.0
    assert snap.prompt_tokens == 246.0
    assert snap.requests_running == 0.0
    assert snap.requests_waiting == 0.0
    assert snap.kv_cache_usage == pytest.approx(0.0011764705882353343)
    assert snap.model_names == ("Qwen/Qwen3-4B-Instruct-2507-FP8",)
    # the generation counter's own _created, not another family's that merely ends alike
    assert snap.counters_created_unix_s == pytest.approx(1771042457.4209504)


def test_real_sglang_and_llamacpp_scrapes_map_to_the_same_concepts() -> None:
    sg = parse_metrics(fixture_text(SGLANG), url="u", unix_ns=1)
    assert (sg.kind, sg.generation_tokens, sg.prompt_tokens) == ("sglang", 7557572.0, 8128902.0)
    assert (sg.requests_running, sg.requests_waiting, sg.kv_cache_usage) == (162.0, 2826.0, 0.28)
    # BOM at the start, no labels, no kv-cache family in this build
    ll = parse_metrics(fixture_text(LLAMACPP), url="u", unix_ns=1)
    assert ll.kind == "llamacpp"
    assert ll.generation_tokens == 0.0
    assert ll.kv_cache_usage is None
    assert ll.model_names == ()


def test_new_kv_name_wins_over_deprecated_and_deprecated_alone_is_read() -> None:
    both = parse_metrics(_vllm({"0/m": 1}, kv_new=0.25, kv_old=0.75), url="u", unix_ns=1)
    assert both.kv_cache_usage == 0.25
    old_only = parse_metrics(_vllm({"0/m": 1}, kv_old=0.75), url="u", unix_ns=1)
    assert old_only.kv_cache_usage == 0.75


def test_data_parallel_engines_are_summed_and_model_name_filters() -> None:
    text = _vllm({"0/a": 100.0, "1/a": 50.0, "0/b": 7.0})
    total = parse_metrics(text, url="u", unix_ns=1)
    assert total.generation_tokens == 157.0
    assert total.requests_running == 6.0
    only_a = parse_metrics(text, url="u", unix_ns=1, model_name="a")
    assert only_a.generation_tokens == 150.0
    assert only_a.prompt_tokens == 20.0
    assert only_a.model_names == ("a", "b")


def test_unknown_model_name_is_an_error_naming_the_served_models() -> None:
    with pytest.raises(EngineError, match=r"u: no series for model 'zzz'; the engine serves a"):
        parse_metrics(_vllm({"0/a": 1.0}), url="u", unix_ns=1, model_name="zzz")


def test_type_comes_from_the_type_line_not_the_suffix() -> None:
    # a histogram whose name ends in _total must never be read as the generation counter
    text = (
        "# TYPE vllm:generation_tokens_total histogram\n"
        'vllm:generation_tokens_total_bucket{le="+Inf"} 3\n'
        "vllm:generation_tokens_total_count 3\n"
        "vllm:generation_tokens_total_sum 99\n"
        "# TYPE vllm:num_requests_running gauge\n"
        "vllm:num_requests_running 2"
    )
    snap = parse_metrics(text, url="u", unix_ns=1)
    assert snap.generation_tokens is None
    assert snap.requests_running == 2.0


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ('vllm:generation_tokens_total{engine="0" 12\n', "not valid Prometheus text"),
        ("# TYPE up gauge\nup 1\n", "no vLLM, SGLang or llama.cpp metrics"),
        ("", "no vLLM, SGLang or llama.cpp metrics"),
    ],
)
def test_malformed_or_foreign_text_is_an_engine_error_naming_the_url(text: str, problem: str) -> None:
    with pytest.raises(EngineError, match=problem) as info:
        parse_metrics(text, url="http://x:1", unix_ns=1)
    assert "http://x:1" in str(info.value)


def test_truncated_scrape_still_reads_what_arrived_complete() -> None:
    full = fixture_text(VLLM)
    cut = full[: full.index("# HELP vllm:prompt_tokens_total")]
    snap = parse_metrics(cut, url="u", unix_ns=1)
    assert snap.requests_running == 0.0
    assert snap.generation_tokens is None


def test_metrics_url_accepts_base_v1_and_metrics_forms() -> None:
    assert metrics_url("http://h:1") == "http://h:1/metrics"
    assert metrics_url("http://h:1/v1/") == "http://h:1/metrics"
    assert metrics_url("http://h:1/metrics") == "http://h:1/metrics"


def test_scrape_over_real_http_with_own_httpx2_and_httpx_clients(metrics_server: MetricsServer) -> None:
    metrics_server.set_text(fixture_text(VLLM))
    own = scrape_engine(metrics_server.url + "/v1")
    assert own.generation_tokens == 1739.0
    assert own.url == metrics_server.url + "/v1"
    with httpx2.Client() as c2:
        assert scrape_engine(metrics_server.url, client=c2).prompt_tokens == 246.0
    with httpx.Client() as c1:
        assert scrape_engine(metrics_server.url, client=c1).prompt_tokens == 246.0
    assert metrics_server.hits == 3


async def test_async_scrape_over_real_http(metrics_server: MetricsServer) -> None:
    metrics_server.set_text(fixture_text(SGLANG))
    snap = await ascrape_engine(metrics_server.url)
    assert snap.kind == "sglang"
    async with httpx.AsyncClient() as client:
        again = await ascrape_engine(metrics_server.url, client=client)
    assert again.generation_tokens == snap.generation_tokens


def test_http_error_status_is_an_engine_error(metrics_server: MetricsServer) -> None:
    metrics_server.set_text("oops")
    metrics_server.status = 503
    with pytest.raises(EngineError, match=r"/metrics answered HTTP 503"):
        scrape_engine(metrics_server.url)


async def test_unreachable_engine_is_an_engine_error_naming_it(free_port: int) -> None:
    url = f"http://127.0.0.1:{free_port}"
    with pytest.raises(EngineError, match=rf"{url}/metrics: cannot read engine metrics"):
        scrape_engine(url, timeout_s=2)
    with pytest.raises(EngineError, match="cannot read engine metrics"):
        await ascrape_engine(url, timeout_s=2)


def _snap(
    unix_ns: int, gen: float | None, prompt: float | None, created: float | None = None
) -> EngineSnapshot:
    return EngineSnapshot(
        url="u",
        kind="vllm",
        unix_ns=unix_ns,
        generation_tokens=gen,
        prompt_tokens=prompt,
        counters_created_unix_s=created,
    )


def test_counter_delta_gives_tokens_and_rates_over_the_window() -> None:
    delta = counter_delta(_snap(1_000_000_000, 100, 40, 5.0), _snap(3_000_000_000, 261, 50, 5.0))
    assert delta.elapsed_s == 2.0
    assert delta.generation_tokens == 161
    assert delta.generation_rate == 80.5
    assert delta.prompt_rate == 5.0
    assert not delta.reset


def test_counter_delta_detects_a_reset_by_value_drop_and_by_created_time() -> None:
    dropped = counter_delta(_snap(0, 1000, 500), _snap(1_000_000_000, 30, 600))
    assert dropped.reset
    assert dropped.generation_tokens == 30
    assert dropped.prompt_tokens == 100
    # counter restarted and already passed its old value: only _created tells
    recreated = counter_delta(_snap(0, 10, 5, 100.0), _snap(1_000_000_000, 50, 9, 200.0))
    assert recreated.reset
    assert recreated.generation_tokens == 50


def test_counter_delta_without_a_counter_or_time_has_no_rate() -> None:
    delta = counter_delta(_snap(5, None, 1), _snap(5, 3, 2))
    assert delta.generation_tokens is None
    assert delta.generation_rate is None
    assert delta.prompt_tokens == 1
    assert delta.prompt_rate is None
