"""Named timing profiles for the simulated engine, calibrated to the article (Appendix A, Act 4).

A profile is the ground truth the simulated box runs on, so tests and other tools can compare
what they measure with what the simulation was told to do. Every figure is in model time.

Decode: one engine step emits one token to every decoding stream. The step time for ``n``
streams comes from the profile's calibration curve (per-stream tok/s at measured stream counts),
interpolated linearly in step time between the points and extrapolated from the last segment.
Dense decode reads every weight each step, so the curve is flat until the batch grows large;
the mixture-of-experts curve falls from the start and collapses past eight streams.

Memory contention across engines: an engine decoding ``n`` streams puts
``memory_pressure(n)`` on the box's memory system; every other engine's decode steps take
``1 + memory_sensitivity x (sum of the neighbours' pressure)`` times as long. Calibration: the
MoE engine at 4 streams takes 54% from a serial stream on the dense engine (pressure 1.17);
the dense engine with one stream makes a lone MoE stream decode at 29 tok/s against 82 (2.83x).

Prefill is compute-bound: it costs ``prompt_tokens / prefill_tokens_per_s`` and runs in chunks of
at most ``max_num_batched_tokens`` per step, first come first served, inside the same steps as
decode. A step takes the longer of its weight read (the decode step time) and its prefill compute,
so a short prompt rides along for free while long prompts queue behind each other and stretch
every decode step they share (prompt-heavy cells: eight workers buy about 1.9x).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from .._exceptions import ConfigError

__all__ = ["DENSE", "MOE", "PROFILES", "Profile", "get_profile"]

Curve = tuple[tuple[float, float], ...]


def _interpolate(curve: Curve, x: float) -> float:
    """Piecewise-linear through ``curve``; clamped below the first point, extended past the last."""
    if x <= curve[0][0]:
        return curve[0][1]
    for (x0, y0), (x1, y1) in itertools.pairwise(curve):
        if x <= x1:
            return y0 + (y1 - y0) * (x - x0) / (x1 - x0)
    (x0, y0), (x1, y1) = curve[-2], curve[-1]
    return y1 + (y1 - y0) * (x - x1) / (x1 - x0)


def _check_curve(name: str, what: str, curve: Sequence[tuple[float, float]]) -> Curve:
    points = tuple((float(x), float(y)) for x, y in curve)
    if len(points) < 2:
        raise ConfigError(f"profile {name!r}: {what} needs at least two points, got {len(points)}")
    if points[0][0] != 1:
        raise ConfigError(f"profile {name!r}: {what} must start at 1 stream, got {points[0][0]:g}")
    for (x0, _), (x1, _) in itertools.pairwise(points):
        if not x1 > x0:
            raise ConfigError(f"profile {name!r}: {what} stream counts must increase ({x0:g} then {x1:g})")
    if any(not (y > 0 and math.isfinite(y)) for _, y in points):
        raise ConfigError(f"profile {name!r}: {what} values must be positive and finite")
    return points


@dataclass(frozen=True)
class Profile:
    """One engine's timing, memory and power model. Rates in tok/s and times in s, model time."""

    name: str
    model_id: str
    #: (streams, per-stream decode tok/s) measured alone on the box.
    rate_curve: Curve
    #: (streams, box power W) while this engine decodes alone.
    power_curve: Curve
    prefill_tokens_per_s: float
    memory_pressure_base: float
    memory_pressure_per_stream: float
    memory_sensitivity: float = 1.0
    max_num_batched_tokens: int = 512
    max_num_seqs: int = 256
    max_model_len: int = 131072
    kv_cache_tokens: int = 524288
    memory_bytes: int = 40 * 1024**3
    #: Unpinned output lengths are lognormal around this median, clipped to [min_tokens, max_tokens].
    output_tokens_median: int = 256
    output_tokens_sigma: float = 0.8
    description: str = field(default="", compare=False)
    #: ``rate_curve`` as (streams, step seconds), built once: every decode step reads it.
    _step_curve: Curve = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "rate_curve", _check_curve(self.name, "rate_curve", self.rate_curve))
        object.__setattr__(self, "_step_curve", tuple((n, 1.0 / rate) for n, rate in self.rate_curve))
        object.__setattr__(self, "power_curve", _check_curve(self.name, "power_curve", self.power_curve))
        for attr in ("prefill_tokens_per_s", "max_num_batched_tokens", "max_num_seqs", "max_model_len"):
            if not getattr(self, attr) > 0:
                raise ConfigError(
                    f"profile {self.name!r}: {attr} must be positive, got {getattr(self, attr)!r}"
                )
        for attr in ("memory_pressure_base", "memory_pressure_per_stream", "memory_sensitivity"):
            if getattr(self, attr) < 0:
                raise ConfigError(f"profile {self.name!r}: {attr} must not be negative")

    def decode_step_s(self, n_streams: int, neighbour_pressure: float = 0.0) -> float:
        """Seconds one decode step takes with ``n_streams`` decoding and the neighbours' pressure."""
        if n_streams < 1:
            raise ValueError(f"a decode step needs at least one stream, got {n_streams}")
        return _interpolate(self._step_curve, n_streams) * (
            1.0 + self.memory_sensitivity * neighbour_pressure
        )

    def per_stream_rate(self, n_streams: int, neighbour_pressure: float = 0.0) -> float:
        """The ground truth: tok/s each of ``n_streams`` decoding streams gets (prefill excluded)."""
        return 1.0 / self.decode_step_s(n_streams, neighbour_pressure)

    def aggregate_rate(self, n_streams: int, neighbour_pressure: float = 0.0) -> float:
        return n_streams * self.per_stream_rate(n_streams, neighbour_pressure)

    def memory_pressure(self, n_streams: int) -> float:
        """What this engine decoding ``n_streams`` streams costs its neighbours (0 when idle)."""
        if n_streams <= 0:
            return 0.0
        return self.memory_pressure_base + self.memory_pressure_per_stream * (n_streams - 1)

    def prefill_s(self, prompt_tokens: int) -> float:
        """Seconds to prefill ``prompt_tokens`` alone; concurrent prefills queue behind each other."""
        return prompt_tokens / self.prefill_tokens_per_s

    def power_w(self, n_streams: int) -> float:
        """Box power while this engine decodes ``n_streams`` streams and nothing else runs."""
        return _interpolate(self.power_curve, max(1, n_streams))


# Appendix A, Qwen3.8-27B. The 2- and 4-stream points sit below the probe's (10.93, 10.69) so that
# one more stream costs a serial stream about 5% and four more about 8%, as the eval's own
# records showed in Act 4; 1, 8, 16 and 32 streams are the probe's medians.
DENSE = Profile(
    name="dense",
    model_id="qwen3.8-27b",
    rate_curve=((1, 11.1), (2, 10.6), (4, 10.35), (8, 10.06), (16, 8.59), (32, 5.76)),
    power_curve=((1, 34.2), (2, 35.8), (4, 36.2), (8, 36.6), (16, 37.6), (32, 39.5)),
    prefill_tokens_per_s=1500.0,
    memory_pressure_base=1.83,
    memory_pressure_per_stream=0.02,
    memory_bytes=52 * 1024**3,
    description="27B dense decoder: every step reads the full weight set, so batching is nearly free",
)

# Appendix A, Nemotron-3.5-Lightning-30B-A3B, the clean curve of 2026-09-19.
MOE = Profile(
    name="moe",
    model_id="nemotron-3.5-30b-a3b",
    rate_curve=((1, 82.4), (2, 65.0), (4, 47.0), (8, 32.8), (16, 11.3)),
    power_curve=((1, 35.6), (2, 38.1), (4, 38.9), (8, 41.5), (16, 65.6)),
    prefill_tokens_per_s=2500.0,
    memory_pressure_base=0.3,
    memory_pressure_per_stream=0.29,
    memory_bytes=44 * 1024**3,
    description="30B mixture-of-experts, 3B active: fast alone, expert reads grow with the batch",
)

PROFILES: dict[str, Profile] = {p.name: p for p in (DENSE, MOE)}


def get_profile(name: str | Profile) -> Profile:
    """A profile by name (``dense``, ``moe``), or the profile itself."""
    if isinstance(name, Profile):
        return name
    try:
        return PROFILES[name]
    except KeyError:
        known = ", ".join(sorted(PROFILES))
        raise ConfigError(f"unknown engine profile {name!r}; known profiles: {known}") from None
