"""The simulated box's GPU readout (`SimGpuSource`) over real HTTP: every field it reports
taken as the box gave it, the fields it does not report left out, the wait it is given, and
each refusal in words."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest
from tests.support.metrics_server import MetricsServer

from spark_otel import ConfigError, EngineError
from spark_otel.receivers.gpu import GpuReading, SimGpuSource, open_gpu_source

READOUT = {
    "unix_ns": 1_764_800_000_000_000_000,
    "utilization_gpu_pct": 96.0,
    "power_w": 310.5,
    "energy_j": 12_345.0,
    "sm_clock_mhz": 1980.0,
    "memory_used_bytes": 70e9,
    "memory_total_bytes": 141e9,
}


def test_every_field_the_box_reports_is_read_as_given(metrics_server: MetricsServer) -> None:
    metrics_server.json_body = dict(READOUT)
    source = open_gpu_source("sim", sim_url=metrics_server.url + "/v1")
    try:
        assert source.read() == [
            GpuReading(
                gpu_id="0",
                name="simulated",
                unix_ns=1_764_800_000_000_000_000,
                utilization=0.96,
                power_w=310.5,
                energy_j=12_345.0,
                sm_clock_mhz=1980.0,
                memory_used_bytes=70e9,
                memory_total_bytes=141e9,
            )
        ]
    finally:
        source.close()


def test_a_readout_without_utilization_has_none(metrics_server: MetricsServer) -> None:
    metrics_server.json_body = {k: v for k, v in READOUT.items() if k != "utilization_gpu_pct"}
    source = SimGpuSource(metrics_server.url)
    try:
        [reading] = source.read()
        assert (reading.utilization, reading.power_w) == (None, 310.5)
    finally:
        source.close()


def test_a_readout_that_is_not_the_boxs_is_refused_in_words(metrics_server: MetricsServer) -> None:
    metrics_server.json_body = {"utilization_gpu_pct": "busy"}
    with pytest.raises(EngineError) as caught:
        SimGpuSource(metrics_server.url)
    assert str(caught.value) == (
        f"{metrics_server.url}/sim/gpu: not a simulated GPU readout: "
        "could not convert string to float: 'busy'"
    )


def test_an_engine_that_is_not_up_is_refused_naming_the_error(free_port: int) -> None:
    url = f"http://127.0.0.1:{free_port}"
    with pytest.raises(EngineError) as caught:
        SimGpuSource(url)
    assert str(caught.value).startswith(f"{url}/sim/gpu: cannot read the simulated GPU: ConnectError: ")


@pytest.fixture
def silent_url() -> Iterator[str]:
    with socket.create_server(("127.0.0.1", 0), backlog=8) as listener:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"


def test_a_silent_box_is_given_up_at_the_timeout(silent_url: str) -> None:
    with pytest.raises(EngineError) as caught:
        SimGpuSource(silent_url, timeout_s=0.3)
    assert str(caught.value).startswith(f"{silent_url}/sim/gpu: cannot read the simulated GPU: ReadTimeout")


@pytest.mark.parametrize(
    ("sim_url", "message"),
    [
        (None, "the simulated GPU source (sim) needs --sim-url URL (a simulated engine's base URL)"),
        (
            "ftp://box",
            "--sim-url 'ftp://box': not an http:// or https:// URL with a host; expected e.g. http://127.0.0.1:8011",
        ),
    ],
)
def test_a_sim_source_without_a_usable_url_is_refused_naming_the_option(
    sim_url: str | None, message: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        open_gpu_source("sim", sim_url=sim_url)
    assert str(caught.value) == message
