"""GPU readouts: a fake NVML module, a fake nvidia-smi on PATH, the simulated /sim/gpu, and no GPU."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from tests.support.gpu_fakes import SIM_GPU, SMI_CSV, fake_pynvml, fake_smi
from tests.support.metric_points import metric_points
from tests.support.metrics_server import MetricsServer
from tests.support.waiting import wait_for

from spark_otel import ConfigError, EngineError, NoGpuError
from spark_otel import _semconv as sc
from spark_otel.receivers.gpu import (
    NvmlSource,
    SimGpuSource,
    SmiSource,
    gpu_samples,
    open_gpu_source,
    parse_smi_csv,
)
from spark_otel.receivers.receiver import Receiver
from spark_otel.store import Store


def test_nvml_readout_converts_units_and_keeps_unsupported_as_none(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = fake_pynvml()
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    source = NvmlSource()
    [reading] = source.read()
    source.close()
    assert reading.name == "NVIDIA GB10"
    assert reading.utilization == 0.96
    assert reading.power_w == 37.25
    assert reading.energy_j == 5000.0
    assert (reading.sm_clock_mhz, reading.memory_clock_mhz) == (2418, 4266)
    assert reading.memory_used_bytes is None
    assert fake.calls == ["init", "shutdown"]
    names = {s.name: s for s in gpu_samples([reading])}
    assert sc.GPU_MEMORY_USED not in names
    assert names[sc.GPU_POWER].unit == "W"
    assert names[sc.GPU_UTILIZATION].attributes == {sc.GPU_ID: "0", sc.GPU_NAME: "NVIDIA GB10"}


def test_nvml_without_energy_counter_reports_none(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(energy_supported=False))
    [reading] = NvmlSource().read()
    assert reading.energy_j is None
    assert reading.power_w == 37.25


def test_auto_falls_back_to_nvidia_smi_when_nvml_cannot_start(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(init_fails=True))
    monkeypatch.setenv("PATH", str(fake_smi(tmp_path, SMI_CSV)) + os.pathsep + os.environ["PATH"])
    source = open_gpu_source("auto")
    assert source.kind == "smi"
    h100, gb10 = source.read()
    assert h100.gpu_id == "0"
    assert h100.utilization == 0.96
    assert h100.power_w == 312.45
    assert h100.memory_used_bytes == 40536 * 2**20
    assert h100.energy_j is None
    assert gb10.memory_used_bytes is None
    assert gb10.memory_clock_mhz is None
    assert gb10.sm_clock_mhz == 2418


def test_nvidia_smi_failure_is_a_no_gpu_error_with_its_message(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    msg = "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n"
    monkeypatch.setenv("PATH", str(fake_smi(tmp_path, msg, exit_code=9)) + os.pathsep + "/usr/bin:/bin")
    with pytest.raises(NoGpuError, match="nvidia-smi exited 9: NVIDIA-SMI has failed because"):
        SmiSource()


def test_smi_csv_with_the_wrong_shape_names_the_line() -> None:
    with pytest.raises(NoGpuError, match="nvidia-smi line 2: expected 9 fields, got 3"):
        parse_smi_csv(SMI_CSV.splitlines()[0] + "\n0, x, y\n", unix_ns=1)


def test_no_gpu_here_gives_a_clear_message(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # this machine has no GPU: the real nvidia-ml-py cannot find libnvidia-ml, and no nvidia-smi on PATH
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(NoGpuError) as info:
        open_gpu_source("auto")
    message = str(info.value)
    assert message.startswith("no NVIDIA GPU found: NVML cannot start")
    assert "nvidia-smi is not on PATH" in message
    assert "--source sim" in message


def test_sim_source_reads_the_simulated_box(metrics_server: MetricsServer) -> None:
    metrics_server.json_body = SIM_GPU
    source = SimGpuSource(metrics_server.url + "/v1")
    [reading] = source.read()
    source.close()
    assert reading.utilization == 0.96
    assert reading.energy_j == 1234.5
    assert reading.unix_ns == SIM_GPU["unix_ns"]
    assert reading.memory_total_bytes == 128 * 2**30


def test_sim_source_against_something_else_is_an_engine_error(
    metrics_server: MetricsServer, free_port: int
) -> None:
    with pytest.raises(EngineError, match="answered HTTP 404"):
        SimGpuSource(metrics_server.url)
    with pytest.raises(EngineError, match="cannot read the simulated GPU"):
        SimGpuSource(f"http://127.0.0.1:{free_port}")
    with pytest.raises(ConfigError, match="needs --sim-url"):
        open_gpu_source("sim")


def test_receiver_exports_gpu_gauges_and_energy_counter(
    metrics_server: MetricsServer,
    meter_provider: MeterProvider,
    metric_reader: InMemoryMetricReader,
    store: Store,
) -> None:
    metrics_server.json_body = SIM_GPU
    with Receiver(
        [],
        gpu=SimGpuSource(metrics_server.url),
        interval_s=0.05,
        meter_provider=meter_provider,
        store=store,
        close_gpu=True,
    ) as receiver:
        wait_for(receiver.gpu_readings, "a GPU reading", 20.0, 0.02)
        [util] = metric_points(metric_reader, sc.GPU_UTILIZATION)
        [energy] = metric_points(metric_reader, sc.GPU_ENERGY)
    assert util.value == 0.96
    assert energy.value == 1234.5
    assert util.attributes[sc.GPU_ID] == "0"
    stored = store.samples(sc.GPU_POWER)
    assert stored
    assert stored[0].value == 37.2
    assert stored[0].unix_ns == SIM_GPU["unix_ns"]


def test_gpu_gauges_are_left_out_while_the_gpu_cannot_be_read(
    metrics_server: MetricsServer, meter_provider: MeterProvider, metric_reader: InMemoryMetricReader
) -> None:
    metrics_server.json_body = SIM_GPU
    receiver = Receiver(
        [], gpu=SimGpuSource(metrics_server.url), meter_provider=meter_provider, close_gpu=True
    )
    try:
        assert receiver.scrape_once() == {}
        assert [p.value for p in metric_points(metric_reader, sc.GPU_POWER)] == [37.2]
        metrics_server.status = 500
        assert isinstance(receiver.scrape_once()["gpu"], EngineError)
        for name in (sc.GPU_UTILIZATION, sc.GPU_POWER, sc.GPU_ENERGY):
            assert metric_points(metric_reader, name) == [], name
        metrics_server.status = 200
        receiver.scrape_once()
        assert [p.value for p in metric_points(metric_reader, sc.GPU_UTILIZATION)] == [0.96]
    finally:
        receiver.stop()
