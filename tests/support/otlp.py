"""A real OTLP/HTTP endpoint on 127.0.0.1 that keeps the protobuf bodies it receives."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


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
