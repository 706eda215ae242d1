"""The clients every deadline test drives: each kind, sync and async, against the misbehaving
server, with the checks that nothing was left behind (a busy pooled connection, a task)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx
import httpx2
import openai
from tests.support.deadline_server import MisbehavingServer

from spark_otel.deadline import astream_with_deadline, stream_with_deadline

# The contract: a cut-off request is closed within this long of its deadline.
PROMPTNESS_S = 0.1
KINDS = ["openai", "httpx2", "httpx"]


def make_client(kind: str, url: str, *, is_async: bool, **kwargs: Any) -> Any:
    if kind == "openai":
        cls = openai.AsyncOpenAI if is_async else openai.OpenAI
        return cls(base_url=url + "/v1", api_key="test-key", **kwargs)
    module = httpx2 if kind == "httpx2" else httpx
    return (module.AsyncClient if is_async else module.Client)(base_url=url, **kwargs)


def request_kwargs(kind: str, scenario: str, params: dict[str, Any], *, chat: bool = True) -> dict[str, Any]:
    kwargs: dict[str, Any] = {"model": scenario}
    if chat:
        kwargs["messages"] = [{"role": "user", "content": "find the bugs"}]
    else:
        kwargs["prompt"] = "find the bugs"
    if kind == "openai":
        kwargs["extra_body"] = {"test": params}
    else:
        kwargs["test"] = params
    return kwargs


def busy_connections(client: Any) -> list[Any]:
    """Connections the client's pool holds that are not idle: a leak after a cut-off."""
    inner = client._client if isinstance(client, openai.OpenAI | openai.AsyncOpenAI) else client
    return [conn for conn in inner._transport._pool.connections if not conn.is_idle()]


def _url(server: MisbehavingServer | str) -> str:
    return server if isinstance(server, str) else server.url


def run_sync(
    kind: str, server: MisbehavingServer | str, scenario: str, params: dict[str, Any], **kw: Any
) -> Any:
    """One stream on a fresh client of ``kind``: the result and the seconds it took."""
    chat = kw.pop("chat", True)
    with make_client(kind, _url(server), is_async=False, **kw.pop("client", {})) as client:
        started = time.perf_counter()
        result = stream_with_deadline(client, **kw, **request_kwargs(kind, scenario, params, chat=chat))
        took = time.perf_counter() - started
        assert busy_connections(client) == []
    return result, took


async def run_async(
    kind: str, server: MisbehavingServer | str, scenario: str, params: dict[str, Any], **kw: Any
) -> Any:
    """`run_sync`'s twin; no task may be left behind either."""
    chat = kw.pop("chat", True)
    client = make_client(kind, _url(server), is_async=True, **kw.pop("client", {}))
    try:
        started = time.perf_counter()
        result = await astream_with_deadline(
            client, **kw, **request_kwargs(kind, scenario, params, chat=chat)
        )
        took = time.perf_counter() - started
        assert busy_connections(client) == []
        assert asyncio.all_tasks() == {asyncio.current_task()}
    finally:
        await (client.close() if kind == "openai" else client.aclose())
    return result, took


async def run_either(
    kind: str,
    server: MisbehavingServer | str,
    scenario: str,
    params: dict[str, Any],
    *,
    is_async: bool,
    **kw: Any,
) -> Any:
    """`run_async`, or `run_sync` in a worker thread, so one async test covers both drivers."""
    if is_async:
        return await run_async(kind, server, scenario, params, **kw)
    return await asyncio.to_thread(run_sync, kind, server, scenario, params, **kw)
