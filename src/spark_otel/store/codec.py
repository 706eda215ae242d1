"""The one encoding of cells, requests and load windows as spans: span attributes to records.

A live cell (`spark_otel.cell`), a backfilled one (`receivers.backfill`), the store's exporter
and the OTLP JSON reader all go through here, so a cell reads the same whichever path it took.
"""

from __future__ import annotations

from typing import Any

from opentelemetry.sdk.trace import ReadableSpan

from .. import _semconv as sc
from ..model import Cell, CellStatus, LoadWindow, Request, attributes_json

__all__ = ["cell_from_span", "request_from_span", "window_from_span"]


def _hex_span_id(span: ReadableSpan) -> str:
    return format(span.context.span_id, "016x") if span.context else ""


def _hex_trace_id(span: ReadableSpan) -> str | None:
    return format(span.context.trace_id, "032x") if span.context else None


def _int(value: Any) -> int | None:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


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
        deadline_hit=bool(a.get(sc.CELL_DEADLINE_HIT, False)),
        workers=_int(a.get(sc.CELL_WORKERS)),
        salvaged_findings=_int(a.get(sc.CELL_SALVAGED_FINDINGS)) or 0,
        degraded=bool(a.get(sc.CELL_DEGRADED, False)),
        source=str(a.get(sc.CELL_SOURCE, "live")),
        trace_id=_hex_trace_id(span),
        attributes=attributes_json({k: v for k, v in a.items() if k not in sc.CELL_ATTRIBUTE_KEYS}),
    )


def request_from_span(span: ReadableSpan) -> Request:
    a: dict[str, Any] = dict(span.attributes or {})
    reasons = a.get(sc.GEN_AI_RESPONSE_FINISH_REASONS) or ()
    ttfc = a.get(sc.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK)
    return Request(
        uid=_hex_span_id(span),
        trace_id=_hex_trace_id(span),
        cell_uid=str(a[sc.CELL_UID]) if sc.CELL_UID in a else None,
        eval_name=str(a[sc.EVAL_NAME]) if sc.EVAL_NAME in a else None,
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
