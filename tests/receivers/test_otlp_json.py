"""The OTLP JSON reader against exports encoded by the real OpenTelemetry SDK encoder."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from google.protobuf.json_format import MessageToDict
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from spark_otel import InputError
from spark_otel import _semconv as sc
from spark_otel.cells import cell
from spark_otel.model import CellStatus
from spark_otel.receivers.otlp_json import decode_any_value, read_otlp_json
from spark_otel.records.span_codec import cell_from_span, request_from_span, server_timing_from_span


def _record_spans(tracer_provider: TracerProvider) -> None:
    tracer = tracer_provider.get_tracer("test")
    with (
        cell(
            "golden-review",
            "B#265",
            engine="qwen",
            deadline_s=1800,
            workers=4,
            tracer_provider=tracer_provider,
        ) as state,
        tracer.start_as_current_span(
            "text_completion qwen3.8-27b",
            attributes={
                sc.GEN_AI_OPERATION_NAME: sc.OPERATION_TEXT_COMPLETION,
                sc.GEN_AI_REQUEST_MODEL: "qwen3.8-27b",
                sc.GEN_AI_REQUEST_STREAM: True,
                sc.GEN_AI_USAGE_INPUT_TOKENS: 9857,
                sc.GEN_AI_USAGE_OUTPUT_TOKENS: 5885,
                sc.GEN_AI_RESPONSE_FINISH_REASONS: ("stop",),
                sc.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK: 0.25,
                sc.SERVER_PORT: 8011,
                **state.request_attributes,
            },
        ),
    ):
        state.add_request(input_tokens=9857, output_tokens=5885, error_type=None)
        # vLLM's server span for that request, parented through the traceparent it was sent
        with tracer.start_as_current_span(
            sc.VLLM_SERVER_SPAN_NAME,
            kind=SpanKind.SERVER,
            attributes={
                sc.VLLM_LATENCY_TIME_IN_QUEUE: 0.05,
                sc.VLLM_LATENCY_TIME_IN_MODEL_PREFILL: 0.15,
                sc.VLLM_LATENCY_TIME_IN_MODEL_DECODE: 511.0,
                sc.VLLM_LATENCY_TIME_TO_FIRST_TOKEN: 0.2,
                sc.VLLM_LATENCY_E2E: 511.2,
                sc.VLLM_USAGE_PROMPT_TOKENS: 9857,
                sc.VLLM_USAGE_COMPLETION_TOKENS: 5885,
            },
        ):
            pass
    with cell(
        "golden-review", "E#84", engine="qwen", deadline_s=1800, tracer_provider=tracer_provider
    ) as state:
        state.set_status(CellStatus.DEADLINE)
    with tracer.start_as_current_span(
        "load nemotron eval",
        attributes={
            sc.SPAN_KIND_ATTR: sc.SPAN_KIND_LOAD_WINDOW,
            sc.LOAD_WINDOW_NAME: "nemotron eval, 4 workers",
            sc.LOAD_WINDOW_KIND: "eval",
            sc.LOAD_WINDOW_STREAMS: 4,
            sc.ENGINE: "nemotron",
        },
    ):
        pass
    with tracer.start_as_current_span("unrelated"):
        pass


def _export_lines(span_exporter: InMemorySpanExporter, *, hex_ids: bool) -> list[str]:
    """One ExportTraceServiceRequest per line, as the collector's file exporter writes them."""
    body = MessageToDict(encode_spans(span_exporter.get_finished_spans()))
    if hex_ids:  # OTLP JSON proper (the collector) writes ids as hex, protobuf's mapping as base64
        for rs in body["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                for span in ss["spans"]:
                    for key in ("traceId", "spanId", "parentSpanId"):
                        if key in span:
                            span[key] = base64.b64decode(span[key]).hex()
    return [json.dumps(body)]


@pytest.mark.parametrize("hex_ids", [True, False])
def test_otlp_json_reader_rebuilds_cells_requests_and_windows_like_the_store_exporter(
    tmp_path: Path, span_exporter: InMemorySpanExporter, tracer_provider: TracerProvider, hex_ids: bool
) -> None:
    _record_spans(tracer_provider)
    spans = span_exporter.get_finished_spans()
    path = tmp_path / "traces.jsonl"
    metrics_line = json.dumps({"resourceMetrics": []})
    path.write_text("\n".join([*_export_lines(span_exporter, hex_ids=hex_ids), metrics_line, ""]))

    records = read_otlp_json([path])

    assert records.spans == 6
    expected_cells = [
        cell_from_span(s) for s in spans if s.attributes.get(sc.SPAN_KIND_ATTR) == sc.SPAN_KIND_CELL
    ]
    assert sorted(records.cells, key=lambda c: c.cell_id) == sorted(expected_cells, key=lambda c: c.cell_id)
    by_id = {c.cell_id: c for c in records.cells}
    assert by_id["B#265"].completion_tokens == 5885
    assert by_id["B#265"].workers == 4
    assert by_id["E#84"].status is CellStatus.DEADLINE
    assert by_id["E#84"].deadline_hit
    [request] = records.requests
    assert request == request_from_span(next(s for s in spans if s.name.startswith("text_completion")))
    assert request.cell_uid == by_id["B#265"].uid
    assert request.finish_reasons == ["stop"]
    [server] = records.server_timings
    assert server == server_timing_from_span(next(s for s in spans if s.name == sc.VLLM_SERVER_SPAN_NAME))
    assert (server.request_uid, server.queue_s, server.prefill_s, server.completion_tokens) == (
        request.uid, 0.05, 0.15, 5885,
    )  # fmt: skip
    [window] = records.windows
    assert (window.name, window.kind, window.engine, window.streams) == (
        "nemotron eval, 4 workers",
        "eval",
        "nemotron",
        4,
    )


def test_otlp_json_reader_names_file_and_line_of_a_bad_export(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"resourceSpans": []}\n{not json\n')
    with pytest.raises(InputError, match=r"bad\.jsonl:2: not an OTLP JSON trace export"):
        read_otlp_json([path])


def test_otlp_json_reader_rejects_a_span_id_that_is_neither_hex_nor_base64(tmp_path: Path) -> None:
    span = {"traceId": "zz", "spanId": "0011223344556677", "name": "x", "startTimeUnixNano": "1"}
    path = tmp_path / "ids.json"
    path.write_text(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}))
    with pytest.raises(InputError, match="traceId"):
        read_otlp_json([path])


def test_otlp_json_reader_reports_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"^OTLP JSON export .*missing\.json: no such file$"):
        read_otlp_json([tmp_path / "missing.json"])


def test_decode_any_value_covers_every_otlp_json_kind() -> None:
    assert decode_any_value({"intValue": "9857"}) == 9857
    assert decode_any_value({"doubleValue": 0.25}) == 0.25
    assert decode_any_value({"boolValue": True}) is True
    assert decode_any_value({"arrayValue": {"values": [{"stringValue": "stop"}]}}) == ("stop",)
    assert json.loads(
        decode_any_value({"kvlistValue": {"values": [{"key": "a", "value": {"intValue": "1"}}]}})
    ) == {"a": 1}


def test_otlp_json_reader_skips_a_cut_last_line_and_loads_the_rest(
    tmp_path: Path,
    span_exporter: InMemorySpanExporter,
    tracer_provider: TracerProvider,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A collector still writing leaves its last export request cut short.
    _record_spans(tracer_provider)
    [line] = _export_lines(span_exporter, hex_ids=True)
    path = tmp_path / "traces.jsonl"
    path.write_text(f"{line}\n{line[: len(line) // 2]}")

    records = read_otlp_json([path])

    assert sorted(c.cell_id for c in records.cells) == ["B#265", "E#84"]
    assert len(records.windows) == 1
    [skipped] = records.skipped
    assert skipped.startswith(f"{path}:2: not an OTLP JSON trace export")
    assert f"{path}:2: not an OTLP JSON trace export" in caplog.text


def test_otlp_json_reader_refuses_a_file_with_no_readable_trace_line(tmp_path: Path) -> None:
    path = tmp_path / "cut.jsonl"
    path.write_text('{"resourceMetrics": []}\n{"resourceSpans": [{"scopeSp')
    with pytest.raises(InputError, match=r"cut\.jsonl:2: not an OTLP JSON trace export"):
        read_otlp_json([path])
