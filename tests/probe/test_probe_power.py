"""The probe's power meter on given readings: the box's draw summed over every GPU, a quantity
one GPU lacks left out rather than under-counted, a failed reading logged and skipped, the
sampler's readings over a level, and which source each ``--gpu`` choice opens.

Readings come from the real sources: NVML through a stand-in nvidia-ml-py with two parts
(no GPU can be produced on demand), nvidia-smi as an executable script, and the simulated
box's ``/sim/gpu`` from a real HTTP server on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from tests.support.gpu_fakes import GB10, H100, H100_ROW, fake_nvml, scripted_smi
from tests.support.metrics_server import MetricsServer

from spark_otel import EngineError, NoGpuError, _clock
from spark_otel.probe.power import PowerMeter, power_meter, sample_power
from spark_otel.receivers.gpu import NvmlSource, SimGpuSource
from spark_otel.sim.clock import model_time

NO_ENERGY = {k: v for k, v in GB10.items() if k != "energy"}
NO_POWER = {k: v for k, v in H100.items() if k != "power"}


@pytest.fixture(scope="module")
def _gpu_server() -> Iterator[MetricsServer]:
    with MetricsServer() as server:  # one for the module: it takes half a second to stop
        yield server


@pytest.fixture
def gpu_server(_gpu_server: MetricsServer) -> MetricsServer:
    """A simulated box's ``/sim/gpu``: 300 W, and no energy counter."""
    _gpu_server.json_body = {"power_w": 300.0, "unix_ns": 7}
    _gpu_server.status = 200
    return _gpu_server


@pytest.fixture
def no_gpu_here(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Neither nvidia-ml-py nor nvidia-smi, whatever machine runs the tests."""
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml raises ImportError
    (tmp_path / "empty").mkdir()
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))


def _read(meter: PowerMeter) -> tuple[int, float | None, float | None] | None:
    return asyncio.run(meter.reading())


def test_a_reading_is_the_box_sum_over_every_gpu() -> None:
    meter = PowerMeter(NvmlSource(module=fake_nvml([H100, GB10])))
    before = _clock.wall_ns()
    reading = _read(meter)
    after = _clock.wall_ns()
    meter.close()
    assert reading is not None
    assert before <= reading[0] <= after
    assert reading[1:] == (312.45 + 37.25, 5000.0 + 1.5)
    assert (meter.source, meter.real_time, meter.sample_interval_wall_s) == ("nvml", True, 3.0)


@pytest.mark.parametrize(
    ("parts", "figures"),
    [([H100, NO_ENERGY], (312.45 + 37.25, None)), ([NO_POWER, GB10], (None, 5000.0 + 1.5))],
)
def test_a_quantity_one_gpu_lacks_is_left_out_of_the_box_not_under_counted(
    parts: list[dict[str, object]], figures: tuple[float | None, float | None]
) -> None:
    reading = _read(PowerMeter(NvmlSource(module=fake_nvml(parts))))
    assert reading is not None
    assert reading[1:] == figures


def test_a_failed_reading_is_none_and_logged_at_debug_with_its_cause(
    gpu_server: MetricsServer, caplog: pytest.LogCaptureFixture
) -> None:
    meter = PowerMeter(SimGpuSource(gpu_server.url))
    assert (meter.source, meter.real_time) == ("sim", False)
    assert _read(meter) == (7, 300.0, None)
    gpu_server.status = 500
    with caplog.at_level(logging.DEBUG, logger="spark_otel.probe.power"):
        assert _read(meter) is None
    meter.close()
    [record] = [r for r in caplog.records if r.name == "spark_otel.probe.power"]
    assert (record.levelno, record.getMessage()) == (logging.DEBUG, "probe: GPU reading from sim failed")
    assert record.exc_info is not None
    assert (
        str(record.exc_info[1]) == f"{gpu_server.url}/sim/gpu: answered HTTP 500 (is this a spark-otel sim?)"
    )


async def _until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 5.0
    while not condition():
        assert time.monotonic() < deadline, f"never: {what}"
        await asyncio.sleep(0.01)


def test_the_sampler_keeps_each_power_reading_skips_failed_ones_and_stops_when_told(
    gpu_server: MetricsServer, restore_clock: None
) -> None:
    """At 100x a 3-model-second interval is under the 50 ms floor: readings come 50 ms apart.
    While the readout fails the sampler keeps going with nothing kept; then each reading counts."""

    async def sample(meter: PowerMeter) -> tuple[list[float], list[float], bool]:
        out: list[float] = []
        stop = asyncio.Event()
        task = asyncio.create_task(sample_power(meter, out, stop))
        gpu_server.status, hits = 500, gpu_server.hits
        await _until(lambda: gpu_server.hits >= hits + 3 or task.done(), "three failed readings")
        while_failing, alive = list(out), not task.done()
        gpu_server.status = 200
        await _until(lambda: len(out) >= 3 or task.done(), "three readings kept")
        stop.set()
        await asyncio.wait_for(task, 1.0)
        return while_failing, out, alive

    with model_time(100.0):
        meter = PowerMeter(SimGpuSource(gpu_server.url))
        assert meter.sample_interval_wall_s == 0.05
        while_failing, kept, alive = asyncio.run(sample(meter))
    meter.close()
    assert (while_failing, alive) == ([], True)
    assert len(kept) >= 3
    assert kept == [300.0] * len(kept)


def test_power_none_opens_nothing(gpu_server: MetricsServer) -> None:
    assert power_meter("none", gpu_server.url, {"speed": 100.0}) is None


def test_auto_reads_the_simulated_box_when_the_engine_is_one(gpu_server: MetricsServer) -> None:
    meter = power_meter("auto", gpu_server.url, {"speed": 100.0})
    assert meter is not None
    assert (meter.source, _read(meter)) == ("sim", (7, 300.0, None))


def test_auto_elsewhere_reads_a_real_gpu_and_leaves_power_out_without_one(
    gpu_server: MetricsServer, no_gpu_here: None, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    """An engine that is no simulated box is read through NVML or nvidia-smi, never through
    ``/sim/gpu`` even where the URL answers it; with neither, power is left out, said at INFO."""
    with caplog.at_level(logging.INFO, logger="spark_otel.probe.power"):
        assert power_meter("auto", gpu_server.url, None) is None
    [record] = [r for r in caplog.records if r.name == "spark_otel.probe.power"]
    assert (record.levelno, record.getMessage()) == (
        logging.INFO,
        "probe: no GPU power source (no NVIDIA GPU found: NVML is not available: nvidia-ml-py is not "
        "installed; nvidia-smi is not on PATH; use --source sim --sim-url URL to read a simulated box "
        "instead); power is left out",
    )
    smi = scripted_smi(tmp_path, f'echo "{H100_ROW}"')
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PATH", str(smi.parent))
        meter = power_meter("auto", gpu_server.url, None)
        assert meter is not None
        assert (meter.source, meter.real_time) == ("smi", True)
        # Asked for by name, nvidia-smi is read even on a simulated box.
        named = power_meter("smi", gpu_server.url, {"speed": 100.0})
        assert named is not None
        assert named.source == "smi"


def test_a_source_asked_for_by_name_that_does_not_answer_is_an_error(
    free_port: int, no_gpu_here: None
) -> None:
    url = f"http://127.0.0.1:{free_port}"
    with pytest.raises(EngineError) as refused:
        power_meter("sim", url, {"speed": 100.0})
    assert str(refused.value) == (
        f"{url}/sim/gpu: cannot read the simulated GPU: ConnectError: [Errno 111] Connection refused"
    )
    with pytest.raises(NoGpuError) as no_gpu:
        power_meter("nvml", url, None)
    assert str(no_gpu.value) == (
        "no NVIDIA GPU found: NVML is not available: nvidia-ml-py is not installed; use --source sim "
        "--sim-url URL to read a simulated box instead"
    )
