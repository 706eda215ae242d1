"""`parse_metrics` at its edges, each figure worked out by hand: families with no ``# TYPE`` (or
``unknown``) are read; a NaN or infinite series is left out and the rest still counted; a name
whose series are all unusable gives way to the older name (gauges and histograms alike); the
KV-cache fill is the mean over data-parallel engines; the model filter keeps series that carry
no model label; the restart time is the generation counter's own ``_created``; the kind is the
prefix most names carry; and the exact words (and line) of every refusal."""

from __future__ import annotations

from typing import Any

import pytest

from spark_otel import ConfigError, EngineError
from spark_otel.receivers.prometheus import EngineSnapshot, parse_metrics


def _parse(*lines: str, **kwargs: Any) -> EngineSnapshot:
    return parse_metrics("\n".join(lines) + "\n", url="u", unix_ns=1, **kwargs)


def _refusal(text: str) -> str:
    with pytest.raises(EngineError) as caught:
        parse_metrics(text, url="u", unix_ns=1)
    return str(caught.value)


def test_families_without_a_type_line_or_typed_unknown_are_read() -> None:
    snap = _parse(
        "vllm:generation_tokens_total 12",
        "vllm:num_requests_running 2",
        "# TYPE vllm:num_requests_waiting unknown",
        "vllm:num_requests_waiting 4",
        "vllm:time_to_first_token_seconds_sum 1.5",
        "vllm:time_to_first_token_seconds_count 3",
    )
    got = (snap.generation_tokens, snap.requests_running, snap.requests_waiting)
    assert got == (12.0, 2.0, 4.0)
    assert (snap.time_to_first_token_sum, snap.time_to_first_token_count) == (1.5, 3.0)


def test_the_kv_cache_fill_is_the_mean_over_data_parallel_engines() -> None:
    snap = _parse(
        "# TYPE vllm:kv_cache_usage_perc gauge",
        'vllm:kv_cache_usage_perc{engine="0"} 0.25',
        'vllm:kv_cache_usage_perc{engine="1"} 0.75',
    )
    assert snap.kv_cache_usage == 0.5


def test_a_nan_or_infinite_series_is_left_out_and_the_others_still_counted() -> None:
    snap = _parse(
        "# TYPE vllm:generation_tokens_total counter",
        'vllm:generation_tokens_total{engine="0"} 7',
        'vllm:generation_tokens_total{engine="1"} NaN',
        "# TYPE vllm:kv_cache_usage_perc gauge",
        'vllm:kv_cache_usage_perc{engine="0"} 0.5',
        'vllm:kv_cache_usage_perc{engine="1"} +Inf',
    )
    assert (snap.generation_tokens, snap.kv_cache_usage) == (7.0, 0.5)


def test_a_counter_whose_total_overflows_is_not_exposed() -> None:
    snap = _parse(
        "# TYPE vllm:generation_tokens_total counter",
        'vllm:generation_tokens_total{engine="0"} 1e308',
        'vllm:generation_tokens_total{engine="1"} 1e308',
    )
    assert snap.generation_tokens is None


def test_a_kv_name_whose_series_are_all_nan_gives_way_to_the_deprecated_one() -> None:
    snap = _parse(
        "# TYPE vllm:kv_cache_usage_perc gauge",
        'vllm:kv_cache_usage_perc{engine="0"} NaN',
        "# TYPE vllm:gpu_cache_usage_perc gauge",
        'vllm:gpu_cache_usage_perc{engine="0"} 0.75',
    )
    assert snap.kv_cache_usage == 0.75


@pytest.mark.parametrize(
    ("sums", "counts"),
    [
        (("1e308", "1e308"), ("1", "1")),  # two finite sums whose total is not
        (("3.0", "3.0"), ("NaN", "NaN")),  # sums but no usable count
        (("NaN", "NaN"), ("5", "5")),  # counts but no usable sum
    ],
    ids=["sum-overflows", "count-nan", "sum-nan"],
)
def test_an_unusable_inter_token_histogram_gives_way_to_the_older_name(
    sums: tuple[str, str], counts: tuple[str, str]
) -> None:
    new = "vllm:inter_token_latency_seconds"
    snap = _parse(
        f"# TYPE {new} histogram",
        *(f'{new}_sum{{engine="{i}"}} {v}' for i, v in enumerate(sums)),
        *(f'{new}_count{{engine="{i}"}} {v}' for i, v in enumerate(counts)),
        "# TYPE vllm:time_per_output_token_seconds histogram",
        "vllm:time_per_output_token_seconds_sum 2.0",
        "vllm:time_per_output_token_seconds_count 4",
    )
    assert (snap.inter_token_latency_sum, snap.inter_token_latency_count) == (2.0, 4.0)


def test_the_model_filter_keeps_series_without_a_model_label_and_the_snapshot_names_it() -> None:
    snap = _parse(
        "# TYPE vllm:generation_tokens_total counter",
        'vllm:generation_tokens_total{model_name="a"} 5',
        'vllm:generation_tokens_total{model_name="b"} 9',
        "# TYPE vllm:kv_cache_usage_perc gauge",
        'vllm:kv_cache_usage_perc{engine="0"} 0.25',
        model_name="a",
    )
    assert (snap.generation_tokens, snap.kv_cache_usage) == (5.0, 0.25)
    assert (snap.model_name, snap.model_names) == ("a", ("a", "b"))


def test_the_restart_time_is_the_latest_finite_created_of_the_generation_counter() -> None:
    snap = _parse(
        "# TYPE vllm:generation_tokens_total counter",
        "vllm:generation_tokens_total 5",
        "# TYPE vllm:generation_tokens_created gauge",
        'vllm:generation_tokens_created{engine="0"} 100.0',
        'vllm:generation_tokens_created{engine="1"} 150.0',
        'vllm:generation_tokens_created{engine="2"} +Inf',
        "# TYPE vllm:prompt_tokens_total counter",
        "vllm:prompt_tokens_total 3",
        "# TYPE vllm:prompt_tokens_created gauge",
        "vllm:prompt_tokens_created 200.0",
    )
    assert snap.counters_created_unix_s == 150.0


def test_the_kind_is_the_prefix_most_names_carry_and_a_created_twin_is_no_second_name() -> None:
    """Two SGLang names against one vLLM counter (whose ``_created`` family is not counted)."""
    snap = _parse(
        "# TYPE vllm:generation_tokens_total counter",
        "vllm:generation_tokens_total 5",
        "# TYPE vllm:generation_tokens_created gauge",
        "vllm:generation_tokens_created 100.0",
        "# TYPE sglang:num_running_reqs gauge",
        "sglang:num_running_reqs 3",
        "# TYPE sglang:num_queue_reqs gauge",
        "sglang:num_queue_reqs 4",
    )
    assert (snap.kind, snap.requests_running, snap.requests_waiting) == ("sglang", 3.0, 4.0)


def test_only_a_byte_order_mark_is_taken_off_the_front() -> None:
    snap = _parse("\ufeffXvllm:generation_tokens_total 5", "vllm:num_requests_running 1")
    assert (snap.generation_tokens, snap.requests_running) == (None, 1.0)


def test_an_engine_kind_that_is_none_of_the_three_is_refused_naming_them() -> None:
    with pytest.raises(ConfigError) as caught:
        _parse("vllm:num_requests_running 1", kind="tgi")
    assert str(caught.value) == "engine kind 'tgi': expected one of vllm, sglang, llamacpp"


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("vllm:a 1\nvllm:b x\n", "line 2: could not convert string to float: 'x'"),
        # the parser's own message is empty: the line is quoted instead
        ("vllm:a 1\n# TYPE vllm:x\n", "line 2: cannot parse '# TYPE vllm:x'"),
        # a bad type is noticed where its family ends, here at the end of the text
        ("vllm:a 1\n# TYPE vllm:x bogus\n", "line 2: Invalid metric type: bogus"),
    ],
    ids=["bad-value", "empty-message", "bad-type-last"],
)
def test_text_that_does_not_parse_is_refused_naming_the_line_and_why(text: str, why: str) -> None:
    assert _refusal(text) == f"u: /metrics is not valid Prometheus text: {why}"
