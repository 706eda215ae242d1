"""One scrape at a time (`Receiver.scrape_once`, no threads) against a real /metrics server on
127.0.0.1: the instruments the receiver registers (unit, description, counter or gauge) and the
values they report, the samples it stores, its error counter, and its own log lines. The house
rule is that a failing engine is logged once at WARNING with a precise line, then at DEBUG with
a count, and its recovery at INFO: those lines are the behaviour, so they are pinned whole."""

from __future__ import annotations

import itertools
import logging
from collections.abc import Iterator
from typing import Any

import httpx2
import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import Gauge, InMemoryMetricReader, Sum
from tests.support.gpu_fakes import SIM_GPU
from tests.support.metric_points import metric_points
from tests.support.metrics_server import MetricsServer

from spark_otel import EngineError
from spark_otel import _semconv as sc
from spark_otel.model import MetricSample
from spark_otel.receivers.gpu import SimGpuSource
from spark_otel.receivers.receiver import EngineTarget, Receiver
from spark_otel.store import Store

LOGGER = "spark_otel.receivers.receiver"


def _full_text(hits: int) -> str:
    """A vLLM engine exposing every quantity the receiver reports; per scrape it adds 100
    generated and 10 prompt tokens, 2 first tokens taking 0.5 s, 10 inter-token gaps taking
    0.25 s, and 2 requests taking 3 s (means 0.25 s, 0.025 s and 1.5 s)."""
    lines = [
        "# TYPE vllm:generation_tokens_total counter",
        f'vllm:generation_tokens_total{{model_name="m"}} {100.0 * hits}',
        "# TYPE vllm:prompt_tokens_total counter",
        f'vllm:prompt_tokens_total{{model_name="m"}} {10.0 * hits}',
        "# TYPE vllm:num_requests_running gauge",
        'vllm:num_requests_running{model_name="m"} 3',
        "# TYPE vllm:num_requests_waiting gauge",
        'vllm:num_requests_waiting{model_name="m"} 2',
        "# TYPE vllm:kv_cache_usage_perc gauge",
        'vllm:kv_cache_usage_perc{model_name="m"} 0.5',
    ]
    for family, total, count in (
        ("vllm:time_to_first_token_seconds", 0.5, 2),
        ("vllm:inter_token_latency_seconds", 0.25, 10),
        ("vllm:e2e_request_latency_seconds", 3.0, 2),
    ):
        lines += [
            f"# TYPE {family} histogram",
            f'{family}_bucket{{le="+Inf",model_name="m"}} {count * hits}',
            f'{family}_sum{{model_name="m"}} {total * hits}',
            f'{family}_count{{model_name="m"}} {count * hits}',
        ]
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def module_server() -> Iterator[MetricsServer]:
    """One server for the module: each MetricsServer costs half a second to shut down."""
    with MetricsServer() as server:
        yield server


@pytest.fixture
def server(module_server: MetricsServer) -> MetricsServer:
    scrapes = itertools.count(1)  # the server's own hit count also counts /sim/gpu reads
    module_server.status, module_server.text_fn = 200, lambda _: _full_text(next(scrapes))
    module_server.json_body = dict(SIM_GPU)
    return module_server


def _records(caplog: pytest.LogCaptureFixture) -> list[tuple[str, str]]:
    return [(r.levelname, r.getMessage()) for r in caplog.records if r.name == LOGGER]


def _metrics(reader: InMemoryMetricReader) -> dict[str, Any]:
    data = reader.get_metrics_data()
    assert data is not None
    return {m.name: m for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics}


def _by_engine(reader: InMemoryMetricReader, name: str) -> dict[str, float]:
    return {p.attributes[sc.ENGINE]: p.value for p in metric_points(reader, name)}


def _errors(reader: InMemoryMetricReader) -> dict[frozenset[tuple[str, Any]], float]:
    return {frozenset(p.attributes.items()): p.value for p in metric_points(reader, sc.RECEIVER_ERRORS)}


def test_every_instrument_has_its_unit_description_and_kind_and_reports_the_scrape(
    server: MetricsServer, meter_provider: MeterProvider, metric_reader: InMemoryMetricReader, free_port: int
) -> None:
    gpu = SimGpuSource(server.url)
    receiver = Receiver(
        {"dead": f"http://127.0.0.1:{free_port}", "live": server.url},
        meter_provider=meter_provider,
        gpu=gpu,
        close_gpu=True,
    )
    try:
        receiver.scrape_once()
        receiver.scrape_once()
    finally:
        receiver.stop()
    counter, gauge = ("sum", True), ("gauge", None)
    described = {
        name: (
            m.unit,
            m.description,
            ("sum", m.data.is_monotonic) if isinstance(m.data, Sum) else ("gauge", None),
        )
        for name, m in _metrics(metric_reader).items()
    }
    assert isinstance(_metrics(metric_reader)[sc.ENGINE_UP].data, Gauge)
    assert described == {
        sc.ENGINE_GENERATION_TOKENS: ("{token}", "", counter),
        sc.ENGINE_PROMPT_TOKENS: ("{token}", "", counter),
        sc.ENGINE_REQUESTS_RUNNING: ("{request}", "", gauge),
        sc.ENGINE_REQUESTS_WAITING: ("{request}", "", gauge),
        sc.ENGINE_KV_CACHE_USAGE: ("1", "", gauge),
        sc.ENGINE_GENERATION_TOKEN_RATE: ("{token}/s", "", gauge),
        sc.ENGINE_PROMPT_TOKEN_RATE: ("{token}/s", "", gauge),
        sc.ENGINE_TIME_TO_FIRST_TOKEN: ("s", "", gauge),
        sc.ENGINE_INTER_TOKEN_LATENCY: ("s", "", gauge),
        sc.ENGINE_E2E_LATENCY: ("s", "", gauge),
        sc.ENGINE_UP: ("1", "1 when the last scrape worked", gauge),
        sc.RECEIVER_ERRORS: ("{error}", "failed scrapes and GPU reads", counter),
        sc.GPU_UTILIZATION: ("1", "", gauge),
        sc.GPU_POWER: ("W", "", gauge),
        sc.GPU_ENERGY: ("J", "", counter),
        sc.GPU_CLOCK_SM: ("MHz", "", gauge),
        sc.GPU_MEMORY_USED: ("By", "", gauge),
        sc.GPU_MEMORY_TOTAL: ("By", "", gauge),
    }
    # the dead engine comes first: its being down must not hide the live one's values
    delta = receiver.rate("live")
    assert delta is not None
    assert {
        name: _by_engine(metric_reader, name) for name in described if name.startswith("spark_otel.engine")
    } == {
        sc.ENGINE_GENERATION_TOKENS: {"live": 200.0},
        sc.ENGINE_PROMPT_TOKENS: {"live": 20.0},
        sc.ENGINE_REQUESTS_RUNNING: {"live": 3.0},
        sc.ENGINE_REQUESTS_WAITING: {"live": 2.0},
        sc.ENGINE_KV_CACHE_USAGE: {"live": 0.5},
        sc.ENGINE_GENERATION_TOKEN_RATE: {"live": delta.generation_rate},
        sc.ENGINE_PROMPT_TOKEN_RATE: {"live": delta.prompt_rate},
        sc.ENGINE_TIME_TO_FIRST_TOKEN: {"live": 0.25},
        sc.ENGINE_INTER_TOKEN_LATENCY: {"live": 0.25 / 10},
        sc.ENGINE_E2E_LATENCY: {"live": 1.5},
        sc.ENGINE_UP: {"live": 1, "dead": 0},
    }
    assert delta.generation_rate == 100.0 / delta.elapsed_s
    assert [(p.attributes, p.value) for p in metric_points(metric_reader, sc.GPU_POWER)] == [
        ({sc.GPU_ID: "0", sc.GPU_NAME: "simulated"}, 37.2)
    ]
    assert _errors(metric_reader) == {
        frozenset({(sc.RECEIVER_NAME, "engine"), (sc.ENGINE, "dead")}): 2,
    }


def test_a_failing_engine_warns_once_counts_at_debug_and_its_recovery_is_told(
    server: MetricsServer,
    meter_provider: MeterProvider,
    metric_reader: InMemoryMetricReader,
    caplog: pytest.LogCaptureFixture,
) -> None:
    receiver = Receiver({"flaky": server.url}, meter_provider=meter_provider)
    failed = f"{server.url}/metrics: /metrics answered HTTP 500"
    failures = []
    with caplog.at_level(logging.DEBUG, logger=LOGGER):
        try:
            for status in (500, 500, 200, 200, 500):
                server.status = status
                receiver.scrape_once()
                failures.append(receiver.failures("flaky"))
        finally:
            receiver.stop()
    assert failures == [1, 2, 0, 0, 1]
    assert _records(caplog) == [
        ("WARNING", f"engine flaky: {failed}"),
        ("DEBUG", f"engine flaky still failing (2): {failed}"),
        ("INFO", f"engine flaky ({server.url}) answers again"),
        ("WARNING", f"engine flaky: {failed}"),
    ]
    assert _errors(metric_reader) == {frozenset({(sc.RECEIVER_NAME, "engine"), (sc.ENGINE, "flaky")}): 3}


def test_every_scrape_is_stored_with_its_unit_and_source(
    server: MetricsServer, meter_provider: MeterProvider, store: Store
) -> None:
    gpu = SimGpuSource(server.url)
    receiver = Receiver(
        {"e": server.url}, meter_provider=meter_provider, store=store, gpu=gpu, close_gpu=True
    )
    try:
        server.status = 500
        receiver.scrape_once()
        server.status = 200
        receiver.scrape_once()
        receiver.scrape_once()
    finally:
        receiver.stop()
    up = [s.model_copy(update={"unix_ns": 0}) for s in store.samples(sc.ENGINE_UP)]
    assert up == [
        MetricSample(
            name=sc.ENGINE_UP, unix_ns=0, value=v, unit="1", attributes={sc.ENGINE: "e"}, source="receiver"
        )
        for v in (0.0, 1.0, 1.0)
    ]
    delta = receiver.rate("e")
    latest = receiver.latest("e")
    assert delta is not None
    assert latest is not None
    assert store.samples(sc.ENGINE_GENERATION_TOKEN_RATE) == [
        MetricSample(
            name=sc.ENGINE_GENERATION_TOKEN_RATE,
            unix_ns=latest.unix_ns,
            value=delta.generation_rate,
            unit="{token}/s",
            attributes={sc.ENGINE: "e", sc.ENGINE_KIND: "vllm"},
            source="receiver",
        )
    ]
    power = MetricSample(
        name=sc.GPU_POWER,
        unix_ns=SIM_GPU["unix_ns"],
        value=37.2,
        unit="W",
        attributes={sc.GPU_ID: "0", sc.GPU_NAME: "simulated"},
        source="receiver",
    )
    assert store.samples(sc.GPU_POWER) == [power] * 2  # the GPU failed at the first scrape too


def test_a_failing_gpu_warns_once_counts_errors_and_hides_its_old_readings(
    server: MetricsServer,
    meter_provider: MeterProvider,
    metric_reader: InMemoryMetricReader,
    caplog: pytest.LogCaptureFixture,
) -> None:
    gpu = SimGpuSource(server.url)
    receiver = Receiver({}, meter_provider=meter_provider, gpu=gpu, close_gpu=True)
    failed = f"{server.url}/sim/gpu: answered HTTP 500 (is this a spark-otel sim?)"
    seen = []
    with caplog.at_level(logging.DEBUG, logger=LOGGER):
        try:
            for status in (500, 500, 200, 500):
                server.status = status
                result = receiver.scrape_once()
                # the GPU thread's backoff doubles with this count
                seen.append(
                    (str(result.get("gpu", "")), receiver._gpu_state.failures, _by_gpu_power(metric_reader))
                )
        finally:
            receiver.stop()
    assert seen == [(failed, 1, []), (failed, 2, []), ("", 0, [37.2]), (failed, 1, [])]
    assert _records(caplog) == [
        ("WARNING", f"GPU read failed: {failed}"),
        ("DEBUG", f"GPU read failed: {failed}"),
        ("WARNING", f"GPU read failed: {failed}"),
    ]
    assert _errors(metric_reader) == {frozenset({(sc.RECEIVER_NAME, "gpu")}): 3}


def _by_gpu_power(reader: InMemoryMetricReader) -> list[float]:
    return [p.value for p in metric_points(reader, sc.GPU_POWER)]


def test_the_engine_model_name_picks_its_series(server: MetricsServer, meter_provider: MeterProvider) -> None:
    server.text_fn = lambda _: (
        "# TYPE vllm:generation_tokens_total counter\n"
        'vllm:generation_tokens_total{model_name="a"} 100\n'
        'vllm:generation_tokens_total{model_name="b"} 7\n'
    )
    receiver = Receiver([EngineTarget("e", server.url, model_name="b")], meter_provider=meter_provider)
    try:
        receiver.scrape_once()
    finally:
        receiver.stop()
    latest = receiver.latest("e")
    assert latest is not None
    assert (latest.model_name, latest.generation_tokens) == ("b", 7.0)


def test_a_given_client_is_used_with_the_receiver_timeout_and_left_open(
    server: MetricsServer, meter_provider: MeterProvider
) -> None:
    timeouts: list[object] = []
    with httpx2.Client(
        event_hooks={"request": [lambda r: timeouts.append(r.extensions["timeout"])]}
    ) as client:
        receiver = Receiver({"e": server.url}, meter_provider=meter_provider, client=client, timeout_s=0.75)
        receiver.scrape_once()
        receiver.stop()
        assert timeouts == [{"connect": 0.75, "read": 0.75, "write": 0.75, "pool": 0.75}]
        assert client.is_closed is False


def test_stop_closes_the_receivers_own_client(server: MetricsServer, meter_provider: MeterProvider) -> None:
    receiver = Receiver({"e": server.url}, meter_provider=meter_provider)
    receiver.stop()
    result = receiver.scrape_once()["e"]
    assert isinstance(result, EngineError)
    assert str(result) == (
        f"{server.url}/metrics: cannot read engine metrics: "
        "RuntimeError: Cannot send a request, as the client has been closed."
    )


def test_a_store_that_fails_is_logged_and_the_scrape_goes_on(
    server: MetricsServer, meter_provider: MeterProvider, store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    receiver = Receiver({"e": server.url}, meter_provider=meter_provider, store=store)
    store.close()
    with caplog.at_level(logging.WARNING, logger="spark_otel"):
        try:
            result = receiver.scrape_once()
        finally:
            receiver.stop()
    assert result["e"].generation_tokens == 100.0  # type: ignore[union-attr]
    assert [(r.name, r.getMessage()) for r in caplog.records] == [
        (
            "spark_otel",
            "spark_otel: receiver store write failed; the call goes on untouched: "
            f"{store.path}: cannot write: Cannot operate on a closed database.",
        )
    ]
