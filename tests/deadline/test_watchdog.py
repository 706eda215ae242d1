"""The sync watchdog's hold on a connection, on a real socket pair: it shuts the socket at the
deadline, never after the stream handed the connection back, and never when it cannot know
when that happens. The response around the socket is a stand-in: a stream whose close cannot
be hooked, or a lookup that fails, are faults no real peer produces on demand."""

from __future__ import annotations

import logging
import socket
from collections.abc import Iterator
from typing import Any

import pytest

from spark_otel.deadline.arguments import Plan
from spark_otel.deadline.run import StreamRun
from spark_otel.instrumentation.request_notes import RequestNotes


class NetworkStream:
    """httpcore's ``network_stream`` extension: the connection's socket by name."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock

    def get_extra_info(self, name: str) -> Any:
        return self.sock if name == "socket" else None


class PoolStream:
    """The response's stream: closing it hands the connection back to the pool."""

    def __init__(self) -> None:
        self.closed = 0

    def close(self) -> None:
        self.closed += 1


class Response:
    def __init__(self, sock: socket.socket | None, stream: Any) -> None:
        self.extensions = {} if sock is None else {"network_stream": NetworkStream(sock)}
        self.stream = stream


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    ours, peer = socket.socketpair()
    peer.settimeout(2)
    yield ours, peer
    ours.close()
    peer.close()


def _run() -> StreamRun:
    return StreamRun(Plan("raw", True, {}, 30.0, None), None)


def _shut(peer: socket.socket) -> bool:
    """Whether our end was shut: the peer then reads the end of the stream."""
    return peer.recv(1) == b""


def _open(ours: socket.socket, peer: socket.socket) -> bool:
    ours.sendall(b"x")
    return peer.recv(1) == b"x"


def test_the_deadline_shuts_the_attached_socket(pair: tuple[socket.socket, socket.socket]) -> None:
    ours, peer = pair
    run = _run()
    run.attach(Response(ours, PoolStream()))
    run.expire()
    assert run.expired
    assert _shut(peer)


def test_a_socket_attached_after_the_deadline_is_shut_at_once(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    ours, peer = pair
    run = _run()
    run.expire()
    run.attach(Response(ours, PoolStream()))
    assert _shut(peer)


def test_once_the_stream_hands_its_connection_back_the_watchdog_lets_it_be(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    ours, peer = pair
    run, stream = _run(), PoolStream()
    run.attach(Response(ours, stream))
    stream.close()  # the read loop closes the body: the hook detaches, then the pool's release runs
    assert stream.closed == 1
    run.expire()  # the deadline passes afterwards
    assert not run.expired
    assert _open(ours, peer)


def test_a_detached_run_is_never_expired() -> None:
    run = _run()
    run.notes = RequestNotes()
    run.detach()
    run.expire()
    assert not run.expired
    assert (run.notes.error_type, run.notes.attributes) == (None, {})


def test_a_connection_whose_release_cannot_be_hooked_is_never_shut(
    pair: tuple[socket.socket, socket.socket], caplog: pytest.LogCaptureFixture
) -> None:
    ours, peer = pair
    run = _run()
    run.expire()  # even past the deadline: the pool may have lent the connection on
    with caplog.at_level(logging.DEBUG, logger="spark_otel"):
        run.attach(Response(ours, stream=()))  # a stream with no close to hook
    assert [r.getMessage() for r in caplog.records] == [
        "spark_otel: deadline release hook failed; the call goes on untouched",
        "spark_otel: cannot hook the connection's release; no watchdog shutdown",
    ]
    assert _open(ours, peer)


def test_a_response_without_a_socket_has_no_watchdog_and_says_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    run = _run()
    with caplog.at_level(logging.DEBUG, logger="spark_otel"):
        run.attach(Response(None, PoolStream()))  # an ASGI or mock transport: no network stream
        run.expire()
    assert caplog.records == []
    assert run.expired


def test_a_failing_socket_lookup_is_reported_once_and_the_stream_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    run, response = _run(), Response(None, PoolStream())
    response.extensions = None  # type: ignore[assignment]
    with caplog.at_level(logging.WARNING, logger="spark_otel"):
        run.attach(response)
        run.attach(response)
    assert caplog.messages == ["spark_otel: deadline socket lookup failed; the call goes on untouched"]


def test_a_socket_already_closed_at_the_deadline_is_left_alone(
    pair: tuple[socket.socket, socket.socket], caplog: pytest.LogCaptureFixture
) -> None:
    ours, _ = pair
    run = _run()
    run.attach(Response(ours, PoolStream()))
    ours.close()
    with caplog.at_level(logging.DEBUG, logger="spark_otel.deadline.run"):
        run.expire()
    (record,) = caplog.records
    assert record.getMessage() == "spark_otel: deadline socket already closed"
    assert record.exc_info is not None
    assert issubclass(record.exc_info[0], OSError)  # type: ignore[index,arg-type]
