"""The throughput knee: how wide an engine should run when the deadline-slack law has nothing to
protect (no ceiling-bound cell on the box), learned from the live rates its cells publish.

Past the knee of an engine's throughput curve more streams only add latency (each cell slower,
the aggregate no higher) or even lose throughput (a mixture-of-experts engine reads more experts
per step: 262 tok/s at eight streams, 181 at sixteen). So the width is capped, per engine, at the
knee, found by doubling, as TCP's slow start finds a link's capacity:

    cap starts at START_CAP (4);  at each cap, once the width is full and the cells admitted since the last
    doubling publish a live rate:  aggregate(cap) = cap x mean(their rates)
    aggregate(cap) >= (1 + MIN_GAIN) x aggregate(cap / 2)   ->  cap doubles
    otherwise                                               ->  cap halves, and stays (the knee)

The width must have reached the cap once (it is read when the next cell asks, perhaps after one
ended). Only cells admitted after the last doubling count: their rate windows lie at the new width,
while the older cells' windows still mix in the narrower one (a rate is `live_progress.WINDOW_S`
long), so each step takes about a second and a half, not the five a whole window would. Settled,
the cap holds for the governor's life: it never oscillates, and probing again would cost the eval
a second pass over the knee. An engine whose cells publish no rate (they do not stream) within
`NO_RATE_S` of filling the cap has no curve to read: it is left uncapped. The ramp starts only
from an idle engine: one already running cells when the law first has nothing to protect on it
(the deadline law set its width while a ceiling-bound cell ran) keeps the width it has, uncapped,
rather than being throttled to `START_CAP` while a curve is read.

`next_cap` is the decision, pure; `KneeCap` keeps each engine's curve between admissions. Not a
clock reader: times are the state's admission stamps and the ``now_ns`` it is given.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from .._clock import NS_PER_S

__all__ = ["MAX_CAP", "MIN_GAIN", "NO_RATE_S", "START_CAP", "KneeCap", "aggregate", "next_cap"]

START_CAP = 4
"""Where the ramp starts: every engine batches decode, and four streams cost a stream little (the
dense engine 7%, the mixture-of-experts engine, the steepest measured, 43%: still 2.3 times one
stream's aggregate), so the knee is never under four; the widths 1 and 2 would cost the eval
seconds each to read and never be chosen."""

MIN_GAIN = 0.10
"""A doubling must buy at least this share more aggregate tok/s, else the narrower width is the
knee: doubling the width about doubles each cell's latency, worth it only for a real gain."""
NO_RATE_S = 3.0
"""Real seconds a full cap may go without any live rate before the engine is left uncapped."""
MAX_CAP = 256
"""The ramp stops doubling here (vLLM's default ``max_num_seqs``)."""


def aggregate(width: int, rates: Iterable[float]) -> float | None:
    """The engine's aggregate tok/s at ``width`` streams, from its cells' live rates (None: none)."""
    seen = [r for r in rates if r > 0]
    return width * sum(seen) / len(seen) if seen else None


def next_cap(curve: Mapping[int, float], cap: int, min_gain: float = MIN_GAIN) -> tuple[int, bool]:
    """The cap after measuring ``curve[cap]``, and whether it settled: double while a doubling
    buys ``min_gain``, else fall back to the narrower width and stay."""
    half = cap // 2
    if half >= 1 and half in curve and curve[cap] < (1.0 + min_gain) * curve[half]:
        return half, True
    if cap * 2 > MAX_CAP:
        return cap, True
    return cap * 2, False


@dataclass(slots=True)
class _Engine:
    cap: int | None = START_CAP
    """None: uncapped (no rate to read the curve from)."""
    settled: bool = False
    curve: dict[int, float] = field(default_factory=dict)
    after_ns: int = -1
    """Cells admitted after this stamp were admitted at the current cap."""
    full_since_ns: int | None = None


@dataclass(slots=True)
class KneeCap:
    """Each engine's knee, learned as its width ramps (one per governor, per process)."""

    min_gain: float = MIN_GAIN
    _engines: dict[str, _Engine] = field(default_factory=dict)

    def cap(self, engine: str) -> int | None:
        """The engine's width cap now (None: uncapped)."""
        return self._engines.get(engine, _Engine()).cap

    def settled(self, engine: str) -> bool:
        return self._engines.get(engine, _Engine()).settled

    def curve(self, engine: str) -> dict[int, float]:
        """The aggregate tok/s measured at each width so far."""
        return dict(self._engines.get(engine, _Engine()).curve)

    def admits(self, engine: str, cells: Iterable[tuple[int, float | None]], now_ns: int) -> bool:
        """Whether one more cell may start on ``engine``, whose in-flight cells are ``cells``
        (each one's admission stamp and live rate, None before it shows one), learning the
        curve from them on the way."""
        cells = list(cells)
        state = self._engines.get(engine)
        if state is None:  # a ramp starts from an idle engine; one already running keeps its width
            state = self._engines[engine] = _Engine() if not cells else _Engine(cap=None, settled=True)
        self._observe(state, cells, now_ns)
        if state.cap is None:
            return True
        if len(cells) >= state.cap:
            return False
        if not state.settled and state.full_since_ns is None and len(cells) + 1 >= state.cap:
            state.full_since_ns = now_ns  # this admission fills the cap
        return True

    def _observe(self, state: _Engine, cells: list[tuple[int, float | None]], now_ns: int) -> None:
        if state.settled or state.cap is None:
            return
        if state.full_since_ns is None:
            if len(cells) < state.cap:
                return  # not yet as wide as the cap: nothing to read at it
            state.full_since_ns = now_ns
        fresh = [rate for admitted, rate in cells if admitted > state.after_ns and rate is not None]
        if len(fresh) < max(1, state.cap // 2):
            if not any(rate is not None for _, rate in cells) and (
                now_ns - state.full_since_ns >= NO_RATE_S * NS_PER_S
            ):
                state.cap, state.settled = None, True
            return
        measured = aggregate(state.cap, fresh)
        if measured is None:
            return
        state.curve[state.cap] = measured
        state.cap, state.settled = next_cap(state.curve, state.cap, self.min_gain)
        state.after_ns = max(admitted for admitted, _ in cells)
        state.full_since_ns = None
