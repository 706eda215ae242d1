"""Another GenAI instrumentation on the same client: one call still gives one span.

Beside the OpenTelemetry contrib instrumentation (``opentelemetry-instrumentation-genai-openai``,
its predecessor ``openai-v2``) or OpenLLMetry's, both wrap ``create`` and both would make a
CLIENT span and record the GenAI metrics for the same call. The rule: **the outermost wrapper
makes the request span and records the metrics; spark-otel always keeps its cell.**

* spark-otel outermost (it instrumented last): it makes its span and calls past the other
  instrumentation's wrapper underneath it (`past_foreign_wrappers`), so that one records nothing.
* the other outermost: its span is the current span when spark-otel's wrapper runs
  (`foreign_request_span`); spark-otel puts the cell's attributes on it and counts the call's
  tokens in the cell, and makes no span or metric of its own.

Which is outermost depends only on the order of the ``instrument()`` calls. Both checks cost a
dictionary lookup per call when no other GenAI instrumentation is imported.
"""

from __future__ import annotations

import sys
from typing import Any

import wrapt
from opentelemetry import trace
from opentelemetry.trace import Span

from .. import _semconv as sc

__all__ = ["foreign_request_span", "past_foreign_wrappers"]

# The GenAI instrumentations of the openai SDK that make request spans of their own.
_FOREIGN_PACKAGES = (
    "opentelemetry.instrumentation.genai.openai",  # contrib, current
    "opentelemetry.instrumentation.openai_v2",  # contrib, before genai-openai
    "opentelemetry.instrumentation.openai",  # OpenLLMetry
)


_CONTRIB, _CONTRIB_V2, _OPENLLMETRY = _FOREIGN_PACKAGES


def _foreign_imported() -> bool:
    modules = sys.modules  # three lookups, no generator: this runs on every call
    return _CONTRIB in modules or _CONTRIB_V2 in modules or _OPENLLMETRY in modules


def _is_foreign(name: str) -> bool:
    return name != sc.SCOPE_NAME and name.startswith(_FOREIGN_PACKAGES)


def foreign_request_span() -> Span | None:
    """The span another GenAI instrumentation opened for this very call, if it wrapped outside."""
    if not _foreign_imported():
        return None
    span = trace.get_current_span()
    scope = getattr(span, "instrumentation_scope", None)
    if scope is None or not span.is_recording() or not _is_foreign(getattr(scope, "name", "")):
        return None
    return span


def past_foreign_wrappers(wrapped: Any) -> Any:
    """``wrapped`` with the other GenAI instrumentations' wrappers directly beneath spark-otel's
    skipped; ``wrapped`` itself when there are none (any other wrapper, a user's own, stays)."""
    if not _foreign_imported():
        return wrapped
    inner = wrapped
    while isinstance(inner, wrapt.BoundFunctionWrapper) and _is_foreign(
        getattr(getattr(inner, "_self_wrapper", None), "__module__", "") or ""
    ):
        inner = inner.__wrapped__
    return inner
