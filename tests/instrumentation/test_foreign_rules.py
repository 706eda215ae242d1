"""`_foreign`'s two rules on plain objects: which span is another GenAI instrumentation's, and which
wrappers beneath spark-otel's are skipped (only those; a user's own wrapper always runs)."""

from __future__ import annotations

import sys
import types
from typing import Any

import pytest
import wrapt
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider

from spark_otel import _semconv as sc
from spark_otel.instrumentation._foreign import foreign_request_span, past_foreign_wrappers

CONTRIB = "opentelemetry.instrumentation.genai.openai"
FOREIGN_PACKAGES = (
    CONTRIB,
    "opentelemetry.instrumentation.openai_v2",
    "opentelemetry.instrumentation.openai",
)


@pytest.fixture
def contrib_imported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, CONTRIB, types.ModuleType(CONTRIB))


def _wrapped_by(module: str) -> Any:
    """A bound method wrapped (with wrapt) by a wrapper whose code lives in ``module``."""

    class Target:
        def create(self) -> str:
            return "bare"

    def wrapper(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> str:
        return f"{module}:{wrapped(*args, **kwargs)}"

    wrapper.__module__ = module
    wrapt.wrap_function_wrapper(Target, "create", wrapper)
    return Target().create


@pytest.mark.usefixtures("contrib_imported")
def test_only_another_genai_instrumentation_s_wrapper_is_skipped() -> None:
    foreign = _wrapped_by(f"{CONTRIB}.patch")
    assert past_foreign_wrappers(foreign)() == "bare"
    own = _wrapped_by("my_eval.retries")
    assert past_foreign_wrappers(own) is own
    assert past_foreign_wrappers(own)() == "my_eval.retries:bare"


def test_nothing_is_skipped_while_no_other_instrumentation_is_imported(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in FOREIGN_PACKAGES:
        monkeypatch.delitem(sys.modules, name, raising=False)
    foreign = _wrapped_by(f"{CONTRIB}.patch")
    assert past_foreign_wrappers(foreign) is foreign


@pytest.mark.usefixtures("contrib_imported")
@pytest.mark.parametrize(
    ("scope", "foreign"),
    [
        (CONTRIB, True),
        ("opentelemetry.instrumentation.openai", True),
        ("my_eval", False),
        (sc.SCOPE_NAME, False),
    ],
)
def test_the_current_span_is_foreign_only_when_a_genai_instrumentation_made_it(
    scope: str, foreign: bool
) -> None:
    with TracerProvider().get_tracer(scope).start_as_current_span("chat m") as span:
        assert (foreign_request_span() is span) is foreign


@pytest.mark.parametrize("package", FOREIGN_PACKAGES)
def test_any_one_of_the_instrumentations_imported_alone_turns_the_rules_on(
    package: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in FOREIGN_PACKAGES:
        monkeypatch.delitem(sys.modules, name, raising=False)
    monkeypatch.setitem(sys.modules, package, types.ModuleType(package))
    assert past_foreign_wrappers(_wrapped_by(f"{package}.patch"))() == "bare"
    with TracerProvider().get_tracer(package).start_as_current_span("chat m") as span:
        assert foreign_request_span() is span


@pytest.mark.usefixtures("contrib_imported")
def test_another_instrumentation_s_span_that_ended_is_not_this_call_s() -> None:
    span = TracerProvider().get_tracer(CONTRIB).start_span("chat m")
    span.end()
    with trace.use_span(span):
        assert foreign_request_span() is None
