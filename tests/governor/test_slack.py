"""The deadline-slack control law and its neighbour-cost estimator, on plain data."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest

from spark_otel.governor.costs import FLOOR, NeighbourCosts
from spark_otel.governor.slack import Hysteresis, Protected, SlackParams, SlackReason, decide, project

ALONE = {"qwen": 1}
BESIDE = {"qwen": 1, "nemotron": 1}
PARAMS = SlackParams(hold_margin=0.10, admit_margin=0.20, sustain_s=3.0, prior_factor=0.7)


def cell(**more: object) -> Protected:
    base: dict[str, object] = dict(
        cell_id="B#1", engine="qwen", eval_name="serial", deadline_s=1000.0, elapsed_s=100.0,
        tokens=1000, rate=10.0, expected_tokens=3000.0,
    )  # fmt: skip
    base.update(more)
    return Protected(**base)  # type: ignore[arg-type]


def flat(f: float) -> Callable[[Protected], float]:
    return lambda _cell: f


def test_projection_is_elapsed_plus_remaining_over_the_rate_after_the_admission() -> None:
    p = project(cell(), 0.5)
    assert not isinstance(p, SlackReason)
    assert p.rate_used == 5.0
    assert p.finish_s == 100.0 + 2000 / 5.0
    assert p.margin == pytest.approx(0.5)
    # a neighbour admitted too recently to show in the rate counts too
    q = project(cell(unseen=1), 0.5)
    assert not isinstance(q, SlackReason)
    assert (q.rate_used, q.finish_s) == (2.5, 900.0)


def test_a_neighbour_that_drains_costs_only_its_own_time_at_the_slower_rate() -> None:
    # 2,000 tokens left at 10 tok/s now; the neighbours end within 100 s: 100 s at 5 tok/s
    # (500 tokens), then 1,500 at the eval's best rate of 12 tok/s
    p = project(cell(drain_s=100.0, alone_rate=12.0), 0.5)
    assert not isinstance(p, SlackReason)
    assert p.finish_s == pytest.approx(100.0 + 100.0 + 1500 / 12.0)
    # no best rate known: the live rate, never less
    q = project(cell(drain_s=100.0), 0.5)
    assert not isinstance(q, SlackReason)
    assert q.finish_s == pytest.approx(100.0 + 100.0 + 1500 / 10.0)
    # a drain longer than the cell's remainder is the whole remainder at the slower rate
    r = project(cell(drain_s=10_000.0, alone_rate=12.0), 0.5)
    assert not isinstance(r, SlackReason)
    assert r.finish_s == pytest.approx(100.0 + 2000 / 5.0)


def test_a_cell_past_every_length_seen_still_needs_a_tenth_of_its_tokens_more() -> None:
    p = project(cell(tokens=5000, elapsed_s=500.0), 1.0)
    assert not isinstance(p, SlackReason)
    assert p.finish_s == 500.0 + 500 / 10.0


def test_nothing_protected_admits_and_forgets() -> None:
    verdict, memory = decide([], flat(0.7), Hysteresis(holding=True, slack_since_s=1.0), 5.0, PARAMS)
    assert (verdict.admit, verdict.reason, memory) == (True, SlackReason.NOTHING_PROTECTED, Hysteresis())


def test_slack_admits_and_names_the_tightest_cell() -> None:
    loose = cell(cell_id="loose", elapsed_s=0.0, tokens=0)
    tight = cell(cell_id="tight", elapsed_s=300.0)
    verdict, memory = decide([loose, tight], flat(0.7), Hysteresis(), 0.0, PARAMS)
    assert verdict.reason is SlackReason.SLACK
    assert verdict.admit
    assert verdict.protected == tight
    assert verdict.projection is not None
    assert verdict.projection.finish_s == pytest.approx(300 + 2000 / 7.0)
    assert memory == Hysteresis(admitted=True)


def test_a_projection_under_the_margin_holds_and_says_which_cell_and_figures() -> None:
    verdict, memory = decide([cell(elapsed_s=700.0)], flat(0.7), Hysteresis(), 0.0, PARAMS)
    assert verdict.reason is SlackReason.TIGHT
    assert not verdict.admit
    # nothing admitted yet, nothing to oscillate: the hysteresis is not armed
    assert memory == Hysteresis(held_for=("B#1", "qwen", "serial"))
    # after an admission, a hold arms it
    _, armed = decide([cell(elapsed_s=700.0)], flat(0.7), Hysteresis(admitted=True), 0.0, PARAMS)
    assert armed == Hysteresis(holding=True, held_for=("B#1", "qwen", "serial"), admitted=True)
    assert verdict.projection is not None
    assert verdict.projection.margin < 0.10
    assert "protecting B#1 (serial on qwen)" in verdict.describe()


@pytest.mark.parametrize(
    ("more", "reason"),
    [
        ({"expected_tokens": None}, SlackReason.LENGTH_UNKNOWN),  # no completed cells, no max_tokens
        ({"rate": None}, SlackReason.RATE_UNKNOWN),  # never streamed, or its figures went stale
        ({"rate": 0.0}, SlackReason.RATE_UNKNOWN),  # a stalled stream
    ],
)
def test_what_cannot_be_projected_holds_conservatively(more: dict[str, object], reason: SlackReason) -> None:
    loose = cell(cell_id="loose", elapsed_s=0.0, tokens=0)
    verdict, memory = decide([loose, cell(cell_id="x", **more)], flat(1.0), Hysteresis(), 0.0, PARAMS)
    assert (verdict.reason, verdict.admit) == (reason, False)
    assert verdict.protected is not None
    assert verdict.protected.cell_id == "x"
    # a fact missing, not a margin crossed: the hysteresis is not armed, so once the fact is
    # there the projection alone decides
    assert memory == Hysteresis()


def test_hysteresis_admits_again_only_after_sustained_slack_above_the_wider_margin() -> None:
    # margin 15% after admission: enough to go on admitting, not enough to start again
    middling = cell(elapsed_s=0.0, tokens=0, expected_tokens=5950.0)  # 850 s at 7 tok/s
    admitting, _ = decide([middling], flat(0.7), Hysteresis(), 0.0, PARAMS)
    assert admitting.reason is SlackReason.SLACK
    holding, memory = decide([middling], flat(0.7), Hysteresis(holding=True), 0.0, PARAMS)
    assert holding.reason is SlackReason.SETTLING
    assert memory == Hysteresis(holding=True)

    roomy = cell(elapsed_s=0.0, tokens=0, expected_tokens=3500.0)  # 500 s: margin 50%
    memory = Hysteresis(holding=True)
    seen = []
    for t in (10.0, 11.0, 12.0, 12.9, 13.0):
        verdict, memory = decide([roomy], flat(0.7), memory, t, PARAMS)
        seen.append(verdict.reason)
    assert seen == [SlackReason.SETTLING] * 4 + [SlackReason.SLACK]
    assert memory == Hysteresis(admitted=True)


def test_a_noisy_rate_dipping_under_the_admit_margin_restarts_the_wait_and_never_flaps() -> None:
    memory = Hysteresis(holding=True)
    admitted = []
    # the rate swings between roomy (margin 50%) and middling (15%) every second
    for t in range(12):
        rate = 10.0 if t % 2 == 0 else 10.0 * 3500 / 5950
        verdict, memory = decide(
            [cell(elapsed_s=0.0, tokens=0, expected_tokens=3500.0, rate=rate)],
            flat(0.7),
            memory,
            float(t),
            PARAMS,
        )
        admitted.append(verdict.admit)
    assert admitted == [False] * 12


def test_a_hold_ends_with_the_cell_it_held_for_and_the_next_is_judged_afresh() -> None:
    tight = cell(cell_id="s0", elapsed_s=700.0)
    _, memory = decide([tight], flat(0.7), Hysteresis(admitted=True), 0.0, PARAMS)
    assert (memory.holding, memory.held_for) == (True, ("s0", "qwen", "serial"))
    # s0 is still there, margin roomy: the hysteresis wants sustained slack first
    roomy = cell(cell_id="s0", elapsed_s=0.0, tokens=0, expected_tokens=3500.0)
    settling, memory = decide([roomy], flat(0.7), memory, 1.0, PARAMS)
    assert settling.reason is SlackReason.SETTLING
    # s0 ended; the next cell of its eval is protected instead: admitted at once on its slack
    following = cell(cell_id=None, elapsed_s=0.0, tokens=0, expected_tokens=3500.0)
    verdict, memory = decide([following], flat(0.7), memory, 1.5, PARAMS)
    assert (verdict.reason, memory) == (SlackReason.SLACK, Hysteresis(admitted=True))


def test_costs_fall_back_to_measured_slowdown_then_the_prior() -> None:
    assert NeighbourCosts(prior=0.7).factor("qwen", "nemotron", ALONE) == 0.7
    assert NeighbourCosts(prior=0.7, measured={"qwen": 1.25}).factor("qwen", "nemotron", ALONE) == 0.8


def _feed(costs: NeighbourCosts, start: float, widths: dict[str, int], rates: list[float], n: int) -> float:
    t = start
    for i in range(n):
        costs.observe(t, widths, [("qwen", rates[i % len(rates)])])
        t += 1.0
    return t


def test_costs_learn_the_ratio_of_rates_at_two_widths_once_each_held_still_a_window() -> None:
    costs = NeighbourCosts(prior=0.7)
    t = _feed(costs, 0.0, {"qwen": 1}, [10.0], 9)  # samples from 5 s on: 4 of them
    assert costs.learned("qwen", "nemotron", ALONE) is None
    t = _feed(costs, t, {"qwen": 1, "nemotron": 1}, [8.0], 7)  # 5 s of settling, then 2 samples
    assert costs.learned("qwen", "nemotron", ALONE) is None
    t = _feed(costs, t, {"qwen": 1, "nemotron": 1}, [8.0], 1)
    assert costs.learned("qwen", "nemotron", ALONE) == pytest.approx(0.8)
    assert costs.factor("qwen", "nemotron", ALONE) == pytest.approx(0.8)
    assert costs.factor("qwen", "nemotron", BESIDE) == 0.7  # never seen 2 wide: the prior


def test_costs_ignore_rates_read_while_a_width_settles_and_clamp_noise() -> None:
    costs = NeighbourCosts(prior=0.7)
    t = _feed(costs, 0.0, {"qwen": 1}, [10.0], 9)
    # the neighbour comes and goes every 2 s: no width holds still for a window, nothing learned
    for i in range(20):
        costs.observe(t + i, {"qwen": 1, "nemotron": i % 2}, [("qwen", 0.5)])
    assert costs.learned("qwen", "nemotron", ALONE) is None
    t = _feed(costs, t + 20, {"qwen": 1, "nemotron": 1}, [0.1, 0.2], 9)  # a stall-like patch
    assert costs.learned("qwen", "nemotron", ALONE) == FLOOR
    assert not math.isnan(costs.factor("qwen", "nemotron", ALONE))
