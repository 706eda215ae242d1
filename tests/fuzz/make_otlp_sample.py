"""Writes tests/fuzz/data/otlp-traces.jsonl: what a collector's ``file`` exporter writes for a
small eval, made by the real SDK and its OTLP encoder (the repo's collector build has no file
exporter to make it with).

Four export requests, one per line as the collector batches them: a cell with its request span,
a cell cut off at its deadline, a load window with an unrelated span, and a metrics line the
reader must skip. Each span line has non-ASCII text, so a cut can split a multi-byte character. Ids are
hex, as OTLP JSON proper writes them (protobuf's own mapping writes base64).

    python -m tests.fuzz.make_otlp_sample
"""

from __future__ import annotations

import base64
import json
import random
from pathlib import Path

from google.protobuf.json_format import MessageToDict
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.id_generator import IdGenerator

from spark_otel import _semconv as sc
from spark_otel.cells import cell
from spark_otel.model import CellStatus

OUT = Path(__file__).parent / "data" / "otlp-traces.jsonl"


class _SeededIds(IdGenerator):
    def __init__(self, seed: int) -> None:
        self._random = random.Random(seed)

    def generate_span_id(self) -> int:
        return self._random.getrandbits(64) or 1

    def generate_trace_id(self) -> int:
        return self._random.getrandbits(128) or 1


def _hex_ids(body: dict[str, object]) -> dict[str, object]:
    for rs in body["resourceSpans"]:  # type: ignore[attr-defined]
        for ss in rs["scopeSpans"]:
            for span in ss["spans"]:
                for key in ("traceId", "spanId", "parentSpanId"):
                    if key in span:
                        span[key] = base64.b64decode(span[key]).hex()
    return body


def main() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(id_generator=_SeededIds(265))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("make_otlp_sample")
    lines: list[str] = []

    def flush() -> None:
        lines.append(
            json.dumps(
                _hex_ids(MessageToDict(encode_spans(exporter.get_finished_spans()))), ensure_ascii=False
            )
        )
        exporter.clear()

    with (
        cell(
            "golden-review", "B#265 — µ", engine="qwen", deadline_s=1800, workers=4, tracer_provider=provider
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
    flush()
    with cell("golden-review", "E#84 — µ", engine="qwen", deadline_s=1800, tracer_provider=provider) as state:
        state.set_status(CellStatus.DEADLINE)
    flush()
    with (
        tracer.start_as_current_span(
            "load nemotron eval",
            attributes={
                sc.SPAN_KIND_ATTR: sc.SPAN_KIND_LOAD_WINDOW,
                sc.LOAD_WINDOW_NAME: "nemotron eval — 4 workers",
                sc.LOAD_WINDOW_KIND: "eval",
                sc.LOAD_WINDOW_STREAMS: 4,
                sc.ENGINE: "nemotron",
            },
        ),
        tracer.start_as_current_span("unrelated"),
    ):
        pass
    flush()
    lines.append(json.dumps({"resourceMetrics": [{"scopeMetrics": []}]}))
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text("\n".join(lines) + "\n", encoding="utf-8")
    provider.shutdown()


if __name__ == "__main__":
    main()
