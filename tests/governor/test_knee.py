"""The throughput knee on plain data: the aggregate from live rates, the doubling decision, and
the cap a ramp settles at on the simulated engines' own curves (`Profile.per_stream_rate`), with
the cells and stamps the state would show."""

from __future__ import annotations

import pytest

from spark_otel._clock import NS_PER_S
from spark_otel.governor.knee import MAX_CAP, NO_RATE_S, START_CAP, KneeCap, aggregate, next_cap
from spark_otel.sim.profiles import DENSE, MOE, Profile


def test_the_aggregate_is_the_width_times_the_mean_live_rate() -> None:
    assert aggregate(4, [30.0, 34.0]) == 128.0
    assert aggregate(3, [0.0, 20.0]) == 60.0  # a stalled reading is no rate
    assert aggregate(2, []) is None


def test_a_doubling_that_buys_the_minimum_gain_doubles_again() -> None:
    assert next_cap({1: 82.0}, 1) == (2, False)
    assert next_cap({4: 188.0, 8: 262.0}, 8) == (16, False)
    assert next_cap({4: 100.0, 8: 111.0}, 8) == (16, False)
    assert next_cap({4: 100.0, 8: 109.0}, 8) == (4, True)  # 9% for twice the latency: not worth it
    assert next_cap({8: 262.0, 16: 181.0}, 16) == (8, True)  # lost throughput: the knee is 8
    assert next_cap({8: 262.0, 16: 280.0}, 16) == (8, True)  # 7% for twice the latency: not worth it
    assert next_cap({8: 100.0, 16: 120.0}, 16, min_gain=0.25) == (8, True)
    assert next_cap({MAX_CAP // 2: 1.0, MAX_CAP: 3.0}, MAX_CAP) == (MAX_CAP, True)


def _ramp(profile: Profile, workers: int) -> tuple[int | None, dict[int, float]]:
    """A ramp as the state shows it to the governor: ``workers`` cells of an eval keep asking;
    each admitted cell runs 3 s, decoding at the engine's per-stream rate for the width now, and
    shows a rate once it has run a second."""
    knee = KneeCap()
    cells: list[tuple[int, float | None]] = []
    now = 1_000 * NS_PER_S
    for _ in range(400):
        now += NS_PER_S // 4
        cells = [(a, r) for a, r in cells if now - a < 3 * NS_PER_S]
        while len(cells) < workers and knee.admits("moe", cells, now):
            cells.append((now, None))
            now += 1
        rate = profile.per_stream_rate(len(cells))
        cells = [(a, rate if now - a >= NS_PER_S else None) for a, _ in cells]
        if knee.settled("moe"):
            break
    return knee.cap("moe"), knee.curve("moe")


def test_the_ramp_settles_at_the_knee_of_the_mixture_of_experts_curve() -> None:
    cap, curve = _ramp(MOE, 16)
    assert cap == 8
    assert sorted(curve) == [4, 8, 16]
    assert curve[8] == pytest.approx(8 * 32.8)
    assert curve[16] == pytest.approx(16 * 11.3)


def test_a_dense_engine_keeps_doubling_past_sixteen() -> None:
    cap, curve = _ramp(DENSE, 32)
    assert sorted(curve) == [4, 8, 16, 32]
    assert curve[32] / curve[16] == pytest.approx(184.32 / 137.44)  # 34% more: worth its latency
    assert cap == 64  # past the eval's own 32 workers: they set the width


def _full(t: int, n: int, rate: float | None) -> list[tuple[int, float | None]]:
    return [(t + i, rate) for i in range(n)]


def test_the_cap_holds_the_width_until_the_fresh_cells_show_a_rate() -> None:
    knee = KneeCap()
    t = 5 * NS_PER_S
    assert knee.cap("moe") == START_CAP == 4
    assert knee.admits("moe", [], t)  # first seen idle: the ramp starts
    assert knee.admits("moe", _full(t, 3, None), t)  # the fourth fills the cap
    assert not knee.admits("moe", _full(t, 4, None), t + 1)  # full, no rate yet
    assert knee.admits("moe", _full(t, 4, 47.0), t + NS_PER_S)  # measured: doubles
    assert (knee.cap("moe"), knee.curve("moe")) == (8, {4: 188.0})
    # the old cells' rates mix in the narrower width: only the four admitted since measure 8
    later = t + 2 * NS_PER_S
    assert knee.admits("moe", [*_full(t, 4, 40.0), *_full(later, 3, None)], later)
    assert not knee.admits("moe", [*_full(t, 4, 40.0), *_full(later, 3, 33.0), (later + 9, None)], later)
    assert knee.curve("moe") == {4: 188.0}
    assert knee.admits("moe", [*_full(t, 4, 33.0), *_full(later, 4, 32.0)], later + NS_PER_S)
    assert knee.curve("moe") == {4: 188.0, 8: 256.0}
    assert knee.cap("moe") == 16


def test_an_engine_whose_cells_never_stream_is_left_uncapped() -> None:
    knee = KneeCap()
    t = 5 * NS_PER_S
    assert knee.admits("moe", [], t)
    assert knee.admits("moe", _full(t, 3, None), t)
    assert not knee.admits("moe", _full(t, 4, None), t + 1)
    assert not knee.admits("moe", _full(t, 4, None), t + int((NO_RATE_S - 0.1) * NS_PER_S))
    assert knee.admits("moe", _full(t, 4, None), t + int(NO_RATE_S * NS_PER_S) + 1)
    assert knee.cap("moe") is None
    assert knee.settled("moe")
    assert knee.admits("moe", _full(t, 40, None), t + 10 * NS_PER_S)


def test_an_engine_already_running_when_first_seen_keeps_its_width() -> None:
    knee = KneeCap()
    assert knee.admits("qwen", [(1, None), (2, 10.0)], 3)
    assert knee.cap("qwen") is None
    assert knee.cap("moe") == START_CAP  # each engine its own ramp
