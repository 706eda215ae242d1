"""GpmSampler on a fake nvidia-ml-py whose two devices answer differently by handle, whose metric
ids and request version are not the fallbacks (or are missing, so the fallbacks are used), and
whose calls fail one at a time: each failure is said or logged once, and every sample taken is
freed exactly once."""

from __future__ import annotations

import logging
import types

import pytest

from spark_otel.receivers.gpm import GpmSampler

H0, H1 = ("handle", 0), ("handle", 1)
MODULE_IDS = {"sm_occupancy": 103, "dram_bandwidth": 110, "tensor_activity": 105}
FALLBACK_IDS = {"sm_occupancy": 3, "dram_bandwidth": 10, "tensor_activity": 5}
# per device, the percentage each metric reads over one sample apart
PERCENT = {
    H0: {"sm_occupancy": 17.5, "dram_bandwidth": 42.0, "tensor_activity": 6.0},
    H1: {"sm_occupancy": 50.0, "dram_bandwidth": 25.0, "tensor_activity": 12.5},
}
NONE = {"sm_occupancy": None, "dram_bandwidth": None, "tensor_activity": None}


class _NVMLError(Exception):
    pass


class _Metric:
    def __init__(self) -> None:
        self.metricId = 0
        self.nvmlReturn = 0
        self.value = 0.0


class _MetricsGet:
    def __init__(self) -> None:
        self.version = 0
        self.numMetrics = 0
        self.sample1: object = None
        self.sample2: object = None
        self.metrics = [_Metric() for _ in range(8)]


def _nvml(
    *,
    supported: frozenset[object] = frozenset({H0, H1}),
    constants: bool = True,
    refuse: frozenset[str] = frozenset(),
    fail: str = "",
) -> types.ModuleType:
    """``fail`` names the one call that raises: "sample_get", "metrics_get" or "sample_free"."""
    mod = types.ModuleType("pynvml")
    ids = MODULE_IDS if constants else FALLBACK_IDS
    if constants:
        mod.NVML_GPM_METRIC_SM_OCCUPANCY = ids["sm_occupancy"]  # type: ignore[attr-defined]
        mod.NVML_GPM_METRIC_DRAM_BW_UTIL = ids["dram_bandwidth"]  # type: ignore[attr-defined]
        mod.NVML_GPM_METRIC_ANY_TENSOR_UTIL = ids["tensor_activity"]  # type: ignore[attr-defined]
        mod.NVML_GPM_METRICS_GET_VERSION = 7  # type: ignore[attr-defined]
    field_of = {v: k for k, v in ids.items()}
    log: dict[str, list[object]] = {"sampled": [], "freed": [], "requests": []}
    mod.log = log  # type: ignore[attr-defined]
    mod.c_nvmlGpmMetricsGet_t = _MetricsGet  # type: ignore[attr-defined]

    def support(handle: object) -> object:
        if handle not in PERCENT:
            raise _NVMLError("Invalid Argument")
        return types.SimpleNamespace(version=1, isSupportedDevice=int(handle in supported))

    def sample_get(handle: object, sample: dict[str, object]) -> dict[str, object]:
        if fail == "sample_get":
            raise _NVMLError("Unknown Error")
        if handle not in PERCENT:
            raise _NVMLError("Invalid Argument")
        log["sampled"].append(handle)
        sample.update(handle=handle, n=len(log["sampled"]))
        return sample

    def sample_free(sample: dict[str, object]) -> None:
        log["freed"].append(sample["n"] if isinstance(sample, dict) else sample)
        if fail == "sample_free":
            raise _NVMLError("Invalid Argument")

    def metrics_get(request: _MetricsGet) -> _MetricsGet:
        asked = [m.metricId for m in request.metrics[: request.numMetrics]]
        log["requests"].append((request.version, asked))
        if fail == "metrics_get":
            raise _NVMLError("Timeout")
        first, second = request.sample1, request.sample2
        apart = second["n"] - first["n"]  # type: ignore[index]
        for metric in request.metrics[: request.numMetrics]:
            field = field_of[metric.metricId]
            if field in refuse:
                metric.nvmlReturn = 3  # NVML_ERROR_NOT_SUPPORTED
            else:
                metric.value = PERCENT[second["handle"]][field] * apart  # type: ignore[index]
        return request

    mod.nvmlGpmQueryDeviceSupport = support  # type: ignore[attr-defined]
    mod.nvmlGpmSampleAlloc = dict  # type: ignore[attr-defined]
    mod.nvmlGpmSampleGet = sample_get  # type: ignore[attr-defined]
    mod.nvmlGpmSampleFree = sample_free  # type: ignore[attr-defined]
    mod.nvmlGpmMetricsGet = metrics_get  # type: ignore[attr-defined]
    return mod


def test_each_device_is_asked_through_its_own_handle_with_the_modules_ids() -> None:
    """GPU 0 has GPM, GPU 1 does not: only GPU 0 is sampled, with its own handle; its request
    carries the module's metric ids and version, and its figures are its own, as fractions."""
    fake = _nvml(supported=frozenset({H0}))
    gpm = GpmSampler(fake, [H0, H1])
    assert gpm.unsupported == {"GPU 1 GPM": "not a GPM device (NVML: isSupportedDevice 0)"}
    assert (gpm.read(0), gpm.read(1)) == (NONE, NONE)
    assert gpm.read(0) == {"sm_occupancy": 0.175, "dram_bandwidth": 0.42, "tensor_activity": 0.06}
    assert gpm.read(1) == NONE
    gpm.close()
    assert fake.log["sampled"] == [H0, H0]
    assert fake.log["requests"] == [(7, [103, 110, 105])]
    assert fake.log["freed"] == [1, 2]


def test_both_devices_read_their_own_figures() -> None:
    gpm = GpmSampler(_nvml(), [H0, H1])
    gpm.read(0)
    gpm.read(1)
    assert gpm.read(1) == {"sm_occupancy": 0.5, "dram_bandwidth": 0.25, "tensor_activity": 0.125}
    assert gpm.unsupported == {}


def test_a_module_without_the_constants_gets_nvmls_own_ids_and_version_1() -> None:
    """An nvidia-ml-py that has the calls but not the names: the values NVML defines are used."""
    fake = _nvml(constants=False)
    gpm = GpmSampler(fake, [H0])
    gpm.read(0)
    assert gpm.read(0) == {"sm_occupancy": 0.175, "dram_bandwidth": 0.42, "tensor_activity": 0.06}
    assert fake.log["requests"] == [(1, [3, 10, 5])]


def test_a_module_without_nvml_gpm_metrics_get_has_no_gpm() -> None:
    fake = _nvml()
    del fake.nvmlGpmMetricsGet
    gpm = GpmSampler(fake, [H0])
    assert gpm.unsupported == {"GPU 0 GPM": "this nvidia-ml-py has no GPM calls"}
    assert (gpm.read(0), gpm.read(0)) == (NONE, NONE)
    assert fake.log["sampled"] == []


def test_a_support_answer_without_is_supported_device_is_not_a_gpm_device() -> None:
    fake = _nvml()
    fake.nvmlGpmQueryDeviceSupport = lambda handle: types.SimpleNamespace(version=1)  # type: ignore[attr-defined]
    gpm = GpmSampler(fake, [H0])
    assert gpm.unsupported == {"GPU 0 GPM": "not a GPM device (NVML: isSupportedDevice 0)"}
    assert gpm.read(0) == NONE


def test_an_index_past_the_devices_reads_nothing() -> None:
    gpm = GpmSampler(_nvml(), [H0])
    assert gpm.read(1) == NONE
    assert gpm.read(2) == NONE


def test_a_sample_that_cannot_be_taken_turns_the_device_off_once(caplog: pytest.LogCaptureFixture) -> None:
    """Said once, never sampled again, and closing after it is quiet."""
    fake = _nvml(fail="sample_get")
    gpm = GpmSampler(fake, [H0])
    with caplog.at_level(logging.INFO, logger="spark_otel.receivers.gpm"):
        assert [gpm.read(0) for _ in range(3)] == [NONE] * 3
    assert gpm.unsupported == {"GPU 0 GPM": "nvmlGpmSampleGet: Unknown Error"}
    assert [r.getMessage() for r in caplog.records] == [
        "GPU sampler: GPU 0 GPM unsupported (nvmlGpmSampleGet: Unknown Error); it reads as missing, never 0"
    ]
    gpm.close()
    assert fake.log["freed"] == []


def test_a_refused_first_metric_leaves_the_others_and_is_not_asked_again() -> None:
    fake = _nvml(refuse=frozenset({"sm_occupancy"}))
    gpm = GpmSampler(fake, [H0])
    reads = [gpm.read(0) for _ in range(3)]
    assert reads[1:] == [{"sm_occupancy": None, "dram_bandwidth": 0.42, "tensor_activity": 0.06}] * 2
    assert fake.log["requests"] == [(7, [103, 110, 105]), (7, [110, 105])]
    assert gpm.unsupported == {"GPU 0 sm_occupancy": "nvmlGpmMetricsGet returned 3"}


def test_a_failed_metrics_call_reads_nothing_and_logs_the_device_and_cause(
    caplog: pytest.LogCaptureFixture,
) -> None:
    fake = _nvml(fail="metrics_get")
    gpm = GpmSampler(fake, [H0])
    with caplog.at_level(logging.DEBUG, logger="spark_otel.receivers.gpm"):
        assert (gpm.read(0), gpm.read(0)) == (NONE, NONE)
    assert [(r.levelno, r.getMessage()) for r in caplog.records] == [
        (logging.DEBUG, "nvmlGpmMetricsGet failed on GPU 0: Timeout")
    ]
    assert fake.log["freed"] == [1]  # the earlier sample, freed all the same


def test_a_failed_free_is_logged_with_its_traceback_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    fake = _nvml(fail="sample_free")
    gpm = GpmSampler(fake, [H0])
    with caplog.at_level(logging.DEBUG, logger="spark_otel.receivers.gpm"):
        gpm.read(0)
        assert gpm.read(0) == {"sm_occupancy": 0.175, "dram_bandwidth": 0.42, "tensor_activity": 0.06}
    assert [(r.levelno, r.getMessage()) for r in caplog.records] == [
        (logging.DEBUG, "nvmlGpmSampleFree failed")
    ]
    exc_info = caplog.records[0].exc_info
    assert exc_info is not None
    assert exc_info[0] is _NVMLError


def test_closing_twice_frees_each_sample_once() -> None:
    fake = _nvml()
    gpm = GpmSampler(fake, [H0, H1])
    for index in (0, 1, 0):
        gpm.read(index)
    gpm.close()
    gpm.close()
    # the read freed GPU 0's first sample; closing frees each device's last, in device order
    assert fake.log["freed"] == [1, 3, 2]
