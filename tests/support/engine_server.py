"""A small OpenAI-compatible test server on 127.0.0.1, the instrumentation tests' engine.

The server is real HTTP (uvicorn + starlette) so the real openai client, httpx2 and httpx talk
to it as they would to vLLM. Its answers are deterministic: ``max_tokens`` words ``w0 w1 ...``
(finish reason ``length``), prompt tokens = words in the prompt. Streams follow vLLM's SSE
shape, with the usage chunk (``choices: []``) only when ``stream_options.include_usage`` is
set. Request extras (sent through ``extra_body``): ``delay_s`` between chunks, ``fail_after``
to end a stream with an in-stream error event after that many chunks (``old_error``: in the
older vLLM shape, ``{"object": "error", ...}``, instead of ``{"error": {...}}``).
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import AsyncIterator
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

MODEL = "test-model-7b"


class ServerLog:
    """What the server saw, so tests can check headers that went over the wire."""

    def __init__(self) -> None:
        self.headers: list[dict[str, str]] = []
        self.bodies: list[dict[str, Any]] = []


def _prompt_tokens(body: dict[str, Any]) -> int:
    if "messages" in body:
        return sum(len(str(m.get("content", "")).split()) for m in body["messages"])
    return len(str(body.get("prompt", "")).split())


def _sse(obj: Any) -> bytes:
    return b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"


def make_app(log: ServerLog) -> Starlette:
    async def generate(request: Request) -> Response:
        body = await request.json()
        log.headers.append(dict(request.headers))
        log.bodies.append(body)
        chat = request.url.path.endswith("/chat/completions")
        model = body.get("model")
        if model != MODEL:
            return JSONResponse(
                {"error": {"message": f"model {model!r} not found", "type": "NotFoundError", "code": 404}},
                status_code=404,
            )
        count = int(body.get("max_tokens") or body.get("max_completion_tokens") or 8)
        prompt = _prompt_tokens(body)
        words = [f"w{i} " for i in range(count)]
        rid = "chatcmpl-test" if chat else "cmpl-test"
        created = 1700000000
        usage = {"prompt_tokens": prompt, "completion_tokens": count, "total_tokens": prompt + count}
        if not body.get("stream"):
            text = "".join(words)
            if chat:
                choice: dict[str, Any] = {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": "length",
                    "logprobs": None,
                }
                obj = "chat.completion"
            else:
                choice = {"index": 0, "text": text, "finish_reason": "length", "logprobs": None}
                obj = "text_completion"
            return JSONResponse(
                {
                    "id": rid,
                    "object": obj,
                    "created": created,
                    "model": MODEL,
                    "choices": [choice],
                    "usage": usage,
                }
            )

        delay = float(body.get("delay_s") or 0)
        fail_after = body.get("fail_after")
        old_error = bool(body.get("old_error"))
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))

        def chunk(choices: list[dict[str, Any]], usage_obj: Any = None) -> bytes:
            payload: dict[str, Any] = {
                "id": rid,
                "object": "chat.completion.chunk" if chat else "text_completion",
                "created": created,
                "model": MODEL,
                "choices": choices,
            }
            if usage_obj is not None:
                payload["usage"] = usage_obj
            return _sse(payload)

        async def events() -> AsyncIterator[bytes]:
            if chat:
                role = {"role": "assistant", "content": ""}
                yield chunk([{"index": 0, "delta": role, "finish_reason": None}])
            for i, word in enumerate(words):
                if fail_after is not None and i >= int(fail_after):
                    error = {"message": "engine died", "type": "InternalServerError", "code": 500}
                    yield _sse({"object": "error", **error} if old_error else {"error": error})
                    return
                if delay:
                    await asyncio.sleep(delay)
                last = i == count - 1
                reason = "length" if last else None
                if chat:
                    yield chunk([{"index": 0, "delta": {"content": word}, "finish_reason": reason}])
                else:
                    yield chunk([{"index": 0, "text": word, "finish_reason": reason}])
            if include_usage:
                yield chunk([], usage)
            yield b"data: [DONE]\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")

    async def models(request: Request) -> Response:
        return JSONResponse({"object": "list", "data": [{"id": MODEL, "object": "model"}]})

    return Starlette(
        routes=[
            Route("/v1/chat/completions", generate, methods=["POST"]),
            Route("/v1/completions", generate, methods=["POST"]),
            Route("/v1/models", models, methods=["GET"]),
        ]
    )


class LocalServer:
    def __init__(self, port: int) -> None:
        self.log = ServerLog()
        config = uvicorn.Config(make_app(self.log), host="127.0.0.1", port=port, log_level="warning")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.port = port

    def __enter__(self) -> LocalServer:
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("test server did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
