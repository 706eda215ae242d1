"""Model time: the simulated box's time scale, and lining a process's clock up with a box's.

The simulator owns model time. A simulated box runs ``speed`` times faster than real time
(`model_time` holds the process's clock at that speed) and reports its model clock in
``GET /sim/info`` (``speed``, ``unix_ns``). A process that drives it (an eval runner, the probe,
the demo) reads that once (`follow`) and runs on the box's clock: its timestamps and the box's,
and those of every other process anchored the same way, are on one model clock, whenever each
process started. The box stamped ``unix_ns`` at some
point of the round trip; its middle is taken, so the error is at most half a round trip in real
time (about 0.1 ms on loopback, times the speed: 10 ms of model time at 100x). As NTP does, a
process reads several times on one connection and keeps the shortest round trip: a first request
also pays for the client's and the connection's set-up (tens of milliseconds on a loaded machine,
seconds of model time), all of it before the box stamps its answer.

A runner process follows a box in one of two ways: ``spark_otel.configure(clock=follow(URL))``,
or the environment its launcher sets, ``SPARK_OTEL_CLOCK`` = ``follow(URL).spec()`` (what
``spark-otel sim --clock-of URL`` prints), which `configure()` reads without any of this module.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Any

from .. import _clock
from .._exceptions import EngineError

__all__ = [
    "READINGS",
    "BoxClock",
    "box_clock",
    "box_model_time",
    "closest",
    "follow",
    "model_time",
    "read_box_clock",
]

_INFO_TIMEOUT_S = 5.0
READINGS = 5


@dataclass(frozen=True)
class BoxClock:
    """A box's model clock as one reading saw it."""

    speed: float
    box_unix_ns: int
    """The box's model Unix time when it answered."""
    read_real_ns: int
    """This process's real monotonic time at the middle of the round trip that read it."""
    round_trip_real_ns: int = 0
    """That round trip's real length: the reading is off by at most half of it, times the speed."""

    def epoch_now(self) -> int:
        """The box's model Unix time now, extrapolated at its speed from the reading."""
        return self.box_unix_ns + int((_clock.real_monotonic_ns() - self.read_real_ns) * self.speed)

    def clock(self) -> _clock.Clock:
        """The box's clock as a process holds it, anchored to real Unix time now (so it can be
        handed to another process through `Clock.spec`)."""
        at_real = _clock.real_wall_ns()
        return _clock.Clock(self.speed, self.epoch_now(), at_real)


def model_time(speed: float, *, epoch_unix_ns: int | None = None) -> AbstractContextManager[None]:
    """Hold this process's clock at a simulated box's ``speed`` inside the block (model time);
    ``epoch_unix_ns`` is the model Unix time now (a box's own, to line up with it)."""
    return _clock.hold(_clock.Clock(speed, epoch_unix_ns))


def box_clock(info: Mapping[str, Any], *, sent_real_ns: int, received_real_ns: int) -> BoxClock | None:
    """The clock in a ``/sim/info`` answer; None for a box without a finite speed (an infinite
    box keeps a virtual clock no other process can follow)."""
    speed, unix_ns = info.get("speed"), info.get("unix_ns")
    if (
        isinstance(speed, bool)
        or not isinstance(speed, int | float)
        or not (math.isfinite(speed) and speed > 0)
    ):
        return None
    if isinstance(unix_ns, bool) or not isinstance(unix_ns, int):
        return None
    return BoxClock(
        float(speed), unix_ns, (sent_real_ns + received_real_ns) // 2, received_real_ns - sent_real_ns
    )


def read_box_clock(url: str, *, readings: int = READINGS) -> BoxClock:
    """The clock of the shortest of ``readings`` round trips to ``GET {url}/sim/info``;
    `EngineError` when the URL is no simulated box."""
    import httpx2

    from .._urls import engine_base_url

    if readings < 1:
        raise ValueError(f"readings={readings}: at least one reading is needed")
    base = engine_base_url(url)
    clocks: list[BoxClock] = []
    with httpx2.Client(base_url=base, timeout=_INFO_TIMEOUT_S, trust_env=False) as client:
        for _ in range(readings):
            sent = _clock.real_monotonic_ns()
            try:
                response = client.get("/sim/info")
                received = _clock.real_monotonic_ns()
                info = response.json() if response.status_code == 200 else None
            except (httpx2.HTTPError, ValueError) as exc:
                raise EngineError(f"{base}/sim/info: cannot read the simulated box's clock: {exc}") from exc
            clock = (
                box_clock(info, sent_real_ns=sent, received_real_ns=received)
                if isinstance(info, dict)
                else None
            )
            if clock is None:
                raise EngineError(
                    f"{base}/sim/info: not a simulated box with a finite speed "
                    f"(HTTP {response.status_code}); a clock is followed from a box started by spark-otel sim"
                )
            clocks.append(clock)
    return closest(clocks)


def closest(clocks: Iterable[BoxClock]) -> BoxClock:
    """The reading with the shortest round trip: the tightest bound on the box's clock."""
    return min(clocks, key=lambda clock: clock.round_trip_real_ns)


def follow(url: str) -> _clock.Clock:
    """The clock of the simulated box at ``url`` (any of its engines), to hold or hand on:
    ``spark_otel.configure(clock=follow(url))``; `EngineError` when the URL is no simulated box."""
    return read_box_clock(url).clock()


@contextmanager
def box_model_time(url: str) -> Iterator[BoxClock]:
    """Hold this process's clock on the box's for the block."""
    reading = read_box_clock(url)
    with _clock.hold(reading.clock()):
        yield reading
