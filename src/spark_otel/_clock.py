"""The only place spark-otel reads time: real time, or a clock injected in its place.

Against real engines the clock is real time: `wall_ns` is ``time.time_ns()`` and `perf_ns` is
``time.perf_counter_ns()``. Whoever drives something that runs faster than real time (the
simulated box, which owns that time scale) injects a `Clock` of its own: ``configure(clock=...)``
for a process, `hold` for a block. Every duration, rate and timestamp spark-otel records then
reads on that clock, and what reaches the store carries its rate as data (a cell's
``spark_otel.time_scale``), so a reader knows which seconds it holds.

`hold` is the one way to set it: holds nest when they agree on the rate, a conflicting one
raises, and when the last hold ends the clock is back on real time. The clock's monotonic reading
stays continuous across a change (durations never run backwards); its Unix time restarts from the
clock's epoch.

Hot paths stamp with `real_monotonic_ns` and convert a duration once with `to_clock_ns`.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

__all__ = [
    "CLOCK_ENV",
    "NS_PER_S",
    "Clock",
    "hold",
    "perf_ns",
    "rate",
    "real_monotonic_ns",
    "real_wall_ns",
    "thread_cpu_s",
    "to_clock_ns",
    "to_clock_s",
    "to_real_s",
    "wall_ns",
]

NS_PER_S = 1_000_000_000
"""Nanoseconds per second: every conversion between the two goes through this one name."""

CLOCK_ENV = "SPARK_OTEL_CLOCK"
"""The clock a process runs on, as `Clock.spec` writes it (read by ``configure()``)."""

real_monotonic_ns = time.perf_counter_ns
"""The real (unscaled) monotonic clock in ns, for hot paths and real-time waits: they stamp
with it and convert a duration once with `to_clock_ns`, instead of scaling every reading."""
real_wall_ns = time.time_ns
"""Real Unix time in ns, for what happens outside the clock (a report's generation time)."""
thread_cpu_s = time.thread_time
"""CPU seconds this thread used: what a client spends on its own work."""


@dataclass(frozen=True, slots=True)
class Clock:
    """A clock that runs ``rate`` times faster than real time.

    Its Unix time read ``epoch_unix_ns`` when real Unix time read ``at_real_unix_ns``; without an
    epoch it starts at real time when held, and without ``at_real_unix_ns`` the epoch is its time
    at the moment it is held. The pair lets one process hand its clock to another through the
    environment (`spec`, `parse`): both then read the same time, whenever each started.
    """

    rate: float = 1.0
    epoch_unix_ns: int | None = None
    at_real_unix_ns: int | None = None

    def __post_init__(self) -> None:
        from ._exceptions import ConfigError

        if (
            isinstance(self.rate, bool)
            or not isinstance(self.rate, int | float)
            or not (self.rate > 0 and math.isfinite(self.rate))
        ):
            raise ConfigError(f"a clock's rate must be a positive finite number, got {self.rate!r}")
        if self.at_real_unix_ns is not None and self.epoch_unix_ns is None:
            raise ConfigError("a clock read at a real instant needs the epoch it read then")

    def epoch_now(self) -> int | None:
        """The clock's Unix time now (None: real time now), from its epoch and rate."""
        if self.epoch_unix_ns is None or self.at_real_unix_ns is None:
            return self.epoch_unix_ns
        return self.epoch_unix_ns + int((time.time_ns() - self.at_real_unix_ns) * self.rate)

    def spec(self) -> str:
        """The clock as `CLOCK_ENV` takes it: ``RATE``, or ``RATE@EPOCH_NS@AT_REAL_NS`` anchored
        now, so another process that parses it reads the same time."""
        now = time.time_ns()
        epoch = self.epoch_now()
        return repr(self.rate) if epoch is None else f"{self.rate!r}@{epoch}@{now}"

    @classmethod
    def parse(cls, text: str) -> Clock:
        """A clock from `spec`'s form; `ConfigError` naming the text otherwise."""
        from ._exceptions import ConfigError

        parts = text.strip().split("@")
        try:
            if len(parts) == 1:
                return cls(float(parts[0]))
            if len(parts) == 3:
                return cls(float(parts[0]), int(parts[1]), int(parts[2]))
        except ValueError as exc:
            raise ConfigError(f"{text!r} is not a clock: {exc}") from None
        raise ConfigError(
            f"{text!r} is not a clock: expected RATE (e.g. 100) or RATE@EPOCH_NS@AT_REAL_NS "
            "(what a simulated box's clock() spec() writes)"
        )


class _Anchor:
    """The clock's time = anchor + (real time since anchor) x rate."""

    rate: float = 1.0
    clock_wall_ns: int = time.time_ns()
    clock_perf_ns: int = time.perf_counter_ns()
    real_wall_ns: int = clock_wall_ns
    real_perf_ns: int = clock_perf_ns


class _Holds:
    """Who holds the clock now: how many `hold` blocks, at which rate."""

    lock = threading.Lock()
    count = 0
    rate = 1.0


def rate() -> float:
    """Clock seconds per real second: 1 on real time."""
    return _Anchor.rate


def _set(clock_rate: float, epoch_unix_ns: int | None) -> None:
    clock_perf = perf_ns()
    real_wall, real_perf = time.time_ns(), time.perf_counter_ns()
    _Anchor.real_wall_ns, _Anchor.real_perf_ns = real_wall, real_perf
    _Anchor.clock_wall_ns = real_wall if epoch_unix_ns is None else int(epoch_unix_ns)
    _Anchor.clock_perf_ns = clock_perf
    _Anchor.rate = float(clock_rate)


@contextmanager
def hold(clock: Clock) -> Iterator[None]:
    """Run this process on ``clock`` inside the block.

    A block entered while another holds a clock of the same rate joins it and leaves the clock
    as it is (its epoch is not applied); a different rate raises `ConfigError`, since one process
    has one clock. The last block to end puts the clock back on real time.
    """
    with _Holds.lock:
        if _Holds.count and clock.rate != _Holds.rate:
            from ._exceptions import ConfigError

            raise ConfigError(
                f"this process's clock already runs at {_Holds.rate:g}x; "
                f"it cannot also run at {clock.rate:g}x (one process has one clock)"
            )
        if not _Holds.count:
            _Holds.rate = clock.rate
            _set(clock.rate, clock.epoch_now())
        _Holds.count += 1
    try:
        yield
    finally:
        with _Holds.lock:
            _Holds.count -= 1
            if not _Holds.count:
                _Holds.rate = 1.0
                _set(1.0, None)


def wall_ns() -> int:
    """Unix time in ns, on the clock."""
    a = _Anchor
    if a.rate == 1.0 and a.clock_wall_ns == a.real_wall_ns:
        return time.time_ns()
    return a.clock_wall_ns + int((time.time_ns() - a.real_wall_ns) * a.rate)


def perf_ns() -> int:
    """A monotonic clock in ns, on the clock."""
    a = _Anchor
    if a.rate == 1.0 and a.clock_perf_ns == a.real_perf_ns:
        return time.perf_counter_ns()
    return a.clock_perf_ns + int((time.perf_counter_ns() - a.real_perf_ns) * a.rate)


def to_clock_ns(real_duration_ns: int) -> int:
    """A real duration in ns, on the clock."""
    return int(real_duration_ns * _Anchor.rate)


def to_clock_s(real_seconds: float) -> float:
    return real_seconds * _Anchor.rate


def to_real_s(clock_seconds: float) -> float:
    """How long to really wait for ``clock_seconds`` on the clock (deadlines, sleeps)."""
    return clock_seconds / _Anchor.rate
