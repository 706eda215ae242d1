"""The one encoding of cells, requests and load windows as spans, both ways.

A live cell (`spark_otel.cell`) and a backfilled one (`receivers.backfill`) are written as spans
by the same functions (`cell_start_attributes`, `cell_end_attributes`, `cell_span_attributes`,
`cell_error`); the store's exporter and the OTLP JSON reader read every span back through
`cell_from_span`, `request_from_span` and `window_from_span`. A cell field is added here, once.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from opentelemetry.trace import Status, StatusCode

from .. import _semconv as sc
from ..model import AttributeValue, Cell, CellStatus, LoadWindow, Request, ServerTiming, attributes_json
from ..time_budget import SCORING

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan

__all__ = [
    "cell_budget",
    "cell_end_attributes",
    "cell_error",
    "cell_from_span",
    "cell_span_attributes",
    "cell_span_name",
    "cell_start_attributes",
    "is_server_timing",
    "request_from_span",
    "runner_eval",
    "server_timing_from_span",
    "window_from_span",
]


def cell_span_name(eval_name: str) -> str:
    """A cell span's name: the eval's, never the cell's own id (span names stay low-cardinality)."""
    return f"cell {eval_name}"


def cell_start_attributes(
    eval_name: str,
    cell_id: str,
    *,
    engine: str | None = None,
    deadline_s: float | None = None,
    workers: int | None = None,
    time_scale: float = 1.0,
) -> dict[str, AttributeValue]:
    """What a cell span carries from its start: who it is and what it ran under.

    ``time_scale`` other than 1 marks a cell recorded under a model clock, so
    readers label its times as model time.
    """
    attrs: dict[str, AttributeValue] = {
        sc.SPAN_KIND_ATTR: sc.SPAN_KIND_CELL,
        sc.EVAL_NAME: eval_name,
        sc.CELL_ID: cell_id,
    }
    if engine is not None:
        attrs[sc.ENGINE] = engine
    if deadline_s is not None:
        attrs[sc.CELL_DEADLINE_S] = float(deadline_s)
    if workers is not None:
        attrs[sc.CELL_WORKERS] = int(workers)
    if time_scale != 1.0:
        attrs[sc.TIME_SCALE] = float(time_scale)
    return attrs


def cell_end_attributes(
    *,
    status: CellStatus,
    elapsed_s: float,
    salvaged_findings: int = 0,
    prompt_tokens: int | None = None,
    completion_tokens: int | None = None,
    budget: Mapping[str, float | None] | None = None,
) -> dict[str, AttributeValue]:
    """What a cell span carries once the cell ended; the decode rate is derived, as `Cell`'s is.
    ``budget``: seconds per phase of `time_budget.IN_CELL_PHASES`, and `time_budget.SCORING` where
    the cell marked it (a phase absent or None is not known, and not written)."""
    attrs: dict[str, AttributeValue] = {
        sc.CELL_STATUS: status.value,
        sc.CELL_ELAPSED_S: elapsed_s,
        # Both derived from the status, as `Cell`'s are; on the span for queries that filter on them.
        sc.CELL_DEADLINE_HIT: status is CellStatus.DEADLINE,
        sc.CELL_SALVAGED_FINDINGS: salvaged_findings,
        sc.CELL_DEGRADED: status is CellStatus.DEADLINE and salvaged_findings > 0,
    }
    if prompt_tokens is not None:
        attrs[sc.CELL_PROMPT_TOKENS] = prompt_tokens
    if completion_tokens is not None:
        attrs[sc.CELL_COMPLETION_TOKENS] = completion_tokens
        if elapsed_s > 0 and completion_tokens > 0:
            attrs[sc.CELL_DECODE_RATE] = completion_tokens / elapsed_s
    for phase, seconds in (budget or {}).items():
        if seconds is not None:
            attrs[_BUDGET_ATTRIBUTES.get(phase) or _SCORING_ATTRIBUTE[phase]] = float(seconds)
    return attrs


_BUDGET_ATTRIBUTES = {
    "first_token": sc.CELL_BUDGET_FIRST_TOKEN_S,
    "decode": sc.CELL_BUDGET_DECODE_S,
    "unsplit": sc.CELL_BUDGET_UNSPLIT_S,
    "other": sc.CELL_BUDGET_OTHER_S,
}
"""Each phase inside the cell's elapsed time: its span attribute (and, with ``_s``, its `Cell` field)."""
_SCORING_ATTRIBUTE = {SCORING: sc.CELL_BUDGET_SCORING_S}
"""The phase only a cell that marked its grading has: an attribute the `Cell` keeps among its others."""


def cell_budget(cell: Cell) -> dict[str, float | None]:
    """The cell's recorded split of elapsed, by phase."""
    return {phase: getattr(cell, f"{phase}_s") for phase in _BUDGET_ATTRIBUTES}


def cell_error(status: CellStatus, exception_type: str | None = None) -> tuple[str, Status] | None:
    """``error.type`` and span status of a cell that failed or hit its ceiling; None otherwise.

    The status description names the exception's type only: its message may quote the prompt."""
    if status is CellStatus.ERROR:
        return exception_type or sc.ERROR_TYPE_OTHER, Status(StatusCode.ERROR, exception_type)
    if status is CellStatus.DEADLINE:
        return sc.ERROR_TYPE_DEADLINE, Status(StatusCode.ERROR, "cell hit its deadline")
    return None


def cell_span_attributes(cell: Cell) -> dict[str, AttributeValue]:
    """Every attribute of a recorded cell's span, so collectors and the store see one cell alike."""
    attrs = cell_start_attributes(
        cell.eval_name, cell.cell_id, engine=cell.engine, deadline_s=cell.deadline_s, workers=cell.workers
    )
    attrs.update(
        cell_end_attributes(
            status=cell.status,
            elapsed_s=cell.elapsed_s,
            salvaged_findings=cell.salvaged_findings,
            prompt_tokens=cell.prompt_tokens,
            completion_tokens=cell.completion_tokens,
            budget=cell_budget(cell),
        )
    )
    attrs[sc.CELL_SOURCE] = cell.source
    attrs.update(cell.attributes)
    return attrs


def _hex_span_id(span: ReadableSpan) -> str:
    return format(span.context.span_id, "016x") if span.context else ""


def _hex_trace_id(span: ReadableSpan) -> str | None:
    return format(span.context.trace_id, "032x") if span.context else None


def _int(value: Any) -> int | None:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _seconds(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def cell_from_span(span: ReadableSpan) -> Cell:
    a: dict[str, Any] = dict(span.attributes or {})
    status = a.get(sc.CELL_STATUS, CellStatus.OK.value)
    return Cell(
        uid=_hex_span_id(span),
        eval_name=str(a.get(sc.EVAL_NAME, "")),
        cell_id=str(a.get(sc.CELL_ID, "")),
        engine=str(a[sc.ENGINE]) if sc.ENGINE in a else None,
        start_unix_ns=span.start_time or 0,
        end_unix_ns=span.end_time or span.start_time or 0,
        prompt_tokens=_int(a.get(sc.CELL_PROMPT_TOKENS)),
        completion_tokens=_int(a.get(sc.CELL_COMPLETION_TOKENS)),
        status=CellStatus(status),
        deadline_s=float(a[sc.CELL_DEADLINE_S]) if sc.CELL_DEADLINE_S in a else None,
        workers=_int(a.get(sc.CELL_WORKERS)),
        salvaged_findings=_int(a.get(sc.CELL_SALVAGED_FINDINGS)) or 0,
        source=str(a.get(sc.CELL_SOURCE, "live")),
        trace_id=_hex_trace_id(span),
        **{f"{phase}_s": _seconds(a.get(key)) for phase, key in _BUDGET_ATTRIBUTES.items()},
        attributes=attributes_json({k: v for k, v in a.items() if k not in sc.CELL_ATTRIBUTE_KEYS}),
    )


def runner_eval(span: ReadableSpan) -> str | None:
    """The eval a request made outside any `cell()` belongs to, as its runner named it on the
    resource: ``spark_otel.eval`` (``SPARK_OTEL_EVAL``), else a service name the user set
    (``OTEL_SERVICE_NAME``; spark-otel's default names no eval); None where neither did."""
    resource = span.resource.attributes if span.resource is not None else {}
    for key in (sc.EVAL_NAME, sc.SERVICE_NAME):
        value = str(resource.get(key) or "").strip()
        if value and value != sc.DEFAULT_SERVICE_NAME and not value.startswith("unknown_service"):
            return value
    return None


def request_from_span(span: ReadableSpan) -> Request:
    a: dict[str, Any] = dict(span.attributes or {})
    reasons = a.get(sc.GEN_AI_RESPONSE_FINISH_REASONS) or ()
    ttfc = a.get(sc.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK)
    return Request(
        uid=_hex_span_id(span),
        trace_id=_hex_trace_id(span),
        cell_uid=str(a[sc.CELL_UID]) if sc.CELL_UID in a else None,
        eval_name=str(a[sc.EVAL_NAME]) if sc.EVAL_NAME in a else runner_eval(span),
        engine=str(a[sc.ENGINE]) if sc.ENGINE in a else None,
        operation=str(a.get(sc.GEN_AI_OPERATION_NAME, "")),
        request_model=str(a[sc.GEN_AI_REQUEST_MODEL]) if sc.GEN_AI_REQUEST_MODEL in a else None,
        response_model=str(a[sc.GEN_AI_RESPONSE_MODEL]) if sc.GEN_AI_RESPONSE_MODEL in a else None,
        server_address=str(a[sc.SERVER_ADDRESS]) if sc.SERVER_ADDRESS in a else None,
        server_port=_int(a.get(sc.SERVER_PORT)),
        start_unix_ns=span.start_time or 0,
        end_unix_ns=span.end_time or span.start_time or 0,
        streaming=bool(a.get(sc.GEN_AI_REQUEST_STREAM, False)),
        time_to_first_chunk_s=float(ttfc) if isinstance(ttfc, int | float) else None,
        input_tokens=_int(a.get(sc.GEN_AI_USAGE_INPUT_TOKENS)),
        output_tokens=_int(a.get(sc.GEN_AI_USAGE_OUTPUT_TOKENS)),
        finish_reasons=[str(r) for r in reasons],
        error_type=str(a[sc.ERROR_TYPE]) if sc.ERROR_TYPE in a else None,
    )


def is_server_timing(span: ReadableSpan) -> bool:
    """vLLM's ``llm_request`` server span (or the simulated engine's) answering a client span."""
    attrs = span.attributes or {}
    parent = span.parent
    return sc.VLLM_LATENCY_E2E in attrs and parent is not None and parent.is_valid


def server_timing_from_span(span: ReadableSpan) -> ServerTiming:
    """The engine's split of one request, keyed by the client request span it answered."""
    a: dict[str, Any] = dict(span.attributes or {})
    assert span.parent is not None
    return ServerTiming(
        request_uid=format(span.parent.span_id, "016x"),
        trace_id=_hex_trace_id(span) or "",
        span_uid=_hex_span_id(span),
        engine=str(a[sc.ENGINE]) if sc.ENGINE in a else None,
        arrival_unix_ns=span.start_time or 0,
        queue_s=_seconds(a.get(sc.VLLM_LATENCY_TIME_IN_QUEUE)),
        prefill_s=_seconds(a.get(sc.VLLM_LATENCY_TIME_IN_MODEL_PREFILL)),
        decode_s=_seconds(a.get(sc.VLLM_LATENCY_TIME_IN_MODEL_DECODE)),
        time_to_first_token_s=_seconds(a.get(sc.VLLM_LATENCY_TIME_TO_FIRST_TOKEN)),
        e2e_s=_seconds(a.get(sc.VLLM_LATENCY_E2E)),
        prompt_tokens=_int(a.get(sc.VLLM_USAGE_PROMPT_TOKENS)),
        completion_tokens=_int(a.get(sc.VLLM_USAGE_COMPLETION_TOKENS)),
    )


def window_from_span(span: ReadableSpan) -> LoadWindow:
    a: dict[str, Any] = dict(span.attributes or {})
    return LoadWindow(
        uid=_hex_span_id(span),
        name=str(a.get(sc.LOAD_WINDOW_NAME, span.name)),
        kind=str(a.get(sc.LOAD_WINDOW_KIND, "load")),
        engine=str(a[sc.ENGINE]) if sc.ENGINE in a else None,
        start_unix_ns=span.start_time or 0,
        end_unix_ns=span.end_time or span.start_time or 0,
        streams=_int(a.get(sc.LOAD_WINDOW_STREAMS)),
        attributes=attributes_json({k: v for k, v in a.items() if not k.startswith("spark_otel.")}),
    )
