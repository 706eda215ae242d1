"""The two refusals a user meets first: an engine URL that is not one (each way it can fail,
in the exact words the CLI prints), and a model the engine does not serve, which lists the
models it does, one line long however many or however odd their names."""

from __future__ import annotations

import pytest

from spark_otel import ConfigError, EngineError
from spark_otel._urls import check_engine_url
from spark_otel.receivers.prometheus import parse_metrics

EXAMPLE = "expected e.g. http://127.0.0.1:8011"


@pytest.mark.parametrize(
    ("url", "want"),
    [
        ("http://127.0.0.1:8011", "http://127.0.0.1:8011"),
        ("  https://box.local/v1 ", "https://box.local/v1"),
        ("http://h:1", "http://h:1"),
        ("http://h:65535", "http://h:65535"),
        ("http://[::1]", "http://[::1]"),  # IPv6 without a port: its colons are no port
        ("http://[::1]:8000", "http://[::1]:8000"),
        ("http://user:secret@h:8000", "http://user:secret@h:8000"),
        ("http://x@y:0@h", "http://x@y:0@h"),  # the host is after the last @
    ],
)
def test_an_http_url_with_a_host_and_a_port_in_range_is_taken(url: str, want: str) -> None:
    assert check_engine_url(url) == want


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("ftp://h:21", f"not an http:// or https:// URL with a host; {EXAMPLE}"),
        ("127.0.0.1:8011", f"not an http:// or https:// URL with a host; {EXAMPLE}"),
        ("http://", f"not an http:// or https:// URL with a host; {EXAMPLE}"),
        ("http://[::1", f"Invalid IPv6 URL; {EXAMPLE}"),
        ("http://h:0", "port '0' is not a number from 1 to 65535"),
        ("http://h:65536", "port '65536' is not a number from 1 to 65535"),
        ("http://h:x", "port 'x' is not a number from 1 to 65535"),
        ("http://u@[::1]:99999", "port '99999' is not a number from 1 to 65535"),
    ],
)
def test_a_url_that_is_not_an_engines_is_refused_in_words(url: str, why: str) -> None:
    with pytest.raises(ConfigError) as caught:
        check_engine_url(url)
    assert str(caught.value) == f"engine URL {url!r}: {why}"


def test_the_refusal_names_the_option_it_came_from() -> None:
    with pytest.raises(ConfigError) as caught:
        check_engine_url("ftp://h", "--sim-url")
    assert str(caught.value) == f"--sim-url 'ftp://h': not an http:// or https:// URL with a host; {EXAMPLE}"


def _serving(*names: str) -> str:
    lines = ["# TYPE vllm:generation_tokens counter"]
    lines += [f'vllm:generation_tokens_total{{model_name="{n}"}} 1' for n in names]
    return "\n".join(lines) + "\n"


def _refusal(text: str) -> str:
    with pytest.raises(EngineError) as caught:
        parse_metrics(text, url="http://e/metrics", unix_ns=1, model_name="wanted")
    return str(caught.value)


def test_a_model_not_served_is_refused_with_the_five_first_served_and_a_count_of_the_rest() -> None:
    text = _serving("m1", "m2", "m3", "m4", "m5", "m6", "m7")
    assert _refusal(text) == (
        "http://e/metrics: no series for model 'wanted'; the engine serves m1, m2, m3, m4, m5 and 2 more"
    )


def test_five_served_models_are_listed_whole() -> None:
    assert _refusal(_serving("a", "b", "c", "d", "e")) == (
        "http://e/metrics: no series for model 'wanted'; the engine serves a, b, c, d, e"
    )


def test_served_names_sorted_and_those_with_spaces_at_their_ends_or_empty_quoted() -> None:
    assert _refusal(_serving(" lead", "trail ", "", "plain")) == (
        "http://e/metrics: no series for model 'wanted'; the engine serves '', ' lead', plain, 'trail '"
    )


def test_a_listing_past_120_characters_is_cut_to_117_and_marked() -> None:
    names = [f"{c}" * 30 for c in "abcde"]  # 5 x 30 characters and 4 separators: 158
    listing = ", ".join(names)
    assert _refusal(_serving(*names)) == (
        f"http://e/metrics: no series for model 'wanted'; the engine serves {listing[:117]}..."
    )


def test_a_listing_of_exactly_120_characters_is_whole() -> None:
    names = ["a" * 29, "b" * 29, "c" * 29, "d" * 27]  # 114 characters and 3 separators of 2: 120
    listing = ", ".join(names)
    assert len(listing) == 120
    assert _refusal(_serving(*names)) == (
        f"http://e/metrics: no series for model 'wanted'; the engine serves {listing}"
    )
