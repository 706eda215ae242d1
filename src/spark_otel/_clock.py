"""The only place spark-otel reads time, so a simulated box can run faster than real time.

With a time scale of 1 (the default, and always against real engines) these are plain
``time.time_ns()`` and ``time.perf_counter_ns()``. The simulated engine runs the article's
scenarios ``speed`` times faster than real time; calling `set_time_scale(speed)` in the
process that drives it makes every duration, rate and timestamp spark-otel records read in
model time (tok/s as in the article). Model time equals wall time at the moment the scale
is set and runs ``scale`` times faster from then on.

Hot paths read `real_monotonic_ns` and convert durations once with `to_model_ns`.
"""

from __future__ import annotations

import math
import os
import time

__all__ = [
    "NS_PER_S",
    "TIME_SCALE_ENV",
    "perf_ns",
    "real_monotonic_ns",
    "set_time_scale",
    "time_scale",
    "to_model_ns",
    "to_model_s",
    "to_wall_s",
    "wall_ns",
]

NS_PER_S = 1_000_000_000
"""Nanoseconds per second: every conversion between the two goes through this one name."""
TIME_SCALE_ENV = "SPARK_OTEL_TIME_SCALE"


class _Anchor:
    """Model time = anchor + (real time since anchor) x scale."""

    scale: float = 1.0
    model_wall_ns: int = time.time_ns()
    model_perf_ns: int = time.perf_counter_ns()
    real_wall_ns: int = model_wall_ns
    real_perf_ns: int = model_perf_ns


def time_scale() -> float:
    return _Anchor.scale


def set_time_scale(scale: float, *, model_unix_ns: int | None = None) -> None:
    """Make model time run ``scale`` times faster than wall time from now on.

    ``model_unix_ns`` anchors model time to another process's model clock (a simulated box
    reports its own in ``/sim/info``), so records from both processes line up.
    """
    if not (scale > 0 and math.isfinite(scale)):
        raise ValueError(f"time scale must be a positive finite number, got {scale!r}")
    # The monotonic clock stays continuous (durations never run backwards); Unix time restarts
    # from the real clock, or from the given anchor.
    model_perf = perf_ns()
    real_wall, real_perf = time.time_ns(), time.perf_counter_ns()
    _Anchor.real_wall_ns, _Anchor.real_perf_ns = real_wall, real_perf
    _Anchor.model_wall_ns = real_wall if model_unix_ns is None else int(model_unix_ns)
    _Anchor.model_perf_ns = model_perf
    _Anchor.scale = float(scale)


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


real_monotonic_ns = time.perf_counter_ns
"""The real (unscaled) monotonic clock in ns, for hot paths: they stamp with it and convert a
duration once with `to_model_ns`, instead of scaling every reading."""


def to_model_ns(wall_duration_ns: int) -> int:
    return int(wall_duration_ns * _Anchor.scale)


def to_model_s(wall_seconds: float) -> float:
    return wall_seconds * _Anchor.scale


def to_wall_s(model_seconds: float) -> float:
    """How long to really wait for ``model_seconds`` of model time (deadlines, sleeps)."""
    return model_seconds / _Anchor.scale


def _from_env() -> None:
    raw = os.environ.get(TIME_SCALE_ENV)
    if raw:
        try:
            set_time_scale(float(raw))
        except ValueError:
            import logging

            logging.getLogger(__name__).warning(
                "%s=%r is not a positive number; using 1", TIME_SCALE_ENV, raw
            )


_from_env()
