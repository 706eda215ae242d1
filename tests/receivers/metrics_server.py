"""A tiny real HTTP server on 127.0.0.1 that serves whatever /metrics text (or /sim/gpu JSON) a test sets."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

DATA = Path(__file__).parent.parent / "data" / "receivers"


def fixture_text(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8")


class MetricsServer:
    """A tiny real HTTP server: GET /metrics answers ``body`` with ``status``; other paths 404."""

    def __init__(self) -> None:
        self.body = b""
        self.status = 200
        self.hits = 0
        self.json_body: dict[str, object] | None = None
        self.text_fn: Callable[[int], str] | None = None
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                outer.hits += 1
                if self.path == "/metrics":
                    body = outer.text_fn(outer.hits).encode() if outer.text_fn else outer.body
                    payload, ctype = body, "text/plain; version=0.0.4"
                elif self.path == "/sim/gpu" and outer.json_body is not None:
                    payload, ctype = json.dumps(outer.json_body).encode(), "application/json"
                else:
                    self.send_response(404)
                    self.end_headers()
                    return
                self.send_response(outer.status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args: object) -> None:
                return

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def set_text(self, text: str) -> None:
        self.body = text.encode("utf-8")

    def __enter__(self) -> MetricsServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


class OtlpSink:
    """A real HTTP endpoint on 127.0.0.1 that keeps the OTLP/HTTP protobuf bodies it receives
    (``bodies``; ``posts`` with the path each was sent to) and answers each ``status``."""

    def __init__(self, status: int = 200) -> None:
        self.bodies: list[bytes] = []
        self.posts: list[tuple[str, bytes]] = []
        self._posted = posted = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                # As sent: `self.path` folds a leading "//" into "/" (http.server's open-redirect fix).
                sent = self.requestline.split()[1]
                with posted:
                    outer.bodies.append(body)
                    outer.posts.append((sent, body))
                self.send_response(status)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()

    def bodies_to(self, path: str) -> list[bytes]:
        """The bodies posted to ``path`` (e.g. "/v1/traces"): a run may send metrics beside its spans."""
        return [body for sent, body in self.posts if sent == path]

    def clear(self) -> None:
        """Forget every body received so far."""
        with self._posted:
            self.bodies.clear()
            self.posts.clear()
