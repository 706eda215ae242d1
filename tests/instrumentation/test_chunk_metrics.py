"""`instrument(chunk_metrics=...)` and the hot-path caches: only the per-chunk histogram changes.

``chunk_metrics=False`` (or ``SPARK_OTEL_CHUNK_METRICS=0``) drops
``gen_ai.client.operation.time_per_output_chunk`` and nothing else: every span attribute and
every other metric point is the same as with it on. The caches that keep per-request work small
(attribute sets per model and server, the SSE scanner's one-event fast path) must not mix
requests up or change what a stream reports.
"""

from __future__ import annotations

import json
import logging
import random
from typing import Any

import openai
import pytest
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from tests.support.chunk_runs import MESSAGES, instrumented_run
from tests.support.engine_server import MODEL
from tests.support.finished_spans import request_spans
from tests.support.metric_points import metric_points

import spark_otel
from spark_otel import ConfigError
from spark_otel import _semconv as sc
from spark_otel.instrumentation import InstrumentationConfig
from spark_otel.instrumentation._config import CHUNK_METRICS_ENV
from spark_otel.instrumentation._sse_scanner import _MARKED, SseScanner, _followed_by
from spark_otel.telemetry.bulk_histogram import BulkHistogram


@pytest.fixture
def _no_chunk_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(CHUNK_METRICS_ENV, raising=False)


# -- the switch ----------------------------------------------------------------------------------


@pytest.mark.usefixtures("_no_chunk_env")
@pytest.mark.parametrize("pipeline", ["user-sdk", "spark-otel"])
@pytest.mark.parametrize("path", ["openai", "async-openai", "raw-httpx2"])
def test_chunk_metrics_off_drops_only_time_per_output_chunk(base_url: str, path: str, pipeline: str) -> None:
    """Both ways of recording the per-chunk histogram: one SDK record per chunk into the user's
    providers, the whole stream at once into the providers spark-otel builds."""
    on, chunks = instrumented_run(base_url, path, chunk_metrics=None, pipeline=pipeline)  # the default
    off, chunks_off = instrumented_run(base_url, path, chunk_metrics=False, pipeline=pipeline)
    assert chunks == chunks_off > 2

    # On (the default): one time-per-output-chunk point counting every chunk after the first.
    ((_, tpoc_count),) = on["points"][sc.GEN_AI_CLIENT_TIME_PER_OUTPUT_CHUNK]
    assert tpoc_count == on["span"][sc.REQUEST_CHUNKS] - 1
    # Off: none at all.
    assert off["points"][sc.GEN_AI_CLIENT_TIME_PER_OUTPUT_CHUNK] == []

    # Everything else is identical: span name, kind, attributes, every other metric's points.
    on["points"].pop(sc.GEN_AI_CLIENT_TIME_PER_OUTPUT_CHUNK)
    off["points"].pop(sc.GEN_AI_CLIENT_TIME_PER_OUTPUT_CHUNK)
    assert off == on
    input_tokens, output_tokens = on["tokens"]
    assert input_tokens > 0
    assert output_tokens == 6
    assert len(on["points"][sc.GEN_AI_CLIENT_TIME_TO_FIRST_CHUNK]) == 1
    assert len(on["points"][sc.GEN_AI_CLIENT_OPERATION_DURATION]) == 1


@pytest.mark.usefixtures("_no_chunk_env")
def test_only_providers_spark_otel_built_take_a_stream_in_one_bulk_record(
    base_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    batches: list[int] = []
    record_many = BulkHistogram.record_many

    def spy(self: BulkHistogram, values: Any, attributes: Any, *args: Any) -> None:
        batches.append(len(values))
        record_many(self, values, attributes, *args)

    monkeypatch.setattr(BulkHistogram, "record_many", spy)
    _, chunks = instrumented_run(base_url, "openai", chunk_metrics=None, pipeline="spark-otel")
    assert batches == [chunks - 1]
    instrumented_run(base_url, "openai", chunk_metrics=None, pipeline="user-sdk")
    assert batches == [chunks - 1]  # the user's providers got SDK records instead


@pytest.mark.parametrize(
    ("env", "expected"),
    [(None, True), ("", True), ("1", True), ("true", True), ("0", False), ("off", False), ("false", False)],
)
def test_chunk_metrics_env(monkeypatch: pytest.MonkeyPatch, env: str | None, expected: bool) -> None:
    if env is None:
        monkeypatch.delenv(CHUNK_METRICS_ENV, raising=False)
    else:
        monkeypatch.setenv(CHUNK_METRICS_ENV, env)
    config = InstrumentationConfig.resolve(
        capture_content=None, include_usage=None, inject_traceparent=None, provider_name="vllm"
    )
    assert config.chunk_metrics is expected


def test_chunk_metrics_argument_wins_over_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CHUNK_METRICS_ENV, "0")
    resolve = InstrumentationConfig.resolve
    common: dict[str, Any] = {
        "capture_content": None,
        "include_usage": None,
        "inject_traceparent": None,
        "provider_name": "vllm",
    }
    assert resolve(**common, chunk_metrics=True).chunk_metrics is True
    monkeypatch.setenv(CHUNK_METRICS_ENV, "1")
    assert resolve(**common, chunk_metrics=False).chunk_metrics is False


def test_chunk_metrics_bad_env_warns_and_stays_on(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv(CHUNK_METRICS_ENV, "maybe")
    with caplog.at_level(logging.WARNING):
        config = InstrumentationConfig.resolve(
            capture_content=None, include_usage=None, inject_traceparent=None, provider_name="vllm"
        )
    assert config.chunk_metrics is True
    assert CHUNK_METRICS_ENV in caplog.text


def test_chunk_metrics_rejects_non_bool() -> None:
    with pytest.raises(ConfigError, match="chunk_metrics"):
        spark_otel.instrument(chunk_metrics="no")  # type: ignore[arg-type]


def test_env_switches_chunk_metrics_off_end_to_end(base_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CHUNK_METRICS_ENV, "0")
    snapshot, _ = instrumented_run(base_url, "openai", chunk_metrics=None)
    assert snapshot["points"][sc.GEN_AI_CLIENT_TIME_PER_OUTPUT_CHUNK] == []
    assert len(snapshot["points"][sc.GEN_AI_CLIENT_TIME_TO_FIRST_CHUNK]) == 1


# -- the per-request caches never mix requests up --------------------------------------------------


def test_attribute_sets_are_per_model_and_server(
    base_url: str,
    instrumented: None,
    span_exporter: InMemorySpanExporter,
    metric_reader: InMemoryMetricReader,
) -> None:
    port = int(base_url.rsplit(":", 1)[1].split("/", maxsplit=1)[0])
    by_ip = openai.OpenAI(base_url=base_url, api_key="sk", max_retries=0)
    by_name = openai.OpenAI(base_url=f"http://localhost:{port}/v1", api_key="sk", max_retries=0)
    for _ in range(2):  # the second round runs on cached attribute sets
        by_ip.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=2)  # type: ignore[arg-type]
        by_name.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=2)  # type: ignore[arg-type]
        with pytest.raises(openai.NotFoundError):
            by_ip.chat.completions.create(model="other", messages=MESSAGES, max_tokens=2)  # type: ignore[arg-type]

    spans = request_spans(span_exporter)
    seen = sorted(
        (s.name, s.attributes[sc.SERVER_ADDRESS], s.attributes.get(sc.ERROR_TYPE))  # type: ignore[index, union-attr]
        for s in spans
    )
    ok_ip = (f"chat {MODEL}", "127.0.0.1", None)
    ok_name = (f"chat {MODEL}", "localhost", None)
    missing = ("chat other", "127.0.0.1", "404")
    assert seen == sorted([ok_ip, ok_name, missing] * 2)
    points = metric_points(metric_reader, sc.GEN_AI_CLIENT_OPERATION_DURATION)
    shapes = sorted(
        (
            p.attributes[sc.SERVER_ADDRESS],
            p.attributes[sc.GEN_AI_REQUEST_MODEL],
            p.attributes.get(sc.GEN_AI_RESPONSE_MODEL),
            p.attributes.get(sc.ERROR_TYPE),
            p.attributes[sc.SERVER_PORT],
            p.count,
        )
        for p in points
    )
    assert shapes == sorted(
        [
            ("127.0.0.1", MODEL, MODEL, None, port, 2),
            ("127.0.0.1", "other", None, "404", port, 2),
            ("localhost", MODEL, MODEL, None, port, 2),
        ]
    )
    tokens = metric_points(metric_reader, sc.GEN_AI_CLIENT_TOKEN_USAGE)
    assert sorted((p.attributes[sc.SERVER_ADDRESS], p.attributes[sc.GEN_AI_TOKEN_TYPE]) for p in tokens) == [
        ("127.0.0.1", "input"),
        ("127.0.0.1", "output"),
        ("localhost", "input"),
        ("localhost", "output"),
    ]


# -- the SSE scanner's fast path reports what the general path reports ---------------------------------


def _events() -> list[bytes]:
    head = {"id": "chatcmpl-x", "object": "chat.completion.chunk", "created": 1, "model": "m"}
    out = []
    for i in range(5):
        choice = {"index": 0, "delta": {"content": f"t{i} "}, "finish_reason": "stop" if i == 4 else None}
        out.append({**head, "choices": [choice], "usage": None})
    out.append({**head, "choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 5}})
    return [b"data: " + json.dumps(e).encode() + b"\n\n" for e in out] + [b"data: [DONE]\n\n"]


def _scan(blocks: list[bytes], *, capture: bool) -> tuple[Any, ...]:
    scanner = SseScanner(capture=capture)
    for block in blocks:
        scanner.feed(block)
    scanner.flush()
    summary = scanner.summary(chat=True)
    return (scanner.chunks, len(scanner.intervals), scanner.done, summary)


@pytest.mark.parametrize("capture", [False, True])
def test_sse_one_event_blocks_match_any_other_split(capture: bool) -> None:
    events = _events()
    body = b"".join(events)
    one_per_block = _scan(events, capture=capture)  # the fast path
    whole = _scan([body], capture=capture)  # one block, split into lines
    pieces = _scan([body[i : i + 7] for i in range(0, len(body), 7)], capture=capture)  # partial lines
    crlf = _scan([e.replace(b"\n", b"\r\n") for e in events], capture=capture)  # not the fast path
    assert one_per_block == whole == pieces == crlf
    chunks, intervals, done, summary = one_per_block
    assert (chunks, intervals, done) == (6, 5, True)
    assert (summary.response_id, summary.response_model) == ("chatcmpl-x", "m")
    assert summary.reasons == {0: "stop"}
    assert (summary.input_tokens, summary.output_tokens) == (3, 5)
    if capture:
        assert "".join(summary.texts[0]) == "t0 t1 t2 t3 t4 "


def _multi_choice_events(early: int) -> list[bytes]:
    """Two choices: choice 0 stops at once, then choice 1 streams ``early`` more chunks."""
    head = {"id": "chatcmpl-y", "object": "chat.completion.chunk", "created": 1, "model": "m"}
    out = [{**head, "choices": [{"index": 0, "delta": {"content": "a"}, "finish_reason": "stop"}]}]
    for i in range(early):
        last = i == early - 1
        choice = {"index": 1, "delta": {"content": f"b{i}"}, "finish_reason": "length" if last else None}
        out.append({**head, "choices": [choice]})
    out.append({**head, "choices": [], "usage": {"prompt_tokens": 2, "completion_tokens": early + 1}})
    return [b"data: " + json.dumps(e).encode() + b"\n\n" for e in out] + [b"data: [DONE]\n\n"]


def test_a_one_choice_stream_reads_its_finish_and_usage_from_its_last_events() -> None:
    """The scanner searches a one-choice stream's last events only, at its end: the same answer
    as searching every event, for a long stream too."""
    head = {"id": "chatcmpl-z", "object": "chat.completion.chunk", "created": 1, "model": "m"}
    body = [{**head, "choices": [{"index": 0, "delta": {"content": "x"}, "finish_reason": None}]}] * 300
    body.append({**head, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    body.append({**head, "choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 300}})
    blocks = [b"data: " + json.dumps(e).encode() + b"\n\n" for e in body] + [b"data: [DONE]\n\n"]
    for choices in (1, 2):  # 2: every event searched as it comes
        scanner = SseScanner(capture=False, choices=choices)
        for block in blocks:
            scanner.feed(block)
        summary = scanner.summary(chat=True)
        assert summary.reasons == {0: "stop"}
        assert (summary.input_tokens, summary.output_tokens) == (9, 300)
        assert scanner.summary(chat=True).reasons == {0: "stop"}  # asking twice counts nothing twice
        assert scanner.finish_events == [blocks[300][6:-2]]


def test_several_choices_keep_a_finish_reason_from_long_before_the_end() -> None:
    blocks = _multi_choice_events(early=40)
    scanner = SseScanner(capture=False, choices=2)
    for block in blocks:
        scanner.feed(block)
    assert scanner.summary(chat=True).reasons == {0: "stop", 1: "length"}
    # Told one choice, the scanner would look only at the end, and miss choice 0's early stop.
    one = SseScanner(capture=False, choices=1)
    for block in blocks:
        one.feed(block)
    assert one.summary(chat=True).reasons == {1: "length"}


def test_sse_marker_scan_matches_the_plain_substring_checks() -> None:
    """One regex scan plus per-key checks decide exactly what four substring checks decided."""
    usage_marks = (b'"usage":{', b'"usage": {')
    finish_marks = (b'"finish_reason":"', b'"finish_reason": "')
    pieces = [
        b'"usage":{',
        b'"usage": {',
        b'"usage":null',
        b'"usage":  {',
        b'"finish_reason":"stop"',
        b'"finish_reason": "length"',
        b'"finish_reason":null',
        b'"finish_reason":  "x"',
        b'"usage"',
        b'"finish_reason"',
        b"x",
        b" ",
        b":",
    ]
    rng = random.Random(7)
    for _ in range(5000):
        line = b"data: " + b"".join(rng.choice(pieces) for _ in range(rng.randint(0, 6)))
        expected = (any(m in line for m in usage_marks), any(m in line for m in finish_marks))
        got = (False, False)
        if _MARKED.search(line) is not None:
            got = (_followed_by(line, b'"usage":', b"{"), _followed_by(line, b'"finish_reason":', b'"'))
        assert got == expected, line


@pytest.mark.usefixtures("_no_chunk_env")
def test_a_failing_bulk_record_costs_only_the_per_chunk_histogram(
    base_url: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Injected: no real input makes the bulk record fail, but if it did, the stream, the span
    and every other metric must be as they are without the per-chunk histogram."""

    def broken(self: BulkHistogram, values: Any, attributes: Any, *args: Any) -> None:
        raise RuntimeError("injected")

    monkeypatch.setattr(BulkHistogram, "record_many", broken)
    # DEBUG: a failure of this kind reported earlier in the process is logged at DEBUG (`report_failure`).
    with caplog.at_level(logging.DEBUG, logger="spark_otel"):
        failed, chunks = instrumented_run(base_url, "openai", chunk_metrics=None, pipeline="spark-otel")
    off, chunks_off = instrumented_run(base_url, "openai", chunk_metrics=False, pipeline="spark-otel")
    assert chunks == chunks_off > 2
    assert failed == off
    assert "chunk metrics failed" in caplog.text
    (report,) = [r for r in caplog.records if r.getMessage().startswith("spark_otel: chunk metrics failed")]
    assert report.exc_info is not None
    assert str(report.exc_info[1]) == "injected"
