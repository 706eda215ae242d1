"""The receiver's pure parts: ``--engine`` specs, constructor checks and defaults, the stored
samples of one scrape, and the backoff table. Every refusal is pinned as its whole message (the
message is what a user of ``spark-otel receive`` reads), every figure is worked out by hand."""

from __future__ import annotations

import pytest

from spark_otel import ConfigError
from spark_otel import _semconv as sc
from spark_otel.model import MetricSample
from spark_otel.receivers.prometheus import CounterDelta, EngineSnapshot
from spark_otel.receivers.receiver import Receiver, engine_samples, parse_engine_spec, split_engine_spec

URL = "http://127.0.0.1:8011"
EXAMPLE = "e.g. qwen=http://127.0.0.1:8011"


@pytest.mark.parametrize(
    ("spec", "name_optional", "expected"),
    [
        ("qwen=https://127.0.0.1:8011", False, ("qwen", "https://127.0.0.1:8011")),
        # the first "=" splits the name off; a later one belongs to the URL's query
        ("qwen=http://127.0.0.1:8011/?a=b", False, ("qwen", "http://127.0.0.1:8011/?a=b")),
        (" http://127.0.0.1:8011 ", True, (None, URL)),
        # an "=" after "://" is a query, not a name
        ("http://127.0.0.1:8011/?a=b", True, (None, "http://127.0.0.1:8011/?a=b")),
        (" qwen = http://127.0.0.1:8011 ", True, ("qwen", URL)),
    ],
)
def test_engine_specs_that_are_accepted(
    spec: str, name_optional: bool, expected: tuple[str | None, str]
) -> None:
    assert split_engine_spec(spec, name_optional=name_optional) == expected


@pytest.mark.parametrize(
    ("spec", "name_optional", "message"),
    [
        (URL, False, f"--engine {URL!r}: expected NAME=URL, {EXAMPLE}"),
        ("ftp://x", True, f"--engine 'ftp://x': expected URL or NAME=URL, {EXAMPLE}"),
        ("=http://x", True, f"--engine '=http://x': expected URL or NAME=URL, {EXAMPLE}"),
        # the URL's own check names the option it came from
        (
            "qwen=http://127.0.0.1:99999",
            False,
            "--engine 'http://127.0.0.1:99999': port '99999' is not a number from 1 to 65535",
        ),
    ],
)
def test_engine_specs_that_are_refused_say_what_was_expected(
    spec: str, name_optional: bool, message: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        split_engine_spec(spec, name_optional=name_optional)
    assert str(caught.value) == message


def test_parse_engine_spec_refuses_a_bare_url() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_engine_spec(URL)
    assert str(caught.value) == f"--engine {URL!r}: expected NAME=URL, {EXAMPLE}"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"timeout_s": 0}, "Receiver timeout must be positive seconds, at most 86,400 (a day), got 0"),
        (
            {"max_backoff_s": -1},
            "Receiver max_backoff must be positive seconds, at most 86,400 (a day), got -1",
        ),
        (
            {"interval_s": True},
            "Receiver interval must be positive seconds, at most 86,400 (a day), got True",
        ),
        (
            {"interval_s": 86_400.5},
            "Receiver interval must be positive seconds, at most 86,400 (a day), got 86400.5",
        ),
    ],
)
def test_bad_seconds_are_refused_naming_the_setting(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        Receiver({"a": URL}, **kwargs)  # type: ignore[arg-type]
    assert str(caught.value) == message


def test_bad_engine_sets_are_refused_with_the_whole_story() -> None:
    with pytest.raises(ConfigError) as caught:
        Receiver([parse_engine_spec(f"{n}={URL}") for n in ("a", "b", "a")])
    assert str(caught.value) == "engine names must be unique, got a, b, a"
    with pytest.raises(ConfigError) as caught:
        Receiver([])
    assert str(caught.value) == "nothing to receive: give at least one engine or a GPU source"


def test_defaults_and_settings_are_kept() -> None:
    default = Receiver({"a": URL})
    set_ = Receiver({"a": URL}, interval_s=86_400, timeout_s=0.25, max_backoff_s=0.1)
    try:
        assert (default.interval_s, default.timeout_s, default.max_backoff_s) == (5.0, 5.0, 60.0)
        # a day is allowed; a backoff cap below the interval is raised to it
        assert (set_.interval_s, set_.timeout_s, set_.max_backoff_s) == (86_400, 0.25, 86_400)
    finally:
        default.stop()
        set_.stop()


def test_backoff_doubles_per_failure_up_to_the_cap_and_two_to_the_sixteenth() -> None:
    capped = Receiver({"a": URL}, interval_s=0.5, max_backoff_s=3)
    uncapped = Receiver({"a": URL}, interval_s=1, max_backoff_s=86_400)
    try:
        assert [capped._backoff_s(n) for n in range(5)] == [0.5, 1.0, 2.0, 3, 3]
        assert [uncapped._backoff_s(n) for n in (0, 1, 2, 3, 16, 17)] == [1, 2, 4, 8, 65_536, 65_536]
    finally:
        capped.stop()
        uncapped.stop()


def test_engine_samples_hold_every_known_value_with_its_unit_and_source() -> None:
    ns = 1_790_000_000_000_000_000
    snapshot = EngineSnapshot(
        url=URL,
        kind="vllm",
        unix_ns=ns,
        generation_tokens=200.0,
        prompt_tokens=20.0,
        requests_running=3.0,
        kv_cache_usage=0.5,
    )
    delta = CounterDelta(
        url=URL,
        start_unix_ns=ns - 2_000_000_000,
        end_unix_ns=ns,
        elapsed_s=2.0,
        generation_tokens=200.0,
        prompt_tokens=20.0,
        generation_rate=100.0,
        prompt_rate=10.0,
        mean_time_to_first_token_s=0.25,
        mean_e2e_request_latency_s=1.5,
    )
    attrs = {sc.ENGINE: "qwen", sc.ENGINE_KIND: "vllm"}

    def sample(name: str, value: float, unit: str) -> MetricSample:
        return MetricSample(
            name=name, unix_ns=ns, value=value, unit=unit, attributes=attrs, source="backfill"
        )

    assert engine_samples("qwen", snapshot, delta, source="backfill") == [
        MetricSample(
            name=sc.ENGINE_UP,
            unix_ns=ns,
            value=1.0,
            unit="1",
            attributes={sc.ENGINE: "qwen"},
            source="backfill",
        ),
        sample(sc.ENGINE_GENERATION_TOKENS, 200.0, "{token}"),
        sample(sc.ENGINE_PROMPT_TOKENS, 20.0, "{token}"),
        sample(sc.ENGINE_REQUESTS_RUNNING, 3.0, "{request}"),
        sample(sc.ENGINE_KV_CACHE_USAGE, 0.5, "1"),
        sample(sc.ENGINE_GENERATION_TOKEN_RATE, 100.0, "{token}/s"),
        sample(sc.ENGINE_PROMPT_TOKEN_RATE, 10.0, "{token}/s"),
        sample(sc.ENGINE_TIME_TO_FIRST_TOKEN, 0.25, "s"),
        sample(sc.ENGINE_E2E_LATENCY, 1.5, "s"),
    ]
