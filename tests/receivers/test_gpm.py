"""NVML GPU performance monitoring on a fake nvidia-ml-py: a Hopper-like part whose GPM counters
move between samples, a part without GPM (the article's GB10), and a metric one part refuses.
No GPU can be produced on demand, so NVML is faked as in test_gpu."""

from __future__ import annotations

import logging
import sys
import types
from pathlib import Path

import pytest
from tests.support.gpu_fakes import NVMLError, fake_pynvml

from spark_otel import _semconv as sc
from spark_otel.cli import main
from spark_otel.receivers.gpu import NvmlSource, gpu_samples
from spark_otel.store import Store

SM_OCCUPANCY, ANY_TENSOR, DRAM_BW = 3, 5, 10


class _Metric:
    def __init__(self) -> None:
        self.metricId = 0
        self.nvmlReturn = 0
        self.value = 0.0


class _MetricsGet:
    """The shape of nvidia-ml-py's c_nvmlGpmMetricsGet_t."""

    def __init__(self) -> None:
        self.version = 0
        self.numMetrics = 0
        self.sample1: object = None
        self.sample2: object = None
        self.metrics = [_Metric() for _ in range(8)]


def _with_gpm(mod: types.ModuleType, *, supported: bool = True, refuse: frozenset[int] = frozenset()) -> None:
    """GPM on the fake module: each sample is the device's cycle count so far; a metric between
    two samples is a fixed percentage per metric, scaled by how many reads apart they are, so a
    test can tell which pair was compared."""
    state = {"taken": 0, "freed": 0, "alive": set()}
    mod.gpm = state  # type: ignore[attr-defined]
    mod.NVML_GPM_METRIC_SM_OCCUPANCY = SM_OCCUPANCY  # type: ignore[attr-defined]
    mod.NVML_GPM_METRIC_ANY_TENSOR_UTIL = ANY_TENSOR  # type: ignore[attr-defined]
    mod.NVML_GPM_METRIC_DRAM_BW_UTIL = DRAM_BW  # type: ignore[attr-defined]
    mod.NVML_GPM_METRICS_GET_VERSION = 1  # type: ignore[attr-defined]
    mod.c_nvmlGpmMetricsGet_t = _MetricsGet  # type: ignore[attr-defined]

    def support(handle: object) -> object:
        return types.SimpleNamespace(version=1, isSupportedDevice=1 if supported else 0)

    def alloc() -> dict[str, int]:
        return {}

    def sample_get(handle: object, sample: dict[str, int]) -> dict[str, int]:
        state["taken"] += 1
        sample["n"] = state["taken"]
        state["alive"].add(id(sample))  # type: ignore[attr-defined]
        return sample

    def sample_free(sample: dict[str, int]) -> None:
        state["freed"] += 1
        state["alive"].discard(id(sample))  # type: ignore[attr-defined]

    def metrics_get(request: _MetricsGet) -> _MetricsGet:
        assert request.version == 1
        apart = request.sample2["n"] - request.sample1["n"]  # type: ignore[index]
        base = {SM_OCCUPANCY: 17.5, ANY_TENSOR: 6.0, DRAM_BW: 42.0}
        for metric in request.metrics[: request.numMetrics]:
            if metric.metricId in refuse:
                metric.nvmlReturn = 3  # NVML_ERROR_NOT_SUPPORTED
            else:
                metric.value = base[metric.metricId] * apart
        return request

    mod.nvmlGpmQueryDeviceSupport = support  # type: ignore[attr-defined]
    mod.nvmlGpmSampleAlloc = alloc  # type: ignore[attr-defined]
    mod.nvmlGpmSampleGet = sample_get  # type: ignore[attr-defined]
    mod.nvmlGpmSampleFree = sample_free  # type: ignore[attr-defined]
    mod.nvmlGpmMetricsGet = metrics_get  # type: ignore[attr-defined]


def test_gpm_metrics_are_read_between_consecutive_samples_as_fractions(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake = fake_pynvml()
    _with_gpm(fake)
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    source = NvmlSource()
    [first] = source.read()
    assert (first.sm_occupancy, first.dram_bandwidth, first.tensor_activity) == (None, None, None)
    [second] = source.read()
    [third] = source.read()
    source.close()
    # One read apart each time: the pair compared is the previous sample and this one.
    assert (second.sm_occupancy, second.dram_bandwidth, second.tensor_activity) == (0.175, 0.42, 0.06)
    assert third.sm_occupancy == 0.175
    assert source.unsupported == {}
    assert fake.gpm["taken"] == 3
    assert fake.gpm["freed"] == 3
    assert not fake.gpm["alive"]
    samples = {s.name: s for s in gpu_samples([second])}
    assert samples[sc.GPU_SM_OCCUPANCY].value == 0.175
    assert samples[sc.GPU_DRAM_BANDWIDTH].value == 0.42
    assert samples[sc.GPU_TENSOR_ACTIVITY].unit == "1"
    assert sc.GPU_SM_OCCUPANCY not in {s.name for s in gpu_samples([first])}


def test_a_part_without_gpm_says_so_once_and_records_nothing(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    fake = fake_pynvml()
    _with_gpm(fake, supported=False)
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    with caplog.at_level(logging.INFO, logger="spark_otel.receivers.gpm"):
        source = NvmlSource()
        readings = [source.read()[0] for _ in range(3)]
    assert source.unsupported == {"GPU 0 GPM": "not a GPM device (NVML: isSupportedDevice 0)"}
    assert [r.message for r in caplog.records].count(
        "GPU sampler: GPU 0 GPM unsupported (not a GPM device (NVML: isSupportedDevice 0)); "
        "it reads as missing, never 0"
    ) == 1
    assert all(r.sm_occupancy is None and r.dram_bandwidth is None for r in readings)
    assert fake.gpm["taken"] == 0
    names = {s.name for r in readings for s in gpu_samples([r])}
    assert not names & {sc.GPU_SM_OCCUPANCY, sc.GPU_DRAM_BANDWIDTH, sc.GPU_TENSOR_ACTIVITY}


def test_an_older_nvidia_ml_py_without_gpm_calls_is_unsupported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml())
    source = NvmlSource()
    [reading] = source.read()
    assert source.unsupported == {"GPU 0 GPM": "this nvidia-ml-py has no GPM calls"}
    assert reading.tensor_activity is None


def test_a_query_that_raises_is_unsupported(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = fake_pynvml()
    _with_gpm(fake)

    def refuse(handle: object) -> object:
        raise NVMLError("Not Supported")

    fake.nvmlGpmQueryDeviceSupport = refuse  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    assert NvmlSource().unsupported == {"GPU 0 GPM": "nvmlGpmQueryDeviceSupport: Not Supported"}


def test_one_metric_the_part_refuses_is_unsupported_the_others_read(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = fake_pynvml()
    _with_gpm(fake, refuse=frozenset({DRAM_BW}))
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    source = NvmlSource()
    readings = [source.read()[0] for _ in range(4)]
    assert [r.dram_bandwidth for r in readings] == [None] * 4
    assert [r.sm_occupancy for r in readings] == [None, 0.175, 0.175, 0.175]
    assert source.unsupported == {"GPU 0 dram_bandwidth": "nvmlGpmMetricsGet returned 3"}


def test_gpu_sample_once_names_what_is_unsupported(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fake = fake_pynvml()
    _with_gpm(fake, supported=False)
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    store = tmp_path / "s.sqlite"
    assert main(["gpu-sample", "--source", "nvml", "--once", "--store", str(store)]) == 0
    assert "unsupported: GPU 0 GPM: not a GPM device (NVML: isSupportedDevice 0)" in capsys.readouterr().out
    with Store(store, read_only=True) as s:
        assert s.samples(sc.GPU_SM_OCCUPANCY) == []
        assert len(s.samples(sc.GPU_POWER)) == 1
