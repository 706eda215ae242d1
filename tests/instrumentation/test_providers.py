"""Where `instrument()` sends spans and metrics: passed providers, spark-otel's telemetry in
force (followed across `configure()`), the user's global providers, or a default setup."""

from __future__ import annotations

import math
from pathlib import Path

import openai
import pytest
from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import Histogram, MeterProvider
from opentelemetry.sdk.metrics.export import ExponentialHistogramDataPoint, InMemoryMetricReader
from opentelemetry.sdk.metrics.view import ExponentialBucketHistogramAggregation
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from tests.support.engine_server import MODEL
from tests.support.finished_spans import one_span, request_spans
from tests.support.metric_points import CapturingExporter, metric_points, points_in

import spark_otel
from spark_otel import ConfigError
from spark_otel import _semconv as sc
from spark_otel.instrumentation import SparkOtelInstrumentor
from spark_otel.store import Store
from spark_otel.telemetry import build_providers, current_telemetry
from spark_otel.telemetry.bulk_histogram import bulk_histograms_of

pytestmark = pytest.mark.usefixtures("fresh_globals")


def _call(base_url: str, max_tokens: int = 3) -> None:
    openai.OpenAI(base_url=base_url, api_key="sk").completions.create(
        model=MODEL, prompt="a b", max_tokens=max_tokens
    )


def _flush() -> None:
    telemetry = current_telemetry()
    assert telemetry is not None
    telemetry.force_flush()


def _sdk_pipeline() -> tuple[TracerProvider, InMemorySpanExporter, MeterProvider, InMemoryMetricReader]:
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    return tracer_provider, exporter, MeterProvider(metric_readers=[reader]), reader


def test_configure_after_instrument_moves_requests_and_cells_to_the_new_setup(
    base_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SPARK_OTEL_STORE", str(tmp_path / "a.sqlite"))
    spark_otel.instrument()  # no telemetry yet: the default setup, the store at a.sqlite
    _call(base_url, max_tokens=1)
    spark_otel.configure(service_name="my-eval", store=tmp_path / "b.sqlite")  # shuts a.sqlite's down
    with spark_otel.cell("ev", "c1", engine="e"):
        _call(base_url, max_tokens=3)
    _flush()
    spark_otel.configure(store=tmp_path / "c.sqlite")
    _call(base_url, max_tokens=2)
    _flush()
    with (
        Store(tmp_path / "a.sqlite") as a,
        Store(tmp_path / "b.sqlite") as b,
        Store(tmp_path / "c.sqlite") as c,
    ):
        assert [r.output_tokens for r in a.requests()] == [1]
        assert [r.output_tokens for r in b.requests()] == [3]
        ((cell),) = b.cells()
        assert [r.output_tokens for r in c.requests()] == [2]
    assert cell.completion_tokens == 3
    assert cell.prompt_tokens == 2


def test_instrument_prefers_the_users_global_providers_over_a_store(
    base_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SPARK_OTEL_STORE", str(tmp_path / "store.sqlite"))
    tracer_provider, exporter, meter_provider, reader = _sdk_pipeline()
    trace.set_tracer_provider(tracer_provider)
    metrics.set_meter_provider(meter_provider)
    spark_otel.instrument()
    _call(base_url)
    assert current_telemetry() is None  # spark-otel set nothing up of its own
    assert not (tmp_path / "store.sqlite").exists()
    assert one_span(exporter).attributes[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == 3  # type: ignore[index]
    assert [p.count for p in metric_points(reader, sc.GEN_AI_CLIENT_OPERATION_DURATION)] == [1]


def test_a_later_configure_is_followed_even_over_global_providers(base_url: str, tmp_path: Path) -> None:
    tracer_provider, exporter, _, _ = _sdk_pipeline()
    trace.set_tracer_provider(tracer_provider)
    spark_otel.instrument()
    _call(base_url, max_tokens=1)
    spark_otel.configure(store=tmp_path / "s.sqlite")  # the user asks for spark-otel's setup
    _call(base_url, max_tokens=2)
    _flush()
    assert [s.attributes[sc.GEN_AI_USAGE_OUTPUT_TOKENS] for s in request_spans(exporter)] == [1]  # type: ignore[index]
    with Store(tmp_path / "s.sqlite") as store:
        assert [r.output_tokens for r in store.requests()] == [2]


def test_spark_otels_own_shut_down_globals_are_not_taken_for_the_users(
    base_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spark_otel.configure(store=tmp_path / "old.sqlite")  # installs its providers globally
    spark_otel.shutdown()  # ... which stay global, shut down
    assert not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)
    monkeypatch.setenv("SPARK_OTEL_STORE", str(tmp_path / "new.sqlite"))
    spark_otel.instrument()
    _call(base_url)
    _flush()
    with Store(tmp_path / "new.sqlite") as store:
        assert [r.output_tokens for r in store.requests()] == [3]


def test_one_provider_passed_sets_nothing_up_and_pairs_with_the_global_other(
    base_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SPARK_OTEL_STORE", str(tmp_path / "store.sqlite"))
    tracer_provider, exporter, meter_provider, reader = _sdk_pipeline()
    spark_otel.instrument(tracer_provider=tracer_provider)
    _call(base_url, max_tokens=1)
    assert current_telemetry() is None
    assert not (tmp_path / "store.sqlite").exists()
    assert trace.get_tracer_provider() is not tracer_provider  # nothing installed globally either
    metrics.set_meter_provider(meter_provider)  # the global placeholder hands over to it
    _call(base_url, max_tokens=2)
    assert [s.attributes[sc.GEN_AI_USAGE_OUTPUT_TOKENS] for s in request_spans(exporter)] == [1, 2]  # type: ignore[index]
    (point,) = metric_points(reader, sc.GEN_AI_CLIENT_OPERATION_DURATION)
    assert point.count == 1


def test_one_provider_passed_pairs_with_spark_otels_telemetry_in_force(base_url: str, tmp_path: Path) -> None:
    spark_otel.configure(store=tmp_path / "s.sqlite")
    _, _, meter_provider, reader = _sdk_pipeline()
    spark_otel.instrument(meter_provider=meter_provider)
    _call(base_url)
    _flush()
    with Store(tmp_path / "s.sqlite") as store:
        assert [r.output_tokens for r in store.requests()] == [3]  # spans: the telemetry's
    assert [p.count for p in metric_points(reader, sc.GEN_AI_CLIENT_OPERATION_DURATION)] == [1]


@pytest.mark.parametrize("bad", [{"tracer_provder": None}, {"capture_contents": True}])
def test_misspelt_keyword_raises_config_error_and_patches_nothing(bad: dict[str, object]) -> None:
    (name,) = bad
    with pytest.raises(ConfigError, match=name):
        SparkOtelInstrumentor().instrument(**bad)
    assert not SparkOtelInstrumentor().is_instrumented
    with pytest.raises(TypeError):
        spark_otel.instrument(**bad)  # type: ignore[arg-type]


def test_opentelemetry_instrument_keywords_are_accepted(
    tracer_provider: TracerProvider, meter_provider: MeterProvider
) -> None:
    instrumentor = SparkOtelInstrumentor()
    instrumentor.instrument(
        tracer_provider=tracer_provider,
        meter_provider=meter_provider,
        skip_dep_check=True,
        raise_exception_on_conflict=False,
    )
    assert instrumentor.is_instrumented
    with pytest.raises(ConfigError, match=r"^uninstrument\(\): unknown argument\(s\) bogus$"):
        instrumentor.uninstrument(bogus=1)
    assert instrumentor.is_instrumented
    instrumentor.uninstrument()
    assert not instrumentor.is_instrumented


def _stream(base_url: str, max_tokens: int) -> int:
    stream = openai.OpenAI(base_url=base_url, api_key="sk").chat.completions.create(  # type: ignore[call-overload]
        model=MODEL,
        messages=[{"role": "user", "content": "count"}],
        max_tokens=max_tokens,
        stream=True,
        stream_options={"include_usage": True},
    )
    return sum(1 for _ in stream)


def _chunk_counts(path: Path) -> list[float]:
    with Store(path) as store:
        return [s.value for s in store.samples(sc.GEN_AI_CLIENT_TIME_PER_OUTPUT_CHUNK + ".count")]


def test_the_store_gets_every_chunk_interval_in_bulk_across_a_reconfigure(
    base_url: str, tmp_path: Path
) -> None:
    """spark-otel's own providers take a stream's chunk intervals at once (`BulkHistogramReader`);
    a `configure()` moves them to the new providers like every other metric."""
    spark_otel.configure(store=tmp_path / "b.sqlite")
    spark_otel.instrument()
    first = [_stream(base_url, max_tokens=5), _stream(base_url, max_tokens=4)]
    _flush()
    spark_otel.configure(store=tmp_path / "c.sqlite")  # flushes and shuts down b's providers
    second = _stream(base_url, max_tokens=7)
    _flush()
    assert min(first) > 4
    # Cumulative points: the last one counts every interval after each stream's first chunk.
    assert _chunk_counts(tmp_path / "b.sqlite")[-1] == sum(n - 1 for n in first)
    assert _chunk_counts(tmp_path / "c.sqlite")[-1] == second - 1


def test_a_cell_entered_again_after_a_reconfigure_records_to_the_new_setup(tmp_path: Path) -> None:
    reused = spark_otel.cell("ev", "c1", engine="e")
    spark_otel.configure(store=tmp_path / "a.sqlite")
    with reused as state:
        state.add_tokens(completion=1)
    spark_otel.configure(store=tmp_path / "b.sqlite")  # flushes and shuts down a's providers
    with reused as state:
        state.add_tokens(completion=2)
    _flush()
    with Store(tmp_path / "a.sqlite") as a, Store(tmp_path / "b.sqlite") as b:
        assert [c.completion_tokens for c in a.cells()] == [1]
        assert [c.completion_tokens for c in b.cells()] == [2]


def test_an_exporter_wanting_exponential_histograms_gets_the_chunk_intervals_through_the_sdk(
    base_url: str,
) -> None:
    """The bulk histogram only makes explicit-bucket points; a reader asking for another
    aggregation leaves its provider on plain SDK records, so every histogram arrives alike."""
    exponential = CapturingExporter(
        preferred_aggregation={Histogram: ExponentialBucketHistogramAggregation()}
    )
    tracer_provider, meter_provider = build_providers([], [(exponential, math.inf)])
    assert bulk_histograms_of(meter_provider) is None
    _, default = build_providers([], [(CapturingExporter(), math.inf)])
    assert bulk_histograms_of(default) is not None
    spark_otel.instrument(tracer_provider=tracer_provider, meter_provider=meter_provider)
    try:
        chunks = _stream(base_url, max_tokens=5)
    finally:
        spark_otel.uninstrument()
    meter_provider.force_flush()
    (point,) = points_in(exponential.last, sc.GEN_AI_CLIENT_TIME_PER_OUTPUT_CHUNK)
    assert isinstance(point, ExponentialHistogramDataPoint)
    assert point.count == chunks - 1
    for provider in (tracer_provider, meter_provider, default):
        provider.shutdown()
