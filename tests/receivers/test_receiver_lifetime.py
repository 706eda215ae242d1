"""The receiver's threads and its stop: thread names and daemon flags, a loop that logs an
unexpected failure and goes on, the retry promise only while the loop runs, a stop that keeps
its timeout even when a scrape is stuck, and who closes the GPU source. Each test waits on a
condition (a log record, a first scrape), never on the clock."""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Iterator

import httpx2
import pytest
from opentelemetry.sdk.metrics import MeterProvider
from tests.support.gpu_fakes import SIM_GPU
from tests.support.metrics_pages import counting_text
from tests.support.metrics_server import MetricsServer
from tests.support.waiting import wait_for

from spark_otel.receivers.gpu import GpuReading, SimGpuSource
from spark_otel.receivers.receiver import Receiver

LOGGER = "spark_otel.receivers.receiver"
CLOSED = "Cannot send a request, as the client has been closed."


@pytest.fixture(scope="module")
def module_server() -> Iterator[MetricsServer]:
    """One server for the module: each MetricsServer costs half a second to shut down."""
    with MetricsServer() as server:
        yield server


@pytest.fixture
def server(module_server: MetricsServer) -> MetricsServer:
    module_server.status, module_server.text_fn, module_server.json_body = 200, counting_text, dict(SIM_GPU)
    return module_server


def _receiver_threads() -> list[tuple[str, bool]]:
    return sorted(
        (t.name, t.daemon) for t in threading.enumerate() if t.name.startswith("spark-otel-receiver")
    )


def test_one_named_daemon_thread_per_engine_and_one_for_the_gpu(
    server: MetricsServer, meter_provider: MeterProvider
) -> None:
    gpu = SimGpuSource(server.url)
    receiver = Receiver(
        {"a": server.url}, gpu=gpu, close_gpu=True, interval_s=3600, meter_provider=meter_provider
    ).start()
    try:
        wait_for(lambda: receiver.latest("a") and receiver.gpu_readings(), "both first reads", 20.0, 0.01)
        assert _receiver_threads() == [("spark-otel-receiver-a", True), ("spark-otel-receiver-gpu", True)]
    finally:
        receiver.stop()
    assert _receiver_threads() == []


def test_an_unexpected_failure_is_logged_with_its_traceback_and_the_loop_goes_on(
    server: MetricsServer, meter_provider: MeterProvider, caplog: pytest.LogCaptureFixture
) -> None:
    """A GPU source closed under the receiver raises RuntimeError, not one of spark-otel's errors."""
    gpu = SimGpuSource(server.url)
    gpu.close()
    with (
        caplog.at_level(logging.ERROR, logger=LOGGER),
        Receiver({}, gpu=gpu, interval_s=0.01, meter_provider=meter_provider),
    ):
        wait_for(lambda: len(caplog.records) >= 2, "a second try after the first failure", 20.0, 0.01)
    first = caplog.records[0]
    assert (first.name, first.levelname, first.getMessage()) == (
        LOGGER,
        "ERROR",
        "receiver: GPU failed unexpectedly; retrying",
    )
    assert first.exc_info is not None
    assert (type(first.exc_info[1]), str(first.exc_info[1])) == (RuntimeError, CLOSED)


def test_only_the_running_loop_promises_a_retry(
    server: MetricsServer, meter_provider: MeterProvider, caplog: pytest.LogCaptureFixture
) -> None:
    failed = f"engine flaky: {server.url}/metrics: /metrics answered HTTP 500"
    server.status = 500
    with httpx2.Client() as client, caplog.at_level(logging.INFO, logger=LOGGER):
        receiver = Receiver(
            {"flaky": server.url}, client=client, interval_s=3600, meter_provider=meter_provider
        ).start()
        wait_for(lambda: caplog.records, "the loop's first warning", 20.0, 0.01)
        receiver.stop()
        # stopped: a one-off scrape that fails again (after a success) must not promise a retry
        server.status = 200
        receiver.scrape_once()
        server.status = 500
        receiver.scrape_once()
    assert [(r.levelname, r.getMessage()) for r in caplog.records if r.name == LOGGER] == [
        ("WARNING", f"{failed}; retrying with backoff"),
        ("INFO", f"engine flaky ({server.url}) answers again"),
        ("WARNING", failed),
    ]


def test_stop_keeps_its_timeout_while_a_scrape_is_stuck(meter_provider: MeterProvider) -> None:
    """An engine that takes the connection and never answers holds the scrape for its whole
    timeout (30 s here); stop must give up waiting on the thread after its own timeout."""
    sent = threading.Event()
    with (
        socket.create_server(("127.0.0.1", 0), backlog=8) as listener,
        httpx2.Client(event_hooks={"request": [lambda _: sent.set()]}) as client,
    ):
        url = f"http://127.0.0.1:{listener.getsockname()[1]}"
        receiver = Receiver(
            {"silent": url}, client=client, timeout_s=30, interval_s=3600, meter_provider=meter_provider
        ).start()
        wait_for(sent.is_set, "the scrape's request", 20.0, 0.01)
        started = time.monotonic()
        receiver.stop(timeout_s=0.05)
        assert time.monotonic() - started < 15
        assert _receiver_threads() == [("spark-otel-receiver-silent", True)]
    # closing the listener resets the held connection: the stuck thread ends
    wait_for(lambda: not _receiver_threads(), "the stuck thread's end", 20.0, 0.01)


def test_the_gpu_source_is_closed_only_when_asked(
    server: MetricsServer, meter_provider: MeterProvider
) -> None:
    kept, closed = SimGpuSource(server.url), SimGpuSource(server.url)
    Receiver({}, gpu=kept, meter_provider=meter_provider).stop()
    Receiver({}, gpu=closed, close_gpu=True, meter_provider=meter_provider).stop()
    try:
        assert [r.power_w for r in kept.read()] == [37.2]
        with pytest.raises(RuntimeError) as caught:
            closed.read()
        assert str(caught.value) == CLOSED
    finally:
        kept.close()


class _LostGpu:
    """A GPU source whose close fails (as NVML's can for a GPU that fell off the bus): a fault no
    real source produces on demand."""

    kind = "lost"

    def read(self) -> list[GpuReading]:
        return []

    def close(self) -> None:
        raise RuntimeError("GPU is lost")


def test_a_failing_gpu_close_is_logged_and_stop_still_returns(
    meter_provider: MeterProvider, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="spark_otel"):
        Receiver({}, gpu=_LostGpu(), close_gpu=True, meter_provider=meter_provider).stop()
    [record] = caplog.records
    assert (record.name, record.getMessage()) == (
        "spark_otel",
        "spark_otel: GPU source close failed; the call goes on untouched",
    )
    assert record.exc_info is not None
    assert str(record.exc_info[1]) == "GPU is lost"
