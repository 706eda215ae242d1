"""The OpenAI-compatible surface, driven by the real `openai` client and raw HTTP."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import openai
import pytest

from spark_otel.sim import Box, run_box

SPEED = 500.0


@pytest.fixture(scope="module")
def box() -> Iterator[Box]:
    with run_box({"qwen": "dense", "nemotron": "moe"}, speed=SPEED, seed=0) as b:
        yield b


@pytest.fixture
def client(box: Box) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=box.url("nemotron") + "/v1", api_key="unused", max_retries=0) as c:
        yield c


@pytest.fixture
def http(box: Box) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=box.url("nemotron"), timeout=30) as c:
        yield c


MODEL = "nemotron-3.5-30b-a3b"


def test_models_lists_the_profile_model_first(client: openai.OpenAI) -> None:
    ids = [m.id for m in client.models.list()]
    assert ids[0] == MODEL
    assert "nemotron" in ids  # the engine name is served as an alias


def test_pinned_completion_is_exactly_max_tokens_and_finishes_on_length(client: openai.OpenAI) -> None:
    response = client.completions.create(
        model=MODEL, prompt="x" * 200, max_tokens=40, extra_body={"min_tokens": 40, "ignore_eos": True}
    )
    assert response.usage is not None
    assert response.usage.completion_tokens == 40
    assert response.usage.prompt_tokens == 50  # 200 characters / 4
    assert response.choices[0].finish_reason == "length"
    assert len(response.choices[0].text.split()) == 40


def test_min_tokens_equal_to_max_tokens_pins_without_ignore_eos(client: openai.OpenAI) -> None:
    response = client.completions.create(
        model=MODEL, prompt="hi", max_tokens=17, extra_body={"min_tokens": 17}
    )
    assert response.usage is not None
    assert response.usage.completion_tokens == 17


def test_unpinned_chat_stops_on_its_own_below_a_large_cap(client: openai.OpenAI) -> None:
    response = client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "review this diff"}], max_completion_tokens=20_000
    )
    assert response.choices[0].finish_reason == "stop"
    assert response.usage is not None
    assert 1 <= response.usage.completion_tokens < 20_000
    assert response.usage.prompt_tokens == 4 + 4  # one message: 4 tokens + 16 characters / 4
    assert response.choices[0].message.role == "assistant"
    assert len(response.choices[0].message.content.split()) == response.usage.completion_tokens


def test_max_completion_tokens_caps_chat_output(client: openai.OpenAI) -> None:
    response = client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "go"}], max_completion_tokens=3
    )
    assert response.usage is not None
    assert response.usage.completion_tokens <= 3


def test_sync_chat_stream_with_usage_ends_with_an_empty_choices_chunk(client: openai.OpenAI) -> None:
    stream = client.chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": "count"}],
        max_tokens=25,
        stream=True,
        stream_options={"include_usage": True},
        extra_body={"ignore_eos": True},
    )
    chunks = list(stream)
    content = [c for c in chunks if c.choices and c.choices[0].delta.content]
    assert len(content) == 25
    assert chunks[0].choices[0].delta.role == "assistant"
    assert content[-1].choices[0].finish_reason == "length"
    assert all(c.choices[0].finish_reason is None for c in content[:-1])
    last = chunks[-1]
    assert last.choices == []
    assert last.usage is not None
    assert last.usage.completion_tokens == 25
    assert all(c.usage is None for c in chunks[:-1])


def test_completion_stream_without_usage_has_no_usage_chunk(client: openai.OpenAI) -> None:
    chunks = list(
        client.completions.create(
            model=MODEL,
            prompt="x",
            max_tokens=8,
            stream=True,
            extra_body={"min_tokens": 8, "ignore_eos": True},
        )
    )
    assert [bool(c.choices) for c in chunks] == [True] * 8
    assert chunks[-1].choices[0].finish_reason == "length"
    assert all(c.usage is None for c in chunks)


def test_raw_sse_ends_with_done(http: httpx.Client) -> None:
    body = {"model": MODEL, "prompt": "x", "max_tokens": 3, "min_tokens": 3, "stream": True}
    with http.stream("POST", "/v1/completions", json=body) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        lines = [line for line in response.iter_lines() if line]
    assert lines[-1] == "data: [DONE]"
    events = [json.loads(line.removeprefix("data: ")) for line in lines[:-1]]
    assert [e["object"] for e in events] == ["text_completion"] * 3


def test_token_ids_prompt_counts_one_token_per_id(client: openai.OpenAI) -> None:
    response = client.completions.create(model=MODEL, prompt=[1, 2, 3, 4, 5, 6, 7], max_tokens=2)
    assert response.usage is not None
    assert response.usage.prompt_tokens == 7


def test_engine_name_alias_is_accepted(box: Box) -> None:
    with openai.OpenAI(base_url=box.url("qwen") + "/v1", api_key="unused", max_retries=0) as c:
        response = c.completions.create(model="qwen", prompt="x", max_tokens=2, extra_body={"min_tokens": 2})
    assert response.model == "qwen3.8-27b"
    assert response.usage is not None
    assert response.usage.completion_tokens == 2


def test_unknown_model_is_a_404_model_not_found(client: openai.OpenAI) -> None:
    with pytest.raises(openai.NotFoundError) as info:
        client.completions.create(model="gpt-nope", prompt="x", max_tokens=2)
    assert info.value.body["code"] == "model_not_found"
    assert info.value.body["param"] == "model"


def test_n_above_one_is_rejected_naming_n(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        client.completions.create(model=MODEL, prompt="x", max_tokens=2, n=2)
    assert info.value.body["param"] == "n"


@pytest.mark.parametrize(
    ("path", "content", "status", "param"),
    [
        ("/v1/completions", b"{not json", 400, None),
        ("/v1/chat/completions", b"[1, 2", 400, None),
        ("/v1/completions", json.dumps({"prompt": "x"}).encode(), 400, "model"),
        (
            "/v1/completions",
            json.dumps({"model": MODEL, "prompt": "x", "max_tokens": -5}).encode(),
            400,
            "max_tokens",
        ),
        (
            "/v1/completions",
            json.dumps({"model": MODEL, "prompt": "x", "max_tokens": 0}).encode(),
            400,
            "max_tokens",
        ),
        (
            "/v1/completions",
            json.dumps({"model": MODEL, "prompt": "x", "min_tokens": -1}).encode(),
            400,
            "min_tokens",
        ),
        ("/v1/completions", json.dumps({"model": MODEL}).encode(), 400, "prompt"),
        ("/v1/completions", json.dumps({"model": MODEL, "prompt": ["a", "b"]}).encode(), 400, "prompt"),
        (
            "/v1/completions",
            json.dumps({"model": MODEL, "prompt": "x", "max_tokens": 4, "min_tokens": 9}).encode(),
            400,
            "min_tokens",
        ),
        (
            "/v1/completions",
            json.dumps({"model": MODEL, "prompt": "x", "max_tokens": 10**6}).encode(),
            400,
            "max_tokens",
        ),
        (
            "/v1/completions",
            json.dumps({"model": MODEL, "prompt": "x", "stream_options": {"include_usage": True}}).encode(),
            400,
            "stream_options",
        ),
        ("/v1/chat/completions", json.dumps({"model": MODEL, "messages": []}).encode(), 400, "messages"),
        (
            "/v1/chat/completions",
            json.dumps({"model": MODEL, "messages": [{"content": "x"}]}).encode(),
            400,
            "messages",
        ),
        ("/v1/completions", json.dumps({"model": "other", "prompt": "x"}).encode(), 404, "model"),
        ("/v1/embeddings", json.dumps({"model": MODEL, "input": "x"}).encode(), 404, None),
    ],
)
def test_malformed_requests_get_openai_error_bodies(
    http: httpx.Client, path: str, content: bytes, status: int, param: str | None
) -> None:
    response = http.post(path, content=content, headers={"content-type": "application/json"})
    assert response.status_code == status
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["message"]
    assert error["param"] == param
    assert error["type"] == ("not_found_error" if status == 404 else "invalid_request_error")


def test_wrong_method_is_405_with_an_error_body(http: httpx.Client) -> None:
    response = http.get("/v1/completions")
    assert response.status_code == 405
    assert "not allowed" in response.json()["error"]["message"]


def test_a_rejected_request_leaves_no_trace_in_the_engine(box: Box, http: httpx.Client) -> None:
    before = box.stats("nemotron")
    http.post("/v1/completions", json={"model": MODEL, "prompt": "x", "max_tokens": -1})
    after = box.stats("nemotron")
    assert (after.generation_tokens, after.prompt_tokens, after.finished) == (
        before.generation_tokens,
        before.prompt_tokens,
        before.finished,
    )


def test_health_and_info(box: Box, http: httpx.Client) -> None:
    assert http.get("/health").status_code == 200
    info = http.get("/sim/info").json()
    assert info["engine"] == "nemotron"
    assert info["profile"] == "moe"
    assert info["model"] == MODEL
    assert info["speed"] == SPEED
    assert info["engines"] == {"qwen": "dense", "nemotron": "moe"}


LIMIT = 131072  # the profiles' max_model_len


@pytest.mark.parametrize(
    ("path", "body", "param"),
    [
        # No max_tokens: the prompt alone fills (or overflows) the context.
        ("/v1/completions", {"prompt": [7] * LIMIT}, "prompt"),
        ("/v1/completions", {"prompt": [7] * (LIMIT + 5)}, "prompt"),
        ("/v1/completions", {"prompt": [7] * (LIMIT + 5), "min_tokens": 0}, "prompt"),
        # A max_tokens that would fit an empty context does not make the prompt's fault its own.
        ("/v1/completions", {"prompt": [7] * LIMIT, "max_tokens": 1}, "prompt"),
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": "x" * (4 * LIMIT)}]}, "messages"),
    ],
)
def test_a_prompt_that_leaves_no_room_is_a_400_naming_the_prompt(
    box: Box, http: httpx.Client, path: str, body: dict, param: str
) -> None:
    before = box.stats("nemotron").finished
    response = http.post(path, json={"model": MODEL, **body})
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["param"] == param
    assert f"maximum context length is {LIMIT} tokens" in error["message"]
    assert "input tokens" in error["message"]
    assert box.stats("nemotron").finished == before  # rejected, never queued


def test_max_completion_tokens_past_the_context_names_max_completion_tokens(http: httpx.Client) -> None:
    body = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "max_completion_tokens": LIMIT}
    response = http.post("/v1/chat/completions", json=body)
    assert response.status_code == 400
    assert response.json()["error"]["param"] == "max_completion_tokens"


def test_a_prompt_one_token_short_of_the_context_gets_exactly_one_token(http: httpx.Client) -> None:
    response = http.post("/v1/completions", json={"model": MODEL, "prompt": [7] * (LIMIT - 1)})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["usage"] == {"prompt_tokens": LIMIT - 1, "completion_tokens": 1, "total_tokens": LIMIT}
    assert body["choices"][0]["finish_reason"] == "length"


def test_sim_info_reports_the_dropped_model_time(http: httpx.Client) -> None:
    info = http.get("/sim/info").json()
    assert info["dropped_model_s"] == 0.0


def test_timings_record_each_finished_request_as_served(box: Box, client: openai.OpenAI) -> None:
    for tokens in (1, 12):
        client.completions.create(
            model=MODEL, prompt="abcd" * 30, max_tokens=tokens, extra_body={"min_tokens": tokens}
        )
    *_, one, twelve = box.timings("nemotron")
    assert (one.prompt_tokens, one.completion_tokens, one.finish_reason) == (30, 1, "length")
    assert one.decode_rate is None  # one token has no decode phase
    assert one.ttft_s is not None
    assert one.ttft_s > 0
    assert twelve.completion_tokens == 12
    assert twelve.arrival_ns < twelve.first_token_ns < twelve.last_token_ns <= twelve.finished_ns
    assert twelve.decode_rate == pytest.approx(box.predicted_rate("nemotron", 1), rel=1e-6)
    assert twelve.e2e_s == pytest.approx(twelve.ttft_s + 11 / twelve.decode_rate)
