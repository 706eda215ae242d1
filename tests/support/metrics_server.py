"""A tiny real HTTP server on 127.0.0.1 that serves whatever /metrics text (or /sim/gpu JSON) a test sets."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


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
