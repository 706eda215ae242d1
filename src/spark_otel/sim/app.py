"""The OpenAI-compatible ASGI app one simulated engine serves, as vLLM's API server would.

Routes: ``POST /v1/completions`` and ``/v1/chat/completions`` (streaming or not; ``max_tokens``,
``max_completion_tokens``, vLLM's ``min_tokens`` and ``ignore_eos``, ``stream_options.include_usage``),
``GET /v1/models``, ``/health``, ``/metrics`` (vLLM V1 exposition), ``/sim/info`` and ``/sim/gpu``.

Prompt tokens are counted deterministically: a text prompt costs one token per 4 characters
(rounded up, at least 1); a chat request costs 4 tokens per message plus its text at the same
rate; a prompt given as token ids costs one token per id. Output text is cheap deterministic words.

Every malformed request gets an OpenAI-style body ``{"error": {"message", "type", "param",
"code"}}``: 400 for unparseable JSON and invalid parameters (OpenAI's convention, which vLLM follows;
never 422), 404 for an unknown model or route, 405 for a wrong method.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from .._clock import NS_PER_S
from .box import BoxModel, EngineModel, SimRequest
from .tracing import incoming_context

__all__ = ["build_app", "count_text_tokens"]

# Words chosen to need no JSON escaping, so a chunk is three byte strings joined.
_VOCAB = (
    "the", "box", "reads", "busy", "while", "decode", "waits", "on", "memory", "and", "every", "step",
    "reads", "the", "weights", "once", "for", "all", "streams", "so", "a", "batch", "of", "eight", "costs",
    "each", "stream", "a", "tenth", "the", "neighbour", "pays", "half", "when", "the", "other", "engine",
    "batches", "tokens", "over", "time", "tell", "the", "truth", "the", "gauge", "does", "not", "move",
)  # fmt: skip
_TOKEN_TEXT = tuple(f"{w} " for w in _VOCAB)
_TOKEN_BYTES = tuple(t.encode() for t in _TOKEN_TEXT)
_CHARS_PER_TOKEN = 4
_CHAT_TOKENS_PER_MESSAGE = 4


def count_text_tokens(text: str) -> int:
    """Prompt tokens for ``text``: one per 4 characters, rounded up, at least 1."""
    return max(1, math.ceil(len(text) / _CHARS_PER_TOKEN))


def _token_text(req: SimRequest, index: int) -> str:
    return _TOKEN_TEXT[(req.text_offset + index) % len(_TOKEN_TEXT)]


class _ApiError(Exception):
    def __init__(self, status: int, message: str, param: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param
        self.code = code

    def response(self) -> JSONResponse:
        kind = {404: "not_found_error", 405: "invalid_request_error", 503: "service_unavailable"}.get(
            self.status, "invalid_request_error" if self.status < 500 else "server_error"
        )
        body = {"error": {"message": self.message, "type": kind, "param": self.param, "code": self.code}}
        return JSONResponse(body, status_code=self.status)


class _StreamOptions(BaseModel):
    model_config = ConfigDict(extra="allow")
    include_usage: bool = False


class _CommonParams(BaseModel):
    model_config = ConfigDict(extra="allow")
    model: str
    stream: bool = False
    stream_options: _StreamOptions | None = None
    max_tokens: int | None = Field(default=None, ge=1)
    min_tokens: int = Field(default=0, ge=0)
    ignore_eos: bool = False
    n: int = Field(default=1, ge=1)
    seed: int | None = None


class _CompletionParams(_CommonParams):
    prompt: str | list[str] | list[int] | list[list[int]]


class _ContentPart(BaseModel):
    model_config = ConfigDict(extra="allow")
    type: str
    text: str | None = None


class _Message(BaseModel):
    model_config = ConfigDict(extra="allow")
    role: str
    content: str | list[_ContentPart] | None = None


class _ChatParams(_CommonParams):
    messages: list[_Message] = Field(min_length=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)


def _completion_prompt(params: _CompletionParams) -> tuple[int, str]:
    prompt = params.prompt
    if isinstance(prompt, str):
        return count_text_tokens(prompt), prompt
    if not prompt:
        raise _ApiError(400, "prompt: must not be empty", "prompt")
    if isinstance(prompt[0], int):
        return len(prompt), json.dumps(prompt)
    if len(prompt) != 1:
        raise _ApiError(
            400, f"prompt: the simulator serves one prompt per request, got {len(prompt)}", "prompt"
        )
    only = prompt[0]
    if isinstance(only, str):
        return count_text_tokens(only), only
    if not only:
        raise _ApiError(400, "prompt: must not be empty", "prompt")
    return len(only), json.dumps(only)


def _chat_prompt(params: _ChatParams) -> tuple[int, str]:
    tokens = 0
    texts = []
    for message in params.messages:
        content = message.content
        if isinstance(content, list):
            content = "".join(part.text or "" for part in content)
        text = content or ""
        tokens += _CHAT_TOKENS_PER_MESSAGE + math.ceil(len(text) / _CHARS_PER_TOKEN)
        texts.append(f"{message.role}\x00{text}")
    return tokens, "\x01".join(texts)


async def _json_body(request: Request) -> Any:
    raw = await request.body()
    try:
        return json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise _ApiError(400, f"We could not parse the JSON body of your request: {exc}") from None


def _validation_error(exc: ValidationError) -> _ApiError:
    first = exc.errors()[0]
    loc = [str(p) for p in first["loc"]]
    where = ".".join(loc) or "body"
    return _ApiError(400, f"{where}: {first['msg']}", loc[0] if loc else None)


class _EngineApp:
    """The handlers of one engine; every one runs on the box's event loop."""

    def __init__(self, box: BoxModel, engine: EngineModel) -> None:
        self.box = box
        self.engine = engine
        self.model_id = engine.profile.model_id
        self.served_names = (self.model_id, engine.name)
        self._model_json = json.dumps(self.model_id)

    def _check_model(self, model: str) -> None:
        if model not in self.served_names:
            raise _ApiError(404, f"The model `{model}` does not exist.", "model", "model_not_found")

    def _submit(
        self,
        params: _CommonParams,
        max_tokens: int | None,
        prompt: tuple[int, str],
        *,
        prompt_param: str,
        max_tokens_param: str = "max_tokens",
    ) -> SimRequest:
        self._check_model(params.model)
        if params.n != 1:
            raise _ApiError(400, f"n: the simulator produces one choice per request, got {params.n}", "n")
        if params.stream_options is not None and not params.stream:
            raise _ApiError(400, "stream_options: only allowed when stream is true", "stream_options")
        prompt_tokens, prompt_key = prompt
        limit = self.engine.profile.max_model_len
        if prompt_tokens >= limit:
            # As vLLM: a prompt that leaves no room for one output token is the prompt's fault,
            # whatever max_tokens says (or when it says nothing).
            raise _ApiError(
                400,
                f"This model's maximum context length is {limit} tokens. However, your request has "
                f"{prompt_tokens} input tokens. Please reduce the length of the input {prompt_param}.",
                prompt_param,
            )
        if max_tokens is None:
            max_tokens = limit - prompt_tokens
        if prompt_tokens + max_tokens > limit:
            raise _ApiError(
                400,
                f"This model's maximum context length is {limit} tokens. However, you requested "
                f"{prompt_tokens + max_tokens} tokens ({prompt_tokens} in the messages, {max_tokens} in "
                "the completion). Please reduce the length of the messages or completion.",
                max_tokens_param,
            )
        if params.min_tokens > max_tokens:
            raise _ApiError(
                400,
                f"min_tokens ({params.min_tokens}) must be at most {max_tokens_param} ({max_tokens})",
                "min_tokens",
            )
        return self.engine.submit(
            prompt_tokens=prompt_tokens,
            max_tokens=max_tokens,
            min_tokens=params.min_tokens,
            ignore_eos=params.ignore_eos,
            key=f"{params.seed}\x00{prompt_key}",
        )

    async def completions(self, request: Request) -> Response:
        try:
            params = _CompletionParams.model_validate(await _json_body(request))
        except ValidationError as exc:
            raise _validation_error(exc) from None
        req = self._submit(params, params.max_tokens, _completion_prompt(params), prompt_param="prompt")
        req.trace_context = incoming_context(request.headers)
        return self._respond(req, params, chat=False)

    async def chat_completions(self, request: Request) -> Response:
        try:
            params = _ChatParams.model_validate(await _json_body(request))
        except ValidationError as exc:
            raise _validation_error(exc) from None
        max_tokens: int | None = params.max_tokens
        max_tokens_param = "max_tokens"
        if params.max_completion_tokens is not None:
            max_tokens, max_tokens_param = params.max_completion_tokens, "max_completion_tokens"
        req = self._submit(
            params,
            max_tokens,
            _chat_prompt(params),
            prompt_param="messages",
            max_tokens_param=max_tokens_param,
        )
        req.trace_context = incoming_context(request.headers)
        return self._respond(req, params, chat=True)

    def _respond(self, req: SimRequest, params: _CommonParams, chat: bool) -> Response:
        include_usage = bool(params.stream_options and params.stream_options.include_usage)
        created = self.box.clock.unix_ns(req.arrival_ns) // NS_PER_S
        response_id = f"{'chatcmpl' if chat else 'cmpl'}-sim{self.engine.name}{req.id:08d}"
        if params.stream:
            return _TokenStream(self, req, response_id, created, chat=chat, include_usage=include_usage)
        return _WholeCompletion(self, req, response_id, created, chat)

    async def models(self, request: Request) -> Response:
        created = self.box.clock.unix_ns(self.box.clock.now_ns()) // NS_PER_S
        data = [
            {
                "id": name,
                "object": "model",
                "created": created,
                "owned_by": "spark-otel-sim",
                "root": self.model_id,
                "parent": None,
                "max_model_len": self.engine.profile.max_model_len,
            }
            for name in self.served_names
        ]
        return JSONResponse({"object": "list", "data": data})

    async def health(self, request: Request) -> Response:
        return Response(status_code=200)

    async def metrics(self, request: Request) -> Response:
        from prometheus_client import CONTENT_TYPE_LATEST

        return Response(self.engine.metrics.exposition(), media_type=CONTENT_TYPE_LATEST)

    async def info(self, request: Request) -> Response:
        speed = self.box.speed
        return JSONResponse(
            {
                "engine": self.engine.name,
                "profile": self.engine.profile.name,
                "model": self.model_id,
                "speed": speed if math.isfinite(speed) else "inf",
                "seed": self.box.seed,
                "contention": self.box.contention,
                "engines": {name: e.profile.name for name, e in self.box.engines.items()},
                # The box's model clock now; another process can align its own model clock to it.
                "unix_ns": self.box.clock.unix_ns(self.box.clock.now_ns()),
                # Model time this engine skipped because the process fell behind the wall clock;
                # while it grows, measured rates read slower than the profile.
                "dropped_model_s": self.engine.dropped_ns / NS_PER_S,
            }
        )

    async def gpu(self, request: Request) -> Response:
        return JSONResponse(self.box.gpu().as_dict())


async def _abort_on_disconnect(receive: Receive, engine: EngineModel, req: SimRequest) -> None:
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            engine.abort(req)
            return


class _TokenStream(Response):
    """Server-sent events, one chunk per token, written as the engine's steps produce them."""

    def __init__(
        self,
        app: _EngineApp,
        req: SimRequest,
        response_id: str,
        created: int,
        *,
        chat: bool,
        include_usage: bool,
    ) -> None:
        self.app = app
        self.req = req
        self.chat = chat
        self.include_usage = include_usage
        head = {"id": response_id, "object": "chat.completion.chunk" if chat else "text_completion"}
        head_json = json.dumps(head)[:-1] + f', "created": {created}, "model": {app._model_json}, '
        self.head = ("data: " + head_json).encode()
        usage_null = ', "usage": null' if include_usage else ""
        if chat:
            self.prefix = self.head + b'"choices": [{"index": 0, "delta": {"content": "'
            self.suffix = f'"}}, "logprobs": null, "finish_reason": null}}]{usage_null}}}\n\n'.encode()
            self.role_chunk = (
                self.head
                + b'"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, '
                + f'"logprobs": null, "finish_reason": null}}]{usage_null}}}\n\n'.encode()
            )
        else:
            self.prefix = self.head + b'"choices": [{"index": 0, "text": "'
            self.suffix = f'", "logprobs": null, "finish_reason": null}}]{usage_null}}}\n\n'.encode()
        self.status_code = 200
        self.background = None

    def _final_suffix(self, reason: str) -> bytes:
        return self.suffix.replace(b'"finish_reason": null', f'"finish_reason": "{reason}"'.encode())

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        req, engine = self.req, self.app.engine
        watcher = asyncio.create_task(_abort_on_disconnect(receive, engine, req))
        try:
            await send(
                {
                    "type": "http.response.start",
                    "status": 200,
                    "headers": [
                        (b"content-type", b"text/event-stream; charset=utf-8"),
                        (b"cache-control", b"no-cache"),
                    ],
                }
            )
            parts: list[bytes] = [self.role_chunk] if self.chat else []
            prefix, suffix, offset = self.prefix, self.suffix, req.text_offset
            n_vocab = len(_TOKEN_BYTES)
            sent = 0
            while True:
                req.event.clear()
                produced, done = req.produced, req.done
                if done and req.finish_reason != "abort" and produced > sent:
                    parts.extend(
                        prefix + _TOKEN_BYTES[(offset + i) % n_vocab] + suffix
                        for i in range(sent, produced - 1)
                    )
                    parts.append(
                        prefix
                        + _TOKEN_BYTES[(offset + produced - 1) % n_vocab]
                        + self._final_suffix(req.finish_reason or "")
                    )
                    sent = produced
                elif produced > sent:
                    parts.extend(
                        prefix + _TOKEN_BYTES[(offset + i) % n_vocab] + suffix for i in range(sent, produced)
                    )
                    sent = produced
                if done:
                    break
                if parts:
                    await send({"type": "http.response.body", "body": b"".join(parts), "more_body": True})
                    parts = []
                await req.event.wait()
            if req.finish_reason != "abort":
                if self.include_usage:
                    usage = {
                        "prompt_tokens": req.prompt_tokens,
                        "completion_tokens": req.produced,
                        "total_tokens": req.prompt_tokens + req.produced,
                    }
                    parts.append(self.head + f'"choices": [], "usage": {json.dumps(usage)}}}\n\n'.encode())
                parts.append(b"data: [DONE]\n\n")
            await send({"type": "http.response.body", "body": b"".join(parts), "more_body": False})
        finally:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
            engine.abort(req)


class _WholeCompletion(Response):
    """A non-streaming answer: wait for the request to finish, then send one JSON body."""

    def __init__(self, app: _EngineApp, req: SimRequest, response_id: str, created: int, chat: bool) -> None:
        self.app = app
        self.req = req
        self.response_id = response_id
        self.created = created
        self.chat = chat
        self.status_code = 200
        self.background = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        req, engine = self.req, self.app.engine
        watcher = asyncio.create_task(_abort_on_disconnect(receive, engine, req))
        try:
            while not req.done:
                req.event.clear()
                if not req.done:
                    await req.event.wait()
        finally:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
        if req.finish_reason == "abort":
            response: Response = _ApiError(503, "the simulated engine is shutting down").response()
        else:
            text = "".join(_token_text(req, i) for i in range(req.produced))
            choice: dict[str, Any] = {"index": 0, "logprobs": None, "finish_reason": req.finish_reason}
            if self.chat:
                choice["message"] = {"role": "assistant", "content": text}
            else:
                choice["text"] = text
            usage = {
                "prompt_tokens": req.prompt_tokens,
                "completion_tokens": req.produced,
                "total_tokens": req.prompt_tokens + req.produced,
            }
            body = {
                "id": self.response_id,
                "object": "chat.completion" if self.chat else "text_completion",
                "created": self.created,
                "model": self.app.model_id,
                "choices": [choice],
                "usage": usage,
            }
            response = JSONResponse(body)
        await response(scope, receive, send)


async def _api_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, _ApiError)
    return exc.response()


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    if exc.status_code == 404:
        message = f"Invalid URL ({request.method} {request.url.path})"
    elif exc.status_code == 405:
        message = f"Method {request.method} is not allowed on {request.url.path}"
    else:
        message = str(exc.detail)
    return _ApiError(exc.status_code, message).response()


def build_app(box: BoxModel, engine_name: str) -> Starlette:
    """The ASGI app for one engine of ``box``; run it on the loop the box runs on."""
    handlers = _EngineApp(box, box.engines[engine_name])
    routes = [
        Route("/v1/completions", handlers.completions, methods=["POST"]),
        Route("/v1/chat/completions", handlers.chat_completions, methods=["POST"]),
        Route("/v1/models", handlers.models, methods=["GET"]),
        Route("/health", handlers.health, methods=["GET"]),
        Route("/metrics", handlers.metrics, methods=["GET"]),
        Route("/sim/info", handlers.info, methods=["GET"]),
        Route("/sim/gpu", handlers.gpu, methods=["GET"]),
    ]
    return Starlette(routes=routes, exception_handlers={_ApiError: _api_error, HTTPException: _http_error})
