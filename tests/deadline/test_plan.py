"""A deadline stream's plan, on plain arguments: each refusal names the argument and the problem,
and what is accepted becomes exactly the body, budget and timeout the stream runs on."""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime
from typing import Any

import httpx
import httpx2
import openai
import pytest

from spark_otel import ConfigError, _clock
from spark_otel._clock import NS_PER_S
from spark_otel.deadline.arguments import Plan, budget_s, client_kind, make_plan

BASE = "http://127.0.0.1:9"
CHAT = {"model": "m", "messages": [{"role": "user", "content": "résumé"}]}


def _plan(client: Any, *, is_async: bool = False, **kwargs: Any) -> Plan:
    options = {"deadline_s": kwargs.pop("deadline_s", 2.5), "deadline_at": kwargs.pop("deadline_at", None)}
    max_output_tokens = kwargs.pop("max_output_tokens", None)
    return make_plan(
        client, is_async=is_async, max_output_tokens=max_output_tokens, create_kwargs=kwargs, **options
    )


def _refused(client: Any, **kwargs: Any) -> str:
    with pytest.raises(ConfigError) as raised:
        _plan(client, **kwargs)
    return str(raised.value)


@pytest.fixture
def raw() -> httpx2.Client:
    return httpx2.Client(base_url=BASE)


def test_a_raw_plan_sends_a_streamed_body_with_usage_encoded_once(raw: httpx2.Client) -> None:
    given = {**CHAT, "timeout": 7, "stream_options": {"continuous_usage_stats": True, "include_usage": False}}
    plan = _plan(raw, **given)
    body = {
        **CHAT,
        "stream_options": {"continuous_usage_stats": True, "include_usage": True},
        "stream": True,
    }
    assert plan == Plan("raw", True, body, 2.5, None, 7.0, json.dumps(body, ensure_ascii=False).encode())
    assert "résumé".encode() in plan.raw_content
    assert isinstance(plan.request_timeout_s, float)
    assert given["stream_options"] == {"continuous_usage_stats": True, "include_usage": False}
    assert "stream" not in given  # the caller's arguments are left as they were


def test_an_openai_plan_keeps_the_timeout_for_the_sdk_and_encodes_nothing() -> None:
    client = openai.OpenAI(base_url=BASE + "/v1", api_key="k")
    plan = _plan(client, model="m", prompt="p", timeout=7, stream=True, n=1, max_output_tokens=5)
    body = {"model": "m", "prompt": "p", "timeout": 7, "stream": True, "n": 1}
    body["stream_options"] = {"include_usage": True}
    assert plan == Plan("openai", False, body, 2.5, 5, None, b"")


def test_an_async_plan_takes_an_async_client() -> None:
    client = httpx2.AsyncClient(base_url=BASE)
    plan = make_plan(
        client,
        is_async=True,
        deadline_s=1,
        deadline_at=None,
        max_output_tokens=None,
        create_kwargs=dict(CHAT),
    )
    assert (plan.kind, plan.budget_s) == ("raw", 1.0)
    with pytest.raises(ConfigError, match=r"^stream_with_deadline: AsyncClient needs astream_with_deadline$"):
        make_plan(
            client, is_async=False, deadline_s=1, deadline_at=None, max_output_tokens=None, create_kwargs=CHAT
        )


def test_any_positive_timeout_is_the_request_s(raw: httpx2.Client) -> None:
    assert _plan(raw, **CHAT, timeout=0.5).request_timeout_s == 0.5


def test_no_time_budget_is_allowed_with_a_token_budget(raw: httpx2.Client) -> None:
    plan = _plan(raw, deadline_s=None, max_output_tokens=1, n=None, **CHAT)
    assert (plan.budget_s, plan.max_output_tokens, plan.request_timeout_s) == (None, 1, None)
    assert _plan(raw, deadline_s=0, **CHAT).budget_s == 0.0


TIMEOUT = "expected a positive finite number of seconds, or None"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"deadline_s": None},
         "give deadline_s, deadline_at or max_output_tokens: without one the stream is unbounded"),
        ({"deadline_at": 2}, "give deadline_s or deadline_at, not both"),
        ({"max_output_tokens": 0}, "max_output_tokens must be a positive integer, got 0"),
        ({"max_output_tokens": True}, "max_output_tokens must be a positive integer, got True"),
        ({"max_output_tokens": 2.0}, "max_output_tokens must be a positive integer, got 2.0"),
        ({"messages": None, "prompt": "p"},
         "give messages (a chat completion) or prompt (a text completion), exactly one"),
        ({"model": ""}, "model is required (the served model id, as /v1/models lists it)"),
        ({"stream": False}, "stream=False cannot keep what arrives; leave stream unset"),
        ({"n": 2}, "n=2: only one choice per stream is supported"),
        ({"stream_options": ["include_usage"]},
         "stream_options=['include_usage']: expected a mapping, e.g. {'include_usage': True}"),
        ({"timeout": 0}, f"timeout=0: {TIMEOUT}"),
        ({"timeout": float("inf")}, f"timeout=inf: {TIMEOUT}"),
        ({"timeout": True}, f"timeout=True: {TIMEOUT}"),
        ({"timeout": "7"}, f"timeout='7': {TIMEOUT}"),
    ],
)  # fmt: skip
def test_each_bad_argument_is_named_with_its_problem(
    raw: httpx2.Client, kwargs: dict[str, Any], message: str
) -> None:
    assert _refused(raw, **{**CHAT, **kwargs}) == message


def test_a_body_that_is_no_json_is_refused_before_any_request(raw: httpx2.Client) -> None:
    assert _refused(raw, **CHAT, seed={1}).startswith("the request body cannot be sent as JSON: ")
    nan = _refused(raw, **CHAT, temperature=float("nan"))
    assert "Out of range float values are not JSON compliant" in nan
    client = openai.OpenAI(base_url=BASE + "/v1", api_key="k")
    assert _plan(client, **CHAT, temperature=float("nan")).raw_content == b""  # the SDK sends it


@pytest.mark.parametrize(
    ("deadline_s", "message"),
    [
        (-1, "deadline_s must be a finite number >= 0, got -1"),
        (float("nan"), "deadline_s must be a finite number >= 0, got nan"),
        (float("inf"), "deadline_s must be a finite number >= 0, got inf"),
        (True, "deadline_s must be a number of seconds, got True"),
        ("10", "deadline_s must be a number of seconds, got '10'"),
    ],
)
def test_a_bad_deadline_s_is_named(deadline_s: Any, message: str) -> None:
    with pytest.raises(ConfigError) as raised:
        budget_s(deadline_s, None)
    assert str(raised.value) == message


def test_a_deadline_past_the_longest_timer_wait_is_a_typo() -> None:
    far = threading.TIMEOUT_MAX * 2
    with pytest.raises(ConfigError) as raised:
        budget_s(far, None)
    assert str(raised.value) == (
        f"deadline_s={far!r}: a deadline {far:.3g} s away is past the longest wait this platform's "
        f"timers allow ({threading.TIMEOUT_MAX:.3g} s); leave it out for no deadline"
    )
    assert budget_s(threading.TIMEOUT_MAX, None) == threading.TIMEOUT_MAX
    with pytest.raises(ConfigError, match=r"^deadline_at=datetime\.datetime\(9999, .* past the longest wait"):
        budget_s(None, datetime.max.replace(tzinfo=UTC))


@pytest.mark.parametrize("as_datetime", [False, True], ids=["unix-seconds", "datetime"])
def test_a_deadline_at_is_its_distance_from_now_on_the_wall_clock(as_datetime: bool) -> None:
    at_s = _clock.wall_ns() / NS_PER_S + 100
    before = _clock.wall_ns() / NS_PER_S
    budget = budget_s(None, datetime.fromtimestamp(at_s, tz=UTC) if as_datetime else at_s)
    after = _clock.wall_ns() / NS_PER_S
    assert budget is not None
    assert at_s - after <= budget <= at_s - before + 1e-6  # a datetime keeps microseconds
    assert budget_s(None, None) is None


@pytest.mark.parametrize(
    ("deadline_at", "message"),
    [
        ("tomorrow", "deadline_at must be Unix seconds or a datetime, got 'tomorrow'"),
        (True, "deadline_at must be Unix seconds or a datetime, got True"),
        (float("inf"), "deadline_at must be finite, got inf"),
        (float("nan"), "deadline_at must be finite, got nan"),
    ],
)
def test_a_bad_deadline_at_is_named(deadline_at: Any, message: str) -> None:
    with pytest.raises(ConfigError) as raised:
        budget_s(None, deadline_at)
    assert str(raised.value) == message


def test_a_deadline_at_the_platform_cannot_time_is_named() -> None:
    with pytest.raises(ConfigError) as raised:
        budget_s(None, datetime.min)
    assert str(raised.value).startswith(
        "deadline_at=datetime.datetime(1, 1, 1, 0, 0) is not a moment this platform can time: "
    )


def test_each_client_is_taken_on_the_path_of_its_kind() -> None:
    assert client_kind(openai.OpenAI(base_url=BASE, api_key="k"), is_async=False) == "openai"
    assert client_kind(openai.AsyncOpenAI(base_url=BASE, api_key="k"), is_async=True) == "openai"
    for client, is_async in [
        (httpx2.Client(base_url=BASE), False),
        (httpx2.AsyncClient(base_url=BASE), True),
        (httpx.Client(base_url=BASE), False),
        (httpx.AsyncClient(base_url=BASE), True),
    ]:
        assert client_kind(client, is_async=is_async) == "raw"


SYNC, ASYNC = "stream_with_deadline", "astream_with_deadline"
NO_BASE = "the HTTP client has no base_url (e.g. http://127.0.0.1:8011)"


@pytest.mark.parametrize(
    ("client", "is_async", "message"),
    [
        (openai.OpenAI(base_url=BASE, api_key="k"), True, f"{ASYNC}: OpenAI needs {SYNC}"),
        (openai.AsyncOpenAI(base_url=BASE, api_key="k"), False, f"{SYNC}: AsyncOpenAI needs {ASYNC}"),
        (httpx2.Client(base_url=BASE), True, f"{ASYNC}: Client needs {SYNC}"),
        (httpx2.AsyncClient(base_url=BASE), False, f"{SYNC}: AsyncClient needs {ASYNC}"),
        (httpx.Client(base_url=BASE), True, f"{ASYNC}: Client needs {SYNC}"),
        (httpx.AsyncClient(base_url=BASE), False, f"{SYNC}: AsyncClient needs {ASYNC}"),
        (httpx.Client(base_url="/"), False, f"{SYNC}: {NO_BASE}"),
        (httpx2.AsyncClient(), True, f"{ASYNC}: {NO_BASE}"),
        (BASE, True, f"{ASYNC}: client must be an openai client or an httpx2/httpx client, got str"),
    ],
)
def test_a_client_of_the_wrong_kind_is_named_with_the_function_it_needs(
    client: Any, is_async: bool, message: str
) -> None:
    with pytest.raises(ConfigError) as raised:
        client_kind(client, is_async=is_async)
    assert str(raised.value) == message
