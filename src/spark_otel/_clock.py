"""The only place spark-otel reads time, so a simulated box can run faster than real time.

With a time scale of 1 (the default, and always against real engines) these are plain
``time.time_ns()`` and ``time.perf_counter_ns()``. The simulated engine runs the article's
scenarios ``speed`` times faster than real time; inside `model_time(speed)` every duration,
rate and timestamp spark-otel records reads in model time (tok/s as in the article). Model time
equals wall time when the scale is set (or the epoch given, to line up with another process's
model clock) and runs ``scale`` times faster from then on.

`model_time` is the one way to set the scale. The simulated box (`spark_otel.sim.run_box`), the
probe against a simulated box, the demo and a process that `configure()` anchors to a box
(``SPARK_OTEL_MODEL_CLOCK``) hold it; holds nest when they agree on the scale, a conflicting one
raises, and when the last hold ends the clock is back on real time.

Hot paths stamp with `real_monotonic_ns` and convert a duration once with `to_model_ns`.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = [
    "NS_PER_S",
    "model_time",
    "perf_ns",
    "real_monotonic_ns",
    "real_wall_ns",
    "thread_cpu_s",
    "time_scale",
    "to_model_ns",
    "to_model_s",
    "to_wall_s",
    "wall_ns",
]

NS_PER_S = 1_000_000_000
"""Nanoseconds per second: every conversion between the two goes through this one name."""

real_monotonic_ns = time.perf_counter_ns
"""The real (unscaled) monotonic clock in ns, for hot paths and real-time waits: they stamp
with it and convert a duration once with `to_model_ns`, instead of scaling every reading."""
real_wall_ns = time.time_ns
"""Real Unix time in ns, for what happens outside the model (a report's generation time)."""
thread_cpu_s = time.thread_time
"""CPU seconds this thread used: what a client spends on its own work."""


class _Anchor:
    """Model time = anchor + (real time since anchor) x scale."""

    scale: float = 1.0
    model_wall_ns: int = time.time_ns()
    model_perf_ns: int = time.perf_counter_ns()
    real_wall_ns: int = model_wall_ns
    real_perf_ns: int = model_perf_ns


class _Holds:
    """Who holds the scale now: how many `model_time` blocks, at which scale."""

    lock = threading.Lock()
    count = 0
    scale = 1.0


def time_scale() -> float:
    return _Anchor.scale


def _set(scale: float, model_unix_ns: int | None) -> None:
    # The monotonic clock stays continuous (durations never run backwards); Unix time restarts
    # from the real clock, or from the given epoch.
    model_perf = perf_ns()
    real_wall, real_perf = time.time_ns(), time.perf_counter_ns()
    _Anchor.real_wall_ns, _Anchor.real_perf_ns = real_wall, real_perf
    _Anchor.model_wall_ns = real_wall if model_unix_ns is None else int(model_unix_ns)
    _Anchor.model_perf_ns = model_perf
    _Anchor.scale = float(scale)


def _check_scale(scale: float) -> float:
    if (
        isinstance(scale, bool)
        or not isinstance(scale, int | float)
        or not (scale > 0 and math.isfinite(scale))
    ):
        from ._exceptions import ConfigError

        raise ConfigError(f"time scale must be a positive finite number, got {scale!r}")
    return float(scale)


@contextmanager
def model_time(scale: float, *, epoch_unix_ns: int | None = None) -> Iterator[None]:
    """Run this process's model clock ``scale`` times faster than real time inside the block.

    ``epoch_unix_ns`` is the model Unix time now, to line the clock up with another process's
    (a simulated box reports its own in ``/sim/info``); without it model time starts at wall
    time. A block entered while another holds the same scale joins it and leaves the clock as
    it is (its epoch is not applied); a different scale raises `ConfigError`, since one process
    has one model clock. The last block to end puts the clock back on real time.
    """
    scale = _check_scale(scale)
    with _Holds.lock:
        if _Holds.count and scale != _Holds.scale:
            from ._exceptions import ConfigError

            raise ConfigError(
                f"this process's model clock already runs at {_Holds.scale:g}x; "
                f"it cannot also run at {scale:g}x (one process has one model clock)"
            )
        if not _Holds.count:
            _Holds.scale = scale
            _set(scale, epoch_unix_ns)
        _Holds.count += 1
    try:
        yield
    finally:
        with _Holds.lock:
            _Holds.count -= 1
            if not _Holds.count:
                _Holds.scale = 1.0
                _set(1.0, None)


def wall_ns() -> int:
    """Unix time in ns, in model time."""
    a = _Anchor
    if a.scale == 1.0 and a.model_wall_ns == a.real_wall_ns:
        return time.time_ns()
    return a.model_wall_ns + int((time.time_ns() - a.real_wall_ns) * a.scale)


def perf_ns() -> int:
    """A monotonic clock in ns, in model time."""
    a = _Anchor
    if a.scale == 1.0 and a.model_perf_ns == a.real_perf_ns:
        return time.perf_counter_ns()
    return a.model_perf_ns + int((time.perf_counter_ns() - a.real_perf_ns) * a.scale)


def to_model_ns(wall_duration_ns: int) -> int:
    return int(wall_duration_ns * _Anchor.scale)


def to_model_s(wall_seconds: float) -> float:
    return wall_seconds * _Anchor.scale


def to_wall_s(model_seconds: float) -> float:
    """How long to really wait for ``model_seconds`` of model time (deadlines, sleeps)."""
    return model_seconds / _Anchor.scale
