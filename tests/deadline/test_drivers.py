"""What the deadline drivers send and how they end, sync and async, on the misbehaving server.

`test_deadline` shows each scenario ends right; these pin the request itself (method, path
under any base URL, content type, no retry, whose timeout), how a refused connection or an
error status reads, the request span's notes on a plain stream, and that nothing the drivers
start outlives them: the watchdog thread at interpreter exit, the SDK's generators at return.
"""

from __future__ import annotations

import asyncio
import gc
import json
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from typing import Any

import httpx2
import pytest
from tests.support.deadline_clients import KINDS, PROMPTNESS_S, request_kwargs, run_async, run_either
from tests.support.deadline_server import MisbehavingServer

from spark_otel._semconv import REQUEST_DEADLINE_STATUS, REQUEST_SALVAGED_FINDINGS, REQUEST_TOKENS_SOURCE
from spark_otel.deadline import DeadlineStatus, astream_with_deadline, stream_with_deadline
from spark_otel.deadline.drivers import _aclose_all, _http_error
from spark_otel.instrumentation.request_notes import RequestNotes, current_request_notes

RAW = ["httpx2", "httpx"]
BOTH = pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])


def _endpoint(chat: bool) -> str:
    return "/v1/chat/completions" if chat else "/v1/completions"


@pytest.fixture
def refused_url() -> Iterator[str]:
    """A loopback port nobody listens on: bound, so no one else takes it, and never listening."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    sock.close()


# --- the request ----------------------------------------------------------------------------------


@BOTH
@pytest.mark.parametrize("chat", [True, False], ids=["chat", "completion"])
@pytest.mark.parametrize("base", ["", "/v1", "/v1/"], ids=["root", "v1", "v1-slash"])
@pytest.mark.parametrize("kind", RAW)
async def test_a_raw_request_is_one_json_post_to_the_endpoint_under_any_base_url(
    test_server: MisbehavingServer, tag: str, kind: str, base: str, chat: bool, is_async: bool
) -> None:
    url = test_server.url + base
    result, _ = await run_either(
        kind, url, "findings", {"tag": tag}, is_async=is_async, chat=chat, deadline_s=30
    )
    assert result.status is DeadlineStatus.COMPLETE, result.error
    assert test_server.requests[tag] == [("POST", _endpoint(chat), "application/json")]


@BOTH
async def test_the_sdk_sends_a_failed_request_once_never_retrying_into_the_deadline(
    test_server: MisbehavingServer, tag: str, is_async: bool
) -> None:
    params = {"tag": tag, "status": 503}  # a status the SDK retries by default
    result, _ = await run_either(
        "openai", test_server, "http_error", params, is_async=is_async, deadline_s=30
    )
    assert result.status is DeadlineStatus.ERROR
    assert (result.error or "").startswith("InternalServerError: Error code: 503"), result.error
    assert test_server.requests[tag] == [("POST", _endpoint(True), "application/json")]


@BOTH
@pytest.mark.parametrize("kind", RAW)
async def test_the_caller_s_timeout_bounds_a_raw_request_without_a_deadline(
    test_server: MisbehavingServer, tag: str, kind: str, is_async: bool
) -> None:
    kw: dict[str, Any] = {"client": {"timeout": 30.0}, "max_output_tokens": 10, "timeout": 0.3}
    result, took = await run_either(kind, test_server, "stall_headers", {"tag": tag}, is_async=is_async, **kw)
    assert result.status is DeadlineStatus.ERROR
    assert (result.error or "").startswith("ReadTimeout: "), result.error
    assert 0.3 <= took < 10  # the caller's 0.3 s, far from the client's 30 s


# --- how a failure reads --------------------------------------------------------------------------


@BOTH
@pytest.mark.parametrize(
    ("kind", "raised"),
    [("openai", "APIConnectionError"), ("httpx2", "ConnectError"), ("httpx", "ConnectError")],
)
async def test_a_refused_connection_is_an_error_naming_what_the_client_raised(
    refused_url: str, kind: str, raised: str, is_async: bool
) -> None:
    result, _ = await run_either(kind, refused_url, "findings", {}, is_async=is_async, deadline_s=30)
    assert result.status is DeadlineStatus.ERROR
    assert (result.error or "").startswith(f"{raised}: "), result.error
    assert result.text == ""


@BOTH
@pytest.mark.parametrize("status", [400, 500])
@pytest.mark.parametrize("kind", RAW)
async def test_an_error_status_is_an_error_in_the_server_s_own_words(
    test_server: MisbehavingServer, tag: str, kind: str, status: int, is_async: bool
) -> None:
    params = {"tag": tag, "status": status}
    result, _ = await run_either(kind, test_server, "http_error", params, is_async=is_async, deadline_s=30)
    body = json.dumps({"error": {"message": "engine overloaded", "code": status}}, separators=(",", ":"))
    assert result.status is DeadlineStatus.ERROR
    assert result.error == f"HTTP {status}: {body}"
    assert result.text == ""


class UnreadableBody:
    """A response whose body cannot be decoded: no real peer produces this on demand."""

    status_code = 502

    @property
    def text(self) -> str:
        raise httpx2.ResponseNotRead()


def test_an_error_status_whose_body_cannot_be_read_still_names_the_status() -> None:
    assert _http_error(UnreadableBody()) == "HTTP 502: "


# --- deadlines before and at the start ------------------------------------------------------------


@BOTH
@pytest.mark.parametrize("kind", KINDS)
async def test_a_deadline_already_past_returns_at_once_and_sends_nothing(
    test_server: MisbehavingServer, tag: str, kind: str, is_async: bool
) -> None:
    result, took = await run_either(
        kind, test_server, "stall_headers", {"tag": tag}, is_async=is_async, deadline_s=0
    )
    assert result.status is DeadlineStatus.DEADLINE
    assert result.error is None
    assert took < PROMPTNESS_S
    await asyncio.sleep(0.2)  # a request sent would have reached the server by now
    assert tag not in test_server.requests


async def test_an_absolute_deadline_cuts_an_async_stream_off_at_that_time(
    test_server: MisbehavingServer, tag: str
) -> None:
    at = time.time() + 0.3
    result, took = await run_async("httpx2", test_server, "stall_headers", {"tag": tag}, deadline_at=at)
    assert result.status is DeadlineStatus.DEADLINE
    assert time.time() >= at
    assert took < 0.3 + PROMPTNESS_S
    assert await asyncio.to_thread(test_server.wait_disconnect, tag)


# --- the request span's notes ---------------------------------------------------------------------


@BOTH
async def test_a_plain_finished_stream_notes_streamed_tokens_and_no_findings(
    test_server: MisbehavingServer, is_async: bool
) -> None:
    """No usage chunk and nothing to salvage: the notes keep the values the driver starts with."""
    captured: list[RequestNotes | None] = []
    kwargs = request_kwargs("httpx2", "findings", {"text": "nothing to report", "usage": False})

    async def ahook(request: Any) -> None:
        captured.append(current_request_notes())

    if is_async:
        async with httpx2.AsyncClient(base_url=test_server.url, event_hooks={"request": [ahook]}) as aclient:
            result = await astream_with_deadline(aclient, deadline_s=30, **kwargs)
    else:
        hooks = {"request": [lambda request: captured.append(current_request_notes())]}
        with httpx2.Client(base_url=test_server.url, event_hooks=hooks) as client:
            result = await asyncio.to_thread(stream_with_deadline, client, deadline_s=30, **kwargs)
    assert result.status is DeadlineStatus.COMPLETE
    assert result.usage.source == "streamed"
    (notes,) = captured
    assert notes is not None
    assert notes.error_type is None
    assert notes.attributes == {
        REQUEST_DEADLINE_STATUS: "complete",
        REQUEST_SALVAGED_FINDINGS: 0,
        REQUEST_TOKENS_SOURCE: "streamed",
    }


# --- nothing outlives the call --------------------------------------------------------------------


def test_a_stream_in_a_daemon_thread_never_holds_the_interpreter_open(
    test_server: MisbehavingServer, tag: str
) -> None:
    """The watchdog waits out the whole deadline; were it not a daemon, a user's daemon worker
    still streaming at exit would keep the process alive until the deadline (here a minute)."""
    script = textwrap.dedent(
        f"""
        import threading, time
        import httpx2
        from spark_otel.deadline import stream_with_deadline

        client = httpx2.Client(base_url={test_server.url!r})
        kwargs = dict(deadline_s=60, model="stall_headers", messages=[], test={{"tag": {tag!r}}})
        threading.Thread(target=stream_with_deadline, args=(client,), kwargs=kwargs, daemon=True).start()
        give_up = time.monotonic() + 20
        while not any(isinstance(t, threading.Timer) for t in threading.enumerate()):
            assert time.monotonic() < give_up, "the watchdog never started"
            time.sleep(0.01)
        print("in flight", flush=True)
        """
    )
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=45, check=False
    )
    took = time.perf_counter() - started
    assert (done.returncode, done.stdout, done.stderr) == (0, "in flight\n", "")
    assert took < 30  # interpreter start and imports, seen up to 5 s here; the deadline is 60 s


async def test_the_sdk_s_own_generators_are_closed_before_the_call_returns(
    test_server: MisbehavingServer,
) -> None:
    """Left to the garbage collector, each suspended generator is closed later by a task of its
    own. The two innermost live only in a local of the SDK's ``__stream__``, out of reach; they
    hold nothing, as the response under them is closed by then."""
    finalized: list[str] = []
    hooks = sys.get_asyncgen_hooks()

    def finalizer(generator: Any) -> None:
        finalized.append(generator.__qualname__)
        assert hooks.finalizer is not None
        hooks.finalizer(generator)

    sys.set_asyncgen_hooks(firstiter=hooks.firstiter, finalizer=finalizer)
    try:
        result, _ = await run_async("openai", test_server, "findings", {"delay_s": 0.01}, max_output_tokens=3)
        gc.collect()
    finally:
        sys.set_asyncgen_hooks(*hooks)
    assert result.status is DeadlineStatus.LENGTH_CAP
    assert sorted(finalized) == ["AsyncStream._iter_events", "SSEDecoder.aiter_bytes"]


class BareStream:
    """An SDK stream with no generator to close, as a future SDK might hand back."""

    def __init__(self) -> None:
        self.closed = 0

    async def close(self) -> None:
        self.closed += 1


async def test_a_stream_without_generators_to_close_is_still_closed_once() -> None:
    stream = BareStream()
    await _aclose_all(object(), stream)
    assert stream.closed == 1
