"""`counter_delta` at its edges: a restart that only the ``_created`` time shows, however soon
after the last scrape; a histogram exposed in part; a reset whose sum rose while its count fell;
one new observation; and the one log line a reset gets."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from spark_otel.receivers.prometheus import EngineSnapshot, counter_delta

S = 1_000_000_000


def _snap(unix_ns: int, **fields: Any) -> EngineSnapshot:
    return EngineSnapshot(url="http://e", kind="vllm", unix_ns=unix_ns, **fields)


def test_a_restart_half_a_second_after_the_last_one_resets_both_counters() -> None:
    """The counters rose, so only ``_created`` (0.5 s later) says the engine restarted: both
    counts are then counted from zero."""
    before = _snap(0, generation_tokens=10, prompt_tokens=5, counters_created_unix_s=100.0)
    after = _snap(2 * S, generation_tokens=50, prompt_tokens=9, counters_created_unix_s=100.5)
    delta = counter_delta(before, after)
    assert (delta.reset, delta.generation_tokens, delta.prompt_tokens) == (True, 50, 9)
    assert (delta.generation_rate, delta.prompt_rate) == (25.0, 4.5)


def test_one_new_observation_is_the_mean() -> None:
    before = _snap(0, e2e_request_latency_sum=10.0, e2e_request_latency_count=4)
    after = _snap(S, e2e_request_latency_sum=12.5, e2e_request_latency_count=5)
    assert counter_delta(before, after).mean_e2e_request_latency_s == 2.5


@pytest.mark.parametrize(
    ("before", "after"),
    [
        ({"time_to_first_token_sum": 1.0}, {"time_to_first_token_sum": 2.0, "time_to_first_token_count": 3}),
        ({"time_to_first_token_count": 1}, {"time_to_first_token_sum": 2.0, "time_to_first_token_count": 3}),
        ({"time_to_first_token_sum": 1.0, "time_to_first_token_count": 1}, {"time_to_first_token_count": 3}),
        ({"time_to_first_token_sum": 1.0, "time_to_first_token_count": 1}, {"time_to_first_token_sum": 2.0}),
    ],
)
def test_a_histogram_exposed_in_part_on_either_side_has_no_mean_and_no_reset(
    before: dict[str, float], after: dict[str, float]
) -> None:
    delta = counter_delta(_snap(0, **before), _snap(S, **after))
    assert (delta.mean_time_to_first_token_s, delta.reset) == (None, False)


def test_a_count_that_fell_while_its_sum_rose_is_a_reset_with_no_mean() -> None:
    before = _snap(0, inter_token_latency_sum=5.0, inter_token_latency_count=10)
    after = _snap(S, inter_token_latency_sum=8.0, inter_token_latency_count=2)
    delta = counter_delta(before, after)
    assert (delta.mean_inter_token_latency_s, delta.reset) == (None, True)


@pytest.mark.parametrize(
    ("before", "after"),
    [
        ({"prompt_tokens": 500}, {"prompt_tokens": 30}),  # the prompt counter alone fell
        (
            {"e2e_request_latency_sum": 5.0, "e2e_request_latency_count": 9},
            {"e2e_request_latency_sum": 1.0, "e2e_request_latency_count": 1},
        ),
    ],
)
def test_a_reset_is_logged_once_naming_the_engine(
    caplog: pytest.LogCaptureFixture, before: dict[str, float], after: dict[str, float]
) -> None:
    with caplog.at_level(logging.INFO, logger="spark_otel.receivers.prometheus"):
        assert counter_delta(_snap(0, **before), _snap(S, **after)).reset is True
    assert [r.getMessage() for r in caplog.records] == [
        "engine http://e counters were reset between scrapes (engine restart)"
    ]


def test_no_reset_logs_nothing(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="spark_otel.receivers.prometheus"):
        counter_delta(_snap(0, prompt_tokens=5), _snap(S, prompt_tokens=9))
    assert caplog.records == []
