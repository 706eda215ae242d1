"""The one rule that turns requests no cell holds into cells of their own: which requests, the
eval and engine they count in, and the status each ending maps to; and the eval a runner names
on its resource, read where a request span becomes a record (live and from OTLP JSON)."""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanContext, TraceFlags
from tests.support.otlp_json_export import REQUEST, export, span

from spark_otel import _semconv as sc
from spark_otel.analysis.request_cells import (
    REQUEST_SOURCE,
    count_requests_as_cells,
    request_as_cell,
    request_engine,
    request_status,
    requests_as_cells,
    with_requests_as_cells,
)
from spark_otel.model import Cell, CellStatus, LoadWindow, Request
from spark_otel.receivers.otlp_json import records_from_export
from spark_otel.records.span_codec import request_from_span, runner_eval

S = 1_000_000_000


def _request(uid: str, start_s: float = 0, **fields: Any) -> Request:
    values: dict[str, Any] = {
        "uid": uid,
        "operation": "text_completion",
        "start_unix_ns": int(start_s * S),
        "end_unix_ns": int((start_s + 2) * S),
        "server_address": "127.0.0.1",
        "server_port": 8000,
        "input_tokens": 10,
        "output_tokens": 40,
        "finish_reasons": ["stop"],
    }
    return Request(**(values | fields))


def _cell(uid: str) -> Cell:
    return Cell(uid=uid, eval_name="golden", cell_id="c", engine="qwen", start_unix_ns=0, end_unix_ns=5 * S)


@pytest.mark.parametrize(
    ("error_type", "reasons", "status"),
    [
        (None, ["stop"], CellStatus.OK),
        (None, [], CellStatus.OK),
        (None, ["length"], CellStatus.LENGTH_CAP),
        (sc.ERROR_TYPE_DEADLINE, ["length"], CellStatus.DEADLINE),
        ("APITimeoutError", ["error"], CellStatus.DEADLINE),  # openai's client timeout
        ("ReadTimeout", ["error"], CellStatus.DEADLINE),  # httpx's and requests'
        ("ServerTimeoutError", ["error"], CellStatus.DEADLINE),  # aiohttp's
        ("500", ["error"], CellStatus.ERROR),
        (sc.ERROR_TYPE_CANCELLED, ["error"], CellStatus.ERROR),
        (sc.ERROR_TYPE_STREAM_ABANDONED, ["stop"], CellStatus.ERROR),
    ],
)
def test_a_requests_ending_maps_to_a_cell_status(
    error_type: str | None, reasons: list[str], status: CellStatus
) -> None:
    assert request_status(_request("r", error_type=error_type, finish_reasons=reasons)) is status


def test_a_request_becomes_a_cell_with_its_own_times_tokens_and_ids() -> None:
    r = _request("r1", 3, eval_name="lm-eval", trace_id="t" * 32, response_model="qwen3")
    assert request_as_cell(r, {"qwen": "http://127.0.0.1:8000"}) == Cell(
        uid="r1",
        eval_name="lm-eval",
        cell_id="r1",
        engine="qwen",
        start_unix_ns=3 * S,
        end_unix_ns=5 * S,
        prompt_tokens=10,
        completion_tokens=40,
        status=CellStatus.OK,
        source=REQUEST_SOURCE,
        trace_id="t" * 32,
        attributes={sc.GEN_AI_OPERATION_NAME: "text_completion", sc.GEN_AI_RESPONSE_MODEL: "qwen3"},
    )


def test_the_engine_is_the_requests_own_else_named_at_its_address_else_the_address() -> None:
    named = {"qwen": "http://127.0.0.1:8000", "nemo": "http://127.0.0.1:8001"}
    assert request_engine(_request("a", engine="mine"), named) == "mine"
    assert request_engine(_request("b"), named) == "qwen"
    assert request_engine(_request("c", server_port=9000), named) == "127.0.0.1:9000"
    assert request_engine(_request("d", server_port=None), named) == "127.0.0.1"
    assert request_engine(_request("e", server_address=None), named) is None


def test_an_unnamed_requests_eval_is_its_engines_requests() -> None:
    (cell,) = requests_as_cells([_request("a", server_port=9000)])
    assert cell.eval_name == "requests to 127.0.0.1:9000"
    (cell,) = requests_as_cells([_request("b", server_address=None)])
    assert (cell.eval_name, cell.engine) == ("requests to an unknown engine", None)


def test_only_requests_no_given_cell_holds_stand_in_and_in_time_order() -> None:
    held = _request("in", 1, cell_uid="c1", eval_name="golden")
    orphaned = _request("lost", 2, cell_uid="gone", eval_name="golden")  # its cell was never stored
    bare = _request("bare", 0)
    cells = [_cell("c1")]
    stand_ins = requests_as_cells([held, orphaned, bare], cells)
    assert [c.uid for c in stand_ins] == ["bare", "lost"]
    assert stand_ins[1].eval_name == "golden"
    merged = with_requests_as_cells(cells, [held, orphaned, bare])
    assert [c.uid for c in merged] == ["c1", "bare", "lost"]  # by start; c1 and bare both at 0
    assert count_requests_as_cells(merged) == 2
    assert with_requests_as_cells(cells, [held]) == cells


def _request_span(resource: dict[str, str], **attrs: Any) -> ReadableSpan:
    context = SpanContext(trace_id=1, span_id=2, is_remote=False, trace_flags=TraceFlags(1))
    return ReadableSpan(
        name="text_completion m",
        context=context,
        attributes={sc.GEN_AI_OPERATION_NAME: "text_completion", **attrs},
        start_time=0,
        end_time=S,
        resource=Resource(resource),
    )


@pytest.mark.parametrize(
    ("resource", "attrs", "expected"),
    [
        ({sc.EVAL_NAME: "mmlu", sc.SERVICE_NAME: "lm-eval"}, {}, "mmlu"),
        ({sc.SERVICE_NAME: "lm-eval"}, {}, "lm-eval"),
        ({sc.SERVICE_NAME: sc.DEFAULT_SERVICE_NAME}, {}, None),
        ({sc.SERVICE_NAME: "unknown_service:python"}, {}, None),
        ({sc.SERVICE_NAME: "lm-eval"}, {sc.EVAL_NAME: "golden"}, "golden"),  # the cell's, on the span
    ],
)
def test_a_request_outside_a_cell_takes_the_eval_its_runner_named(
    resource: dict[str, str], attrs: dict[str, Any], expected: str | None
) -> None:
    assert request_from_span(_request_span(resource, **attrs)).eval_name == expected


def test_runner_eval_reads_an_otlp_json_exports_resource() -> None:
    request = export(span("text_completion m", REQUEST))
    request["resourceSpans"][0]["resource"] = {
        "attributes": [{"key": sc.SERVICE_NAME, "value": {"stringValue": "lm-eval"}}]
    }
    (read,) = records_from_export(request).requests
    assert read.eval_name == "lm-eval"
    assert runner_eval(_request_span({})) is None


def test_requests_inside_a_recorded_load_or_probe_window_on_their_engine_are_that_load() -> None:
    def window(kind: str, engine: str | None) -> LoadWindow:
        return LoadWindow(uid=kind, name=kind, kind=kind, engine=engine, start_unix_ns=0, end_unix_ns=10 * S)

    inside, past = _request("in", 1, engine="qwen"), _request("past", 9, engine="qwen")  # ends at 11 s
    other = _request("other", 1, engine="nemo")
    for kind in ("load", "probe"):
        stand_ins = requests_as_cells([inside, past, other], windows=[window(kind, "qwen")])
        assert [c.uid for c in stand_ins] == ["other", "past"], kind
    # An eval's window, or a load on no named engine, leaves every request standing in.
    assert len(requests_as_cells([inside, past, other], windows=[window("eval", "qwen")])) == 3
    assert len(requests_as_cells([inside, past, other], windows=[window("load", None)])) == 3
