"""The engine's HTTP answers, byte for byte: what a client of vLLM's OpenAI server parses.

test_api.py drives the surface with the `openai` client, which forgives a missing key or a
wrong ``object``; these read the raw bodies of a box at infinite speed (each test starts its
own, so request ids and the word cycle start from the first request) and compare whole JSON
documents and whole event streams, error bodies included. ``created`` is the box's model Unix
second of the request's arrival (`Box.timings`), so it is known exactly too.

Output words are a cycle through the engine's vocabulary starting at an offset drawn from the
seed and the prompt (the engine's name is not in it), and the same prompt asked again starts
one word later: the texts below are pinned as served, and the tests check those two rules
between requests too.
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import threading
from typing import Any

import httpx
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from tests.support.loopback import stream_many, until

from spark_otel.sim import DENSE, Box, BoxModel, run_box

INF = float("inf")
DENSE_ID = "qwen3.8-27b"
LIMIT = 131072  # the profiles' max_model_len


def _created(box: Box, engine: str, request_id: int) -> int:
    """The model Unix second the box stamped request ``request_id`` of ``engine`` as arrived."""
    (timing,) = [t for t in box.timings(engine) if t.id == request_id]
    return box.unix_ns(timing.arrival_ns) // 1_000_000_000


def _error(
    message: str, kind: str = "invalid_request_error", param: str | None = None, code: str | None = None
) -> dict:
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def test_whole_completions_are_exact_json_documents() -> None:
    with run_box({"a": "dense"}, speed=INF, seed=3) as box, httpx.Client(base_url=box.url("a")) as http:

        def complete(prompt: Any, tokens: int = 6) -> dict:
            body = {"model": "a", "prompt": prompt, "max_tokens": tokens, "min_tokens": tokens}
            response = http.post("/v1/completions", json=body)
            assert response.status_code == 200, response.text
            return response.json()

        text = complete("abcdefgh")
        ids = complete([1, 2, 3])
        nested_ids = complete([[1, 2, 3]])
        listed_text = complete(["abcdefgh"])
        short = complete("abc", tokens=1)

        assert text == {
            "id": "cmpl-sima00000001",
            "object": "text_completion",
            "created": _created(box, "a", 1),
            "model": DENSE_ID,
            "choices": [
                {
                    "index": 0,
                    "logprobs": None,
                    "finish_reason": "length",
                    "text": "each stream a tenth the neighbour ",
                }
            ],
            "usage": {"prompt_tokens": 2, "completion_tokens": 6, "total_tokens": 8},
        }
        assert type(text["created"]) is int
        # Token ids cost one token each; their words come from the ids, and the same ids nested
        # in a list are the same prompt asked a second time: the cycle one word on.
        assert (ids["id"], ids["choices"][0]["text"], ids["usage"]) == (
            "cmpl-sima00000002",
            "the other engine batches tokens over ",
            {"prompt_tokens": 3, "completion_tokens": 6, "total_tokens": 9},
        )
        assert (nested_ids["choices"][0]["text"], nested_ids["usage"]["prompt_tokens"]) == (
            "other engine batches tokens over time ",
            3,
        )
        assert (listed_text["choices"][0]["text"], listed_text["usage"]["prompt_tokens"]) == (
            "stream a tenth the neighbour pays ",
            2,
        )
        # Three characters are one token (four a token, rounded up).
        assert short["usage"] == {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}


def test_a_whole_chat_completion_counts_every_message_and_part() -> None:
    body = {
        "model": DENSE_ID,
        "messages": [
            {"role": "system", "content": None},  # 4 tokens for the message, none for its text
            {
                "role": "user",  # 4 more, and 8 characters of text parts: 2
                "content": [
                    {"type": "text", "text": "abcd"},
                    {"type": "image_url"},
                    {"type": "text", "text": "efgh"},
                ],
            },
        ],
        "max_tokens": 5,
        "min_tokens": 5,
    }
    with run_box({"a": "dense"}, speed=INF, seed=3) as box:
        answer = httpx.post(box.url("a") + "/v1/chat/completions", json=body).json()
        created = _created(box, "a", 1)
    assert answer == {
        "id": "chatcmpl-sima00000001",
        "object": "chat.completion",
        "created": created,
        "model": DENSE_ID,
        "choices": [
            {
                "index": 0,
                "logprobs": None,
                "finish_reason": "length",
                "message": {"role": "assistant", "content": "step reads the weights once "},
            }
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


BAD_REQUESTS: list[tuple[str, Any, int, dict]] = [
    (
        "/v1/completions",
        b"{not json",
        400,
        _error(
            "We could not parse the JSON body of your request: "
            "Expecting property name enclosed in double quotes: line 1 column 2 (char 1)"
        ),
    ),
    (
        "/v1/completions",
        b"[1, 2]",
        400,
        _error("body: Input should be a valid dictionary or instance of _CompletionParams"),
    ),
    (
        "/v1/chat/completions",
        b"[1, 2]",
        400,
        _error("body: Input should be a valid dictionary or instance of _ChatParams"),
    ),
    ("/v1/completions", {"prompt": "x"}, 400, _error("model: Field required", param="model")),
    (
        "/v1/chat/completions",
        {"model": "a", "messages": [{"content": "x"}]},
        400,
        _error("messages.0.role: Field required", param="messages"),
    ),
    (
        "/v1/completions",
        {"model": "a", "prompt": []},
        400,
        _error("prompt: must not be empty", param="prompt"),
    ),
    (
        "/v1/completions",
        {"model": "a", "prompt": [[]]},
        400,
        _error("prompt: must not be empty", param="prompt"),
    ),
    (
        "/v1/completions",
        {"model": "a", "prompt": ["a", "b"]},
        400,
        _error("prompt: the simulator serves one prompt per request, got 2", param="prompt"),
    ),
    (
        "/v1/completions",
        {"model": "a", "prompt": "x", "n": 2},
        400,
        _error("n: the simulator produces one choice per request, got 2", param="n"),
    ),
    (
        "/v1/completions",
        {"model": "a", "prompt": "x", "stream_options": {"include_usage": True}},
        400,
        _error("stream_options: only allowed when stream is true", param="stream_options"),
    ),
    (
        "/v1/completions",
        {"model": "gpt-nope", "prompt": "x"},
        404,
        _error("The model `gpt-nope` does not exist.", "not_found_error", "model", "model_not_found"),
    ),
    (
        "/v1/completions",
        {"model": "a", "prompt": "x", "max_tokens": 4, "min_tokens": 9},
        400,
        _error("min_tokens (9) must be at most max_tokens (4)", param="min_tokens"),
    ),
    (
        "/v1/chat/completions",
        {"model": "a", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4, "min_tokens": 9},
        400,
        _error("min_tokens (9) must be at most max_tokens (4)", param="min_tokens"),
    ),
    (
        "/v1/chat/completions",
        {"model": "a", "messages": [{"role": "user", "content": "hi"}], "max_tokens": LIMIT},
        400,
        _error(
            f"This model's maximum context length is {LIMIT} tokens. However, you requested {LIMIT + 5} "
            f"tokens (5 in the messages, {LIMIT} in the completion). Please reduce the length of the "
            "messages or completion.",
            param="max_tokens",
        ),
    ),
    (
        "/v1/chat/completions",
        {"model": "a", "messages": [{"role": "user", "content": "hi"}], "max_completion_tokens": LIMIT - 4},
        400,
        _error(
            f"This model's maximum context length is {LIMIT} tokens. However, you requested {LIMIT + 1} "
            f"tokens (5 in the messages, {LIMIT - 4} in the completion). Please reduce the length of the "
            "messages or completion.",
            param="max_completion_tokens",
        ),
    ),
    (
        "/v1/completions",
        {"model": "a", "prompt": [7] * LIMIT},
        400,
        _error(
            f"This model's maximum context length is {LIMIT} tokens. However, your request has {LIMIT} input "
            "tokens. Please reduce the length of the input prompt.",
            param="prompt",
        ),
    ),
    (
        "/v1/chat/completions",
        {"model": "a", "messages": [{"role": "user", "content": "x" * (4 * LIMIT)}]},
        400,
        _error(
            f"This model's maximum context length is {LIMIT} tokens. However, your request has {LIMIT + 4} "
            "input tokens. Please reduce the length of the input messages.",
            param="messages",
        ),
    ),
]


def test_every_malformed_request_gets_its_whole_openai_error_body() -> None:
    with run_box({"a": "dense"}, speed=INF) as box, httpx.Client(base_url=box.url("a")) as http:
        answers = []
        for path, body, _, _ in BAD_REQUESTS:
            content = body if isinstance(body, bytes) else json.dumps(body).encode()
            response = http.post(path, content=content, headers={"content-type": "application/json"})
            answers.append((path, body, response.status_code, response.json()))
        not_found = http.get("/v1/embeddings")
        wrong_method = http.put("/v1/models")
        finished = box.stats("a").finished
    assert answers == BAD_REQUESTS
    assert (not_found.status_code, not_found.json()) == (
        404,
        _error("Invalid URL (GET /v1/embeddings)", "not_found_error"),
    )
    assert (wrong_method.status_code, wrong_method.json()) == (
        405,
        _error("Method PUT is not allowed on /v1/models"),
    )
    assert finished == {"stop": 0, "length": 0, "abort": 0}  # none of them reached the engine


def test_a_chat_max_tokens_caps_the_answer_and_names_itself_in_errors() -> None:
    body = {"model": "a", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 5, "min_tokens": 5}
    with run_box({"a": "dense"}, speed=INF) as box:
        answer = httpx.post(box.url("a") + "/v1/chat/completions", json=body).json()
    assert (answer["choices"][0]["finish_reason"], answer["usage"]) == (
        "length",
        {"prompt_tokens": 5, "completion_tokens": 5, "total_tokens": 10},
    )


def test_models_info_and_metrics_describe_the_engine_exactly() -> None:
    with (
        run_box({"a": "dense", "b": "moe"}, speed=INF, seed=3, contention=0.5) as box,
        httpx.Client(base_url=box.url("a")) as http,
    ):
        models = http.get("/v1/models").json()
        info = http.get("/sim/info").json()
        metrics = http.get("/metrics")
        now_unix_ns = box.unix_ns(box.model.clock.now_ns())  # idle at infinite speed: the clock stands
    entry = {"object": "model", "created": now_unix_ns // 1_000_000_000, "owned_by": "spark-otel-sim",
             "root": DENSE_ID, "parent": None, "max_model_len": LIMIT}  # fmt: skip
    assert models == {"object": "list", "data": [{"id": DENSE_ID, **entry}, {"id": "a", **entry}]}
    assert type(models["data"][0]["created"]) is int
    assert info == {
        "engine": "a",
        "profile": "dense",
        "model": DENSE_ID,
        "speed": "inf",
        "seed": 3,
        "contention": 0.5,
        "engines": {"a": "dense", "b": "moe"},
        "unix_ns": now_unix_ns,
        "dropped_model_s": 0.0,
    }
    assert metrics.headers["content-type"] == "text/plain; version=1.0.0; charset=utf-8"


def _sse(path: str, body: dict, url: str) -> tuple[httpx.Response, str]:
    with httpx.stream("POST", url + path, json=body) as response:
        return response, response.read().decode()


def test_streams_are_exact_event_sequences(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    chat = {"model": "a", "messages": [{"role": "user", "content": "go"}], "max_tokens": 3, "stream": True,
            "stream_options": {"include_usage": True}, "ignore_eos": True}  # fmt: skip
    text = {"model": "a", "prompt": "go", "max_tokens": 2, "min_tokens": 2, "stream": True}
    with run_box({"a": "dense"}, speed=INF, seed=3) as box:
        chat_response, chat_events = _sse("/v1/chat/completions", chat, box.url("a"))
        text_response, text_events = _sse("/v1/completions", text, box.url("a"))
        chat_created, text_created = _created(box, "a", 1), _created(box, "a", 2)
    for response in (chat_response, text_response):
        assert response.status_code == 200
        assert (response.headers["content-type"], response.headers["cache-control"]) == (
            "text/event-stream; charset=utf-8",
            "no-cache",
        )
    head = f'data: {{"id": "chatcmpl-sima00000001", "object": "chat.completion.chunk", "created": {chat_created}, "model": "{DENSE_ID}", '  # fmt: skip  # noqa: E501
    assert chat_events == (
        head + '"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": null, "finish_reason": null}], "usage": null}\n\n'  # noqa: E501
        + head + '"choices": [{"index": 0, "delta": {"content": "eight "}, "logprobs": null, "finish_reason": null}], "usage": null}\n\n'  # noqa: E501
        + head + '"choices": [{"index": 0, "delta": {"content": "costs "}, "logprobs": null, "finish_reason": null}], "usage": null}\n\n'  # noqa: E501
        + head + '"choices": [{"index": 0, "delta": {"content": "each "}, "logprobs": null, "finish_reason": "length"}], "usage": null}\n\n'  # noqa: E501
        + head + '"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8}}\n\n'  # noqa: E501
        + "data: [DONE]\n\n"
    )  # fmt: skip
    head = f'data: {{"id": "cmpl-sima00000002", "object": "text_completion", "created": {text_created}, "model": "{DENSE_ID}", '  # fmt: skip  # noqa: E501
    assert text_events == (
        head + '"choices": [{"index": 0, "text": "of ", "logprobs": null, "finish_reason": null}]}\n\n'
        + head + '"choices": [{"index": 0, "text": "eight ", "logprobs": null, "finish_reason": "length"}]}\n\n'  # noqa: E501
        + "data: [DONE]\n\n"
    )  # fmt: skip
    assert [r.getMessage() for r in caplog.records] == []  # every handler ended cleanly


def test_a_long_stream_says_the_same_words_as_a_whole_answer(caplog: pytest.LogCaptureFixture) -> None:
    """Thousands of tokens at infinite speed reach the handler in many batches while the request
    runs: each is a plain token chunk, and only the last one carries the finish reason."""
    caplog.set_level(logging.WARNING)
    tokens = 2000
    body = {"prompt": "a long answer", "max_tokens": tokens, "ignore_eos": True}
    with run_box({"a": "dense", "b": "dense"}, speed=INF) as box:
        _, events = _sse("/v1/completions", {"model": "a", "stream": True, **body}, box.url("a"))
        whole = httpx.post(box.url("b") + "/v1/completions", json={"model": "b", **body}).json()
    chunks = [json.loads(e.removeprefix("data: ")) for e in events.split("\n\n") if e and e != "data: [DONE]"]
    assert [c["choices"][0]["finish_reason"] for c in chunks] == [None] * (tokens - 1) + ["length"]
    assert "".join(c["choices"][0]["text"] for c in chunks) == whole["choices"][0]["text"]
    assert len(whole["choices"][0]["text"].split()) == tokens
    assert [r.getMessage() for r in caplog.records] == []


def test_requests_in_flight_at_shutdown_end_as_vllm_ends_them() -> None:
    """Leaving the box with a whole answer and a stream pending: the whole answer is a 503 error
    body, the stream stops short with no finish reason, no usage chunk and no ``[DONE]``."""
    pending = {"model": "a", "prompt": "x", "max_tokens": 100_000, "ignore_eos": True}
    streamed = {**pending, "stream": True, "stream_options": {"include_usage": True}}
    answers: dict[str, Any] = {}
    with run_box({"a": "dense"}, speed=1000) as box:

        def whole() -> None:
            answers["whole"] = httpx.post(box.url("a") + "/v1/completions", json=pending, timeout=30)

        def stream() -> None:
            answers["stream"] = asyncio.run(stream_many(box.port("a"), [("/v1/completions", streamed)]))

        clients = [threading.Thread(target=whole), threading.Thread(target=stream)]
        for client in clients:
            client.start()
        asyncio.run(until(lambda: box.stats("a").decoding == 2))
    for client in clients:
        client.join(10)
    response = answers["whole"]
    assert (response.status_code, response.json()) == (
        503,
        _error("the simulated engine is shutting down", "service_unavailable"),
    )
    [result] = answers["stream"]
    events = result.body.split(b"\r\n\r\n", 1)[1]
    assert b"data: [DONE]" not in events
    assert b'"usage": {' not in events
    assert b'"finish_reason": null' in events
    assert events.count(b'"finish_reason"') == events.count(b'"finish_reason": null')
    assert box.stats("a").finished == {"stop": 0, "length": 0, "abort": 2}


def test_a_client_that_leaves_a_whole_answer_aborts_its_request() -> None:
    body = json.dumps({"model": "a", "prompt": "x", "max_tokens": 100_000, "ignore_eos": True}).encode()
    with run_box({"a": "dense"}, speed=1000) as box:
        with socket.create_connection(("127.0.0.1", box.port("a"))) as sock:
            sock.sendall(
                b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                + f"Content-Length: {len(body)}\r\n\r\n".encode()
                + body
            )
            asyncio.run(until(lambda: box.stats("a").decoding == 1))
        asyncio.run(until(lambda: box.stats("a").running == 0))
        finished = box.stats("a").finished
    assert finished == {"stop": 0, "length": 0, "abort": 1}


def test_chat_and_completion_requests_carry_their_traceparent_into_the_server_span() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    parents = {"chat": "b7ad6b7169203331", "completion": "00f067aa0ba902b7"}
    trace_id = "0af7651916cd43dd8448eb211c80319c"
    with run_box({"a": "dense"}, speed=INF, tracer_provider=provider) as box:
        for path, body, parent in (
            ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}]}, parents["chat"]),
            ("/v1/completions", {"prompt": "hi"}, parents["completion"]),
        ):
            headers = {"traceparent": f"00-{trace_id}-{parent}-01"}
            response = httpx.post(
                box.url("a") + path, json={"model": "a", "max_tokens": 2, **body}, headers=headers
            )
            assert response.status_code == 200
    spans = exporter.get_finished_spans()
    assert [
        (format(s.context.trace_id, "032x"), s.parent and format(s.parent.span_id, "016x")) for s in spans
    ] == [
        (trace_id, parents["chat"]),
        (trace_id, parents["completion"]),
    ]


def test_a_stream_cut_with_tokens_unsent_sends_them_without_a_finish_reason() -> None:
    """The box stops while the handler is still writing the response head, after the engine made
    tokens it has not sent: they go out as plain token chunks, and the stream ends without a
    finish reason or ``[DONE]``. A real server cannot hold its head write on demand, so the
    handler runs under a minimal ASGI server here, on a box model at infinite speed."""
    from spark_otel.sim.app import build_app

    body = json.dumps(
        {"model": "a", "prompt": "x", "max_tokens": 100_000, "ignore_eos": True, "stream": True}
    )

    sent: list[dict] = []
    made: list[int] = []

    async def serve() -> None:
        box = BoxModel({"a": DENSE}, speed=INF)
        engine = box.engines["a"]
        box.start()
        requests = [{"type": "http.request", "body": body.encode(), "more_body": False}]
        client_stays = asyncio.get_running_loop().create_future()

        async def receive() -> dict:
            return requests.pop() if requests else await client_stays

        async def send(message: dict) -> None:
            sent.append(message)
            if message["type"] == "http.response.start":
                while engine.generation_tokens < 3:  # noqa: ASYNC110 - the engine's burst, up to its next yield
                    await asyncio.sleep(0)
                made.append(engine.generation_tokens)
                engine.stop()  # as the box does on leaving: the request ends, its tokens unsent

        scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
                 "scheme": "http", "path": "/v1/completions", "raw_path": b"/v1/completions", "query_string": b"",  # noqa: E501
                 "root_path": "", "headers": [(b"content-type", b"application/json")], "server": ("127.0.0.1", 1),  # noqa: E501
                 "client": ("127.0.0.1", 2)}  # fmt: skip
        await build_app(box, "a")(scope, receive, send)
        await box.stop()

    asyncio.run(serve())
    start, *bodies = sent
    assert start["status"] == 200
    assert bodies[-1]["more_body"] is False
    events = b"".join(m["body"] for m in bodies).decode()
    chunks = [json.loads(e.removeprefix("data: ")) for e in events.split("\n\n") if e]
    assert len(chunks) == made[0]  # every token made, none twice
    assert {c["choices"][0]["finish_reason"] for c in chunks} == {None}


def test_min_tokens_and_max_tokens_bound_an_unpinned_draw() -> None:
    """Unpinned lengths drawn from the seed and the prompt: "short" draws 135 tokens, "brief" 140,
    "tiny" 141 (seed 3, engine a). A min_tokens above the draw raises it; a max_tokens below cuts it."""
    asked = [("short", 200, 2000), ("brief", 100, 2000), ("tiny", 0, 100)]
    with run_box({"a": "dense"}, speed=INF, seed=3) as box, httpx.Client(base_url=box.url("a")) as http:
        answers = [
            http.post(
                "/v1/completions", json={"model": "a", "prompt": p, "min_tokens": low, "max_tokens": high}
            ).json()
            for p, low, high in asked
        ]
    assert [(a["usage"]["completion_tokens"], a["choices"][0]["finish_reason"]) for a in answers] == [
        (200, "stop"),
        (140, "stop"),
        (100, "length"),
    ]
