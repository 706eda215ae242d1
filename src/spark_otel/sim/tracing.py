"""The simulated engine's server span, in vLLM's shape (vllm/tracing.py, ``--otlp-traces-endpoint``).

vLLM, started with an OTLP traces endpoint, ends one ``llm_request`` span (kind SERVER) per
finished request, parented to the context the request's ``traceparent`` header carried, with
its own split of the request in float seconds: time in queue, to first token, in model prefill
and decode, end to end. The simulated engine does the same from the times its step loop
stamped, in model time, so a client that injects ``traceparent`` (``instrument(
inject_traceparent=True)``) gets the engine's split of each of its requests joined to its own
span, as it would against vLLM.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import SpanKind
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from .. import _semconv as sc
from .._clock import NS_PER_S

if TYPE_CHECKING:
    from opentelemetry.trace import Tracer


class StampedRequest(Protocol):
    """What a request's server span is made of: its model-time stamps (ns on the box's monotonic
    clock; None for a phase it never reached), its token counts and the context it carried."""

    @property
    def id(self) -> int: ...

    @property
    def arrival_ns(self) -> int: ...

    @property
    def scheduled_ns(self) -> int | None: ...

    @property
    def first_token_ns(self) -> int | None: ...

    @property
    def last_token_ns(self) -> int | None: ...

    @property
    def finished_ns(self) -> int | None: ...

    @property
    def prompt_tokens(self) -> int: ...

    @property
    def produced(self) -> int: ...

    @property
    def trace_context(self) -> Context | None: ...


__all__ = ["end_server_span", "incoming_context", "server_span_attributes"]

_PROPAGATOR = TraceContextTextMapPropagator()
_logger = logging.getLogger(__name__)


def incoming_context(headers: Mapping[str, str]) -> Context | None:
    """The W3C trace context a request carried, as vLLM's ``extract_trace_context``; None without
    a valid ``traceparent``."""
    if "traceparent" not in headers:
        return None
    context = _PROPAGATOR.extract(dict(headers))
    return context if trace.get_current_span(context).get_span_context().is_valid else None


def _seconds(start_ns: int | None, end_ns: int | None) -> float | None:
    if start_ns is None or end_ns is None:
        return None
    return max(0, end_ns - start_ns) / NS_PER_S


def server_span_attributes(req: StampedRequest, request_id: str) -> dict[str, Any]:
    """The attributes vLLM's ``do_tracing`` sets, from the request's model-time stamps; a phase the
    request never reached (aborted while queued) is left out, as vLLM has no value for it."""
    scheduled, first, finished = req.scheduled_ns, req.first_token_ns, req.finished_ns
    values = {
        sc.VLLM_LATENCY_TIME_IN_QUEUE: _seconds(
            req.arrival_ns, scheduled if scheduled is not None else finished
        ),
        sc.VLLM_LATENCY_TIME_TO_FIRST_TOKEN: _seconds(req.arrival_ns, first),
        sc.VLLM_LATENCY_E2E: _seconds(req.arrival_ns, finished),
        sc.VLLM_LATENCY_TIME_IN_MODEL_PREFILL: _seconds(scheduled, first),
        sc.VLLM_LATENCY_TIME_IN_MODEL_DECODE: _seconds(
            first, req.last_token_ns if first is not None else None
        ),
        sc.VLLM_LATENCY_TIME_IN_MODEL_INFERENCE: _seconds(scheduled, finished),
        sc.VLLM_USAGE_PROMPT_TOKENS: req.prompt_tokens,
        sc.VLLM_USAGE_COMPLETION_TOKENS: req.produced,
        sc.VLLM_REQUEST_ID: request_id,
    }
    return {k: v for k, v in values.items() if v is not None}


def end_server_span(
    tracer: Tracer | None, unix_ns: Callable[[int], int], engine: str, req: StampedRequest
) -> None:
    """Emit the finished request's server span when the box traces (``tracer``), as vLLM does for
    every request: a child of the context the request carried, or a root span without one.
    ``unix_ns`` turns a stamp on the box's monotonic clock into Unix time."""
    if tracer is None or req.finished_ns is None:
        return
    try:  # the engine's step loop goes on whatever its tracing does
        span = tracer.start_span(
            sc.VLLM_SERVER_SPAN_NAME,
            context=req.trace_context,
            kind=SpanKind.SERVER,
            attributes=server_span_attributes(req, f"sim{engine}{req.id:08d}"),
            start_time=unix_ns(req.arrival_ns),
        )
        span.end(end_time=unix_ns(req.finished_ns))
    except Exception:
        _logger.warning("sim engine %s: its server span could not be recorded", engine, exc_info=True)
