"""GPU readouts: NVML, ``nvidia-smi``, or the simulated box's ``/sim/gpu``.

These are the gauges the article found wanting: ``utilization.gpu`` is the fraction of
sample periods in which any kernel was resident, so it pins near 96% under any decode load,
and power moved a few watts across a 17x throughput range. spark-otel records them anyway,
beside the engines' token rates, so the dashboards can show the gauge not moving.

Sources, in the order ``auto`` tries them: NVML through ``nvidia-ml-py`` (``import pynvml``;
power mW -> W, energy mJ -> J, memory in bytes), then ``nvidia-smi --query-gpu`` CSV (memory
MiB -> bytes, no energy counter). ``sim`` reads a simulated engine's ``/sim/gpu`` JSON. A
quantity a part does not support (memory on unified-memory parts, energy on older GPUs) is
None, never zero. Utilization is reported as a fraction (0..1). Where NVML exposes GPU
performance monitoring (Hopper-class parts), NVML readings also carry SM occupancy, DRAM
bandwidth and tensor activity (`spark_otel.receivers.gpm`); a part without it says so once, in
the source's ``unsupported``.
"""

from __future__ import annotations

import csv
import importlib
import io
import logging
import shutil
import subprocess
from collections.abc import Callable, Sequence
from typing import Any, Literal, Protocol

import httpx2
from pydantic import BaseModel, ConfigDict

from .. import _clock
from .. import _semconv as sc
from .._exceptions import ConfigError, EngineError, NoGpuError
from .._urls import check_engine_url, engine_base_url
from ..model import AttributeValue, MetricSample
from .gpm import GpmSampler

__all__ = [
    "GpuReading",
    "GpuSource",
    "NvmlSource",
    "SimGpuSource",
    "SmiSource",
    "SourceKind",
    "gpu_samples",
    "open_gpu_source",
]

_logger = logging.getLogger(__name__)

SourceKind = Literal["auto", "nvml", "smi", "sim"]
_MIB = 1024 * 1024
SMI_FIELDS = (
    "index",
    "name",
    "uuid",
    "utilization.gpu",
    "power.draw",
    "clocks.sm",
    "clocks.mem",
    "memory.used",
    "memory.total",
)
_NO_GPU_HINT = "use --source sim --sim-url URL to read a simulated box instead"


class GpuReading(BaseModel):
    """One GPU at one instant; None where the part or source does not report the quantity."""

    model_config = ConfigDict(frozen=True)

    gpu_id: str
    name: str | None = None
    unix_ns: int
    utilization: float | None = None
    power_w: float | None = None
    energy_j: float | None = None
    sm_clock_mhz: float | None = None
    memory_clock_mhz: float | None = None
    memory_used_bytes: float | None = None
    memory_total_bytes: float | None = None
    sm_occupancy: float | None = None
    dram_bandwidth: float | None = None
    tensor_activity: float | None = None


class GpuSource(Protocol):
    """Something that reads every GPU it sees, now."""

    kind: str

    def read(self) -> list[GpuReading]: ...

    def close(self) -> None: ...


# (field on GpuReading, metric name, unit, instrument) — the table docs/receivers.md documents.
GPU_METRICS: tuple[tuple[str, str, str, str], ...] = (
    ("utilization", sc.GPU_UTILIZATION, "1", "gauge"),
    ("power_w", sc.GPU_POWER, "W", "gauge"),
    ("energy_j", sc.GPU_ENERGY, "J", "counter"),
    ("sm_clock_mhz", sc.GPU_CLOCK_SM, "MHz", "gauge"),
    ("memory_clock_mhz", sc.GPU_CLOCK_MEMORY, "MHz", "gauge"),
    ("memory_used_bytes", sc.GPU_MEMORY_USED, "By", "gauge"),
    ("memory_total_bytes", sc.GPU_MEMORY_TOTAL, "By", "gauge"),
    ("sm_occupancy", sc.GPU_SM_OCCUPANCY, "1", "gauge"),
    ("dram_bandwidth", sc.GPU_DRAM_BANDWIDTH, "1", "gauge"),
    ("tensor_activity", sc.GPU_TENSOR_ACTIVITY, "1", "gauge"),
)


def gpu_attributes(reading: GpuReading) -> dict[str, AttributeValue]:
    attrs: dict[str, AttributeValue] = {sc.GPU_ID: reading.gpu_id}
    if reading.name:
        attrs[sc.GPU_NAME] = reading.name
    return attrs


def gpu_samples(readings: Sequence[GpuReading], *, source: str = "gpu") -> list[MetricSample]:
    """Store samples for every quantity each reading has (pure)."""
    out: list[MetricSample] = []
    for reading in readings:
        attrs = gpu_attributes(reading)
        for field, name, unit, _ in GPU_METRICS:
            value = getattr(reading, field)
            if value is not None:
                out.append(
                    MetricSample(
                        name=name,
                        unix_ns=reading.unix_ns,
                        value=value,
                        unit=unit,
                        attributes=attrs,
                        source=source,
                    )
                )
    return out


# -- NVML --------------------------------------------------------------------------------------------
class NvmlSource:
    """NVML through ``nvidia-ml-py``; one handle per device, opened once."""

    kind = "nvml"

    def __init__(self, module: Any | None = None) -> None:
        nvml: Any = module
        if nvml is None:
            try:
                nvml = importlib.import_module("pynvml")
            except ImportError as exc:
                raise NoGpuError("NVML is not available: nvidia-ml-py is not installed") from exc
        self._nvml = nvml
        try:
            nvml.nvmlInit()
        except Exception as exc:  # pynvml.NVMLError and its many subclasses
            raise NoGpuError(f"NVML cannot start ({exc}); no NVIDIA driver or GPU here") from exc
        try:
            count = int(nvml.nvmlDeviceGetCount())
            self._handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
        except Exception as exc:
            self._shutdown()
            raise NoGpuError(f"NVML cannot list GPUs: {exc}") from exc
        if not self._handles:
            self._shutdown()
            raise NoGpuError("NVML sees no GPU")
        self._names = [self._optional(nvml.nvmlDeviceGetName, h) for h in self._handles]
        self._gpm = GpmSampler(nvml, self._handles)

    @property
    def unsupported(self) -> dict[str, str]:
        """What this GPU cannot report and why (GPM metrics), each said once."""
        return self._gpm.unsupported

    def _optional(self, fn: Callable[..., Any], *args: Any) -> Any:
        """A query the part may not support (NVML_ERROR_NOT_SUPPORTED) reads as None."""
        try:
            value = fn(*args)
        except Exception:
            return None
        return value.decode() if isinstance(value, bytes) else value

    def read(self) -> list[GpuReading]:
        nvml = self._nvml
        now = _clock.wall_ns()
        out = []
        for index, (handle, name) in enumerate(zip(self._handles, self._names, strict=True)):
            util = self._optional(nvml.nvmlDeviceGetUtilizationRates, handle)
            power_mw = self._optional(nvml.nvmlDeviceGetPowerUsage, handle)
            energy_mj = self._optional(nvml.nvmlDeviceGetTotalEnergyConsumption, handle)
            memory = self._optional(nvml.nvmlDeviceGetMemoryInfo, handle)
            gpm = self._gpm.read(index)
            out.append(
                GpuReading(
                    gpu_id=str(index),
                    name=name,
                    unix_ns=now,
                    utilization=util.gpu / 100.0 if util is not None else None,
                    power_w=power_mw / 1000.0 if power_mw is not None else None,
                    energy_j=energy_mj / 1000.0 if energy_mj is not None else None,
                    sm_clock_mhz=self._optional(nvml.nvmlDeviceGetClockInfo, handle, nvml.NVML_CLOCK_SM),
                    memory_clock_mhz=self._optional(nvml.nvmlDeviceGetClockInfo, handle, nvml.NVML_CLOCK_MEM),
                    memory_used_bytes=float(memory.used) if memory is not None else None,
                    memory_total_bytes=float(memory.total) if memory is not None else None,
                    **gpm,
                )
            )
        return out

    def close(self) -> None:
        self._gpm.close()
        self._shutdown()

    def _shutdown(self) -> None:
        """NVML's own shutdown; also where a start that found no GPU ends (nothing else is open)."""
        try:
            self._nvml.nvmlShutdown()
        except Exception:
            _logger.debug("nvmlShutdown failed", exc_info=True)


# -- nvidia-smi --------------------------------------------------------------------------------------
def _smi_number(raw: str) -> float | None:
    """nvidia-smi prints ``[N/A]`` or ``[Not Supported]`` for what a part lacks."""
    text = raw.strip()
    if not text or text.startswith("[") or text.upper() == "N/A":
        return None
    try:
        return float(text)
    except ValueError:
        return None


SMI_MAX_LINE = 4_096
"""The longest nvidia-smi line read: a GPU's line is about 100 characters; a longer one is not
nvidia-smi's answer (and past csv's own field limit it would be an internal error)."""


def parse_smi_csv(text: str, *, unix_ns: int) -> list[GpuReading]:
    """Readings from ``--query-gpu=<SMI_FIELDS> --format=csv,noheader,nounits`` output (pure)."""
    out = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        if len(line) > SMI_MAX_LINE:
            raise NoGpuError(
                f"nvidia-smi line {lineno}: {len(line):,} characters, past the cap of {SMI_MAX_LINE:,}; "
                "not nvidia-smi's answer"
            )
    try:
        rows = list(csv.reader(io.StringIO(text)))
    except csv.Error as exc:
        raise NoGpuError(f"nvidia-smi: not CSV output: {exc}") from None
    for lineno, row in enumerate(rows, start=1):
        if not row or not "".join(row).strip():
            continue
        if len(row) != len(SMI_FIELDS):
            raise NoGpuError(
                f"nvidia-smi line {lineno}: expected {len(SMI_FIELDS)} fields, "
                f"got {len(row)}: {_shown(','.join(row))!r}"
            )
        values = dict(zip(SMI_FIELDS, (cell.strip() for cell in row), strict=True))
        util = _smi_number(values["utilization.gpu"])
        used = _smi_number(values["memory.used"])
        total = _smi_number(values["memory.total"])
        out.append(
            GpuReading(
                gpu_id=values["index"],
                name=values["name"] or None,
                unix_ns=unix_ns,
                utilization=util / 100.0 if util is not None else None,
                power_w=_smi_number(values["power.draw"]),
                sm_clock_mhz=_smi_number(values["clocks.sm"]),
                memory_clock_mhz=_smi_number(values["clocks.mem"]),
                memory_used_bytes=used * _MIB if used is not None else None,
                memory_total_bytes=total * _MIB if total is not None else None,
            )
        )
    return out


def _shown(text: str, most: int = 200) -> str:
    return text if len(text) <= most else text[: most - 3] + "..."


class SmiSource:
    """``nvidia-smi --query-gpu`` as a subprocess, once per read."""

    kind = "smi"

    def __init__(self, executable: str | None = None, *, timeout_s: float = 10.0) -> None:
        found = executable or shutil.which("nvidia-smi")
        if not found:
            raise NoGpuError("nvidia-smi is not on PATH")
        self._argv = [found, f"--query-gpu={','.join(SMI_FIELDS)}", "--format=csv,noheader,nounits"]
        self._timeout_s = timeout_s
        if not self.read():
            raise NoGpuError("nvidia-smi lists no GPU")

    def read(self) -> list[GpuReading]:
        try:
            done = subprocess.run(
                self._argv, capture_output=True, text=True, timeout=self._timeout_s, check=False
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise NoGpuError(f"nvidia-smi did not run: {exc}") from exc
        if done.returncode != 0:
            message = (done.stderr or done.stdout).strip().splitlines()
            raise NoGpuError(
                f"nvidia-smi exited {done.returncode}: {message[0] if message else 'no message'}"
            )
        return parse_smi_csv(done.stdout, unix_ns=_clock.wall_ns())

    def close(self) -> None:
        return


# -- simulated box -----------------------------------------------------------------------------------
class SimGpuSource:
    """The simulated engine's ``GET /sim/gpu`` readout of the box it simulates."""

    kind = "sim"

    def __init__(self, url: str, *, timeout_s: float = 5.0) -> None:
        self.url = engine_base_url(url) + "/sim/gpu"
        self._client = httpx2.Client(timeout=timeout_s)
        try:
            self.read()
        except EngineError:
            self._client.close()
            raise

    def read(self) -> list[GpuReading]:
        try:
            response = self._client.get(self.url)
        except httpx2.HTTPError as exc:
            raise EngineError(
                f"{self.url}: cannot read the simulated GPU: {type(exc).__name__}: {exc}"
            ) from exc
        if response.status_code != 200:
            raise EngineError(f"{self.url}: answered HTTP {response.status_code} (is this a spark-otel sim?)")
        try:
            body = response.json()
            util = body.get("utilization_gpu_pct")
            return [
                GpuReading(
                    gpu_id="0",
                    name="simulated",
                    unix_ns=int(body.get("unix_ns") or _clock.wall_ns()),
                    utilization=float(util) / 100.0 if util is not None else None,
                    power_w=body.get("power_w"),
                    energy_j=body.get("energy_j"),
                    sm_clock_mhz=body.get("sm_clock_mhz"),
                    memory_used_bytes=body.get("memory_used_bytes"),
                    memory_total_bytes=body.get("memory_total_bytes"),
                )
            ]
        except (ValueError, TypeError, AttributeError) as exc:
            raise EngineError(f"{self.url}: not a simulated GPU readout: {exc}") from exc

    def close(self) -> None:
        self._client.close()


def open_gpu_source(kind: SourceKind = "auto", *, sim_url: str | None = None) -> GpuSource:
    """Open the requested source; ``auto`` tries NVML, then nvidia-smi.

    Raises `NoGpuError` with both reasons when neither finds a GPU, `ConfigError` for
    ``sim`` without a URL.
    """
    if kind == "sim":
        if not sim_url:
            raise ConfigError(
                "the simulated GPU source (sim) needs --sim-url URL (a simulated engine's base URL)"
            )
        return SimGpuSource(check_engine_url(sim_url, "--sim-url"))
    if kind in ("nvml", "smi"):
        try:
            return NvmlSource() if kind == "nvml" else SmiSource()
        except NoGpuError as exc:
            raise NoGpuError(f"no NVIDIA GPU found: {exc}; {_NO_GPU_HINT}") from exc
    if kind != "auto":
        raise ConfigError(f"unknown GPU source {kind!r}: use auto, nvml, smi or sim")
    try:
        return NvmlSource()
    except NoGpuError as nvml_exc:
        try:
            return SmiSource()
        except NoGpuError as smi_exc:
            raise NoGpuError(f"no NVIDIA GPU found: {nvml_exc}; {smi_exc}; {_NO_GPU_HINT}") from smi_exc
