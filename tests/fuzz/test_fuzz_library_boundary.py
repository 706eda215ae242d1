"""Fuzzing the library boundary: `spark_otel.cell`, `spark_otel.instrument` and
`spark_otel.stream_with_deadline` with hostile arguments either work or raise `ConfigError`;
an unusable store costs the eval one log line, never the eval.

The raw-HTTP client here is a real ``httpx2.Client`` over a `MockTransport` answering a short
server-sent-event stream, so a call whose arguments pass goes all the way through without a
socket. Properties that find a bug outside the readers (cells.py, the instrumentation, the
deadline plan, the guard) are kept as strict xfails naming it, each failing fast on an
explicit example; when the owner fixes it they XPASS, and the mark comes off.
"""

from __future__ import annotations

import logging
import math
import re
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx2
import pytest
from hypothesis import event, example, given
from hypothesis import strategies as st
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from tests.support.fuzzing import FUZZ, JSON_VALUES, timed

import spark_otel
import spark_otel._guard
import spark_otel.telemetry
from spark_otel import ConfigError
from spark_otel import _semconv as sc
from spark_otel._validate import MAX_COUNT, check_cell_arguments
from spark_otel.deadline import DeadlineResult
from spark_otel.instrumentation import SparkOtelInstrumentor


@pytest.fixture(scope="module")
def spans() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture(scope="module")
def providers(spans: InMemorySpanExporter) -> Iterator[dict[str, Any]]:
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    meter_provider = MeterProvider(metric_readers=[InMemoryMetricReader()])
    yield {"tracer_provider": tracer_provider, "meter_provider": meter_provider}
    tracer_provider.shutdown()
    meter_provider.shutdown()


def cell_spans(spans: InMemorySpanExporter) -> list[Any]:
    return [
        s
        for s in spans.get_finished_spans()
        if (s.attributes or {}).get(sc.SPAN_KIND_ATTR) == sc.SPAN_KIND_CELL
    ]


# -- cell() ----------------------------------------------------------------------------------------------
NAMES = st.text(min_size=1, max_size=30).filter(str.strip) | st.sampled_from(
    ["a\x00b", "é" * 200, "x" * 10_000]
)
SECONDS = st.floats(min_value=1e-300, max_value=1e300) | st.integers(1, 10**18)
WORKERS = st.integers(1, MAX_COUNT - 1)
ATTRIBUTE_VALUES = JSON_VALUES | st.sampled_from([object(), b"bytes", (1, "a"), {1, 2}, 2**70, float("nan")])
CELL_PARAMETERS = {"eval_name", "cell_id", "engine", "deadline_s", "workers", "cell_class"}
CELL_PARAMETERS |= {"tracer_provider", "meter_provider"}
ATTRIBUTE_KEYS = st.text(min_size=1, max_size=12).filter(
    lambda k: k not in CELL_PARAMETERS and not k.startswith(("spark_otel.", "gen_ai."))
)


@FUZZ
@given(
    eval_name=NAMES,
    cell_id=st.none() | NAMES,
    engine=st.none() | NAMES,
    deadline_s=st.none() | SECONDS,
    workers=st.none() | WORKERS,
    attributes=st.dictionaries(ATTRIBUTE_KEYS, ATTRIBUTE_VALUES, max_size=4),
)
def test_a_cell_with_valid_arguments_and_any_attributes_records_its_span(
    spans: InMemorySpanExporter,
    providers: dict[str, Any],
    eval_name: str,
    cell_id: str | None,
    engine: str | None,
    deadline_s: float | None,
    workers: int | None,
    attributes: dict[str, Any],
) -> None:
    spans.clear()

    def run() -> None:
        with spark_otel.cell(
            eval_name,
            cell_id,
            engine=engine,
            deadline_s=deadline_s,
            workers=workers,
            **attributes,
            **providers,
        ) as state:
            state.add_tokens(prompt=3, completion=5)

    timed(run, "a cell")
    [span] = cell_spans(spans)
    assert span.attributes[sc.EVAL_NAME] == eval_name
    if cell_id is not None:
        assert span.attributes[sc.CELL_ID] == cell_id


def _valid_text(value: Any) -> bool:
    return isinstance(value, str) and bool(value.strip())


def cell_arguments_valid(
    eval_name: Any, cell_id: Any, engine: Any, deadline_s: Any, workers: Any
) -> str | None:
    """The first argument that is not what `spark_otel.cell` documents, or None (the oracle)."""
    if not _valid_text(eval_name):
        return "eval_name"
    if cell_id is not None and not _valid_text(cell_id):
        return "cell_id"
    if engine is not None and not _valid_text(engine):
        return "engine"
    number = isinstance(deadline_s, int | float) and not isinstance(deadline_s, bool)
    if deadline_s is not None and not (number and math.isfinite(deadline_s) and deadline_s > 0):
        return "deadline_s"
    whole = isinstance(workers, int) and not isinstance(workers, bool)
    if workers is not None and not (whole and 1 <= workers < MAX_COUNT):
        return "workers"
    return None


HOSTILE_TEXT_ARGS = st.sampled_from(["", " ", "\t", None, 5, 0, b"golden", ["golden"], ("g",), 1.5, True])
HOSTILE_SECONDS = st.sampled_from([0, -1, -0.0, math.nan, math.inf, -math.inf, "1800", True, False, [1800]])
HOSTILE_WORKERS = st.sampled_from([0, -1, 2.5, 4.0, "4", True, 2**53, 2**64, math.nan, [4]])
CELL_ARGUMENTS = {
    "eval_name": NAMES | HOSTILE_TEXT_ARGS,
    "cell_id": st.none() | NAMES | HOSTILE_TEXT_ARGS,
    "engine": st.none() | NAMES | HOSTILE_TEXT_ARGS,
    "deadline_s": st.none() | SECONDS | HOSTILE_SECONDS,
    "workers": st.none() | WORKERS | HOSTILE_WORKERS,
}


@FUZZ
@given(**CELL_ARGUMENTS)
def test_check_cell_arguments_refuses_exactly_what_cell_documents_as_wrong(
    eval_name: Any, cell_id: Any, engine: Any, deadline_s: Any, workers: Any
) -> None:
    """The check `cell()` is meant to run before its span starts (`_validate`)."""
    wrong = cell_arguments_valid(eval_name, cell_id, engine, deadline_s, workers)
    if wrong is None:
        check_cell_arguments(eval_name, cell_id, engine=engine, deadline_s=deadline_s, workers=workers)
        return
    with pytest.raises(ConfigError, match=rf"cell\({wrong}="):
        check_cell_arguments(eval_name, cell_id, engine=engine, deadline_s=deadline_s, workers=workers)


@FUZZ
@given(**CELL_ARGUMENTS)
@example(eval_name="", cell_id="c", engine=None, deadline_s=None, workers=None)
@example(eval_name="golden", cell_id="c", engine=None, deadline_s=math.nan, workers=None)
@example(eval_name="golden", cell_id="c", engine=None, deadline_s=None, workers=0)
def test_a_cell_with_a_hostile_argument_raises_config_error_naming_it_before_it_starts(
    spans: InMemorySpanExporter,
    providers: dict[str, Any],
    eval_name: Any,
    cell_id: Any,
    engine: Any,
    deadline_s: Any,
    workers: Any,
) -> None:
    spans.clear()
    wrong = cell_arguments_valid(eval_name, cell_id, engine, deadline_s, workers)
    body_ran = False
    refused: ConfigError | None = None
    try:
        with spark_otel.cell(
            eval_name, cell_id, engine=engine, deadline_s=deadline_s, workers=workers, **providers
        ):
            body_ran = True
    except ConfigError as exc:
        refused = exc
    if refused is None:
        assert wrong is None, f"cell({wrong}=...) was accepted"
        return
    assert wrong is not None, str(refused)
    assert wrong in str(refused), str(refused)
    assert not body_ran
    assert not cell_spans(spans)


# -- instrument() ----------------------------------------------------------------------------------------
FLAGS = st.sampled_from([None, True, False, 0, 1, "true", "", "0", [], 1.0])
PROVIDER_NAMES = st.sampled_from(["vllm", "sglang", " x ", "", "  ", None, 5, b"vllm", ["vllm"]]) | st.text(
    max_size=8
)


def instrument_outcome(**kwargs: Any) -> ConfigError | None:
    """Instrument and undo it; the `ConfigError` it raised, or None. Any other exception fails."""
    refused: ConfigError | None = None
    try:
        timed(lambda: spark_otel.instrument(**kwargs), "instrument()")
    except ConfigError as exc:
        refused = exc
        patched = SparkOtelInstrumentor().is_instrumented_by_opentelemetry
    finally:
        if SparkOtelInstrumentor().is_instrumented_by_opentelemetry:
            spark_otel.uninstrument()
    if refused is not None:
        assert not patched, "a refused instrument() patched"
        assert "instrument(" in str(refused), str(refused)
    return refused


@FUZZ
@given(
    capture_content=FLAGS,
    include_usage=FLAGS,
    inject_traceparent=FLAGS,
    chunk_metrics=FLAGS,
    provider_name=PROVIDER_NAMES,
)
def test_instrument_with_hostile_switches_works_or_raises_config_error(
    providers: dict[str, Any],
    capture_content: Any,
    include_usage: Any,
    inject_traceparent: Any,
    chunk_metrics: Any,
    provider_name: Any,
) -> None:
    outcome = instrument_outcome(
        capture_content=capture_content,
        include_usage=include_usage,
        inject_traceparent=inject_traceparent,
        chunk_metrics=chunk_metrics,
        provider_name=provider_name,
        **providers,
    )
    flags_ok = all(
        v is None or isinstance(v, bool)
        for v in (capture_content, include_usage, inject_traceparent, chunk_metrics)
    )
    name_ok = isinstance(provider_name, str) and bool(provider_name.strip())
    assert (outcome is None) == (flags_ok and name_ok), outcome


HOSTILE_PROVIDERS = st.sampled_from(["otlp", 5, object(), [], True, TracerProvider, MeterProvider])


@FUZZ
@given(which=st.sampled_from(["tracer_provider", "meter_provider"]), provider=HOSTILE_PROVIDERS)
@example(which="tracer_provider", provider="otlp")
@example(which="meter_provider", provider="otlp")
def test_instrument_with_a_hostile_provider_raises_config_error(
    providers: dict[str, Any], which: str, provider: Any
) -> None:
    assert instrument_outcome(**{**providers, which: provider}) is not None


# -- stream_with_deadline() ------------------------------------------------------------------------------
SSE = (
    b'data: {"choices":[{"index":0,"delta":{"content":"[{\\"id\\": 1}]"}}]}\n\n'
    b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],'
    b'"usage":{"prompt_tokens":3,"completion_tokens":2}}\n\n'
    b"data: [DONE]\n\n"
)


def _answer(request: httpx2.Request) -> httpx2.Response:
    return httpx2.Response(200, content=SSE, headers={"content-type": "text/event-stream"})


@pytest.fixture(scope="module")
def engine() -> Iterator[httpx2.Client]:
    with httpx2.Client(
        base_url="http://engine.invalid:8011", transport=httpx2.MockTransport(_answer)
    ) as client:
        yield client


@pytest.fixture(scope="module")
def clients(engine: httpx2.Client) -> Iterator[dict[str | None, Any]]:
    """What a caller might pass as the client: the engine, or something that is not one."""
    with httpx2.Client() as no_base_url:
        yield {
            "engine": engine,
            None: None,
            "text": "http://127.0.0.1:8011",
            "async": httpx2.AsyncClient(base_url="http://engine.invalid:8011"),
            "no base_url": no_base_url,
        }


MISSING = object()
"""An argument left out of the call."""
# Per argument: values that are fine, and hostile ones. A call draws 0-2 arguments hostile, the
# rest fine, so most calls reach the engine and every hostile value is met on its own.
ARGUMENTS: dict[str, tuple[list[Any], st.SearchStrategy[Any]]] = {
    "client": (["engine"], st.sampled_from([None, "text", "async", "no base_url"])),
    "deadline_s": (
        [5, 0.5, 30, MISSING],
        st.sampled_from([0, -1, -0.0, 1e-300, math.nan, math.inf, -math.inf, "5", True, [5]])
        | st.floats(max_value=1e6),
    ),
    "deadline_at": (
        [MISSING],
        st.sampled_from([None, 0, -1.0, math.nan, math.inf, "2026-09-17", True])
        | st.datetimes(
            min_value=datetime(2000, 1, 1),
            max_value=datetime(2100, 1, 1),
            timezones=st.sampled_from([None, UTC]),
        ),
    ),
    "max_output_tokens": ([MISSING, None, 1, 3, 2**80], st.sampled_from([0, -1, 1.5, "5", True, [1]])),
    "extractor": (
        [MISSING, "json", "jsonl", None, re.compile(r"id"), lambda text: [text[:1]]],
        st.sampled_from(["regex", "(", 5, b"json"]),
    ),
    "model": (["m"], st.sampled_from([MISSING, "", None, 5, ["m"]])),
    "messages": ([[{"role": "user", "content": "find bugs"}]], st.sampled_from([MISSING, [], "x", 5, None])),
    "prompt": ([MISSING], st.sampled_from(["find bugs", "", ["a"], 5, None])),
    "n": ([MISSING, 1, None], st.sampled_from([2, 0, [1], "1"])),
    "stream": ([MISSING, True], st.sampled_from([False, None, "yes"])),
    "stream_options": ([MISSING, None, {}, {"include_usage": False}], st.sampled_from([{"x": [1, 2]}, []])),
    "timeout": ([MISSING, 5], st.sampled_from([None, 0, -1, "x", math.inf])),
    "max_tokens": ([MISSING, 64], st.sampled_from([0, -5, None])),
}


@st.composite
def stream_calls(draw: st.DrawFn) -> dict[str, Any]:
    """The arguments of one `stream_with_deadline` call (``client`` among them)."""
    hostile = draw(st.sets(st.sampled_from(sorted(ARGUMENTS)), max_size=2))
    call: dict[str, Any] = {}
    for name, (fine, bad) in ARGUMENTS.items():
        value = draw(bad) if name in hostile else draw(st.sampled_from(fine))
        if value is not MISSING:
            call[name] = value
    return call


def stream_outcome(client: Any, **kwargs: Any) -> DeadlineResult | ConfigError:
    """The call's result or `ConfigError`; any other exception, in the call or in a thread it
    started (the watchdog), fails the test."""
    died: list[BaseException | None] = []
    hook = threading.excepthook
    threading.excepthook = lambda args: died.append(args.exc_value)
    outcome: DeadlineResult | ConfigError
    try:
        outcome = timed(lambda: spark_otel.stream_with_deadline(client, **kwargs), "stream_with_deadline")
    except ConfigError as exc:
        outcome = exc
    finally:
        threading.excepthook = hook
    assert not died, f"a thread of stream_with_deadline died: {died[0]!r}"
    if isinstance(outcome, ConfigError):
        assert str(outcome), "an empty message"
        assert "\n" not in str(outcome), str(outcome)
    assert isinstance(outcome, DeadlineResult | ConfigError)
    return outcome


FINE = {"client": "engine", "model": "m", "messages": [{"role": "user", "content": "find bugs"}]}


@FUZZ
@given(call=stream_calls())
@example(call={**FINE, "deadline_s": 5})
@example(call={**FINE, "deadline_s": math.nan})
@example(call={**FINE, "deadline_s": math.inf})
@example(call={**FINE, "deadline_s": -1})
@example(call={**FINE, "deadline_s": True})
@example(call={**FINE, "deadline_at": math.nan})
@example(call={**FINE, "deadline_s": 5, "deadline_at": 0})
@example(call={**FINE, "max_output_tokens": 0})
@example(call={**FINE})  # no bound at all
@example(call={**FINE, "deadline_s": 5, "prompt": "x"})  # messages and prompt
@example(call={**FINE, "deadline_s": 5, "n": 2})
@example(call={**FINE, "deadline_s": 5, "stream": False})
@example(call={**FINE, "deadline_s": 5, "model": ""})
@example(call={**FINE, "client": "async", "deadline_s": 5})
def test_stream_with_deadline_with_hostile_arguments_returns_a_result_or_raises_config_error(
    clients: dict[str | None, Any], call: dict[str, Any]
) -> None:
    client = clients[call.pop("client")]
    outcome = stream_outcome(client, **call)
    event(f"status {outcome.status}" if isinstance(outcome, DeadlineResult) else "ConfigError")


HOSTILE_DEADLINE_ARGUMENTS = [
    pytest.param({"deadline_s": 1e300}, id="deadline_s-1e300"),
    pytest.param({"deadline_s": threading.TIMEOUT_MAX * 2}, id="deadline_s-past-TIMEOUT_MAX"),
    pytest.param({"deadline_at": 1e300}, id="deadline_at-1e300"),
    pytest.param({"deadline_at": datetime.max.replace(tzinfo=UTC)}, id="deadline_at-datetime.max"),
    pytest.param({"deadline_at": datetime.min}, id="deadline_at-naive-datetime.min"),
    pytest.param({"deadline_s": 5, "stream_options": "include_usage"}, id="stream_options-text"),
    pytest.param({"deadline_s": 5, "stream_options": 5}, id="stream_options-int"),
    pytest.param({"deadline_s": 5, "messages": [{"role": "user", "content": object()}]}, id="body-not-json"),
    # The raw-HTTP path puts a caller's timeout= into the request body (the deadline replaces it).
    pytest.param({"deadline_s": 5, "timeout": math.inf}, id="timeout-inf-in-the-body"),
]


@pytest.mark.parametrize("arguments", HOSTILE_DEADLINE_ARGUMENTS)
def test_stream_with_deadline_hostile_arguments_found_by_fuzzing_raise_config_error(
    engine: httpx2.Client, arguments: dict[str, Any]
) -> None:
    call = {"model": "m", "messages": [{"role": "user", "content": "find bugs"}], **arguments}
    outcome = stream_outcome(engine, **call)
    assert isinstance(outcome, ConfigError), outcome


# -- an unusable store -----------------------------------------------------------------------------------
@pytest.fixture(params=["not-a-database", "a-directory", "under-a-file", "unreadable-dir"])
def unusable_store(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """$SPARK_OTEL_STORE at a path no store can open, and no telemetry in force (so a cell sets
    up its own, from the environment, as an eval that never called configure() does)."""
    kind = request.param
    if kind == "not-a-database":
        path = tmp_path / "notes.txt"
        path.write_text("not a database\n")
    elif kind == "a-directory":
        path = tmp_path / "store.sqlite"
        path.mkdir()
    elif kind == "under-a-file":
        (tmp_path / "file").write_text("x")
        path = tmp_path / "file" / "store.sqlite"
    else:
        path = Path("/proc/spark-otel-no-such-dir/store.sqlite")
    monkeypatch.setenv("SPARK_OTEL_STORE", str(path))
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", raising=False)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", raising=False)
    monkeypatch.setattr(spark_otel.telemetry, "current_telemetry", lambda: None)
    monkeypatch.setattr(spark_otel.telemetry, "user_pipeline_installed", lambda: False)
    return path


def run_eval_cell() -> str:
    with spark_otel.cell("golden-review", "B#265", engine="qwen", deadline_s=1800) as state:
        state.add_tokens(prompt=3, completion=5)
        return "the eval's own result"


def test_an_unusable_store_costs_the_eval_at_most_one_warning_never_the_eval(
    unusable_store: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="spark_otel")
    results = [timed(run_eval_cell, "a cell with an unusable store") for _ in range(3)]
    assert results == ["the eval's own result"] * 3
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) <= 1, [r.getMessage() for r in warnings]


def test_an_unusable_store_is_one_log_line_naming_it_without_a_traceback(
    unusable_store: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="spark_otel")
    run_eval_cell()
    [warning] = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert warning.exc_info is None, "a traceback"
    assert str(unusable_store) in warning.getMessage()
    assert "\n" not in warning.getMessage()


def test_instrument_with_an_unusable_store_goes_on(
    unusable_store: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    caplog.set_level(logging.WARNING, logger="spark_otel")
    try:
        spark_otel.instrument()
        assert SparkOtelInstrumentor().is_instrumented
    finally:
        if SparkOtelInstrumentor().is_instrumented_by_opentelemetry:
            spark_otel.uninstrument()
    [warning] = caplog.messages
    assert warning.startswith(
        "spark_otel: telemetry setup for instrument() failed; the call goes on untouched: "
    )
    assert str(unusable_store) in warning


def test_the_unusable_store_fixture_is_one(unusable_store: Path) -> None:
    from spark_otel import StoreError
    from spark_otel.store import Store

    with pytest.raises(StoreError):
        Store(unusable_store)
