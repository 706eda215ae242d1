"""A vLLM-like engine on 127.0.0.1 whose routes answer as a test scripts them, and which records
what its clients sent: each completion's headers, body and connection, and every route's hits.

`PlainEngine` (tests/support/plain_engine.py) answers one fixed script; the probe's faults need each answer
chosen per request: JSON that is no object at ``/sim/info``, a ``/v1/models`` that fails, a
``/metrics`` that fails or resets at one scrape, a completion that stalls silently, trickles,
breaks off or ends without its usage chunk. A stdlib server starts at once, and its keep-alive
connections can be counted.

Routes: ``GET /sim/info`` (``info``: None answers 404, bytes are sent as they are, anything else
as JSON), ``GET /v1/models`` (``models``, bytes or JSON, and ``models_status``), ``GET /metrics``
(``metrics(hit)`` gives status and text, or None for the default: vLLM's generation counter and
running gauge, live), ``GET /sim/gpu`` (``gpu(hit)`` gives the JSON; None answers 404) and
``POST /v1/completions``
(``answer(number, body)`` gives an `Answer`; by default ``max_tokens`` one-token events, the usage
chunk and ``[DONE]``, or one JSON body when ``stream`` is false).
"""

from __future__ import annotations

import contextlib
import json
import select
import socket
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

MODEL = "scripted-model"
TOKEN_EVENT = b'data: {"choices":[{"index":0,"text":"x"}]}\n\n'
DONE_EVENT = b"data: [DONE]\n\n"


def usage_event(completion_tokens: int) -> bytes:
    usage = {
        "prompt_tokens": 40,
        "completion_tokens": completion_tokens,
        "total_tokens": 40 + completion_tokens,
    }
    return b"data: " + json.dumps({"choices": [], "usage": usage}).encode() + b"\n\n"


def vllm_metrics(generated: float, running: float) -> str:
    """vLLM's exposition of the two series the probe reads."""
    return (
        "# TYPE vllm:generation_tokens_total counter\n"
        f'vllm:generation_tokens_total{{model_name="{MODEL}"}} {generated}\n'
        "# TYPE vllm:num_requests_running gauge\n"
        f'vllm:num_requests_running{{model_name="{MODEL}"}} {running}\n'
    )


@dataclass
class Answer:
    """How one completion is answered: ``status`` with ``body`` (any status but 200, or 200 with
    a body of its own); else ``events`` streamed as SSE, one chunk each, after which the stream
    ends, ``stall``s (``silent``: nothing more; ``trickle``: an SSE comment every 50 ms) until the
    client goes away, or is broken off (``drop``: the connection closes mid-body)."""

    status: int = 200
    body: bytes | None = None
    events: list[bytes] = field(default_factory=list)
    stall: Literal["silent", "trickle"] | None = None
    drop: bool = False
    content_type: str = "application/json"
    """Of ``body`` (an HTML error page a proxy sends: ``text/html``)."""


@dataclass(frozen=True)
class Completion:
    number: int
    connection: int
    headers: dict[str, str]
    body: dict[str, Any]


def default_answer(number: int, body: dict[str, Any]) -> Answer:
    """What vLLM answers a pinned request: exactly ``max_tokens`` tokens and a usage count."""
    tokens = int(body["max_tokens"])
    if not body.get("stream"):
        usage = {"prompt_tokens": 40, "completion_tokens": tokens, "total_tokens": 40 + tokens}
        return Answer(
            body=json.dumps({"choices": [{"index": 0, "text": "x" * tokens}], "usage": usage}).encode()
        )
    return Answer(events=[TOKEN_EVENT] * tokens + [usage_event(tokens), DONE_EVENT])


class ScriptedEngine:
    """The engine, served from a background thread inside ``with``."""

    def __init__(
        self,
        *,
        info: object = None,
        models: object = None,
        models_status: int = 200,
        metrics: Callable[[int], tuple[int, str] | None] = lambda hit: None,
        gpu: Callable[[int], dict[str, Any]] | None = None,
        answer: Callable[[int, dict[str, Any]], Answer] = default_answer,
    ) -> None:
        self.info = info
        self.models = (
            {"object": "list", "data": [{"id": MODEL, "object": "model"}]} if models is None else models
        )
        self.models_status = models_status
        self.metrics = metrics
        self.gpu = gpu
        self.answer = answer
        self.hits: Counter[str] = Counter()
        self.completions: list[Completion] = []
        self.connections = 0
        self.generated = 0
        self.running = 0
        self._lock = threading.Lock()
        self._released = threading.Event()
        engine = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self) -> None:
                super().setup()
                with engine._lock:
                    engine.connections += 1
                    self.connection_number = engine.connections

            def do_GET(self) -> None:
                engine._get(self)

            def do_POST(self) -> None:
                engine._post(self)

            def log_message(self, *args: object) -> None:
                return

        class Server(ThreadingHTTPServer):
            daemon_threads = True
            request_queue_size = 128  # a level's streams all connect at once

        self._server = Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.02,), daemon=True)

    def __enter__(self) -> ScriptedEngine:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._released.set()
        self._server.shutdown()
        self._server.server_close()

    @property
    def bodies(self) -> list[dict[str, Any]]:
        return [c.body for c in self.completions]

    # -- answers ----------------------------------------------------------------------------------
    @staticmethod
    def _send(handler: BaseHTTPRequestHandler, status: int, payload: bytes, ctype: str) -> None:
        handler.send_response(status)
        handler.send_header("Content-Type", ctype)
        handler.send_header("Content-Length", str(len(payload)))
        handler.end_headers()
        handler.wfile.write(payload)

    def _get(self, handler: BaseHTTPRequestHandler) -> None:
        path = handler.path
        with self._lock:
            self.hits[path] += 1
            hit = self.hits[path]
        if path == "/sim/info" and self.info is not None:
            raw = self.info if isinstance(self.info, bytes) else json.dumps(self.info).encode()
            self._send(handler, 200, raw, "application/json")
        elif path == "/v1/models":
            raw = self.models if isinstance(self.models, bytes) else json.dumps(self.models).encode()
            self._send(handler, self.models_status, raw, "application/json")
        elif path == "/metrics":
            status, text = self.metrics(hit) or (200, vllm_metrics(self.generated, self.running))
            self._send(handler, status, text.encode(), "text/plain; version=0.0.4")
        elif path == "/sim/gpu" and self.gpu is not None:
            self._send(handler, 200, json.dumps(self.gpu(hit)).encode(), "application/json")
        else:
            self._send(handler, 404, b'{"detail":"Not Found"}', "application/json")

    def _post(self, handler: BaseHTTPRequestHandler) -> None:
        raw = handler.rfile.read(int(handler.headers["Content-Length"]))
        if handler.path != "/v1/completions":
            self._send(handler, 404, b'{"detail":"Not Found"}', "application/json")
            return
        body = json.loads(raw)
        with self._lock:
            number = len(self.completions) + 1
            headers = {k.lower(): v for k, v in handler.headers.items()}
            self.completions.append(Completion(number, handler.connection_number, headers, body))  # type: ignore[attr-defined]
            self.running += 1
        finished = threading.Event()

        def finish() -> None:
            """No longer running: said before the answer's last byte, as the gauge reads then."""
            with self._lock:
                if not finished.is_set():
                    finished.set()
                    self.running -= 1

        try:
            self._complete(handler, self.answer(number, body), finish)
        finally:
            finish()

    @staticmethod
    def _gone(handler: BaseHTTPRequestHandler) -> bool:
        """Whether the client closed the connection (waits up to 50 ms to see)."""
        readable, _, _ = select.select([handler.connection], [], [], 0.05)
        return bool(readable) and not handler.connection.recv(1, socket.MSG_PEEK)

    def _complete(self, handler: BaseHTTPRequestHandler, answer: Answer, finish: Callable[[], None]) -> None:
        if answer.body is not None:
            with self._lock, contextlib.suppress(ValueError, AttributeError, KeyError, TypeError):
                self.generated += (
                    json.loads(answer.body)["usage"]["completion_tokens"] if answer.status == 200 else 0
                )
            finish()
            self._send(handler, answer.status, answer.body, answer.content_type)
            return
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream")
        handler.send_header("Transfer-Encoding", "chunked")
        handler.end_headers()

        def chunk(data: bytes) -> None:
            handler.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            handler.wfile.flush()

        try:
            for event in answer.events:
                if event == TOKEN_EVENT:
                    with self._lock:
                        self.generated += 1
                chunk(event)
            if answer.drop:
                finish()
                handler.close_connection = True
                handler.connection.shutdown(socket.SHUT_RDWR)
                return
            while answer.stall == "silent" and not self._released.is_set() and not self._gone(handler):
                pass
            while answer.stall == "trickle" and not self._released.is_set():
                chunk(b": still thinking\n\n")
                time.sleep(0.05)
            finish()
            handler.wfile.write(b"0\r\n\r\n")
        except OSError:  # the client went away
            handler.close_connection = True


def load_free(warnings: list[str]) -> list[str]:
    """A report's warnings but the client's CPU budget, which depends on the machine's load."""
    return [w for w in warnings if "the client is past its CPU budget" not in w]
