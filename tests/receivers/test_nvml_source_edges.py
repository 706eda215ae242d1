"""NvmlSource on a fake nvidia-ml-py with two devices that answer differently, so a query sent to
the wrong handle (or to none) reads wrong; a part without a quantity; NVML failing to list or to
shut down; and the source a reading's samples are stored under."""

from __future__ import annotations

import logging
import sys

import pytest
from tests.support.gpu_fakes import GB10, H100, NVMLError, fake_nvml

from spark_otel import NoGpuError
from spark_otel import _semconv as sc
from spark_otel.receivers.gpu import GpuReading, NvmlSource, gpu_samples


def _figures(r: GpuReading) -> tuple[object, ...]:
    return (
        r.gpu_id,
        r.name,
        r.utilization,
        r.power_w,
        r.energy_j,
        r.sm_clock_mhz,
        r.memory_clock_mhz,
        r.memory_used_bytes,
        r.memory_total_bytes,
    )


def test_each_device_is_read_through_its_own_handle_in_the_given_module() -> None:
    """Two parts that answer differently: every figure is its own device's, converted (percent to
    fraction, mW to W, mJ to J, memory bytes as floats); the module passed in is the one used."""
    fake = fake_nvml([H100, GB10])
    source = NvmlSource(module=fake)
    h100, gb10 = source.read()
    source.close()
    assert _figures(h100) == (
        "0",
        "NVIDIA H100 80GB HBM3",
        0.96,
        312.45,
        5000.0,
        1980,
        2619,
        40536 * 1048576.0,
        81559 * 1048576.0,
    )
    assert _figures(gb10) == ("1", "NVIDIA GB10", 0.35, 37.25, 1.5, 2418, 4266, None, None)
    assert fake.calls == ["init", "shutdown"]


def test_a_part_without_utilization_or_power_reads_none_for_them() -> None:
    """A quantity the part refuses is None (never 0), and the rest still read."""
    part = {k: v for k, v in GB10.items() if k not in ("util", "power")}
    [reading] = NvmlSource(module=fake_nvml([part])).read()
    assert _figures(reading) == ("0", "NVIDIA GB10", None, None, 1.5, 2418, 4266, None, None)


def test_nvidia_ml_py_not_installed_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    """No module given and none importable: the one-line reason auto mode passes on."""
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml raises ImportError
    with pytest.raises(NoGpuError) as info:
        NvmlSource()
    assert str(info.value) == "NVML is not available: nvidia-ml-py is not installed"


def test_nvml_that_cannot_list_its_gpus_is_a_no_gpu_error_and_shuts_down() -> None:
    fake = fake_nvml([H100], count_fails=True)
    with pytest.raises(NoGpuError) as info:
        NvmlSource(module=fake)
    assert str(info.value) == "NVML cannot list GPUs: Uninitialized"
    assert fake.calls == ["init", "shutdown"]


def test_nvml_that_sees_no_gpu_is_a_no_gpu_error_and_shuts_down() -> None:
    fake = fake_nvml([])
    with pytest.raises(NoGpuError) as info:
        NvmlSource(module=fake)
    assert str(info.value) == "NVML sees no GPU"
    assert fake.calls == ["init", "shutdown"]


def test_a_failed_shutdown_is_logged_with_its_traceback_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    """Closing must not fail a run that is ending anyway; the debug line keeps the cause."""
    fake = fake_nvml([GB10], shutdown_fails=True)
    source = NvmlSource(module=fake)
    with caplog.at_level(logging.DEBUG, logger="spark_otel.receivers.gpu"):
        source.close()
    records = [r for r in caplog.records if r.name == "spark_otel.receivers.gpu"]
    assert [(r.levelno, r.getMessage()) for r in records] == [(logging.DEBUG, "nvmlShutdown failed")]
    exc_info = records[0].exc_info
    assert exc_info is not None
    assert exc_info[0] is NVMLError
    assert fake.calls == ["init", "shutdown"]


def test_samples_carry_the_source_they_are_stored_under() -> None:
    """The receiver passes its own source name; each sample is stored under it."""
    reading = GpuReading(gpu_id="0", unix_ns=5, power_w=37.25)
    [sample] = gpu_samples([reading], source="receiver")
    assert (sample.name, sample.value, sample.unit, sample.source) == (sc.GPU_POWER, 37.25, "W", "receiver")
