"""The sync scrape's refusals in exact words (the async twin's are in test_async_scrape_edges.py),
its limits kept (the timeout it is given, with its own client or the caller's; the 32 MiB cap on
an answer, to the byte), the model and kind it is told passed on, and the engine and /metrics
addresses it derives from the URL forms a user gives."""

from __future__ import annotations

import threading
from typing import Any

import httpx2
import pytest
from tests.support.metrics_pages import SGLANG, fixture_text
from tests.support.metrics_server import MetricsServer

from spark_otel import EngineError
from spark_otel._urls import engine_base_url
from spark_otel.receivers.prometheus import metrics_url, scrape_engine

MIB = 1024 * 1024


def _refusal_within(deadline_s: float, url: str, **kwargs: Any) -> str:
    """The `EngineError` a scrape ends in, failing the test if it has not ended by the deadline
    (the scrape runs in a daemon thread, so a scrape that waits forever cannot hang the run)."""
    outcome: list[BaseException] = []

    def scrape() -> None:
        try:
            scrape_engine(url, **kwargs)
        except BaseException as exc:  # the test asserts which
            outcome.append(exc)

    thread = threading.Thread(target=scrape, daemon=True)
    thread.start()
    thread.join(deadline_s)
    assert not thread.is_alive(), f"the scrape was still waiting after {deadline_s} s"
    [error] = outcome
    assert isinstance(error, EngineError), repr(error)
    return str(error)


def test_a_silent_engine_is_given_up_at_the_timeout_with_its_own_client(silent_url: str) -> None:
    message = _refusal_within(3, silent_url, timeout_s=0.3)
    assert message.startswith(f"{silent_url}/metrics: cannot read engine metrics: ReadTimeout")


def test_a_silent_engine_is_given_up_at_the_timeout_with_the_callers_client(silent_url: str) -> None:
    with httpx2.Client(timeout=30) as client:  # the timeout given must win over the client's own
        message = _refusal_within(3, silent_url, client=client, timeout_s=0.3)
    assert message.startswith(f"{silent_url}/metrics: cannot read engine metrics: ReadTimeout")


def test_a_refused_connection_names_the_metrics_url_and_the_error(free_port: int) -> None:
    url = f"http://127.0.0.1:{free_port}"
    assert _refusal_within(3, url, timeout_s=2).startswith(
        f"{url}/metrics: cannot read engine metrics: ConnectError: "
    )


def test_an_error_status_names_the_metrics_url(metrics_server: MetricsServer) -> None:
    metrics_server.set_text("oops")
    metrics_server.status = 503
    assert (
        _refusal_within(3, metrics_server.url) == f"{metrics_server.url}/metrics: /metrics answered HTTP 503"
    )


def test_an_answer_one_byte_past_32_mib_is_refused_for_its_size(metrics_server: MetricsServer) -> None:
    metrics_server.body = b"#" * (32 * MIB + 1)
    assert _refusal_within(10, metrics_server.url) == (
        f"{metrics_server.url}/metrics: /metrics answer is larger than the cap of 33,554,432 bytes; "
        "the scrape was stopped"
    )


def test_an_answer_of_exactly_32_mib_is_read_and_must_be_utf8(metrics_server: MetricsServer) -> None:
    metrics_server.body = b"\xff" + b"#" * (32 * MIB - 1)
    assert _refusal_within(10, metrics_server.url) == (
        f"{metrics_server.url}/metrics: /metrics answer is not UTF-8 text: "
        "'utf-8' codec can't decode byte 0xff in position 0: invalid start byte"
    )


def test_the_model_and_the_kind_given_are_passed_to_the_parser(metrics_server: MetricsServer) -> None:
    metrics_server.set_text(
        "# TYPE vllm:generation_tokens_total counter\n"
        'vllm:generation_tokens_total{model_name="a"} 5\n'
        'vllm:generation_tokens_total{model_name="b"} 9\n'
    )
    only_a = scrape_engine(metrics_server.url, model_name="a")
    assert (only_a.generation_tokens, only_a.model_name) == (5.0, "a")
    metrics_server.set_text(fixture_text(SGLANG))
    told = scrape_engine(metrics_server.url, kind="vllm")
    assert (told.kind, told.generation_tokens) == ("vllm", None)


@pytest.mark.parametrize(
    ("given", "base"),
    [
        ("http://h:1", "http://h:1"),
        ("http://h:1/", "http://h:1"),
        (" http://h:1/v1/ ", "http://h:1"),
        ("http://BOX/", "http://BOX"),  # a host in capitals keeps its last letter
    ],
)
def test_the_engine_base_url_drops_trailing_slashes_and_the_openai_suffix(given: str, base: str) -> None:
    assert engine_base_url(given) == base


@pytest.mark.parametrize(
    "given",
    ["http://BOX", "http://BOX/", "http://BOX/v1/", "http://BOX/metrics", "http://BOX/metrics/"],
)
def test_every_url_form_gives_the_one_metrics_url(given: str) -> None:
    assert metrics_url(given) == "http://BOX/metrics"
