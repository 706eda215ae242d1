"""The async scrape's refusals in the words of the sync one, and its limits kept: the timeout
it is given (with its own client or the caller's), the model and the engine kind it is told."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from tests.support.metrics_pages import SGLANG, VLLM, fixture_text
from tests.support.metrics_server import MetricsServer

from spark_otel import EngineError
from spark_otel.receivers.prometheus import ascrape_engine


async def _refusal(url: str, **kwargs: object) -> str:
    with pytest.raises(EngineError) as caught:
        await asyncio.wait_for(ascrape_engine(url, **kwargs), 3)  # type: ignore[arg-type]
    return str(caught.value)


async def test_a_silent_engine_is_given_up_at_the_timeout_with_its_own_client(silent_url: str) -> None:
    message = await _refusal(silent_url, timeout_s=0.3)
    assert message.startswith(f"{silent_url}/metrics: cannot read engine metrics: ReadTimeout")


async def test_a_silent_engine_is_given_up_at_the_timeout_with_the_callers_client(silent_url: str) -> None:
    async with httpx.AsyncClient() as client:  # its own default is 5 s
        message = await _refusal(silent_url, client=client, timeout_s=0.3)
    assert message.startswith(f"{silent_url}/metrics: cannot read engine metrics: ReadTimeout")


async def test_a_refused_connection_names_the_url_and_the_error(free_port: int) -> None:
    url = f"http://127.0.0.1:{free_port}"
    assert (await _refusal(url, timeout_s=2)).startswith(
        f"{url}/metrics: cannot read engine metrics: ConnectError: "
    )


async def test_an_error_status_names_the_metrics_url(metrics_server: MetricsServer) -> None:
    metrics_server.set_text("oops")
    metrics_server.status = 503
    assert await _refusal(metrics_server.url) == f"{metrics_server.url}/metrics: /metrics answered HTTP 503"


async def test_a_model_the_engine_does_not_serve_is_refused(metrics_server: MetricsServer) -> None:
    metrics_server.set_text(fixture_text(VLLM))
    message = await _refusal(metrics_server.url, model_name="not-served")
    assert message.startswith(f"{metrics_server.url}: no series for model 'not-served'; the engine serves ")


async def test_the_kind_given_is_the_kind_read(metrics_server: MetricsServer) -> None:
    metrics_server.set_text(fixture_text(SGLANG))
    assert (await ascrape_engine(metrics_server.url)).kind == "sglang"
    told = await ascrape_engine(metrics_server.url, kind="vllm")
    assert (told.kind, told.generation_tokens) == ("vllm", None)
