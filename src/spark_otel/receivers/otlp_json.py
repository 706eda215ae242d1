"""Read OTLP JSON trace exports (the collector's ``file`` exporter) back into cells, requests and
load windows, so a report can be built from a box whose telemetry went to a collector.

The file exporter writes one ``ExportTraceServiceRequest`` per line, in the OTLP JSON encoding:
``resourceSpans[].scopeSpans[].spans[]``, trace and span ids as hex strings (protobuf's own JSON
mapping writes them as base64; both are read), ``*TimeUnixNano`` as decimal strings and
attributes as ``AnyValue`` objects. Each span is rebuilt as an SDK `ReadableSpan` and converted
by the same functions the store's exporter uses, so a cell reads the same from either path.
Lines holding metrics or logs are skipped. A malformed line (the last line of a file the collector
is still writing is often cut short) is skipped with a warning naming the file and line, and kept
in `OtlpRecords.skipped`; a file with no readable trace line but a malformed one is an
`InputError` naming the file and line.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanContext, TraceFlags

from .. import _semconv as sc
from .._exceptions import InputError
from ..model import Cell, LoadWindow, Request
from ..store import Store
from ..store.codec import cell_from_span, request_from_span, window_from_span

__all__ = ["OtlpRecords", "decode_any_value", "read_otlp_json", "records_from_export", "spans_from_export"]

_logger = logging.getLogger(__name__)


@dataclass
class OtlpRecords:
    """What an export held, as spark-otel's data model; ``skipped`` names each malformed line
    left out (``file:line: why``)."""

    cells: list[Cell] = field(default_factory=list)
    requests: list[Request] = field(default_factory=list)
    windows: list[LoadWindow] = field(default_factory=list)
    spans: int = 0
    skipped: list[str] = field(default_factory=list)

    def extend(self, other: OtlpRecords) -> None:
        self.cells.extend(other.cells)
        self.requests.extend(other.requests)
        self.windows.extend(other.windows)
        self.spans += other.spans
        self.skipped.extend(other.skipped)

    def write_to(self, store: Store) -> None:
        store.write_cells(self.cells)
        store.write_requests(self.requests)
        store.write_windows(self.windows)


def decode_any_value(value: Any) -> Any:
    """An OTLP JSON ``AnyValue`` as a Python value (ints may arrive as strings, per proto3 JSON)."""
    if not isinstance(value, dict):
        raise ValueError(f"attribute value {value!r} is not an AnyValue object")
    if "stringValue" in value:
        return str(value["stringValue"])
    if "boolValue" in value:
        return bool(value["boolValue"])
    if "intValue" in value:
        return int(value["intValue"])
    if "doubleValue" in value:
        return float(value["doubleValue"])
    if "arrayValue" in value:
        return tuple(decode_any_value(v) for v in (value["arrayValue"] or {}).get("values", []))
    if "kvlistValue" in value:
        return json.dumps(_attributes((value["kvlistValue"] or {}).get("values", [])), sort_keys=True)
    if "bytesValue" in value:
        return str(value["bytesValue"])
    return None


def _attributes(items: Iterable[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items:
        decoded = decode_any_value(item.get("value", {}))
        if decoded is not None:
            out[str(item["key"])] = decoded
    return out


def _id(text: Any, nbytes: int, what: str) -> int:
    """A trace or span id: hex (OTLP JSON) or base64 (protobuf's generic JSON mapping)."""
    if not isinstance(text, str) or not text:
        raise ValueError(f"{what} is missing")
    if len(text) == 2 * nbytes:
        try:
            return int(text, 16)
        except ValueError:
            pass
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ValueError(f"{what} {text!r} is neither hex nor base64") from exc
    if len(raw) != nbytes:
        raise ValueError(f"{what} {text!r} is {len(raw)} bytes, not {nbytes}")
    return int.from_bytes(raw, "big")


def spans_from_export(export: dict[str, Any]) -> Iterator[ReadableSpan]:
    """The spans of one ``ExportTraceServiceRequest`` (pure: no I/O)."""
    for resource_spans in export.get("resourceSpans") or []:
        for scope_spans in resource_spans.get("scopeSpans") or []:
            for span in scope_spans.get("spans") or []:
                start = int(span.get("startTimeUnixNano") or 0)
                yield ReadableSpan(
                    name=str(span.get("name", "")),
                    context=SpanContext(
                        trace_id=_id(span.get("traceId"), 16, "traceId"),
                        span_id=_id(span.get("spanId"), 8, "spanId"),
                        is_remote=False,
                        trace_flags=TraceFlags(TraceFlags.SAMPLED),
                    ),
                    attributes=_attributes(span.get("attributes") or []),
                    start_time=start,
                    end_time=int(span.get("endTimeUnixNano") or start),
                )


def records_from_export(export: dict[str, Any]) -> OtlpRecords:
    """Cells, requests and load windows in one export request (pure); other spans are skipped."""
    out = OtlpRecords()
    for span in spans_from_export(export):
        out.spans += 1
        attrs = span.attributes or {}
        kind = attrs.get(sc.SPAN_KIND_ATTR)
        if kind == sc.SPAN_KIND_CELL:
            out.cells.append(cell_from_span(span))
        elif kind == sc.SPAN_KIND_LOAD_WINDOW:
            out.windows.append(window_from_span(span))
        elif sc.GEN_AI_OPERATION_NAME in attrs:
            out.requests.append(request_from_span(span))
    return out


def read_otlp_json(paths: Iterable[str | os.PathLike[str]]) -> OtlpRecords:
    """Read OTLP JSON trace files (one export request per line, or one per file).

    A malformed line is skipped with a warning when the file has readable spans elsewhere, and
    raises `InputError` (naming file and line) when it has none.
    """
    out = OtlpRecords()
    for path in map(Path, paths):
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise InputError(f"{path}: cannot read the OTLP JSON export: {exc}") from exc
        stripped = text.strip()
        lines = [stripped] if stripped.startswith("{") and "\n{" not in stripped else text.splitlines()
        found = OtlpRecords()
        bad: list[str] = []
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                export = json.loads(line)
                if not isinstance(export, dict):
                    raise ValueError("a line is not a JSON object")
                if "resourceSpans" not in export:
                    continue  # metrics or logs from the same file exporter
                found.extend(records_from_export(export))
            except (ValueError, KeyError, TypeError) as exc:
                bad.append(f"{path}:{number}: not an OTLP JSON trace export: {exc}")
        if bad and not found.spans:
            raise InputError(bad[0])
        for message in bad:  # e.g. the last line of a file the collector is still writing
            _logger.warning("%s (line skipped)", message)
        out.extend(found)
        out.skipped.extend(bad)
    return out
