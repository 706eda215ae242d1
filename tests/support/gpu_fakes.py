"""Stand-ins for a GPU no test machine has on demand: fake nvidia-ml-py modules, fake nvidia-smi
executables, and the simulated box's /sim/gpu readings."""

from __future__ import annotations

import stat
import types
from pathlib import Path

SIM_GPU = {
    "utilization_gpu_pct": 96.0,
    "power_w": 37.2,
    "energy_j": 1234.5,
    "sm_clock_mhz": 2418.0,
    "memory_used_bytes": 80 * 2**30,
    "memory_total_bytes": 128 * 2**30,
    "unix_ns": 1_790_000_000_000_000_000,
}


# SIM_GPU as a reading reads in --json (gpu-sample, receive).
SIM_GPU_JSON = {
    "gpu_id": "0",
    "name": "simulated",
    "unix_ns": SIM_GPU["unix_ns"],
    "utilization": 0.96,
    "power_w": 37.2,
    "energy_j": 1234.5,
    "sm_clock_mhz": 2418.0,
    "memory_clock_mhz": None,
    "memory_used_bytes": 80.0 * 2**30,
    "memory_total_bytes": 128.0 * 2**30,
    "sm_occupancy": None,
    "dram_bandwidth": None,
    "tensor_activity": None,
}


class NVMLError(Exception):
    pass


def fake_pynvml(*, energy_supported: bool = True, init_fails: bool = False) -> types.ModuleType:
    """A stand-in for nvidia-ml-py with one GB10-like device (no GPU can be produced on demand)."""
    mod = types.ModuleType("pynvml")
    mod.NVMLError = NVMLError  # type: ignore[attr-defined]
    mod.NVML_CLOCK_SM = 1  # type: ignore[attr-defined]
    mod.NVML_CLOCK_MEM = 2  # type: ignore[attr-defined]
    calls: list[str] = []
    mod.calls = calls  # type: ignore[attr-defined]

    def init() -> None:
        calls.append("init")
        if init_fails:
            raise NVMLError("Driver Not Loaded")

    def energy(handle: object) -> int:
        if not energy_supported:
            raise NVMLError("Not Supported")
        return 5_000_000  # mJ

    def memory(handle: object) -> object:
        raise NVMLError("Not Supported")  # unified memory: no dedicated framebuffer

    mod.nvmlInit = init  # type: ignore[attr-defined]
    mod.nvmlShutdown = lambda: calls.append("shutdown")  # type: ignore[attr-defined]
    mod.nvmlDeviceGetCount = lambda: 1  # type: ignore[attr-defined]
    mod.nvmlDeviceGetHandleByIndex = lambda i: ("handle", i)  # type: ignore[attr-defined]
    mod.nvmlDeviceGetName = lambda h: b"NVIDIA GB10"  # type: ignore[attr-defined]
    mod.nvmlDeviceGetUtilizationRates = lambda h: types.SimpleNamespace(gpu=96, memory=0)  # type: ignore[attr-defined]
    mod.nvmlDeviceGetPowerUsage = lambda h: 37_250  # type: ignore[attr-defined]  # mW
    mod.nvmlDeviceGetTotalEnergyConsumption = energy  # type: ignore[attr-defined]
    mod.nvmlDeviceGetClockInfo = lambda h, kind: {1: 2418, 2: 4266}[kind]  # type: ignore[attr-defined]
    mod.nvmlDeviceGetMemoryInfo = memory  # type: ignore[attr-defined]
    return mod


def fake_smi(tmp_path: Path, body: str, exit_code: int = 0) -> Path:
    """An executable named nvidia-smi that prints ``body`` (real-format CSV or an error)."""
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    script = bindir / "nvidia-smi"
    stream = ">&2" if exit_code else ""
    script.write_text(
        f"#!/bin/sh\n"
        f'case "$*" in *--query-gpu=index,name,uuid,utilization.gpu,power.draw,clocks.sm,clocks.mem,'
        f"memory.used,memory.total*--format=csv,noheader,nounits*) ;; *) echo bad args >&2; exit 2;; esac\n"
        f"cat <<'EOF' {stream}\n{body}EOF\nexit {exit_code}\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return bindir


SMI_CSV = (
    "0, NVIDIA H100 80GB HBM3, GPU-2c3f7a0e-1111-2222-3333-444455556666, "
    "96, 312.45, 1980, 2619, 40536, 81559\n"
    "1, NVIDIA GB10, GPU-aaaa, 95, 37.10, 2418, [N/A], [N/A], [N/A]\n"
)


SM, MEM = 7, 8  # the clock kinds, other than any default a mutant could fall back on


H100 = {
    "name": b"NVIDIA H100 80GB HBM3",  # older nvidia-ml-py returns bytes
    "util": types.SimpleNamespace(gpu=96, memory=40),
    "power": 312_450,  # mW
    "energy": 5_000_000,  # mJ
    "clock": {SM: 1980, MEM: 2619},
    "memory": types.SimpleNamespace(used=40536 * 2**20, total=81559 * 2**20, free=0),
}


GB10 = {
    "name": "NVIDIA GB10",  # newer nvidia-ml-py returns str
    "util": types.SimpleNamespace(gpu=35, memory=0),
    "power": 37_250,
    "energy": 1_500,
    "clock": {SM: 2418, MEM: 4266},
    # no "memory": unified memory, NVML_ERROR_NOT_SUPPORTED
}


def fake_nvml(
    devices: list[dict[str, object]],
    *,
    count_fails: bool = False,
    shutdown_fails: bool = False,
) -> types.ModuleType:
    """A fake nvidia-ml-py whose handles are ``("handle", i)``; each query looks its device up by
    handle, so a query given another handle finds nothing, and a quantity a device lacks raises."""
    mod = types.ModuleType("pynvml")
    mod.NVML_CLOCK_SM = SM  # type: ignore[attr-defined]
    mod.NVML_CLOCK_MEM = MEM  # type: ignore[attr-defined]
    table = {("handle", i): d for i, d in enumerate(devices)}
    calls: list[str] = []
    mod.calls = calls  # type: ignore[attr-defined]

    def query(key: str) -> object:
        def call(handle: tuple[str, int], *args: int) -> object:
            values = table[handle]
            if key not in values:
                raise NVMLError("Not Supported")
            value = values[key]
            return value[args[0]] if args else value  # type: ignore[index]

        return call

    def count() -> int:
        if count_fails:
            raise NVMLError("Uninitialized")
        return len(devices)

    def shutdown() -> None:
        calls.append("shutdown")
        if shutdown_fails:
            raise NVMLError("Driver busy")

    mod.nvmlInit = lambda: calls.append("init")  # type: ignore[attr-defined]
    mod.nvmlShutdown = shutdown  # type: ignore[attr-defined]
    mod.nvmlDeviceGetCount = count  # type: ignore[attr-defined]
    mod.nvmlDeviceGetHandleByIndex = lambda i: ("handle", i)  # type: ignore[attr-defined]
    mod.nvmlDeviceGetName = query("name")  # type: ignore[attr-defined]
    mod.nvmlDeviceGetUtilizationRates = query("util")  # type: ignore[attr-defined]
    mod.nvmlDeviceGetPowerUsage = query("power")  # type: ignore[attr-defined]
    mod.nvmlDeviceGetTotalEnergyConsumption = query("energy")  # type: ignore[attr-defined]
    mod.nvmlDeviceGetClockInfo = query("clock")  # type: ignore[attr-defined]
    mod.nvmlDeviceGetMemoryInfo = query("memory")  # type: ignore[attr-defined]
    return mod


QUERY = "--query-gpu=index,name,uuid,utilization.gpu,power.draw,clocks.sm,clocks.mem,memory.used,memory.total"


FORMAT = "--format=csv,noheader,nounits"


H100_ROW = "0, NVIDIA H100 80GB HBM3, GPU-2c3f7a0e, 96, 312.45, 1980, 2619, 40536, 81559"


def scripted_smi(tmp_path: Path, script: str) -> Path:
    """An executable nvidia-smi running ``script`` when given exactly the query and format
    arguments spark-otel documents; any other arguments exit 2."""
    path = tmp_path / "bin" / "nvidia-smi"
    path.parent.mkdir(exist_ok=True)
    path.write_text(
        f'#!/bin/sh\n[ "$#" = 2 ] && [ "$1" = "{QUERY}" ] && [ "$2" = "{FORMAT}" ] '
        f"|| {{ echo bad args: $* >&2; exit 2; }}\n{script}\n"
    )
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path
