"""A request's figures, exactly: what the call asked for (choices, sampling parameters), how its
time splits in the cell's budget, per-chunk times in seconds, and nothing recorded that the call
did not have (no time to first chunk without a chunk, no content unless captured)."""

from __future__ import annotations

import json

import httpx2
import openai
import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode
from tests.support.engine_server import MODEL
from tests.support.finished_spans import cell_span, one_span
from tests.support.metric_points import metric_points

import spark_otel
from spark_otel import _semconv as sc
from spark_otel.instrumentation.request_notes import request_notes

MESSAGES = [{"role": "user", "content": "one two three"}]


@pytest.mark.parametrize(("n", "expected"), [(2, 2), (0, None), (1, None)])
@pytest.mark.usefixtures("instrumented")
def test_the_choice_count_asked_for_is_on_the_span_and_sizes_the_finish_reasons(
    n: int, expected: int | None, base_url: str, span_exporter: InMemorySpanExporter
) -> None:
    openai.OpenAI(base_url=base_url, api_key="sk").chat.completions.create(
        model=MODEL, messages=MESSAGES, max_tokens=2, n=n
    )  # type: ignore[call-overload]
    a = one_span(span_exporter).attributes or {}
    assert a.get(sc.GEN_AI_REQUEST_CHOICE_COUNT) == expected
    # The server answers one choice: a second one asked for and never received reports `error`.
    assert list(a[sc.GEN_AI_RESPONSE_FINISH_REASONS]) == (["length", "error"] if n == 2 else ["length"])  # type: ignore[arg-type]


@pytest.mark.usefixtures("instrumented")
def test_only_numeric_sampling_parameters_and_a_string_model_reach_the_span(
    base_url: str, span_exporter: InMemorySpanExporter
) -> None:
    body = {"model": 5, "messages": MESSAGES, "temperature": "hot", "top_p": None, "seed": True}
    with httpx2.Client() as client:
        assert client.post(f"{base_url}/chat/completions", json=body).status_code == 404
    span = one_span(span_exporter)
    a = span.attributes or {}
    assert span.name == "chat"
    for key in (
        sc.GEN_AI_REQUEST_MODEL,
        sc.GEN_AI_REQUEST_TEMPERATURE,
        sc.GEN_AI_REQUEST_TOP_P,
        sc.GEN_AI_REQUEST_SEED,
    ):
        assert key not in a


@pytest.mark.usefixtures("instrumented")
def test_a_deadline_helpers_notes_decide_the_error_everywhere_it_is_recorded(
    base_url: str,
    tracer_provider: TracerProvider,
    meter_provider: MeterProvider,
    span_exporter: InMemorySpanExporter,
    metric_reader: InMemoryMetricReader,
) -> None:
    client = openai.OpenAI(base_url=base_url, api_key="sk")
    with (
        spark_otel.cell(
            "golden", "n", tracer_provider=tracer_provider, meter_provider=meter_provider
        ) as state,
        request_notes() as notes,
    ):
        notes.error_type = "deadline"
        notes.attributes["spark_otel.deadline.salvaged_findings"] = 1
        client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=2)
    span = one_span(span_exporter)
    a = span.attributes or {}
    assert (a[sc.ERROR_TYPE], a["spark_otel.deadline.salvaged_findings"]) == ("deadline", 1)
    assert (span.status.status_code, span.status.description) == (StatusCode.ERROR, "deadline")
    (duration,) = metric_points(metric_reader, sc.GEN_AI_CLIENT_OPERATION_DURATION)
    assert duration.attributes[sc.ERROR_TYPE] == "deadline"
    assert (state.requests, state.failed_requests, state.completion_tokens) == (1, 1, 2)


@pytest.mark.usefixtures("instrumented")
def test_a_cells_budget_is_its_requests_own_spans(
    base_url: str,
    tracer_provider: TracerProvider,
    meter_provider: MeterProvider,
    span_exporter: InMemorySpanExporter,
) -> None:
    client = openai.OpenAI(base_url=base_url, api_key="sk")
    with spark_otel.cell(
        "golden", "b", tracer_provider=tracer_provider, meter_provider=meter_provider
    ) as state:
        client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=2)
        stream = client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=4, stream=True)
        assert sum(1 for _ in stream) == 5
    plain, streamed = sorted(
        (s for s in span_exporter.get_finished_spans() if sc.GEN_AI_OPERATION_NAME in (s.attributes or {})),
        key=lambda s: s.start_time or 0,
    )
    assert [(s.streaming, bool(s.first_ns)) for s in state.request_stamps] == [(False, False), (True, True)]
    a = cell_span(span_exporter).attributes or {}
    ttfc = streamed.attributes[sc.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK]  # type: ignore[index]
    assert a[sc.CELL_BUDGET_UNSPLIT_S] == pytest.approx((plain.end_time - plain.start_time) / 1e9, abs=1e-5)  # type: ignore[operator]
    assert a[sc.CELL_BUDGET_FIRST_TOKEN_S] == pytest.approx(ttfc, abs=1e-5)
    assert a[sc.CELL_BUDGET_FIRST_TOKEN_S] + a[sc.CELL_BUDGET_DECODE_S] == pytest.approx(  # type: ignore[operator]
        (streamed.end_time - streamed.start_time) / 1e9,
        abs=1e-5,  # type: ignore[operator]
    )


@pytest.mark.parametrize("pipeline", ["user-sdk", "spark-otel"])
@pytest.mark.parametrize("path", ["openai", "raw"])
def test_per_chunk_times_are_seconds_that_fit_in_the_stream(path: str, pipeline: str, base_url: str) -> None:
    from tests.support.chunk_runs import RunTelemetry
    from tests.support.metric_points import points_in

    telemetry = RunTelemetry(pipeline)
    spark_otel.instrument(tracer_provider=telemetry.tracer_provider, meter_provider=telemetry.meter_provider)
    body = {"model": MODEL, "messages": MESSAGES, "max_tokens": 5, "stream": True, "delay_s": 0.01}
    try:
        if path == "openai":
            client = openai.OpenAI(base_url=base_url, api_key="sk")
            kwargs = {k: v for k, v in body.items() if k != "delay_s"}
            stream = client.chat.completions.create(**kwargs, extra_body={"delay_s": 0.01})
            assert sum(1 for _ in stream) == 6  # type: ignore[call-overload]
        else:
            with httpx2.Client() as raw, raw.stream("POST", f"{base_url}/chat/completions", json=body) as r:
                r.read()
    finally:
        spark_otel.uninstrument()
    try:
        span = one_span(telemetry.spans)
        data = telemetry.read()
        (per_chunk,) = points_in(data, sc.GEN_AI_CLIENT_TIME_PER_OUTPUT_CHUNK)
        (first,) = points_in(data, sc.GEN_AI_CLIENT_TIME_TO_FIRST_CHUNK)
        span_s = (span.end_time - span.start_time) / 1e9  # type: ignore[operator]
        assert per_chunk.count == 5
        assert 5 * 0.005 < per_chunk.sum < span_s
        assert first.sum + per_chunk.sum <= span_s + 1e-6
        if pipeline == "spark-otel":  # each record's exemplar is the request's own span
            assert {e.span_id for e in per_chunk.exemplars} == {span.context.span_id}  # type: ignore[union-attr]
    finally:
        telemetry.close()


@pytest.mark.usefixtures("instrumented")
def test_a_stream_refused_before_any_chunk_records_no_time_to_first_chunk(
    base_url: str, span_exporter: InMemorySpanExporter, metric_reader: InMemoryMetricReader
) -> None:
    client = openai.OpenAI(base_url=base_url, api_key="sk")
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(model="no-such-model", messages=MESSAGES, stream=True)
    assert sc.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK not in (one_span(span_exporter).attributes or {})
    client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=1)  # not streamed
    assert metric_points(metric_reader, sc.GEN_AI_CLIENT_TIME_TO_FIRST_CHUNK) == []
    assert len(metric_points(metric_reader, sc.GEN_AI_CLIENT_OPERATION_DURATION)) == 2


@pytest.mark.usefixtures("instrumented")
def test_a_stream_closed_before_its_first_chunk_names_no_response_and_keeps_no_content(
    base_url: str, span_exporter: InMemorySpanExporter
) -> None:
    client = openai.OpenAI(base_url=base_url, api_key="sk")
    client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=2, stream=True).close()  # type: ignore[call-overload]
    closed = one_span(span_exporter).attributes or {}
    assert closed[sc.ERROR_TYPE] == sc.ERROR_TYPE_STREAM_CLOSED
    for key in (sc.GEN_AI_RESPONSE_ID, sc.GEN_AI_RESPONSE_MODEL, sc.GEN_AI_OUTPUT_MESSAGES):
        assert key not in closed
    span_exporter.clear()
    assert (
        sum(
            1
            for _ in client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=2, stream=True)
        )
        == 3
    )  # type: ignore[call-overload]
    assert sc.GEN_AI_OUTPUT_MESSAGES not in (one_span(span_exporter).attributes or {})  # capture is off


@pytest.mark.usefixtures("capturing")
def test_a_captured_text_completion_stream_keeps_its_text(
    base_url: str, span_exporter: InMemorySpanExporter
) -> None:
    client = openai.OpenAI(base_url=base_url, api_key="sk")
    assert (
        sum(1 for _ in client.completions.create(model=MODEL, prompt="a b", max_tokens=3, stream=True)) == 3
    )  # type: ignore[call-overload]
    messages = json.loads(str((one_span(span_exporter).attributes or {})[sc.GEN_AI_OUTPUT_MESSAGES]))
    assert [m["parts"][0]["content"] for m in messages] == ["w0 w1 w2 "]


@pytest.mark.usefixtures("instrumented")
def test_stop_sequences_are_on_the_span_only_as_strings(
    base_url: str, span_exporter: InMemorySpanExporter
) -> None:
    client = openai.OpenAI(base_url=base_url, api_key="sk")
    seen = []
    for stop in ("END", ["a", "b"]):
        span_exporter.clear()
        client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=1, stop=stop)
        seen.append(list((one_span(span_exporter).attributes or {})[sc.GEN_AI_REQUEST_STOP_SEQUENCES]))  # type: ignore[arg-type]
    assert seen == [["END"], ["a", "b"]]
    span_exporter.clear()
    with httpx2.Client() as raw:
        raw.post(
            f"{base_url}/chat/completions", json={"model": MODEL, "messages": MESSAGES, "stop": [1, "a"]}
        )
    assert sc.GEN_AI_REQUEST_STOP_SEQUENCES not in (one_span(span_exporter).attributes or {})
    span_exporter.clear()
    client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=1)
    assert sc.GEN_AI_REQUEST_STOP_SEQUENCES not in (one_span(span_exporter).attributes or {})


@pytest.mark.usefixtures("instrumented")
def test_token_counts_that_are_not_integers_are_not_recorded(
    span_exporter: InMemorySpanExporter, metric_reader: InMemoryMetricReader
) -> None:
    """A malformed engine's usage (what the test server never sends)."""
    body = {"id": "r", "model": "m", "choices": [], "usage": {"prompt_tokens": "7", "completion_tokens": 2.5}}

    def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, json=body)

    with httpx2.Client(transport=httpx2.MockTransport(handler)) as client:
        assert client.post("http://e:1/v1/chat/completions", json={"model": "m"}).json() == body
    a = one_span(span_exporter).attributes or {}
    assert sc.GEN_AI_USAGE_INPUT_TOKENS not in a
    assert sc.GEN_AI_USAGE_OUTPUT_TOKENS not in a
    assert metric_points(metric_reader, sc.GEN_AI_CLIENT_TOKEN_USAGE) == []


def test_on_spark_otels_providers_each_histogram_point_is_one_per_outcome_with_the_requests_exemplar(
    base_url: str,
) -> None:
    from tests.support.chunk_runs import RunTelemetry
    from tests.support.metric_points import points_in

    telemetry = RunTelemetry("spark-otel")
    spark_otel.instrument(tracer_provider=telemetry.tracer_provider, meter_provider=telemetry.meter_provider)
    client = openai.OpenAI(base_url=base_url, api_key="sk", max_retries=0)
    try:
        for _ in range(2):
            with pytest.raises(openai.NotFoundError):
                client.chat.completions.create(model="no-such-model", messages=MESSAGES)
        stream = client.chat.completions.create(
            model=MODEL, messages=MESSAGES, max_tokens=2, stream=True, stream_options={"include_usage": True}
        )
        assert sum(1 for _ in stream) == 4
    finally:
        spark_otel.uninstrument()
    try:
        spans = sorted(telemetry.spans.get_finished_spans(), key=lambda s: s.start_time or 0)
        failed, ok = {s.context.span_id for s in spans[:2]}, spans[2].context.span_id  # type: ignore[union-attr]
        data = telemetry.read()
        durations = {
            p.attributes.get(sc.ERROR_TYPE): p for p in points_in(data, sc.GEN_AI_CLIENT_OPERATION_DURATION)
        }
        assert {k: p.count for k, p in durations.items()} == {"404": 2, None: 1}
        failed_exemplars = {e.span_id for e in durations["404"].exemplars}
        assert failed_exemplars
        assert failed_exemplars <= failed
        assert durations["404"].sum == pytest.approx(
            sum((s.end_time - s.start_time) / 1e9 for s in spans[:2])
        )  # type: ignore[operator]
        for name in (sc.GEN_AI_CLIENT_TOKEN_USAGE, sc.GEN_AI_CLIENT_TIME_TO_FIRST_CHUNK):
            for point in points_in(data, name):
                assert {e.span_id for e in point.exemplars} == {ok}, name
        assert {e.span_id for e in durations[None].exemplars} == {ok}
    finally:
        telemetry.close()
