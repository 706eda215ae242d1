"""Whole probe runs against a real engine on 127.0.0.1 scripted per request: what the probe
sends, what it keeps, and how each level reads the engine's counters, its power and its streams.

Pinned whole: the requests (a small warm-up, then each level's pinned bodies, with their
headers, on connections kept between rounds), the load windows stored at once and the report
document (named by the run or by engine and run id), the spans an OTLP telemetry gets, the
engine counters read around a level when a scrape fails, resets or never settles, a level whose
streams stall (the client's read timeout, then the level's own), power averaged over the level
with the sampler's readings, and the probe's own requests kept out of the user's traces.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from tests.support.scripted_engine import (
    MODEL,
    TOKEN_EVENT,
    Answer,
    ScriptedEngine,
    default_answer,
    load_free,
    vllm_metrics,
)

import spark_otel.probe.prober as prober
from spark_otel import __version__, _clock
from spark_otel import _semconv as sc
from spark_otel.model import LoadWindow
from spark_otel.probe import ProbeLevel, ProbeReport, ProbeSettings, load_probe_report, run_probe
from spark_otel.probe.streams import probe_prompt
from spark_otel.store import Store
from spark_otel.telemetry import Telemetry

TINY = {"tokens": 4, "warmup": False, "gpu": "none"}
NOT_SETTLED = "level 1: the engine's running count did not settle; the engine aggregate is approximate"


def _probe(server: ScriptedEngine, store: Store | None = None, **settings: object) -> ProbeReport:
    return run_probe(server.url, ProbeSettings.model_validate({**TINY, **settings}), store=store)


def _run_id(window: LoadWindow) -> str:
    found = re.fullmatch(rf"probe-([0-9a-f]{{12}})-{window.streams}-0", window.uid)
    assert found, window.uid
    return found.group(1)


def _pinned(tokens: int, stream: bool = True) -> dict[str, object]:
    body: dict[str, object] = {
        "model": MODEL,
        "prompt": probe_prompt(30),
        "max_tokens": tokens,
        "min_tokens": tokens,
        "ignore_eos": True,
        "temperature": 0.0,
        "stream": stream,
    }
    return {**body, "stream_options": {"include_usage": True}} if stream else body


def test_a_warm_up_of_at_most_16_tokens_then_each_levels_pinned_requests() -> None:
    with ScriptedEngine() as engine:
        _probe(engine, streams=[1, 2], tokens=20, prompt_chars=30, warmup=True)
    assert engine.bodies == [_pinned(16), _pinned(20), _pinned(20), _pinned(20)]
    sent = [(c.headers["content-type"], c.headers["accept-encoding"]) for c in engine.completions]
    assert sent == [("application/json", "identity")] * 4  # an encoded body would cost the client CPU


def test_a_rounds_connections_are_all_kept_for_the_next_one() -> None:
    """21 streams, one more than httpx keeps alive by default: the warm-up's connection and 20
    more carry the first round, and the same 21 the second; no stream pays for a new one."""
    with ScriptedEngine() as engine:
        report = _probe(engine, streams=[21], repeats=2, tokens=1, warmup=True)
    assert [lv.probe_tokens for lv in report.levels] == [21, 21]
    assert len(engine.completions) == 43
    assert len({c.connection for c in engine.completions}) == 21


def test_each_level_is_stored_as_a_load_window_and_the_run_as_a_probe_document(store: Store) -> None:
    seen: list[ProbeLevel] = []
    with ScriptedEngine() as engine:
        cpu_before = _clock.thread_cpu_s()
        report = run_probe(
            engine.url,
            ProbeSettings.model_validate({**TINY, "streams": [1, 2]}),
            store=store,
            on_level=seen.append,
        )
        cpu_spent = _clock.thread_cpu_s() - cpu_before
    host_port = engine.url.removeprefix("http://")
    windows = store.windows(kind="probe")
    run_id = _run_id(windows[0])
    assert windows == [
        LoadWindow(
            uid=f"probe-{run_id}-{n}-0",
            name=f"probe {n} streams",
            kind="probe",
            engine=host_port,
            start_unix_ns=level.start_unix_ns,
            end_unix_ns=level.end_unix_ns,
            streams=n,
            attributes={
                sc.PROBE_RUN: run_id,
                sc.PROBE_REPEAT: 0,
                sc.PROBE_TOKENS: 4,
                sc.PROBE_MODE: "stream",
            },
        )
        for n, level in zip([1, 2], report.levels, strict=True)
    ]
    [doc] = store.documents("probe")
    assert doc["name"] == f"probe {host_port} {run_id}"
    assert load_probe_report(doc["body"]) == report
    assert seen == report.levels
    assert report.curve.model_dump(exclude={"points"}) == {
        "engine": host_port,
        "source": "probe",
        "model": MODEL,
        "measured_unix_ns": report.levels[1].end_unix_ns,
        "run": run_id,
        "under_load": None,
    }
    assert [p.streams for p in report.curve.points] == [1, 2]
    assert [
        (
            *(lv.streams, lv.repeat, lv.tokens_expected, lv.probe_tokens, lv.sse_events, lv.errors),
            *(lv.engine_generation_tokens, lv.requests_running_before, lv.requests_running_after),
            *(lv.quiescent, lv.power_w, lv.ttft_s_median is not None, len(lv.stream_rates)),
        )
        for lv in report.levels
    ] == [
        (1, 0, 4, 4, 6, 0, 4.0, 0.0, 0.0, True, None, True, 1),
        (2, 0, 4, 8, 12, 0, 8.0, 0.0, 0.0, True, None, True, 2),
    ]
    # The client's CPU over each level: its own share of what this thread spent on the run.
    assert 0 < report.levels[0].client_cpu_s + report.levels[1].client_cpu_s < cpu_spent
    assert (report.metadata.engine_url, report.metadata.gpu_source, load_free(report.warnings)) == (
        engine.url,
        None,
        [],
    )


def test_a_named_plain_run_names_its_windows_document_and_curve(store: Store) -> None:
    with ScriptedEngine() as engine:
        report = _probe(
            engine,
            store,
            streams=[2],
            mode="plain",
            name="night",
            engine="qwen",
            prompt_chars=30,
            warmup=True,
        )
    [window] = store.windows(kind="probe")
    _run_id(window)  # the window's key still carries the run id
    assert (window.name, window.engine, window.attributes) == (
        "probe 2 streams",
        "qwen",
        {sc.PROBE_RUN: "night", sc.PROBE_REPEAT: 0, sc.PROBE_TOKENS: 4, sc.PROBE_MODE: "plain"},
    )
    [doc] = store.documents("probe")
    assert doc["name"] == "night"
    assert (report.curve.run, report.curve.engine, report.metadata.engine) == ("night", "qwen", "qwen")
    [level] = report.levels
    assert (level.probe_tokens, level.sse_events, level.ttft_s_median, level.engine_generation_tokens) == (
        8,
        None,
        None,
        8.0,
    )
    assert engine.bodies == [_pinned(4, stream=False)] * 3  # the warm-up is plain too


def _metrics_at(
    script: Callable[[int], tuple[float, float] | None],
) -> Callable[[int], tuple[int, str] | None]:
    """``/metrics`` as ``script(hit)`` says: (generated, running), or None for HTTP 500."""

    def answer(hit: int) -> tuple[int, str]:
        figures = script(hit)
        return (500, "down") if figures is None else (200, vllm_metrics(*figures))

    return answer


def test_counters_unreadable_before_a_level_leave_its_engine_figures_out(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with ScriptedEngine(metrics=_metrics_at(lambda hit: None if hit == 1 else (4, 0))) as engine:
        report = _probe(engine, streams=[1])
    [level] = report.levels
    assert (level.engine_generation_tokens, level.engine_probe_ratio) == (None, None)
    assert (level.requests_running_before, level.requests_running_after, level.quiescent) == (None, 0.0, True)
    message = f"engine counters unavailable: {engine.url}/metrics: /metrics answered HTTP 500"
    assert load_free(report.warnings) == [message]
    assert ("spark_otel.probe.prober", logging.WARNING, f"probe: {message}") in caplog.record_tuples


def test_counters_unreadable_after_a_level_leave_it_unsettled() -> None:
    with ScriptedEngine(metrics=_metrics_at(lambda hit: (0, 0) if hit == 1 else None)) as engine:
        report = _probe(engine, streams=[1])
    [level] = report.levels
    assert (level.engine_generation_tokens, level.engine_probe_ratio) == (None, None)
    assert (level.requests_running_before, level.requests_running_after, level.quiescent) == (
        0.0,
        None,
        False,
    )
    assert load_free(report.warnings) == [
        f"engine counters unavailable: {engine.url}/metrics: /metrics answered HTTP 500",
        NOT_SETTLED,
    ]


def test_a_running_count_that_lags_the_streams_is_waited_for() -> None:
    """The gauge still counts the finished stream at the first read after the level (as vLLM's
    can): the probe reads again until it settles, and the level is quiescent."""
    lagging = _metrics_at(lambda hit: (0, 0) if hit == 1 else (4, 1) if hit == 2 else (4, 0))
    with ScriptedEngine(metrics=lagging) as engine:
        report = _probe(engine, streams=[1])
        scrapes = engine.hits["/metrics"]
    [level] = report.levels
    assert (level.engine_generation_tokens, level.requests_running_after, level.quiescent) == (4.0, 0.0, True)
    assert scrapes == 3
    assert load_free(report.warnings) == []


def test_a_running_count_that_never_settles_is_read_when_the_wait_ends(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(prober, "_SETTLE_WALL_S", 0.1)
    with ScriptedEngine(metrics=_metrics_at(lambda hit: (0, 0) if hit == 1 else (4, 1))) as engine:
        report = _probe(engine, streams=[1])
    [level] = report.levels
    assert (level.engine_generation_tokens, level.requests_running_after, level.quiescent) == (
        4.0,
        1.0,
        False,
    )
    assert load_free(report.warnings) == [NOT_SETTLED]


def test_a_counter_reset_during_a_level_leaves_the_engine_tokens_out() -> None:
    """The engine restarted: its counter began again, so the delta says nothing of the level."""
    with ScriptedEngine(metrics=_metrics_at(lambda hit: (1000, 0) if hit == 1 else (4, 0))) as engine:
        report = _probe(engine, streams=[1])
    [level] = report.levels
    assert (level.engine_generation_tokens, level.engine_probe_ratio, level.quiescent) == (None, None, True)
    assert load_free(report.warnings) == []


def test_stalled_streams_end_at_the_read_timeout_or_the_levels_own(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three streams: one finishes; one goes silent and hits the client's read timeout (the
    request ceiling); one trickles comments, so only the level's ceiling plus grace ends it."""
    monkeypatch.setattr(prober, "_LEVEL_GRACE_WALL_S", 0.6)
    stalls: dict[int, Answer] = {
        2: Answer(events=[TOKEN_EVENT], stall="trickle"),
        3: Answer(events=[TOKEN_EVENT], stall="silent"),
    }
    with ScriptedEngine(
        answer=lambda number, body: stalls.get(number) or default_answer(number, body)
    ) as engine:
        report = _probe(engine, store, streams=[3], request_timeout_s=0.4)
    [level] = report.levels
    timeout = "ReadTimeout: "  # httpx's read timeout carries no message
    assert (level.probe_tokens, level.errors, level.error_messages, len(level.stream_rates)) == (
        4,
        2,
        [timeout, "timed out"],
        1,
    )
    assert load_free(report.warnings) == [
        "level 3: 1 of 3 streams did not finish within 0.4 s",
        f"level 3: 2 of 3 streams failed: {timeout}",
    ]
    assert len(store.windows(kind="probe")) == 1


def test_power_is_the_mean_of_every_reading_over_the_level_without_an_energy_counter() -> None:
    """100 W at the meter's first two readings (its check and the level's start), 300 W after:
    the mean of the start, each sample the sampler took while the streams ran, and the end."""
    with ScriptedEngine(gpu=lambda hit: {"power_w": 100.0 if hit <= 2 else 300.0}) as engine:
        report = _probe(engine, streams=[1], gpu="sim")
        readings = engine.hits["/sim/gpu"]
    [level] = report.levels
    assert readings >= 4  # the meter's check, the start, at least one sample, the end
    assert level.power_w == (100.0 + 300.0 * (readings - 2)) / (readings - 1)
    assert report.metadata.gpu_source == "sim"


class _FailingProcessor(SpanProcessor):
    """A span processor that fails, as a user's broken exporter pipeline might."""

    def on_end(self, span: ReadableSpan) -> None:
        raise RuntimeError("export queue is full")


def _otlp(monkeypatch: pytest.MonkeyPatch, provider: TracerProvider, meter_provider: MeterProvider) -> None:
    """The telemetry in force exports over OTLP (its spans reach a collector, not the store)."""
    telemetry = Telemetry(provider, meter_provider, store=None, otlp=True)
    monkeypatch.setattr(prober, "current_telemetry", lambda: telemetry)


def test_with_otlp_telemetry_each_level_is_also_a_load_window_span(
    store: Store,
    span_exporter: InMemorySpanExporter,
    tracer_provider: TracerProvider,
    meter_provider: MeterProvider,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _otlp(monkeypatch, tracer_provider, meter_provider)
    with ScriptedEngine() as engine:
        _probe(engine, store, streams=[1, 2])
    spans = span_exporter.get_finished_spans()
    scopes = {
        (x.name, x.version, x.schema_url) if x else None for x in (s.instrumentation_scope for s in spans)
    }
    assert scopes == {(sc.SCOPE_NAME, __version__, sc.SCHEMA_URL)}
    assert [(s.name, s.start_time, s.end_time, dict(s.attributes or {})) for s in spans] == [
        (
            w.name,
            w.start_unix_ns,
            w.end_unix_ns,
            {
                sc.SPAN_KIND_ATTR: sc.SPAN_KIND_LOAD_WINDOW,
                sc.LOAD_WINDOW_NAME: w.name,
                sc.LOAD_WINDOW_KIND: "probe",
                sc.LOAD_WINDOW_STREAMS: w.streams,
                sc.ENGINE: w.engine,
                **w.attributes,
            },
        )
        for w in store.windows(kind="probe")
    ]


def test_a_span_that_fails_is_a_warning_and_the_level_is_still_stored(
    store: Store,
    meter_provider: MeterProvider,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    provider = TracerProvider()
    provider.add_span_processor(_FailingProcessor())
    _otlp(monkeypatch, provider, meter_provider)
    with ScriptedEngine() as engine:
        report = _probe(engine, store, streams=[1, 2])
    provider.shutdown()
    assert [w.streams for w in store.windows(kind="probe")] == [1, 2]
    assert [lv.errors for lv in report.levels] == [0, 0]
    [record] = [r for r in caplog.records if r.name == "spark_otel" and r.levelno == logging.WARNING]
    assert record.getMessage() == "spark_otel: probe load-window span failed; the call goes on untouched"
    assert record.exc_info is not None
    assert str(record.exc_info[1]) == "export queue is full"


@pytest.mark.usefixtures("instrumented")
def test_the_probes_own_requests_are_not_traced_by_the_instrumentation(
    span_exporter: InMemorySpanExporter,
) -> None:
    """Its completions would otherwise read as the user's own eval requests, and cost it time."""
    with ScriptedEngine() as engine:
        report = _probe(engine, streams=[2], warmup=True)
    assert report.levels[0].probe_tokens == 8
    assert span_exporter.get_finished_spans() == ()
