"""NVML GPU performance monitoring (GPM): SM occupancy, DRAM bandwidth and tensor activity.

Hopper-class parts (and later) expose per-cycle counters through NVML's GPM interface
(``nvmlGpmQueryDeviceSupport``, ``nvmlGpmSampleGet``, ``nvmlGpmMetricsGet`` in nvidia-ml-py):
the counters the article could not read on its GB10, whose one Nsight metric set has no DRAM
counter and whose DCGM profiling module reported "gpuId 0 was not a GPM GPU". A GPM metric is a
rate between two samples, so each device keeps its last sample and every read reports the
metrics over the time since the previous read; the first read has nothing to compare with.

What a part or driver does not support (no GPM at all, an nvidia-ml-py without the calls, one
metric refused) is said once, in `GpmSampler.unsupported` and the log, and its reading is None,
never zero.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

__all__ = ["GPM_FIELDS", "GpmSampler"]

_logger = logging.getLogger(__name__)

GPM_FIELDS: tuple[tuple[str, str, int], ...] = (
    ("sm_occupancy", "NVML_GPM_METRIC_SM_OCCUPANCY", 3),
    ("dram_bandwidth", "NVML_GPM_METRIC_DRAM_BW_UTIL", 10),
    ("tensor_activity", "NVML_GPM_METRIC_ANY_TENSOR_UTIL", 5),
)
"""(field on `GpuReading`, nvidia-ml-py constant, its value where the module lacks it). NVML
reports each as a percentage; readings keep fractions (0..1), as utilization does."""

_SUCCESS = 0


@dataclass
class _Device:
    handle: Any
    label: str
    sample: Any = None
    refused: frozenset[str] = frozenset()


class GpmSampler:
    """GPM metrics of every device that supports them, each read over the time since the last."""

    def __init__(self, nvml: Any, handles: list[Any]) -> None:
        self._nvml = nvml
        self.unsupported: dict[str, str] = {}
        """What is not supported, and why: ``"GPU 0 GPM"``, or ``"GPU 0 dram_bandwidth"``."""
        self._devices: list[_Device | None] = []
        for index, handle in enumerate(handles):
            label = f"GPU {index}"
            why = self._support(handle)
            if why is None:
                self._devices.append(_Device(handle, label))
            else:
                self._say(f"{label} GPM", why)
                self._devices.append(None)

    def _say(self, what: str, why: str) -> None:
        if what not in self.unsupported:
            self.unsupported[what] = why
            _logger.info("GPU sampler: %s unsupported (%s); it reads as missing, never 0", what, why)

    def _support(self, handle: Any) -> str | None:
        """None where the device supports GPM, else why not."""
        query = getattr(self._nvml, "nvmlGpmQueryDeviceSupport", None)
        if query is None or not hasattr(self._nvml, "nvmlGpmMetricsGet"):
            return "this nvidia-ml-py has no GPM calls"
        try:
            support = query(handle)
        except Exception as exc:  # NVMLError_NotSupported, a driver without GPM
            return f"nvmlGpmQueryDeviceSupport: {exc}"
        if not getattr(support, "isSupportedDevice", 0):
            return "not a GPM device (NVML: isSupportedDevice 0)"
        return None

    def read(self, index: int) -> dict[str, float | None]:
        """The device's metrics since its previous read, as fractions; None for each the device
        cannot give (unsupported, or the first read)."""
        out: dict[str, float | None] = dict.fromkeys((f for f, _, _ in GPM_FIELDS), None)
        device = self._devices[index] if index < len(self._devices) else None
        if device is None:
            return out
        nvml = self._nvml
        try:
            sample = nvml.nvmlGpmSampleGet(device.handle, nvml.nvmlGpmSampleAlloc())
        except Exception as exc:
            self._say(f"{device.label} GPM", f"nvmlGpmSampleGet: {exc}")
            self._devices[index] = None
            return out
        previous, device.sample = device.sample, sample
        if previous is None:
            return out
        try:
            return out | self._metrics(device, previous, sample)
        finally:
            self._free(previous)

    def _metrics(self, device: _Device, first: Any, second: Any) -> dict[str, float | None]:
        nvml = self._nvml
        wanted = [(f, getattr(nvml, name, value)) for f, name, value in GPM_FIELDS if f not in device.refused]
        if not wanted:
            return {}
        request = nvml.c_nvmlGpmMetricsGet_t()
        request.version = getattr(nvml, "NVML_GPM_METRICS_GET_VERSION", 1)
        request.numMetrics = len(wanted)
        request.sample1, request.sample2 = first, second
        for i, (_, metric_id) in enumerate(wanted):
            request.metrics[i].metricId = metric_id
        try:
            nvml.nvmlGpmMetricsGet(request)
        except Exception as exc:
            _logger.debug("nvmlGpmMetricsGet failed on %s: %s", device.label, exc)
            return {}
        out: dict[str, float | None] = {}
        refused = set(device.refused)
        for i, (field, _) in enumerate(wanted):
            metric = request.metrics[i]
            if metric.nvmlReturn != _SUCCESS:
                refused.add(field)
                self._say(f"{device.label} {field}", f"nvmlGpmMetricsGet returned {metric.nvmlReturn}")
                continue
            out[field] = float(metric.value) / 100.0
        device.refused = frozenset(refused)
        return out

    def _free(self, sample: Any) -> None:
        try:
            self._nvml.nvmlGpmSampleFree(sample)
        except Exception:
            _logger.debug("nvmlGpmSampleFree failed", exc_info=True)

    def close(self) -> None:
        """Free the samples held between reads."""
        for device in self._devices:
            if device is not None and device.sample is not None:
                self._free(device.sample)
                device.sample = None
