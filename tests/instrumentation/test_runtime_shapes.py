"""`Runtime.shape` and `RequestShape`: the attribute sets requests share, exactly as semconv names
them, and a cache that stops growing at its bound (a runner with unbounded models or hosts must
not grow memory per request) while still answering right."""

from __future__ import annotations

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.trace import TracerProvider

from spark_otel import __version__
from spark_otel import _semconv as sc
from spark_otel.instrumentation import InstrumentationConfig
from spark_otel.instrumentation._runtime import _MAX_SHAPES, RequestShape, Runtime, ShapeKey
from spark_otel.telemetry.bulk_histogram import attributes_key


def _runtime() -> Runtime:
    return Runtime(InstrumentationConfig(provider_name="sglang"), TracerProvider(), MeterProvider())


def _key(model: str | None = "m", host: str | None = "h", port: int | None = 8000) -> ShapeKey:
    return (sc.OPERATION_CHAT, model, host, port, "openai", True)


def test_a_shape_carries_each_attribute_semconv_names() -> None:
    shape = RequestShape("sglang", _key())
    assert shape.metric == {
        sc.GEN_AI_OPERATION_NAME: sc.OPERATION_CHAT,
        sc.GEN_AI_PROVIDER_NAME: "sglang",
        sc.GEN_AI_REQUEST_MODEL: "m",
        sc.SERVER_ADDRESS: "h",
        sc.SERVER_PORT: 8000,
    }
    assert shape.span == {**shape.metric, sc.REQUEST_LAYER: "openai", sc.GEN_AI_REQUEST_STREAM: True}
    assert shape.name == f"{sc.OPERATION_CHAT} m"


def test_what_a_request_does_not_know_is_left_out() -> None:
    shape = RequestShape("vllm", (sc.OPERATION_TEXT_COMPLETION, None, None, 8000, "http", False))
    assert shape.metric == {
        sc.GEN_AI_OPERATION_NAME: sc.OPERATION_TEXT_COMPLETION,
        sc.GEN_AI_PROVIDER_NAME: "vllm",
    }
    assert shape.span == {**shape.metric, sc.REQUEST_LAYER: "http"}  # no port without a host, no stream flag
    assert shape.name == sc.OPERATION_TEXT_COMPLETION
    assert RequestShape("vllm", _key(host="h", port=None)).metric[sc.SERVER_ADDRESS] == "h"
    assert sc.SERVER_PORT not in RequestShape("vllm", _key(host="h", port=None)).metric


def test_outcome_sets_add_the_response_model_and_token_type() -> None:
    shape = RequestShape("vllm", _key())
    sets = shape.outcome("m-served")
    assert sets.attributes == {**shape.metric, sc.GEN_AI_RESPONSE_MODEL: "m-served"}
    assert sets.input_tokens == {**sets.attributes, sc.GEN_AI_TOKEN_TYPE: sc.TOKEN_TYPE_INPUT}
    assert sets.output_tokens == {**sets.attributes, sc.GEN_AI_TOKEN_TYPE: sc.TOKEN_TYPE_OUTPUT}
    assert shape.outcome(None).attributes == shape.metric
    # the bulk histograms' series keys, one per attribute set
    assert (sets.key, sets.input_key, sets.output_key) == (
        attributes_key(sets.attributes),
        attributes_key(sets.input_tokens),
        attributes_key(sets.output_tokens),
    )
    assert shape.outcome("m-served") is sets


def test_the_shape_cache_stops_at_its_bound_and_still_answers() -> None:
    runtime = _runtime()
    shapes = [runtime.shape(_key(model=f"m{i}")) for i in range(_MAX_SHAPES + 10)]
    assert len(runtime.shapes) == _MAX_SHAPES
    assert runtime.shape(_key(model="m0")) is shapes[0]  # within the bound: built once
    past = _key(model=f"m{_MAX_SHAPES}")
    assert runtime.shape(past) is not runtime.shape(past)  # past it: built per request, not kept
    assert runtime.shape(past).name == f"{sc.OPERATION_CHAT} m{_MAX_SHAPES}"
    assert len(runtime.shapes) == _MAX_SHAPES
    assert _MAX_SHAPES == 1024


def test_the_outcome_cache_stops_at_its_bound_and_still_answers() -> None:
    shape = RequestShape("vllm", _key())
    for i in range(_MAX_SHAPES + 10):
        shape.outcome(f"r{i}")
    assert len(shape.outcomes) == _MAX_SHAPES
    past = f"r{_MAX_SHAPES}"
    assert shape.outcome(past) is not shape.outcome(past)
    assert shape.outcome(past).attributes[sc.GEN_AI_RESPONSE_MODEL] == past


def test_the_runtime_copies_its_switches_and_starts_active() -> None:
    config = InstrumentationConfig(
        capture_content=True,
        include_usage=True,
        inject_traceparent=True,
        provider_name="sglang",
        chunk_metrics=False,
    )
    runtime = Runtime(config, TracerProvider(), MeterProvider())
    assert (
        runtime.capture_content,
        runtime.include_usage,
        runtime.inject_traceparent,
        runtime.chunk_metrics,
        runtime.provider_name,
        runtime.active,
        runtime.follows,
    ) == (True, True, True, False, "sglang", True, False)
    assert runtime.config is config
    assert runtime.shapes == {}


def test_requests_record_under_spark_otel_s_own_scope() -> None:
    span = _runtime().tracer.start_span("chat m")
    scope = span.instrumentation_scope  # type: ignore[attr-defined]
    assert (scope.name, scope.version, scope.schema_url) == (sc.SCOPE_NAME, __version__, sc.SCHEMA_URL)
    span.end()


def test_a_runtime_follows_spark_otel_s_telemetry_for_any_provider_it_was_not_given() -> None:
    """Each request re-resolves what the runtime follows (after a `spark_otel.configure()`)."""
    config = InstrumentationConfig()
    follows = [
        Runtime(config, tracer_provider, meter_provider).follows
        for tracer_provider, meter_provider in [
            (TracerProvider(), None),
            (None, MeterProvider()),
            (None, None),
            (TracerProvider(), MeterProvider()),
        ]
    ]
    assert follows == [True, True, True, False]
