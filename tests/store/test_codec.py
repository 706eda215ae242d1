"""The one span encoding (`store.codec`), both ways, on spans the real OpenTelemetry SDK ends: a
recorded cell written as a span reads back as itself, and every request, load-window and engine
server-span attribute lands in its field (and an absent one leaves the field empty)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from spark_otel import _semconv as sc
from spark_otel.model import Cell, CellStatus
from spark_otel.records.span_codec import (
    cell_end_attributes,
    cell_error,
    cell_from_span,
    cell_span_attributes,
    cell_span_name,
    cell_start_attributes,
    is_server_timing,
    request_from_span,
    server_timing_from_span,
    window_from_span,
)

S = 1_000_000_000
T0 = 1_760_000_000 * S


@pytest.fixture(scope="module")
def spans() -> Iterator[tuple[trace.Tracer, InMemorySpanExporter]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider.get_tracer("test"), exporter
    provider.shutdown()


def ended(
    spans: tuple[trace.Tracer, InMemorySpanExporter],
    attributes: Mapping[str, Any],
    *,
    start: int = T0,
    end: int | None = T0 + 2 * S,
    name: str = "span",
    parent: trace.SpanContext | None = None,
) -> ReadableSpan:
    """One span the SDK ended with these attributes, start and end."""
    tracer, exporter = spans
    exporter.clear()
    context = trace.set_span_in_context(trace.NonRecordingSpan(parent)) if parent is not None else None
    span = tracer.start_span(name, context=context, attributes=dict(attributes), start_time=start)
    span.end(end_time=end)
    [done] = exporter.get_finished_spans()
    return done


def ids(span: ReadableSpan) -> dict[str, str]:
    assert span.context is not None
    return {"uid": format(span.context.span_id, "016x"), "trace_id": format(span.context.trace_id, "032x")}


# -- cells --------------------------------------------------------------------------------------------
names = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=12)
maybe_seconds = st.one_of(st.none(), st.floats(0, 1e4, allow_nan=False))
user_keys = names.filter(lambda k: not k.startswith("spark_otel.") and k not in sc.CELL_ATTRIBUTE_KEYS)


@st.composite
def cells(draw: st.DrawFn) -> Cell:
    start = T0 + draw(st.integers(0, 10**6)) * 1_000
    status = draw(st.sampled_from(CellStatus))
    return Cell(
        uid="set by the span",
        eval_name=draw(names),
        cell_id=draw(names),
        engine=draw(st.one_of(st.none(), names)),
        start_unix_ns=start,
        end_unix_ns=start + draw(st.integers(0, 3600 * S)),
        prompt_tokens=draw(st.one_of(st.none(), st.integers(0, 10**6))),
        completion_tokens=draw(st.one_of(st.none(), st.integers(0, 10**6))),
        status=status,
        deadline_s=draw(st.one_of(st.none(), st.floats(0.001, 1e5, allow_nan=False))),
        workers=draw(st.one_of(st.none(), st.integers(1, 512))),
        salvaged_findings=draw(st.integers(0, 1000)),
        source=draw(st.sampled_from(["live", "records", "otlp-json"])),
        first_token_s=draw(maybe_seconds),
        decode_s=draw(maybe_seconds),
        unsplit_s=draw(maybe_seconds),
        other_s=draw(maybe_seconds),
        attributes=draw(
            st.dictionaries(
                user_keys,
                st.one_of(names, st.integers(-(2**40), 2**40), st.booleans(), st.floats(allow_nan=False)),
                max_size=3,
            )
        ),
    )


@settings(max_examples=150, deadline=None)
@given(cell=cells())
def test_any_recorded_cell_written_as_its_span_reads_back_as_itself(
    spans: tuple[trace.Tracer, InMemorySpanExporter], cell: Cell
) -> None:
    span = ended(
        spans, cell_span_attributes(cell), start=cell.start_unix_ns, end=cell.end_unix_ns, name="cell"
    )
    assert cell_from_span(span) == cell.model_copy(update=ids(span))


def test_a_cell_span_without_its_end_attributes_reads_as_a_bare_ok_cell(spans) -> None:
    span = ended(spans, {sc.EVAL_NAME: "ev", sc.CELL_ID: "c1"}, end=None)
    cell = cell_from_span(span)
    assert cell.model_dump(exclude={"uid", "trace_id", "end_unix_ns"}) == Cell(
        uid="", eval_name="ev", cell_id="c1", start_unix_ns=T0, end_unix_ns=T0
    ).model_dump(exclude={"uid", "trace_id", "end_unix_ns"})
    assert cell.end_unix_ns >= T0  # the SDK ends an unended span now
    assert cell.uid == ids(span)["uid"]


def test_a_span_with_no_cell_attributes_reads_as_a_cell_of_no_name(spans) -> None:
    cell = cell_from_span(ended(spans, {}))
    assert (cell.eval_name, cell.cell_id, cell.engine, cell.status, cell.source) == (
        "",
        "",
        None,
        CellStatus.OK,
        "live",
    )
    assert (cell.deadline_hit, cell.degraded, cell.salvaged_findings, cell.workers) == (False, False, 0, None)


def test_a_cell_under_a_model_clock_says_so_and_one_in_real_time_says_nothing() -> None:
    assert cell_start_attributes("ev", "c", time_scale=60)[sc.TIME_SCALE] == 60.0
    assert sc.TIME_SCALE not in cell_start_attributes("ev", "c")


@pytest.mark.parametrize(
    ("elapsed_s", "tokens", "rate"), [(0.5, 10, 20.0), (4.0, 1, 0.25), (4.0, 0, None), (0.0, 10, None)]
)
def test_a_cells_rate_is_written_where_it_made_tokens_over_some_time(
    elapsed_s: float, tokens: int, rate: float | None
) -> None:
    attrs = cell_end_attributes(status=CellStatus.OK, elapsed_s=elapsed_s, completion_tokens=tokens)
    assert attrs.get(sc.CELL_DECODE_RATE) == rate


def test_a_cell_span_carries_its_rate_and_elapsed_as_attributes_but_not_into_the_cells_own() -> None:
    attrs = cell_span_attributes(
        Cell(
            uid="u", eval_name="ev", cell_id="c", start_unix_ns=T0, end_unix_ns=T0 + 4 * S,
            completion_tokens=100, attributes={"team": "a"},
        )
    )  # fmt: skip
    assert attrs[sc.CELL_DECODE_RATE] == 25.0
    assert attrs[sc.CELL_ELAPSED_S] == 4.0
    assert attrs[sc.SPAN_KIND_ATTR] == sc.SPAN_KIND_CELL
    assert attrs["team"] == "a"
    zero = cell_span_attributes(
        Cell(uid="u", eval_name="ev", cell_id="c", start_unix_ns=T0, end_unix_ns=T0, completion_tokens=100)
    )
    assert sc.CELL_DECODE_RATE not in zero  # no rate over no time
    assert cell_span_name("golden") == "cell golden"


@pytest.mark.parametrize(
    ("status", "exception_type", "want"),
    [
        (CellStatus.OK, None, None),
        (CellStatus.LENGTH_CAP, None, None),
        (CellStatus.ERROR, "ValueError", ("ValueError", StatusCode.ERROR, "ValueError")),
        (CellStatus.ERROR, None, (sc.ERROR_TYPE_OTHER, StatusCode.ERROR, None)),
        (
            CellStatus.DEADLINE,
            "TimeoutError",
            (sc.ERROR_TYPE_DEADLINE, StatusCode.ERROR, "cell hit its deadline"),
        ),
    ],
)
def test_a_cell_that_failed_or_hit_its_ceiling_names_its_error_type_and_never_the_message(
    status: CellStatus, exception_type: str | None, want: tuple[str, StatusCode, str | None] | None
) -> None:
    got = cell_error(status, exception_type)
    if want is None:
        assert got is None
        return
    assert got is not None
    error_type, span_status = got
    assert (error_type, span_status.status_code, span_status.description) == want


# -- requests ---------------------------------------------------------------------------------------------
REQUEST_ATTRIBUTES: dict[str, tuple[str, Any, Any]] = {
    # span attribute: (Request field, value on the span, value in the field)
    sc.CELL_UID: ("cell_uid", "00f067aa0ba902b7", "00f067aa0ba902b7"),
    sc.EVAL_NAME: ("eval_name", "golden", "golden"),
    sc.ENGINE: ("engine", "qwen", "qwen"),
    sc.GEN_AI_REQUEST_MODEL: ("request_model", "qwen3", "qwen3"),
    sc.GEN_AI_RESPONSE_MODEL: ("response_model", "qwen3-30b", "qwen3-30b"),
    sc.SERVER_ADDRESS: ("server_address", "127.0.0.1", "127.0.0.1"),
    sc.SERVER_PORT: ("server_port", 8000, 8000),
    sc.GEN_AI_REQUEST_STREAM: ("streaming", True, True),
    sc.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK: ("time_to_first_chunk_s", 0.25, 0.25),
    sc.GEN_AI_USAGE_INPUT_TOKENS: ("input_tokens", 120, 120),
    sc.GEN_AI_USAGE_OUTPUT_TOKENS: ("output_tokens", 64, 64),
    sc.GEN_AI_RESPONSE_FINISH_REASONS: ("finish_reasons", ("stop", "length"), ["stop", "length"]),
    sc.ERROR_TYPE: ("error_type", "APITimeoutError", "APITimeoutError"),
}
REQUEST_EMPTY = {
    "cell_uid": None, "eval_name": None, "engine": None, "request_model": None, "response_model": None,
    "server_address": None, "server_port": None, "streaming": False, "time_to_first_chunk_s": None,
    "input_tokens": None, "output_tokens": None, "finish_reasons": [], "error_type": None,
}  # fmt: skip


def test_every_request_attribute_lands_in_its_field(spans) -> None:
    attrs = {key: value for key, (_, value, _) in REQUEST_ATTRIBUTES.items()}
    attrs[sc.GEN_AI_OPERATION_NAME] = "chat"
    span = ended(spans, attrs, start=T0 + 5, end=T0 + 3 * S)
    request = request_from_span(span)
    want = {field: value for field, _, value in REQUEST_ATTRIBUTES.values()}
    assert request.model_dump() == {
        **want, **ids(span), "operation": "chat", "start_unix_ns": T0 + 5, "end_unix_ns": T0 + 3 * S,
    }  # fmt: skip


@pytest.mark.parametrize("missing", sorted(REQUEST_ATTRIBUTES))
def test_a_request_attribute_absent_leaves_its_field_empty_and_the_others_read(spans, missing: str) -> None:
    attrs = {key: value for key, (_, value, _) in REQUEST_ATTRIBUTES.items() if key != missing}
    request = request_from_span(ended(spans, attrs | {sc.GEN_AI_OPERATION_NAME: "chat"}))
    field = REQUEST_ATTRIBUTES[missing][0]
    got = request.model_dump()
    assert got[field] == REQUEST_EMPTY[field]
    for key, (other, _, value) in REQUEST_ATTRIBUTES.items():
        if key != missing:
            assert got[other] == value, other


def test_numbers_of_the_wrong_kind_are_left_out_not_misread(spans) -> None:
    """A boolean is an int to Python: a port or token count recorded as True is no figure."""
    request = request_from_span(
        ended(
            spans,
            {
                sc.GEN_AI_OPERATION_NAME: "chat",
                sc.SERVER_PORT: True,
                sc.GEN_AI_USAGE_OUTPUT_TOKENS: 12.0,
                sc.GEN_AI_USAGE_INPUT_TOKENS: "12",
                sc.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK: "0.5",
            },
        )
    )
    assert (request.server_port, request.output_tokens, request.input_tokens) == (None, 12, None)
    assert request.time_to_first_chunk_s is None
    assert request.operation == "chat"


def test_a_span_with_no_operation_is_a_request_of_no_operation(spans) -> None:
    assert request_from_span(ended(spans, {})).operation == ""


# -- load windows and engine server spans -----------------------------------------------------------
def test_a_load_window_span_reads_back_with_its_own_attributes_only(spans) -> None:
    span = ended(
        spans,
        {
            sc.SPAN_KIND_ATTR: sc.SPAN_KIND_LOAD_WINDOW,
            sc.LOAD_WINDOW_NAME: "probe 8 streams",
            sc.LOAD_WINDOW_KIND: "probe",
            sc.ENGINE: "qwen",
            sc.LOAD_WINDOW_STREAMS: 8,
            "team": "infra",
        },
        name="load window",
    )
    window = window_from_span(span)
    assert window.model_dump() == {
        "uid": ids(span)["uid"], "name": "probe 8 streams", "kind": "probe", "engine": "qwen",
        "start_unix_ns": T0, "end_unix_ns": T0 + 2 * S, "streams": 8, "attributes": {"team": "infra"},
    }  # fmt: skip
    bare = window_from_span(ended(spans, {}, name="load x"))
    assert (bare.name, bare.kind, bare.engine, bare.streams) == ("load x", "load", None, None)
    assert bare.attributes == {}


SERVER = trace.SpanContext(
    trace_id=0x4BF92F3577B34DA6A3CE929D0E0E4736,
    span_id=0x00F067AA0BA902B7,
    is_remote=True,
    trace_flags=trace.TraceFlags(trace.TraceFlags.SAMPLED),
)
"""The client request span an engine's server span answers (through ``traceparent``)."""


def test_an_engine_server_span_is_the_split_of_the_request_that_is_its_parent(spans) -> None:
    attrs = {
        sc.ENGINE: "qwen",
        sc.VLLM_LATENCY_E2E: 3.5,
        sc.VLLM_LATENCY_TIME_IN_QUEUE: 0.5,
        sc.VLLM_LATENCY_TIME_IN_MODEL_PREFILL: 0.25,
        sc.VLLM_LATENCY_TIME_IN_MODEL_DECODE: 2.75,
        sc.VLLM_LATENCY_TIME_TO_FIRST_TOKEN: 0.75,
        sc.VLLM_USAGE_PROMPT_TOKENS: 100,
        sc.VLLM_USAGE_COMPLETION_TOKENS: 200,
    }
    span = ended(spans, attrs, parent=SERVER, name="llm_request")
    assert is_server_timing(span)
    assert server_timing_from_span(span).model_dump() == {
        "request_uid": "00f067aa0ba902b7", "trace_id": "4bf92f3577b34da6a3ce929d0e0e4736",
        "span_uid": ids(span)["uid"], "engine": "qwen", "arrival_unix_ns": T0, "queue_s": 0.5,
        "prefill_s": 0.25, "decode_s": 2.75, "time_to_first_token_s": 0.75, "e2e_s": 3.5,
        "prompt_tokens": 100, "completion_tokens": 200,
    }  # fmt: skip
    bare = server_timing_from_span(ended(spans, {sc.VLLM_LATENCY_E2E: 1.0}, parent=SERVER))
    assert (bare.engine, bare.queue_s, bare.prefill_s, bare.prompt_tokens) == (None, None, None, None)
    # Without its end-to-end latency, or without a parent, a span is no server timing.
    assert not is_server_timing(ended(spans, {sc.VLLM_LATENCY_TIME_IN_QUEUE: 0.5}, parent=SERVER))
    assert not is_server_timing(ended(spans, {sc.VLLM_LATENCY_E2E: 1.0}))
