"""The box's HTTP servers at their edges: what they log and what they close when the box ends.

uvicorn logs its start and stop at INFO; the box sets uvicorn's loggers to WARNING, so a caller
who logs at INFO gets none of those lines. That setting outlives the box, so in a process where a
box already ran (test_box_handle.py's check of the same) an unset level goes unseen: this test
starts from loggers no box has set. Leaving the box shuts each server down, which also closes a
client's idle keep-alive connection: the client reads the end of the connection, not silence.
A stream's first chunk follows its response head at once, on a reused connection too (no Nagle
wait for the ACK a client delays by 40 ms).
"""

from __future__ import annotations

import logging
import socket
import statistics
import time
from collections.abc import Iterator

import httpx
import pytest

from spark_otel.sim import run_box

INF = float("inf")
_UVICORN_LOGGERS = ("uvicorn.error", "uvicorn.access", "uvicorn.asgi")


@pytest.fixture
def uvicorn_loggers_unset() -> Iterator[None]:
    """uvicorn's loggers at NOTSET, as in a process no box has run in yet; restored afterwards."""
    loggers = [logging.getLogger(name) for name in _UVICORN_LOGGERS]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.NOTSET)
    yield
    for logger, level in zip(loggers, levels, strict=True):
        logger.setLevel(level)


def _read_head(sock: socket.socket) -> bytes:
    head = b""
    while not head.endswith(b"\r\n\r\n"):
        data = sock.recv(4096)
        assert data, f"the connection ended inside the response head: {head!r}"
        head += data
    return head


@pytest.mark.usefixtures("uvicorn_loggers_unset")
def test_a_box_keeps_uvicorns_info_lines_out_of_the_callers_log(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    with (
        run_box({"a": "dense"}, speed=INF) as box,
        socket.create_connection(("127.0.0.1", box.port("a"))) as sock,
    ):
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        _read_head(sock)
    assert [
        (r.name, r.levelname, r.getMessage()) for r in caplog.records if r.name.startswith("uvicorn")
    ] == []


def test_leaving_the_box_closes_a_kept_alive_idle_connection() -> None:
    with run_box({"a": "dense"}, speed=INF) as box:
        sock = socket.create_connection(("127.0.0.1", box.port("a")))
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")  # HTTP/1.1: kept alive by default
        head = _read_head(sock)
    with sock:
        sock.settimeout(5)
        try:
            after = sock.recv(1024)
        except TimeoutError:
            after = None  # the server left the connection open
    lines = [line for line in head.split(b"\r\n") if not line.startswith(b"date: ")]
    assert lines == [b"HTTP/1.1 200 OK", b"server: uvicorn", b"content-length: 0", b"", b""]
    assert after == b""  # the end of the connection


def test_a_streams_first_chunk_follows_its_head_at_once_on_a_reused_connection() -> None:
    # At infinite speed the engine has no time to first token: any gap is the server's. Before
    # the listening socket named TCP, asyncio left Nagle's algorithm on and the first chunk sat
    # behind the head's unacknowledged segment until the client's delayed ACK, 40 ms later.
    with run_box({"a": "dense"}, speed=INF) as box, httpx.Client(timeout=10) as client:
        body = {"model": box.model_id("a"), "prompt": "hi", "max_tokens": 4, "stream": True}
        gaps = []
        local_addrs = set()
        for _ in range(12):
            with client.stream("POST", box.url("a") + "/v1/completions", json=body) as response:
                assert response.status_code == 200
                local_addrs.add(response.extensions["network_stream"].get_extra_info("client_addr"))
                chunks = response.iter_raw()
                started = time.perf_counter()
                first = next(chunks)
                gaps.append(time.perf_counter() - started)
                assert (first + b"".join(chunks)).rstrip().endswith(b"data: [DONE]")
    assert len(local_addrs) == 1  # one keep-alive connection, reused by every request after the first
    assert statistics.median(gaps[1:]) < 0.015, [round(g * 1000, 1) for g in gaps]
