"""The engine's server span as vLLM's ``do_tracing`` writes it, pinned on plain data.

A request with hand-set model-time stamps goes through `end_server_span` on a box model at
infinite speed (its virtual clock's Unix epoch is fixed when the box is built), so the span's
name, kind, parent, start and end times and every attribute are known to the nanosecond. The
end-to-end tests (test_server_spans.py) join spans over HTTP; these pin each phase's arithmetic,
the phases a request aborted in the queue never reached, the traceparent a plain mapping
carries, and the one warning a failing tracer leaves.
"""

from __future__ import annotations

import logging
import math

import pytest
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, get_current_span

from spark_otel.sim import DENSE, BoxModel
from spark_otel.sim.box import SimRequest
from spark_otel.sim.tracing import end_server_span, incoming_context, server_span_attributes

TRACE_ID = "0af7651916cd43dd8448eb211c80319c"
PARENT_ID = "b7ad6b7169203331"
TRACEPARENT = f"00-{TRACE_ID}-{PARENT_ID}-01"


def _served() -> SimRequest:
    """Request 7: 30 prompt tokens, arrived at 1 s, scheduled at 1.5 s, first token at 2 s,
    its 12th and last at 4.25 s, finished then."""
    req = SimRequest(7, 30, 12, (12, "length"), arrival_ns=1_000_000_000)
    req.scheduled_ns = 1_500_000_000
    req.first_token_ns = 2_000_000_000
    req.last_token_ns = req.finished_ns = 4_250_000_000
    req.produced = 12
    req.finish_reason = "length"
    return req


def _aborted_in_the_queue() -> SimRequest:
    """Request 3: arrived at 2 s and aborted at 2.75 s, never scheduled."""
    req = SimRequest(3, 5, 40, (40, "length"), arrival_ns=2_000_000_000)
    req.finished_ns = 2_750_000_000
    req.finish_reason = "abort"
    return req


def test_a_served_request_has_every_phase_of_vllms_split() -> None:
    assert server_span_attributes(_served(), "simqwen00000007") == {
        "gen_ai.latency.time_in_queue": 0.5,
        "gen_ai.latency.time_to_first_token": 1.0,
        "gen_ai.latency.e2e": 3.25,
        "gen_ai.latency.time_in_model_prefill": 0.5,
        "gen_ai.latency.time_in_model_decode": 2.25,
        "gen_ai.latency.time_in_model_inference": 2.75,
        "gen_ai.usage.prompt_tokens": 30,
        "gen_ai.usage.completion_tokens": 12,
        "gen_ai.request.id": "simqwen00000007",
    }


def test_a_request_aborted_in_the_queue_spent_its_whole_life_there() -> None:
    # Never scheduled: its queue time runs to the abort, and the phases it never reached are absent.
    assert server_span_attributes(_aborted_in_the_queue(), "simqwen00000003") == {
        "gen_ai.latency.time_in_queue": 0.75,
        "gen_ai.latency.e2e": 0.75,
        "gen_ai.usage.prompt_tokens": 5,
        "gen_ai.usage.completion_tokens": 0,
        "gen_ai.request.id": "simqwen00000003",
    }


def _traced_box() -> tuple[BoxModel, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return BoxModel({"qwen": DENSE}, speed=math.inf, tracer_provider=provider), exporter


def test_the_server_span_is_a_child_of_the_incoming_context_stamped_on_the_box_clock() -> None:
    box, exporter = _traced_box()
    req = _served()
    req.trace_context = incoming_context({"traceparent": TRACEPARENT})
    end_server_span(box.tracer, box.clock.unix_ns, "qwen", req)
    (span,) = exporter.get_finished_spans()
    assert isinstance(span, ReadableSpan)
    assert span.name == "llm_request"
    assert span.kind is SpanKind.SERVER
    assert span.parent is not None
    assert (format(span.parent.trace_id, "032x"), format(span.parent.span_id, "016x")) == (
        TRACE_ID,
        PARENT_ID,
    )
    assert format(span.context.trace_id, "032x") == TRACE_ID
    unix0 = box.clock.unix_ns(0)
    assert (span.start_time, span.end_time) == (unix0 + 1_000_000_000, unix0 + 4_250_000_000)
    assert dict(span.attributes or {}) == server_span_attributes(req, "simqwen00000007")


def test_no_span_without_a_tracer_or_before_the_request_finished(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="spark_otel.sim")
    untraced = BoxModel({"qwen": DENSE}, speed=math.inf)
    end_server_span(untraced.tracer, untraced.clock.unix_ns, "qwen", _served())
    box, exporter = _traced_box()
    running = _served()
    running.finished_ns = None
    end_server_span(box.tracer, box.clock.unix_ns, "qwen", running)
    assert exporter.get_finished_spans() == ()
    assert caplog.records == []  # nothing was tried, so nothing failed


class _FailingProcessor(SpanProcessor):
    """A span pipeline that breaks when a span starts: the fault a real exporter cannot make on demand."""

    def on_start(self, span: object, parent_context: object = None) -> None:
        raise RuntimeError("the span pipeline is broken")


def test_a_failing_tracer_is_one_warning_with_its_traceback(caplog: pytest.LogCaptureFixture) -> None:
    provider = TracerProvider()
    provider.add_span_processor(_FailingProcessor())
    box = BoxModel({"qwen": DENSE}, speed=math.inf, tracer_provider=provider)
    caplog.set_level(logging.DEBUG, logger="spark_otel.sim")
    end_server_span(
        box.tracer, box.clock.unix_ns, "qwen", _served()
    )  # the step loop goes on: nothing raises here
    (record,) = caplog.records
    assert (record.name, record.levelno) == ("spark_otel.sim.tracing", logging.WARNING)
    assert record.getMessage() == "sim engine qwen: its server span could not be recorded"
    assert record.exc_info is not None
    assert record.exc_info[0] is RuntimeError
    assert str(record.exc_info[1]) == "the span pipeline is broken"


def test_incoming_context_reads_a_plain_mapping_and_refuses_an_invalid_traceparent() -> None:
    context = incoming_context({"traceparent": TRACEPARENT})
    assert context is not None
    carried = get_current_span(context).get_span_context()
    assert (format(carried.trace_id, "032x"), format(carried.span_id, "016x")) == (TRACE_ID, PARENT_ID)
    assert carried.is_remote
    assert incoming_context({"traceparent": "00-not-a-trace-context-01"}) is None
    assert incoming_context({"traceparent": f"00-{'0' * 32}-{PARENT_ID}-01"}) is None  # all-zero id
    assert incoming_context({}) is None
