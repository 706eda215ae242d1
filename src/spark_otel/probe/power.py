"""Mean GPU power over a probe level: the box's draw, from NVML, nvidia-smi or the simulated box."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from .. import _clock
from .._exceptions import EngineError, NoGpuError
from ..analysis.probe_levels import GpuPoint
from ..receivers.gpu import GpuSource, open_gpu_source

__all__ = ["PowerMeter", "power_meter", "sample_power"]

_logger = logging.getLogger(__name__)


class PowerMeter:
    """Mean GPU power over a window: energy-counter delta where there is one, else mean samples.

    Readings of every GPU the source sees are summed: the probe reports the box's draw. A real
    GPU's energy counter runs in real time while reading timestamps are model time; the
    simulated box integrates its energy in model time.
    """

    def __init__(self, source: GpuSource) -> None:
        self._source = source
        self.source = source.kind
        self.real_time = source.kind != "sim"

    @property
    def sample_interval_wall_s(self) -> float:
        """3 s between samples, as the article sampled nvidia-smi: real seconds for a real GPU."""
        return 3.0 if self.real_time else max(0.05, _clock.to_real_s(3.0))

    async def reading(self) -> GpuPoint | None:
        try:
            readings = await asyncio.to_thread(self._source.read)
        except Exception:
            _logger.debug("probe: GPU reading from %s failed", self.source, exc_info=True)
            return None
        if not readings:
            return None
        powers = [r.power_w for r in readings]
        energies = [r.energy_j for r in readings]
        return (
            max(r.unix_ns for r in readings),
            sum(p for p in powers if p is not None) if all(p is not None for p in powers) else None,
            sum(e for e in energies if e is not None) if all(e is not None for e in energies) else None,
        )

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._source.close()


def power_meter(requested: str, engine_url: str, sim_info: dict[str, Any] | None) -> PowerMeter | None:
    """The requested power source; ``auto`` reads the simulated box's GPU, else NVML or nvidia-smi,
    and leaves power out when the source it picked does not answer."""
    if requested == "none":
        return None
    mode = "sim" if requested == "auto" and sim_info is not None else requested
    try:
        return PowerMeter(open_gpu_source(mode, sim_url=engine_url))  # type: ignore[arg-type]
    except (NoGpuError, EngineError) as exc:
        if requested == "auto":
            _logger.info("probe: no GPU power source (%s); power is left out", exc)
            return None
        raise


async def sample_power(meter: PowerMeter, out: list[float], stop: asyncio.Event) -> None:
    interval_wall = meter.sample_interval_wall_s
    while not stop.is_set():
        reading = await meter.reading()
        if reading is not None and reading[1] is not None:
            out.append(reading[1])
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), interval_wall)
