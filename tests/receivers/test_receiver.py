"""The long-running receiver: OTel metrics per engine, store samples, backoff, clean stop."""

from __future__ import annotations

import threading

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from tests.support.metric_points import metric_points
from tests.support.metrics_pages import counting_text
from tests.support.metrics_server import MetricsServer
from tests.support.waiting import wait_for

from spark_otel import ConfigError, EngineError
from spark_otel import _semconv as sc
from spark_otel.receivers.receiver import Receiver, parse_engine_spec
from spark_otel.store import Store


def _points_by_engine(reader: InMemoryMetricReader, name: str) -> dict[str, float]:
    return {p.attributes[sc.ENGINE]: p.value for p in metric_points(reader, name)}


def _errors_of(reader: InMemoryMetricReader, engine: str) -> float:
    return sum(
        p.value for p in metric_points(reader, sc.RECEIVER_ERRORS) if p.attributes.get(sc.ENGINE) == engine
    )


def test_a_dead_engine_is_reported_and_retried_while_the_live_one_is_served(
    metrics_server: MetricsServer,
    meter_provider: MeterProvider,
    metric_reader: InMemoryMetricReader,
    store: Store,
    free_port: int,
) -> None:
    metrics_server.text_fn = counting_text
    dead = f"http://127.0.0.1:{free_port}"
    receiver = Receiver(
        {"live": metrics_server.url, "dead": dead},
        interval_s=0.05,
        max_backoff_s=0.2,
        timeout_s=10.0,  # the dead port refuses at once; the live one must not time out on a busy runner
        meter_provider=meter_provider,
        store=store,
    )
    with receiver:
        wait_for(lambda: receiver.rate("live") is not None, "two scrapes of the live engine", 20.0, 0.02)
        # The error counter is added after the failure count: wait for what is asserted.
        wait_for(
            lambda: _errors_of(metric_reader, "dead") >= 2,
            "two counted errors of the dead engine",
            20.0,
            0.02,
        )
        assert receiver.is_up("live") is True
        assert receiver.is_up("dead") is False
        up = _points_by_engine(metric_reader, sc.ENGINE_UP)
        assert up == {"live": 1, "dead": 0}
        gen = metric_points(metric_reader, sc.ENGINE_GENERATION_TOKENS)
        assert [p.attributes for p in gen] == [{sc.ENGINE: "live", sc.ENGINE_KIND: "vllm"}]
        assert gen[0].value >= 200
        assert _points_by_engine(metric_reader, sc.ENGINE_KV_CACHE_USAGE) == {"live": 0.5}
        rates = _points_by_engine(metric_reader, sc.ENGINE_GENERATION_TOKEN_RATE)
        assert rates["live"] > 0
        assert not any(
            p.attributes.get(sc.ENGINE) == "live" for p in metric_points(metric_reader, sc.RECEIVER_ERRORS)
        )
    # the rate is 100 tokens per scrape over the model time between the two scrapes
    delta = receiver.rate("live")
    assert delta is not None
    assert delta.generation_tokens == 100.0
    assert delta.generation_rate == pytest.approx(100.0 / delta.elapsed_s)

    gen_samples = store.samples(sc.ENGINE_GENERATION_TOKENS)
    assert len(gen_samples) >= 2
    assert {s.attributes[sc.ENGINE] for s in gen_samples} == {"live"}
    assert [s.value for s in gen_samples] == sorted(s.value for s in gen_samples)
    down = [s for s in store.samples(sc.ENGINE_UP) if s.attributes[sc.ENGINE] == "dead"]
    assert down
    assert {s.value for s in down} == {0.0}


def test_an_engine_that_recovers_is_marked_up_again(
    metrics_server: MetricsServer, meter_provider: MeterProvider, metric_reader: InMemoryMetricReader
) -> None:
    metrics_server.text_fn = counting_text
    metrics_server.status = 500
    with Receiver(
        {"flaky": metrics_server.url}, interval_s=0.05, max_backoff_s=0.1, meter_provider=meter_provider
    ) as receiver:
        wait_for(lambda: receiver.failures("flaky") >= 1, "a failed scrape", 20.0, 0.02)
        assert _points_by_engine(metric_reader, sc.ENGINE_UP) == {"flaky": 0}
        metrics_server.status = 200
        wait_for(lambda: receiver.is_up("flaky") is True, "recovery", 20.0, 0.02)
        assert receiver.failures("flaky") == 0
        assert _points_by_engine(metric_reader, sc.ENGINE_UP) == {"flaky": 1}


def test_stored_up_is_one_series_before_and_after_the_kind_is_known(
    metrics_server: MetricsServer, meter_provider: MeterProvider, store: Store
) -> None:
    metrics_server.text_fn = counting_text
    metrics_server.status = 500
    receiver = Receiver({"flaky": metrics_server.url}, meter_provider=meter_provider, store=store)
    try:
        receiver.scrape_once()  # down before the first scrape: the kind is not known yet
        metrics_server.status = 200
        receiver.scrape_once()  # up: now it is vllm
        metrics_server.status = 500
        receiver.scrape_once()  # down again, the kind known
    finally:
        receiver.stop()
    up = store.samples(sc.ENGINE_UP)
    assert [s.value for s in up] == [0.0, 1.0, 0.0]
    assert [s.attributes for s in up] == [{sc.ENGINE: "flaky"}] * 3
    [gen] = store.samples(sc.ENGINE_GENERATION_TOKENS)
    assert gen.attributes == {sc.ENGINE: "flaky", sc.ENGINE_KIND: "vllm"}


def test_stop_interrupts_a_long_sleep_and_ends_every_thread(
    metrics_server: MetricsServer, meter_provider: MeterProvider
) -> None:
    metrics_server.text_fn = counting_text
    receiver = Receiver({"a": metrics_server.url}, interval_s=3600, meter_provider=meter_provider).start()
    wait_for(lambda: receiver.latest("a") is not None, "the first scrape", 20.0, 0.02)
    receiver.stop(timeout_s=10)
    assert not any(t.name.startswith("spark-otel-receiver") for t in threading.enumerate())
    receiver.stop()  # idempotent


def test_scrape_once_returns_failures_instead_of_raising(
    metrics_server: MetricsServer, meter_provider: MeterProvider, free_port: int
) -> None:
    metrics_server.text_fn = counting_text
    receiver = Receiver(
        {"ok": metrics_server.url, "gone": f"http://127.0.0.1:{free_port}"},
        meter_provider=meter_provider,
        timeout_s=1,
    )
    try:
        results = receiver.scrape_once()
    finally:
        receiver.stop()
    assert results["ok"].generation_tokens == 100.0  # type: ignore[union-attr]
    assert isinstance(results["gone"], EngineError)


@pytest.mark.parametrize("spec", ["qwen", "=http://x", "qwen=ftp://x", "qwen="])
def test_bad_engine_spec_is_a_config_error(spec: str) -> None:
    with pytest.raises(ConfigError, match="expected NAME=URL"):
        parse_engine_spec(spec)


def test_engine_spec_and_constructor_checks() -> None:
    assert parse_engine_spec("qwen=http://127.0.0.1:8011").url == "http://127.0.0.1:8011"
    with pytest.raises(ConfigError, match="unique"):
        Receiver([parse_engine_spec("a=http://x"), parse_engine_spec("a=http://y")])
    with pytest.raises(ConfigError, match="nothing to receive"):
        Receiver({})
    with pytest.raises(
        ConfigError, match=r"Receiver interval must be positive seconds, at most 86,400 \(a day\), got 0"
    ):
        Receiver({"a": "http://x"}, interval_s=0)


def test_a_down_engine_reports_only_up_0_and_errors_not_its_last_values(
    metrics_server: MetricsServer, meter_provider: MeterProvider, metric_reader: InMemoryMetricReader
) -> None:
    metrics_server.text_fn = counting_text
    receiver = Receiver({"qwen": metrics_server.url}, meter_provider=meter_provider, timeout_s=5)
    engine_metrics = (
        sc.ENGINE_GENERATION_TOKENS,
        sc.ENGINE_PROMPT_TOKENS,
        sc.ENGINE_REQUESTS_RUNNING,
        sc.ENGINE_KV_CACHE_USAGE,
        sc.ENGINE_GENERATION_TOKEN_RATE,
        sc.ENGINE_PROMPT_TOKEN_RATE,
    )
    try:
        receiver.scrape_once()
        receiver.scrape_once()
        # up: every engine metric is observed, the rates included
        assert all(_points_by_engine(metric_reader, name) for name in engine_metrics)
        metrics_server.status = 500
        assert isinstance(receiver.scrape_once()["qwen"], EngineError)
        assert _points_by_engine(metric_reader, sc.ENGINE_UP) == {"qwen": 0}
        for name in engine_metrics:
            assert _points_by_engine(metric_reader, name) == {}, name
        errors = metric_points(metric_reader, sc.RECEIVER_ERRORS)
        assert sum(p.value for p in errors if p.attributes.get(sc.ENGINE) == "qwen") == 1
        metrics_server.status = 200
        receiver.scrape_once()
        assert _points_by_engine(metric_reader, sc.ENGINE_UP) == {"qwen": 1}
        assert _points_by_engine(metric_reader, sc.ENGINE_KV_CACHE_USAGE) == {"qwen": 0.5}
    finally:
        receiver.stop()


def test_scrape_once_does_not_claim_to_retry_but_the_running_loop_does(
    meter_provider: MeterProvider, free_port: int, caplog: pytest.LogCaptureFixture
) -> None:
    dead = f"http://127.0.0.1:{free_port}"
    once = Receiver({"gone": dead}, meter_provider=meter_provider, timeout_s=1)
    with caplog.at_level("WARNING", logger="spark_otel.receivers.receiver"):
        try:
            once.scrape_once()
        finally:
            once.stop()
        [record] = caplog.records
        assert record.getMessage().startswith("engine gone: ")
        assert "retry" not in record.getMessage()
        caplog.clear()
        looping = Receiver(
            {"gone": dead}, interval_s=0.05, max_backoff_s=0.1, meter_provider=meter_provider, timeout_s=1
        )
        with looping:
            # The warning is logged after the failure is counted: wait for the record itself.
            wait_for(lambda: caplog.records, "the first failure's warning", 20.0, 0.02)
        assert "retrying with backoff" in caplog.records[0].getMessage()
