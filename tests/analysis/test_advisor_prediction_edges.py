"""The advisor's model at its edges, worked out by hand: a timeout recorded at four in flight
predicted alone, cells shorter than a second, a zero timeout tolerance, the ceiling-bound line
exactly met, a one-cell class that batches, and the contention and cost interval of a slow
engine (under a second a cell, under 1 tok/s a stream)."""

from __future__ import annotations

import pytest

from spark_otel.analysis.advisor.advice_model import AdvisorConfig, CellClass, ClassAdvice
from spark_otel.analysis.advisor.classes import class_advice
from spark_otel.analysis.advisor.predict import (
    classify,
    fit_prefill_contention,
    per_stream_cost_interval,
)
from spark_otel.model import Cell, CellStatus
from spark_otel.records.rate_curve import CurvePoint, RateCurve

S = 1_000_000_000
FLAT = RateCurve(
    engine="q",
    points=[
        CurvePoint(streams=1, per_stream_rate=10.0, aggregate_rate=10.0),
        CurvePoint(streams=2, per_stream_rate=10.0, aggregate_rate=20.0),
    ],
)
"""Two streams each as fast as one alone: batching two halves the wall of generation."""


def _cell(cell_id: str, elapsed_s: float, tokens: int | None, **kw: object) -> Cell:
    return Cell(
        uid=cell_id,
        eval_name="g",
        cell_id=cell_id,
        engine="q",
        start_unix_ns=0,
        end_unix_ns=int(elapsed_s * S),
        completion_tokens=tokens,
        **kw,  # type: ignore[arg-type]
    )


def _advice(members: list[tuple[Cell, int]], curve: RateCurve, config: AdvisorConfig) -> ClassAdvice:
    return class_advice(
        "q", "g", cell_class=CellClass.GENERATION_HEAVY, members=members, curve=curve, config=config
    )


def test_a_timeout_recorded_at_four_in_flight_is_predicted_to_fit_alone() -> None:
    """A cell cut off at the ceiling beside three others decoded at least the 4-stream rate
    for its 1,000 s; alone, at twice that rate, it needs half the time and no longer times out.
    The candidates are the counts the curve measured, and the timeout spends no prompt time."""
    curve = RateCurve(
        engine="q",
        points=[
            CurvePoint(streams=1, per_stream_rate=10.0, aggregate_rate=10.0),
            CurvePoint(streams=4, per_stream_rate=5.0, aggregate_rate=20.0),
        ],
    )
    members = [
        (_cell("a", 110, 1_000), 1),  # 10 s of prompt, then 1,000 tokens at 10 tok/s
        (_cell("c", 1_000, None, status=CellStatus.DEADLINE), 4),  # at least 5 x 1,000 = 5,000 tokens
    ]
    a = _advice(members, curve, AdvisorConfig(ceiling_s=1_000.0, prefill_contention=0.5))
    # Serial: 110 and 500 s, both inside the 900 s limit; the run of 2 takes 610 s. At 4: the
    # prompt x2.5, 25 + 200 = 225 s, and 5,000 / 5 = 1,000 s (past the limit): 1,000 s.
    assert [(c.workers, c.per_stream_rate, c.wall_s, c.timeout_fraction) for c in a.candidates] == [
        (1, 10.0, 610.0, 0.0),
        (4, 5.0, 1_000.0, 0.5),
    ]
    assert (a.recommended_workers, a.serial_timeout_fraction, a.historical_timeouts) == (1, 0.0, 1)


def test_cells_shorter_than_a_second_batch_and_have_an_interval() -> None:
    """Two half-second cells run side by side in half the wall: 2x, and as the two are alike
    every resample predicts 2x too. A tolerance of 0 still allows a count adding no timeouts."""
    members = [(_cell("a", 0.5, 5), 1), (_cell("b", 0.5, 5), 1)]  # no prompt time: 5 tokens at 10 tok/s
    a = _advice(members, FLAT, AdvisorConfig(timeout_tolerance=0.0))
    # Serial: 2 x 0.5 s = 1 s; at 2: 0.5 s.
    assert [(c.workers, c.wall_s, c.speedup, c.timeout_fraction) for c in a.candidates] == [
        (1, 1.0, 1.0, 0.0),
        (2, 0.5, 2.0, 0.0),
    ]
    assert (a.recommended_workers, a.speedup, a.speedup_interval, a.per_stream_cost) == (
        2,
        2.0,
        (2.0, 2.0),
        0.0,
    )


def test_a_class_whose_p90_serial_time_is_exactly_three_quarters_of_the_ceiling_is_ceiling_bound() -> None:
    """Ceiling-bound is reaching 75% of the ceiling: 1,350 s of 1,800 is, 1,349 s is not."""
    at = _advice([(_cell("a", 1_350, 1_000), 1)], FLAT, AdvisorConfig())  # 1,250 s prompt + 100 s
    below = _advice([(_cell("a", 1_349, 1_000), 1)], FLAT, AdvisorConfig())
    assert (at.ceiling_bound, below.ceiling_bound) == (True, False)


def test_a_class_of_one_cell_that_batches_has_no_speedup_interval() -> None:
    """With one cell there is nothing to resample, even where the curve says batching pays."""
    faster = RateCurve(
        engine="q",
        points=[
            CurvePoint(streams=1, per_stream_rate=10.0, aggregate_rate=10.0),
            CurvePoint(streams=2, per_stream_rate=20.0, aggregate_rate=40.0),
        ],
    )
    a = _advice([(_cell("a", 100, 1_000), 1)], faster, AdvisorConfig())
    # Serial: 100 s; at 2 streams of 20 tok/s: 50 s.
    assert (a.recommended_workers, a.speedup, a.speedup_interval) == (2, 2.0, None)


def test_a_slow_engines_contention_and_cost_interval_are_figures() -> None:
    """Cells under a second and rates under 1 tok/s are measurements like any other: 0.5 s alone
    and 0.8 s at 2 is a contention of 0.6; an interval of 0.5 to 0.8 tok/s alone and 0.4 to 0.6 at
    2 streams costs -20% to 50%."""
    assert fit_prefill_contention({1: [0.5], 2: [0.8]}) == pytest.approx(0.6)
    slow = RateCurve(
        engine="q",
        points=[
            CurvePoint(streams=1, per_stream_rate=0.6, aggregate_rate=0.6, ci_low=0.5, ci_high=0.8),
            CurvePoint(streams=2, per_stream_rate=0.5, aggregate_rate=1.0, ci_low=0.4, ci_high=0.6),
        ],
    )
    assert per_stream_cost_interval(slow, 2) == pytest.approx((1 - 0.6 / 0.5, 1 - 0.4 / 0.8))


def test_timeouts_that_recorded_no_time_predict_no_wall_and_no_speedup() -> None:
    """A record can carry a timeout with no duration (a backfilled elapsed of 0): it predicts 0 s,
    so a class of only such cells has no wall to speed up and stays serial; beside real cells,
    a resample drawing only them is left out of the interval rather than divided by."""
    instant = _cell("z", 0, None, status=CellStatus.DEADLINE)
    alone = _advice([(instant, 1)], FLAT, AdvisorConfig())
    assert [(c.workers, c.wall_s, c.speedup) for c in alone.candidates] == [(1, 0.0, 1.0), (2, 0.0, 1.0)]
    assert (alone.recommended_workers, alone.speedup) == (1, 1.0)
    real = [(_cell(k, 100, 1_000), 1) for k in "abc"]  # 100 s each, all decoding
    mixed = _advice([(instant, 1), *real], FLAT, AdvisorConfig(bootstrap_resamples=5_000))
    # Serial: 4 ids x 75 s mean = 300 s; at 2: 150 s. A resample with k real cells predicts
    # 100k s against max(50k, 100) s: 1x for k = 1 (12 in 256 resamples, past the 2.5% end), 2x
    # for more; k = 0 (1 in 256, so among 5,000 all but surely drawn) has no wall and is left out.
    assert (mixed.recommended_workers, mixed.speedup, mixed.speedup_interval) == (2, 2.0, (1.0, 2.0))


def test_a_speedup_exactly_one_percent_below_the_best_ties_and_the_fewer_workers_win() -> None:
    """Within 1% of the best counts as equal, 1% included: 1.98x at 2 workers ties 2.00x at 4."""
    curve = RateCurve(
        engine="q",
        points=[
            CurvePoint(streams=1, per_stream_rate=10.0, aggregate_rate=10.0),
            CurvePoint(streams=2, per_stream_rate=9.9, aggregate_rate=19.8),
            CurvePoint(streams=4, per_stream_rate=5.0, aggregate_rate=20.0),
        ],
    )
    members = [(_cell(k, 99, 990), 1) for k in "abcd"]  # 990 tokens in 99 s: all decoding
    a = _advice(members, curve, AdvisorConfig())
    # Serial: 4 x 99 s = 396 s; at 2: 2 x 100 s = 200 s (1.98x); at 4: 198 s (2x).
    assert [(c.workers, c.wall_s, c.speedup) for c in a.candidates] == [
        (1, 396.0, 1.0),
        (2, 200.0, 1.98),
        (4, 198.0, 2.0),
    ]
    assert (a.recommended_workers, a.speedup) == (2, 1.98)


def test_a_prompt_not_counted_is_not_long_context_however_low_the_line() -> None:
    """A cell without a prompt count has no known prompt: not long-context even at a 1-token line."""
    config = AdvisorConfig(long_context_prompt_tokens=1)
    assert classify(_cell("a", 10, 100), config) is CellClass.GENERATION_HEAVY
    assert classify(_cell("b", 10, 100, prompt_tokens=1), config) is CellClass.LONG_CONTEXT


def test_the_speedup_interval_is_the_same_every_time_for_the_same_cells() -> None:
    """The bootstrap is seeded by the class: advice on the same cells never flickers between
    runs, however many distinct resamples the cells allow."""
    curve = RateCurve(
        engine="q",
        points=[
            CurvePoint(streams=1, per_stream_rate=10.0, aggregate_rate=10.0),
            CurvePoint(streams=4, per_stream_rate=8.0, aggregate_rate=32.0),
        ],
    )
    members = [(_cell(f"c{i}", 10.0 * (i + 1) ** 2, 100 * (i + 1) ** 2), 1) for i in range(7)]
    config = AdvisorConfig()
    first = _advice(members, curve, config).speedup_interval
    assert first is not None
    assert first[0] < first[1]
    assert [_advice(members, curve, config).speedup_interval for _ in range(3)] == [first] * 3
