"""One request's timing loop (`stream_once`, `plain_once`) against a real HTTP engine on 127.0.0.1
that answers each request as scripted, and the request the probe sends (`request_body`).

What a stream's result says decides a level's figures and warnings, so each ending is pinned whole:
the error text of an HTTP error (its first 200 bytes, bad UTF-8 replaced), of a stream broken
off, of one without its usage chunk and of one without ``[DONE]``; the event count when the last
event lacks its blank line; a usage of 0 tokens read as 0; and the usage looked for only among
the last four events, which is all a stream keeps. A request that meets a kept-alive connection
the engine closed (as llama.cpp's server closes one after each stream) is sent once more.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any

import httpx2
import pytest
from tests.support.scripted_engine import DONE_EVENT, TOKEN_EVENT, Answer, ScriptedEngine, usage_event

from spark_otel.analysis.probe_levels import StreamTiming
from spark_otel.probe.streams import plain_once, probe_prompt, request_body, stream_once, usage_from_tail
from spark_otel.records.probe_report import ProbeSettings

SEED = "Write a long, detailed essay on the history of measurement and the instruments people built. "
NO_USAGE = "no usage chunk before [DONE] (is stream_options.include_usage supported?)"
NO_DONE = "the stream ended without [DONE]: the engine closed it mid-stream"

Once = Callable[[httpx2.AsyncClient, bytes], Awaitable[StreamTiming]]


def _one(answer: Answer, once: Once = stream_once) -> StreamTiming:
    """``once`` against an engine that answers its one request with ``answer``."""

    async def run(url: str) -> StreamTiming:
        async with httpx2.AsyncClient(base_url=url, trust_env=False) as client:
            return await once(client, b'{"max_tokens": 4, "stream": true}')

    with ScriptedEngine(answer=lambda number, body: answer) as engine:
        return asyncio.run(run(engine.url))


def _ended(st: StreamTiming) -> tuple[object, ...]:
    """What a stream's result says, timings reduced to whether they were stamped in order."""
    return (st.events, st.completion_tokens, st.error, 0 < st.start_ns <= st.first_ns <= st.end_ns)


def test_a_whole_stream_counts_every_event_and_reads_its_usage() -> None:
    st = _one(Answer(events=[TOKEN_EVENT] * 4 + [usage_event(4), DONE_EVENT]))
    assert _ended(st) == (6, 4, None, True)


def test_a_last_event_without_its_blank_line_is_still_counted() -> None:
    """The decoder's flush yields it: counted once, and its ``[DONE]`` ends the stream cleanly."""
    st = _one(Answer(events=[TOKEN_EVENT, TOKEN_EVENT, usage_event(2), b"data: [DONE]"]))
    assert _ended(st) == (4, 2, None, True)


def test_a_usage_of_no_tokens_reads_zero_tokens() -> None:
    st = _one(Answer(events=[usage_event(0), DONE_EVENT]))
    assert _ended(st) == (2, 0, None, True)


def test_a_stream_without_a_usage_chunk_says_so_whatever_came_before_done() -> None:
    # Three events: the second from the end and the second from the start are token events.
    st = _one(Answer(events=[TOKEN_EVENT, TOKEN_EVENT, DONE_EVENT]))
    assert _ended(st) == (3, None, NO_USAGE, True)


def test_the_usage_chunk_is_looked_for_among_the_last_four_events_only() -> None:
    """A stream keeps only its last four events' data (bounded memory per stream): a usage chunk
    with three events and ``[DONE]`` after it has already left them."""
    st = _one(Answer(events=[usage_event(4)] + [TOKEN_EVENT] * 3 + [DONE_EVENT]))
    assert _ended(st) == (5, None, NO_USAGE, True)
    st = _one(Answer(events=[usage_event(4)] + [TOKEN_EVENT] * 2 + [DONE_EVENT]))
    assert _ended(st) == (4, 4, None, True)


def test_a_stream_that_ends_without_done_is_an_engine_that_closed_it() -> None:
    st = _one(Answer(events=[TOKEN_EVENT, TOKEN_EVENT]))
    assert _ended(st) == (2, None, NO_DONE, True)
    empty = _one(Answer(events=[]))
    assert (empty.events, empty.completion_tokens, empty.error, empty.first_ns) == (0, None, NO_DONE, 0)


def test_a_stream_broken_off_mid_body_reads_as_the_clients_exception() -> None:
    st = _one(Answer(events=[TOKEN_EVENT], drop=True))
    assert st.error == (
        "RemoteProtocolError: peer closed connection without sending complete message body "
        "(incomplete chunked read)"
    )
    assert (st.events, st.completion_tokens, st.end_ns) == (1, None, 0)


def test_an_http_error_keeps_the_first_200_bytes_of_its_body_bad_utf8_replaced() -> None:
    body = b"\xff" + b"e" * 299
    st = _one(Answer(status=503, body=body))
    assert st.error == "HTTP 503: \ufffd" + "e" * 199
    assert (st.events, st.first_ns, st.end_ns, st.completion_tokens) == (0, 0, 0, None)


@pytest.mark.parametrize("tokens", [4, 0])
def test_a_plain_answer_reads_its_usage_and_stamps_first_byte_at_the_end(tokens: int) -> None:
    usage = {"prompt_tokens": 40, "completion_tokens": tokens, "total_tokens": 40 + tokens}
    st = _one(Answer(body=json.dumps({"choices": [], "usage": usage}).encode()), plain_once)
    assert (st.completion_tokens, st.error, st.events) == (tokens, None, 0)
    assert 0 < st.start_ns < st.first_ns == st.end_ns


def test_a_plain_http_error_keeps_the_first_200_characters_of_its_body() -> None:
    st = _one(Answer(status=503, body=b"e" * 300), plain_once)
    assert st.error == "HTTP 503: " + "e" * 200
    assert st.completion_tokens is None


def test_a_plain_answer_that_is_no_json_is_named_with_its_type_and_first_bytes() -> None:
    st = _one(Answer(body=b"<html>busy</html>", content_type="text/html"), plain_once)
    assert st.error == "the engine answered text/html, not JSON: <html>busy</html>"  # not a parse error
    assert st.completion_tokens is None


def test_usage_is_the_last_usage_chunk_and_other_events_after_it_are_never_parsed() -> None:
    usage = {"prompt_tokens": 1, "completion_tokens": 3, "total_tokens": 4}
    chunk = json.dumps({"choices": [], "usage": usage}).encode()
    assert usage_from_tail([chunk, b"not json at all", b"[DONE]"]) == usage
    assert usage_from_tail([chunk, b"[1, 2]"]) == usage
    assert usage_from_tail([b'{"usage": ', b"[DONE]"]) is None  # a broken usage chunk: none


@pytest.mark.parametrize(
    ("mode", "extra"),
    [("stream", {"stream": True, "stream_options": {"include_usage": True}}), ("plain", {"stream": False})],
)
def test_the_request_pins_its_output_tokens_greedily_with_a_plain_prompt(
    mode: str, extra: dict[str, Any]
) -> None:
    settings = ProbeSettings(prompt_chars=120, mode=mode)  # type: ignore[arg-type]
    body = json.loads(request_body(settings, "qwen3.8-27b", 64))
    assert body == {
        "model": "qwen3.8-27b",
        "prompt": (SEED + SEED)[:120],
        "max_tokens": 64,
        "min_tokens": 64,
        "ignore_eos": True,
        "temperature": 0.0,
        **extra,
    }


def test_the_prompt_is_the_seed_sentence_repeated_to_the_exact_length() -> None:
    assert probe_prompt(200) == (SEED * 3)[:200]
    assert probe_prompt(5) == "Write"
    assert probe_prompt(len(SEED)) == SEED


def _read_request(conn: socket.socket) -> bytes | None:
    """One request's head and body, or None when the client closed the connection first."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return None
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":", 1)[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    while len(body) < length:
        body += conn.recv(65536)
    return body


@contextmanager
def _closing_after_each_answer() -> Iterator[tuple[str, list[str]]]:
    """An engine that, like llama.cpp's server after a stream, answers one request per connection
    while saying keep-alive, then closes it when the next request arrives on it, unanswered: the
    client always meets the closed connection. Yields its URL and what it did, in order."""
    listener = socket.create_server(("127.0.0.1", 0))
    done: list[str] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(5)
                request = _read_request(conn)
                if request is None:
                    continue
                if json.loads(request).get("stream"):
                    events = [TOKEN_EVENT] * 4 + [usage_event(4), DONE_EVENT]
                    chunks = b"".join(b"%x\r\n%s\r\n" % (len(e), e) for e in events) + b"0\r\n\r\n"
                    conn.sendall(
                        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                        b"Keep-Alive: timeout=5, max=100\r\nTransfer-Encoding: chunked\r\n\r\n" + chunks
                    )
                else:
                    payload = json.dumps({"choices": [], "usage": {"completion_tokens": 4}}).encode()
                    conn.sendall(
                        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                        b"Keep-Alive: timeout=5, max=100\r\nContent-Length: %d\r\n\r\n%s"
                        % (len(payload), payload)
                    )
                done.append("answered")
                if _read_request(conn) is not None:
                    done.append("closed on the next request")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}", done
    finally:
        listener.shutdown(socket.SHUT_RDWR)  # wakes the accept() that close() alone leaves blocked
        listener.close()
        thread.join(5)
        assert not thread.is_alive()


@pytest.mark.parametrize("once", [stream_once, plain_once])
def test_a_request_that_meets_a_connection_the_engine_closed_is_sent_once_more(once: Once) -> None:
    body = json.dumps({"max_tokens": 4, "stream": once is stream_once}).encode()

    async def twice(url: str) -> list[StreamTiming]:
        async with httpx2.AsyncClient(base_url=url, trust_env=False) as client:
            return [await once(client, body), await once(client, body)]

    with _closing_after_each_answer() as (url, done):
        first, second = asyncio.run(twice(url))
    assert (first.error, first.completion_tokens) == (None, 4)
    assert (second.error, second.completion_tokens) == (None, 4)
    assert done[:3] == ["answered", "closed on the next request", "answered"]
