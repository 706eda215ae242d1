"""What one more neighbour costs a cell's decode rate, learned from the live rates as loads come
and go, for the deadline-slack law (`slack`).

The estimator: per engine and widths of the box (cells in flight on each engine), the mean live
rate of that engine's cells while the widths had held still for a whole rate window
(`live_progress.WINDOW_S`: a rate read sooner still mixes the old width in). The factor one more
cell on engine ``n`` leaves of a rate, with the box as it is now (``n`` at width ``w``), is
``mean(w + 1) / mean(w)`` (the other engines' widths as now) once both have `MIN_SAMPLES`
samples, kept within [`FLOOR`, 1]; else the rules file's measured ``slowdown`` for the engine
(``1 / slowdown``, the costliest neighbour measured: conservative for one more cell); else the
prior. It never probes:
it only watches widths the admissions made anyway. Not a clock reader: every call is given
``now_s`` (real seconds), so it is tested on plain data.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from ..live_progress import WINDOW_S

__all__ = ["FLOOR", "MIN_SAMPLES", "NeighbourCosts"]

MIN_SAMPLES = 3
"""Samples (at most one a second) at each of two widths before a learned factor is used."""
FLOOR = 0.2
"""A learned factor below this is noise (a stalled stream, a cell's own slow patch), not a neighbour."""
_SAMPLE_EVERY_S = 1.0


@dataclass(slots=True)
class _Mean:
    n: int = 0
    total: float = 0.0

    def add(self, x: float) -> None:
        self.n += 1
        self.total += x

    @property
    def mean(self) -> float:
        return self.total / self.n


@dataclass(slots=True)
class NeighbourCosts:
    prior: float = 0.7
    measured: Mapping[str, float] = field(default_factory=dict)
    """Per engine, the rules file's ``slowdown`` (length beside its costliest neighbour, over alone)."""
    _means: dict[tuple[str, tuple[tuple[str, int], ...]], _Mean] = field(default_factory=dict)
    _widths: dict[str, int] = field(default_factory=dict)
    _stable_since_s: float | None = None
    _last_sample_s: float | None = None

    def observe(self, now_s: float, widths: Mapping[str, int], rates: Iterable[tuple[str, float]]) -> None:
        """The box now: cells in flight per engine, and each in-flight cell's (engine, live rate)."""
        shown = {e: w for e, w in widths.items() if w}
        if shown != self._widths or self._stable_since_s is None:
            self._widths, self._stable_since_s = shown, now_s
            return
        if now_s - self._stable_since_s < WINDOW_S:
            return
        if self._last_sample_s is not None and now_s - self._last_sample_s < _SAMPLE_EVERY_S:
            return
        self._last_sample_s = now_s
        for engine, rate in rates:
            if rate > 0:
                self._means.setdefault((engine, _key(shown)), _Mean()).add(rate)

    def learned(self, engine: str, neighbour: str, widths: Mapping[str, int]) -> float | None:
        """The learned factor for one more cell on ``neighbour``, the box at ``widths``, if any."""
        more = {**widths, neighbour: widths.get(neighbour, 0) + 1}
        at = self._means.get((engine, _key(widths)))
        more_at = self._means.get((engine, _key(more)))
        if at is None or more_at is None or at.n < MIN_SAMPLES or more_at.n < MIN_SAMPLES:
            return None
        return min(1.0, max(FLOOR, more_at.mean / at.mean))

    def factor(self, engine: str, neighbour: str, widths: Mapping[str, int]) -> float:
        """What one more cell on ``neighbour`` leaves of a rate on ``engine``, the box at ``widths``."""
        learned = self.learned(engine, neighbour, widths)
        if learned is not None:
            return learned
        slowdown = self.measured.get(engine)
        if slowdown is not None and slowdown >= 1.0:
            return 1.0 / slowdown
        return self.prior


def _key(widths: Mapping[str, int]) -> tuple[tuple[str, int], ...]:
    return tuple(sorted((e, w) for e, w in widths.items() if w))
