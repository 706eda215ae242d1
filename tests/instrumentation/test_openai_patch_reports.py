"""A failing step of the openai wrapper is reported once, under its own name, with its traceback.

tests/core/test_guarded_points.py checks this promise at every guarded site, but it finds the
step to fail by the caller's frame depth, which mutmut's trampolines change: under mutation it
cannot run for the instrumentation modules. These cases inject the fault by name instead (the one
mock: no real peer makes spark-otel's own step raise) and read the one WARNING it leaves.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import openai
import pytest
from opentelemetry import context as otel_context
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from tests.support.engine_server import MODEL
from tests.support.finished_spans import request_spans

import spark_otel
from spark_otel.instrumentation import _openai_patch, _request, _stream

MESSAGES = [{"role": "user", "content": "one two three"}]


class Injected(Exception):
    pass


def _raiser(exc: Injected) -> Callable[..., Any]:
    def fail(*args: Any, **kwargs: Any) -> Any:
        raise exc

    return fail


def _detach_then_raise(exc: Injected) -> Any:
    """The real ``detach`` (the context is restored), then the fault."""

    class Context:
        attach = staticmethod(otel_context.attach)

        @staticmethod
        def detach(token: Any) -> None:
            otel_context.detach(token)
            raise exc

    return Context


def _chat(client: openai.OpenAI) -> Any:
    result = client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=3)  # type: ignore[arg-type]
    return result.choices[0].message.content


def _chat_stream(client: openai.OpenAI) -> Any:
    chunks = client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=3, stream=True)  # type: ignore[arg-type]
    return [c.choices[0].delta.content for c in chunks if c.choices]


def _raw_stream(client: openai.OpenAI) -> Any:
    create = client.chat.completions.with_raw_response.create
    raw = create(model=MODEL, messages=MESSAGES, max_tokens=3, stream=True)  # type: ignore[arg-type]
    return [c.choices[0].delta.content for c in raw.parse() if c.choices]


# (site, what is made to fail: (object, attribute, replacement factory), the call)
CASES = [
    ("openai request start", (_openai_patch, "_server", _raiser), _chat),
    ("openai span context", (_openai_patch, "set_span_in_context", _raiser), _chat),
    ("openai span context", (_openai_patch, "otel_context", _detach_then_raise), _chat_stream),
    ("openai stream wrap", (_stream.StreamState, "__init__", _raiser), _chat_stream),
    ("openai response", (_request, "get_field", _raiser), _chat),
    ("openai include_usage", (_openai_patch, "_include_usage", _raiser), _raw_stream),
]


@pytest.mark.parametrize(("site", "fault", "call"), CASES, ids=[f"{c[0]}|{c[1][1]}" for c in CASES])
def test_a_failing_step_leaves_the_call_bare_and_is_reported_once_by_name(
    site: str,
    fault: tuple[Any, str, Callable[[Injected], Any]],
    call: Callable[[openai.OpenAI], Any],
    base_url: str,
    tracer_provider: TracerProvider,
    meter_provider: MeterProvider,
    span_exporter: InMemorySpanExporter,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    bare = call(openai.OpenAI(base_url=base_url, api_key="sk"))
    spark_otel.instrument(tracer_provider=tracer_provider, meter_provider=meter_provider, include_usage=True)
    client = openai.OpenAI(base_url=base_url, api_key="sk", max_retries=0)  # its own `with_raw_response`
    injected = Injected(site)
    target, name, make = fault
    monkeypatch.setattr(target, name, make(injected))
    with caplog.at_level(logging.WARNING, logger="spark_otel"):
        first, second = call(client), call(client)
    assert (first, second) == (bare, bare)
    reports = [r for r in caplog.records if r.name.startswith("spark_otel") and r.levelno >= logging.WARNING]
    assert [(r.name, r.getMessage()) for r in reports] == [
        ("spark_otel", f"spark_otel: {site} failed; the call goes on untouched")
    ]
    assert reports[0].exc_info is not None
    assert reports[0].exc_info[1] is injected
    assert len(request_spans(span_exporter)) == 2  # the wrapper's spans, or the raw layer's
