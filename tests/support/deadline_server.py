"""A real OpenAI-compatible test server on 127.0.0.1 that misbehaves on request.

The request's ``model`` names the scenario and an extra ``test`` object in the body carries
its parameters (``extra_body={"test": {...}}`` with the openai client):

- ``findings``: stream ``text`` in pieces of ``piece_chars``, ``delay_s`` apart (after
  ``reasoning`` as vLLM's ``reasoning_content`` deltas, if given), then a finish reason
  (``finish``), a usage chunk (unless ``usage`` is false) and ``[DONE]`` (unless ``done`` is
  false: the body just ends, so a client reads it to the end and pools the connection);
- ``stall_headers``: send nothing at all, not even headers, until the client goes away;
- ``stall_body``: send headers and the pieces of ``text``, then nothing until the client goes;
- ``error_mid``: send the pieces of ``text``, then vLLM's mid-stream error event;
- ``drop``: send the pieces of ``text``, then break the connection;
- ``http_error``: answer ``status`` (default 500) with a JSON error.

Each request may carry a ``tag``; the server records how each tagged request arrived (method,
path, content type) and when its client went away, so a test can show what was sent, how often,
and that the connection was really closed.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import AsyncIterator
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

FINDINGS = [
    {"id": 1, "file": "src/a.py", "line": 12, "title": "off-by-one in {range} [bounds]"},
    {"id": 2, "file": "src/b.py", "line": 40, "title": 'quote " and brace } inside', "severity": "high"},
    {"id": 3, "file": "src/c.py", "line": 7, "title": 'unicode ✓ and escapes \\n \\" {[', "tags": ["x"]},
    {"id": 4, "file": "src/d.py", "line": 99, "title": "last one"},
]


def findings_document(findings: list[dict[str, Any]] = FINDINGS) -> str:
    """A reasoning prefix, then a fenced {"findings": [...]} document, as a thinking finder writes."""
    body = json.dumps(
        {"summary": "found {some} [things]", "findings": findings}, indent=2, ensure_ascii=False
    )
    return f"<think>check {{braces}} and [brackets]</think>\nHere is the review.\n```json\n{body}\n```\n"


DOC = findings_document()
# Two whole findings, then half of the third: what a seed cut off mid-answer has sent.
HALF = DOC[: DOC.index('"id": 3') + 20]
# A cut-off late enough that a stalled answer's text has arrived before it, even for a first
# request of a process on a loaded 2-core machine (connection, client set-up: seen 0.3 s).
SALVAGE_DEADLINE_S = 1.0


def pieces(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def complete_before(text: str, cut: int) -> int:
    """How many of `FINDINGS` are complete within ``text[:cut]`` (each ends with its own '}')."""
    count = 0
    for finding in FINDINGS:
        end = text.find(json.dumps(finding["title"], ensure_ascii=False))
        end = text.find("}", end)
        if end < cut:
            count += 1
    return count


class MisbehavingServer:
    """Uvicorn serving the misbehaving app in a background thread."""

    def __init__(self) -> None:
        self.disconnected: dict[str, float] = {}
        self.finished: set[str] = set()
        self.requests: dict[str, list[tuple[str, str, str | None]]] = {}
        """Each tagged request as it arrived: (method, path, content-type)."""
        self._cond = threading.Condition()
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self.port = int(self._sock.getsockname()[1])
        self.url = f"http://127.0.0.1:{self.port}"
        app = Starlette(
            routes=[
                Route("/v1/chat/completions", self._chat, methods=["POST"]),
                Route("/v1/completions", self._completions, methods=["POST"]),
            ]
        )
        self._server = uvicorn.Server(uvicorn.Config(app, log_level="error", lifespan="off"))
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._sock]}, daemon=True
        )

    def start(self) -> None:
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("test server did not start")
            time.sleep(0.01)

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=5)
        self._sock.close()

    def _mark(self, tag: str | None, what: str) -> None:
        if tag is None:
            return
        with self._cond:
            if what == "disconnected":
                self.disconnected[tag] = time.monotonic()
            else:
                self.finished.add(tag)
            self._cond.notify_all()

    def wait_disconnect(self, tag: str, timeout: float = 5.0) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: tag in self.disconnected, timeout)

    # -- handlers ------------------------------------------------------------------------------------
    async def _chat(self, request: Request) -> Response:
        return await self._handle(request, chat=True)

    async def _completions(self, request: Request) -> Response:
        return await self._handle(request, chat=False)

    async def _handle(self, request: Request, *, chat: bool) -> Response:
        body = await request.json()
        scenario = body.get("model")
        params: dict[str, Any] = body.get("test") or {}
        tag = params.get("tag")
        if tag is not None:
            with self._cond:
                arrived = (request.method, request.url.path, request.headers.get("content-type"))
                self.requests.setdefault(tag, []).append(arrived)
        if scenario == "http_error":
            status = int(params.get("status", 500))
            error = {"message": "engine overloaded", "code": status}
            return JSONResponse({"error": error}, status_code=status)
        if scenario == "stall_headers":
            # The body is read, so the next message is the client going away.
            while (await request.receive())["type"] != "http.disconnect":
                pass
            self._mark(tag, "disconnected")
            return Response(status_code=204)
        text = params.get("text", DOC)
        gen = self._events(scenario, params, pieces(text, int(params.get("piece_chars", 8))), chat, tag)
        return StreamingResponse(gen, media_type="text/event-stream")

    async def _events(
        self, scenario: str, params: dict[str, Any], parts: list[str], chat: bool, tag: str | None
    ) -> AsyncIterator[bytes]:
        delay = float(params.get("delay_s", 0))
        try:
            for part in pieces(params.get("reasoning", ""), 8):
                choice = {"index": 0, "delta": {"reasoning_content": part}, "finish_reason": None}
                yield _event(
                    {"id": "x", "object": "chat.completion.chunk", "model": "m", "choices": [choice]}
                )
            for part in parts:
                yield _event(_chunk(part, None, chat))
                if delay:
                    await asyncio.sleep(delay)
            if scenario == "stall_body":
                await asyncio.sleep(3600)
            if scenario == "error_mid":
                yield _event({"error": {"object": "error", "message": "CUDA out of memory", "code": 500}})
                return
            if scenario == "drop":
                raise ConnectionAbortedError("test server drops the connection")
            yield _event(_chunk("", params.get("finish", "stop"), chat))
            if params.get("usage", True):
                usage = {"prompt_tokens": 7, "completion_tokens": len(parts), "total_tokens": 7 + len(parts)}
                yield _event(
                    {
                        "id": "x",
                        "object": "chat.completion.chunk",
                        "model": "m",
                        "choices": [],
                        "usage": usage,
                    }
                )
            if params.get("done", True):
                yield b"data: [DONE]\n\n"
            self._mark(tag, "finished")
        except asyncio.CancelledError:
            self._mark(tag, "disconnected")
            raise


def _chunk(text: str, finish: str | None, chat: bool) -> dict[str, Any]:
    if chat:
        choice: dict[str, Any] = {
            "index": 0,
            "delta": {"content": text} if text else {},
            "finish_reason": finish,
        }
        return {"id": "x", "object": "chat.completion.chunk", "created": 0, "model": "m", "choices": [choice]}
    choice = {"index": 0, "text": text, "finish_reason": finish}
    return {"id": "x", "object": "text_completion", "created": 0, "model": "m", "choices": [choice]}


def _event(data: dict[str, Any]) -> bytes:
    return f"data: {json.dumps(data)}\n\n".encode()
