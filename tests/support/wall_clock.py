"""A wall clock a test moves by hand: `_clock.real_wall_ns` reads it, so leases, waits and the
governor's stamps advance only when the test says."""

from __future__ import annotations

import pytest

from spark_otel import _clock
from spark_otel._clock import NS_PER_S

START_NS = 1_800_000_000 * NS_PER_S
"""Where the clock starts: a fixed instant, so stamps in assertions are exact."""


class WallClock:
    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.now_ns = START_NS
        monkeypatch.setattr(_clock, "real_wall_ns", lambda: self.now_ns)

    def advance(self, seconds: float) -> None:
        self.now_ns += int(seconds * NS_PER_S)
