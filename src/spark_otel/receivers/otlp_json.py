"""Read OTLP JSON trace exports (the collector's ``file`` exporter) back into cells, requests and
load windows, so a report can be built from a box whose telemetry went to a collector.

The file exporter writes one ``ExportTraceServiceRequest`` per line, in the OTLP JSON encoding:
``resourceSpans[].scopeSpans[].spans[]``, trace and span ids as hex strings (protobuf's own JSON
mapping writes them as base64; both are read), ``*TimeUnixNano`` as decimal strings and
attributes as ``AnyValue`` objects. Each span is rebuilt as an SDK `ReadableSpan` and converted
by the same functions the store's exporter uses, so a cell reads the same from either path.
Lines holding metrics or logs are skipped. A malformed line (the last line of a file the collector
is still writing is often cut short, even inside a multi-byte character) is skipped with a warning
naming the file and line, and kept in `OtlpRecords.skipped`; a file with no readable trace line
but a malformed one is an `InputError` naming the file and line. A line is malformed when it is
not UTF-8 or JSON, when its structure is not an export request's, or when a span in it does not
fit: ids that are not 16 and 8 bytes (or all zeros), times that are not whole nanoseconds in
2000-2100 (or end before they start), counts that are not whole numbers from 0 to 2**53.
"""

from __future__ import annotations

import base64
import binascii
import codecs
import json
import logging
import math
import os
import string
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanContext, TraceFlags

from .. import _semconv as sc
from .._exceptions import InputError
from .._files import MIB, read_input
from .._validate import check_count, check_time_ns, finite_number
from ..model import Cell, LoadWindow, Request, ServerTiming
from ..records.span_codec import (
    cell_from_span,
    is_server_timing,
    request_from_span,
    server_timing_from_span,
    window_from_span,
)
from ..store import Store

__all__ = [
    "OTLP_JSON_MAX_BYTES",
    "OtlpRecords",
    "decode_any_value",
    "read_otlp_json",
    "records_from_export",
    "spans_from_export",
]

_logger = logging.getLogger(__name__)

OTLP_JSON_MAX_BYTES = 512 * MIB
"""The largest OTLP JSON file read (each is read whole): the collector's file exporter rotates
long before (its ``rotation.max_megabytes`` is 100 by default); split a bigger one."""


@dataclass
class OtlpRecords:
    """What an export held, as spark-otel's data model; ``skipped`` names each malformed line
    left out (``file:line: why``)."""

    cells: list[Cell] = field(default_factory=list)
    requests: list[Request] = field(default_factory=list)
    windows: list[LoadWindow] = field(default_factory=list)
    server_timings: list[ServerTiming] = field(default_factory=list)
    """The engine's split of requests, from its server spans (vLLM's ``llm_request``)."""
    spans: int = 0
    skipped: list[str] = field(default_factory=list)

    def extend(self, other: OtlpRecords) -> None:
        self.cells.extend(other.cells)
        self.requests.extend(other.requests)
        self.windows.extend(other.windows)
        self.server_timings.extend(other.server_timings)
        self.spans += other.spans
        self.skipped.extend(other.skipped)

    def write_to(self, store: Store) -> None:
        store.write_cells(self.cells)
        store.write_requests(self.requests)
        store.write_windows(self.windows)
        store.write_server_timings(self.server_timings)


def _short(value: Any, most: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= most else text[: most - 3] + "..."


def _items(value: Any, what: str) -> list[Any]:
    """A repeated field: a JSON array (absent or null is empty), else ValueError naming it."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise ValueError(f"{what} is {_short(value)}, not a list")
    return value


def _fields(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ValueError(f"{what} is {_short(value)}, not an object")
    return value


def decode_any_value(value: Any) -> Any:
    """An OTLP JSON ``AnyValue`` as a Python value (ints may arrive as strings, per proto3 JSON).

    Raises ValueError for a value that is not one (any other shape, or a number past a float's).
    """
    value = _fields(value, "attribute value")
    for key, decode in _ANY_VALUE_DECODERS:
        if key in value:
            try:
                return decode(value[key])
            except OverflowError:
                raise ValueError(f"attribute value {_short(value)} is too large for a number") from None
    return None


def _int_value(number: Any) -> int:
    """An ``intValue``: a JSON number or, as proto3 JSON writes 64-bit ints, a string; never a bool."""
    if isinstance(number, bool) or not isinstance(number, int | str):
        raise ValueError(f"intValue {_short(number)} is not a whole number")
    return int(number)


def _double_value(double: Any) -> float:
    """A ``doubleValue``: a JSON number or a string (``"NaN"``, ``"Infinity"``); never a bool."""
    if isinstance(double, bool) or not isinstance(double, int | float | str):
        raise ValueError(f"doubleValue {_short(double)} is not a number")
    return float(double)


def _array_value(array: Any) -> tuple[Any, ...]:
    """An ``arrayValue``'s values, each decoded; a tuple, as the SDK keeps a sequence attribute."""
    fields = _fields(array or {}, "arrayValue")
    return tuple(decode_any_value(v) for v in _items(fields.get("values"), "arrayValue.values"))


def _kvlist_value(kvlist: Any) -> str:
    """A ``kvlistValue`` as sorted JSON text: an attribute value holds no mapping."""
    fields = _fields(kvlist or {}, "kvlistValue")
    return json.dumps(_attributes(_items(fields.get("values"), "kvlistValue.values")), sort_keys=True)


_ANY_VALUE_DECODERS: tuple[tuple[str, Callable[[Any], Any]], ...] = (
    ("stringValue", str),
    ("boolValue", bool),
    ("intValue", _int_value),
    ("doubleValue", _double_value),
    ("arrayValue", _array_value),
    ("kvlistValue", _kvlist_value),
    ("bytesValue", str),
)
"""Each ``AnyValue`` field and its decoder, in the order they are looked for: the first present wins."""


def _attributes(items: Iterable[Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for raw in items:
        item = _fields(raw, "an attribute")
        key = item.get("key")
        if not isinstance(key, str):
            raise ValueError(f"attribute key {_short(key)} is not a string")
        decoded = decode_any_value(item.get("value", {}))
        if decoded is not None:
            out[key] = decoded
    return out


def _id(text: Any, nbytes: int, what: str) -> int:
    """A trace or span id: hex (OTLP JSON) or base64 (protobuf's generic JSON mapping); never 0."""
    if not isinstance(text, str) or not text:
        raise ValueError(f"{what} is missing")
    if len(text) == 2 * nbytes and all(c in string.hexdigits for c in text):
        number = int(text, 16)
    else:
        try:
            raw = base64.b64decode(text, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise ValueError(f"{what} {_short(text)} is neither hex nor base64") from exc
        if len(raw) != nbytes:
            raise ValueError(f"{what} {_short(text)} is {len(raw)} bytes, not {nbytes}")
        number = int.from_bytes(raw, "big")
    if not number:
        raise ValueError(f"{what} is all zeros (an invalid id)")
    return number


def _time_ns(value: Any, what: str) -> int:
    """A ``*TimeUnixNano``: a decimal string or a number (proto3 JSON writes uint64 as either),
    a whole number of nanoseconds in 2000-2100."""
    if isinstance(value, str) and value.isascii() and value.isdigit():
        ns = int(value)
    elif isinstance(value, int) and not isinstance(value, bool):
        ns = value
    elif isinstance(value, float) and math.isfinite(value) and value == int(value):
        ns = int(value)
    else:
        raise ValueError(f"{what} {_short(value)} is not a whole number of nanoseconds")
    return check_time_ns(ns, what)


def _span(span: dict[str, Any], resource: Resource | None = None) -> ReadableSpan:
    trace_id = _id(span.get("traceId"), 16, "traceId")
    span_id = _id(span.get("spanId"), 8, "spanId")
    start = _time_ns(span.get("startTimeUnixNano"), "startTimeUnixNano")
    end_raw = span.get("endTimeUnixNano")
    end = start if end_raw in (None, "", "0", 0) else _time_ns(end_raw, "endTimeUnixNano")
    if end < start:
        raise ValueError(f"endTimeUnixNano {end} is before startTimeUnixNano {start}")
    parent_raw = span.get("parentSpanId")
    parent = None
    if parent_raw not in (None, ""):
        parent = SpanContext(
            trace_id=trace_id,
            span_id=_id(parent_raw, 8, "parentSpanId"),
            is_remote=False,
            trace_flags=TraceFlags(TraceFlags.SAMPLED),
        )
    return ReadableSpan(
        name=str(span.get("name", "")),
        context=SpanContext(
            trace_id=trace_id, span_id=span_id, is_remote=False, trace_flags=TraceFlags(TraceFlags.SAMPLED)
        ),
        parent=parent,
        attributes=_attributes(_items(span.get("attributes"), "attributes")),
        start_time=start,
        end_time=end,
        resource=resource,
    )


def spans_from_export(export: dict[str, Any]) -> Iterator[ReadableSpan]:
    """The spans of one ``ExportTraceServiceRequest`` (pure: no I/O).

    Raises ValueError naming the part of the request that is not what OTLP JSON writes.
    """
    for i, raw_resource in enumerate(_items(export.get("resourceSpans"), "resourceSpans")):
        where = f"resourceSpans[{i}]"
        resource_spans = _fields(raw_resource, where)
        raw = _fields(resource_spans.get("resource") or {}, f"{where}.resource")
        resource = Resource(_attributes(_items(raw.get("attributes"), f"{where}.resource.attributes")))
        for j, raw_scope in enumerate(_items(resource_spans.get("scopeSpans"), f"{where}.scopeSpans")):
            scope_where = f"{where}.scopeSpans[{j}]"
            scope_spans = _fields(raw_scope, scope_where)
            for k, raw_span in enumerate(_items(scope_spans.get("spans"), f"{scope_where}.spans")):
                span_where = f"{scope_where}.spans[{k}]"
                span = _fields(raw_span, span_where)
                try:
                    yield _span(span, resource)
                except ValueError as exc:
                    raise ValueError(f"{span_where}: {exc}") from exc


def _check_record(record: Cell | Request | LoadWindow | ServerTiming) -> None:
    """What a report needs of a record: a cell's eval and id; counts that are whole numbers from
    0 to 2**53; finite seconds; a cell's workers and ceiling in the ranges `cell()` keeps."""
    if isinstance(record, Cell):
        for name, key in (("eval_name", sc.EVAL_NAME), ("cell_id", sc.CELL_ID)):
            if not getattr(record, name).strip():
                raise ValueError(f"a cell span without {key}")
    counts = {
        Cell: ("prompt_tokens", "completion_tokens", "workers", "salvaged_findings"),
        Request: ("input_tokens", "output_tokens", "server_port"),
        LoadWindow: ("streams",),
        ServerTiming: ("prompt_tokens", "completion_tokens"),
    }[type(record)]
    for name in counts:
        value = getattr(record, name)
        if value is not None:
            check_count(value, name)
    for name in (
        "deadline_s", "time_to_first_chunk_s", "first_token_s", "decode_s", "unsplit_s", "other_s", "queue_s",
        "prefill_s", "time_to_first_token_s", "e2e_s",
    ):  # fmt: skip
        value = getattr(record, name, None)
        if value is not None and finite_number(value, name) < 0:
            raise ValueError(f"{name} is {value!r}, below 0")
    if isinstance(
        record, Cell
    ):  # the ranges `cell()` keeps: a cell runs on 1 worker or more, under a ceiling > 0
        if record.workers is not None and record.workers < 1:
            raise ValueError(f"workers is {record.workers!r}; a cell runs on 1 worker or more")
        if record.deadline_s is not None and record.deadline_s <= 0:
            raise ValueError(f"deadline_s is {record.deadline_s!r}; a ceiling is above 0 seconds")


def records_from_export(export: dict[str, Any]) -> OtlpRecords:
    """Cells, requests, load windows and engine server timings in one export request (pure);
    other spans are skipped."""
    out = OtlpRecords()
    for span in spans_from_export(export):
        out.spans += 1
        attrs = span.attributes or {}
        kind = attrs.get(sc.SPAN_KIND_ATTR)
        what = f"span {span.name[:60]!r}"
        try:
            if kind == sc.SPAN_KIND_CELL:
                out.cells.append(cell_from_span(span))
                _check_record(out.cells[-1])
            elif kind == sc.SPAN_KIND_LOAD_WINDOW:
                out.windows.append(window_from_span(span))
                _check_record(out.windows[-1])
            elif sc.GEN_AI_OPERATION_NAME in attrs:
                out.requests.append(request_from_span(span))
                _check_record(out.requests[-1])
            elif is_server_timing(span):
                out.server_timings.append(server_timing_from_span(span))
                _check_record(out.server_timings[-1])
        except (ValueError, TypeError, ArithmeticError) as exc:  # an attribute of the wrong type or size
            raise ValueError(f"{what}: {exc}") from exc
    return out


def read_otlp_json(paths: Iterable[str | os.PathLike[str]]) -> OtlpRecords:
    """Read OTLP JSON trace files (one export request per line, or one per file).

    Each path is a regular file of at most `OTLP_JSON_MAX_BYTES` (`InputError` otherwise).
    A malformed line is skipped with a warning when the file has readable spans elsewhere, and
    raises `InputError` (naming file and line) when it has none.
    """
    out = OtlpRecords()
    for path in map(Path, paths):
        data = read_input(path, what="OTLP JSON export", max_bytes=OTLP_JSON_MAX_BYTES)
        found = OtlpRecords()
        bad: list[str] = []
        for number, line in _lines(data):
            if isinstance(line, UnicodeDecodeError):
                where = f"byte {line.object[line.start]:#04x} at column {line.start + 1}"
                bad.append(f"{path}:{number}: not an OTLP JSON trace export: not UTF-8 text ({where})")
                continue
            if not line.strip():
                continue
            try:
                export = json.loads(line)
                if not isinstance(export, dict):
                    raise ValueError("a line is not a JSON object")
                if "resourceSpans" not in export:
                    continue  # metrics or logs from the same file exporter
                found.extend(records_from_export(export))
            except RecursionError:
                bad.append(f"{path}:{number}: not an OTLP JSON trace export: nested too deeply to read")
            except (ValueError, KeyError, TypeError, ArithmeticError) as exc:
                bad.append(f"{path}:{number}: not an OTLP JSON trace export: {_first_line(exc)}")
        if bad and not found.spans:
            raise InputError(bad[0])
        for message in bad:  # e.g. the last line of a file the collector is still writing
            _logger.warning("%s (line skipped)", message)
        out.extend(found)
        out.skipped.extend(bad)
    return out


def _lines(data: bytes) -> Iterator[tuple[int, str | UnicodeDecodeError]]:
    """(line number, text) per line of a file, each line decoded on its own, so a multi-byte
    character cut short on the last line spoils that line only; one JSON document spread over
    several lines (an export pretty-printed by hand) is one line, number 1."""
    data = data.removeprefix(codecs.BOM_UTF8)
    stripped = data.strip()
    raws = [stripped] if stripped.startswith(b"{") and b"\n{" not in stripped else data.splitlines()
    for number, raw in enumerate(raws, start=1):
        try:
            yield number, raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            yield number, exc


def _first_line(exc: BaseException, most: int = 300) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text if len(text) <= most else text[: most - 3] + "..."
