"""The advisor's model on plain numbers worked out by hand: a cell's class at its boundaries, the
fitted prefill contention, one prediction at N workers, and the per-stream cost's interval."""

from __future__ import annotations

import pytest

from spark_otel.analysis.advisor.model import AdvisorConfig, CellClass
from spark_otel.analysis.advisor.predict import (
    _Job,
    _predict,
    classify,
    fit_prefill_contention,
    per_stream_cost_interval,
)
from spark_otel.analysis.curve import CurvePoint, RateCurve
from spark_otel.model import Cell, CellStatus

S = 1_000_000_000


def _cell(prompt: int | None, completion: int | None, status: CellStatus = CellStatus.OK) -> Cell:
    return Cell(
        uid="c",
        eval_name="g",
        cell_id="c",
        start_unix_ns=0,
        end_unix_ns=10 * S,
        prompt_tokens=prompt,
        completion_tokens=completion,
        status=status,
    )


@pytest.mark.parametrize(
    ("prompt", "completion", "status", "cell_class"),
    [
        (24_000, 10, CellStatus.OK, CellClass.LONG_CONTEXT),
        (24_000, None, CellStatus.DEADLINE, CellClass.LONG_CONTEXT),  # known long before its output
        (23_999, 1, CellStatus.OK, CellClass.PROMPT_HEAVY),
        (900, 100, CellStatus.OK, CellClass.PROMPT_HEAVY),  # exactly 90% prompt
        (899, 101, CellStatus.OK, CellClass.GENERATION_HEAVY),
        (None, 100, CellStatus.OK, CellClass.GENERATION_HEAVY),
        (900, 100, CellStatus.DEADLINE, None),  # its output is unknown
        (900, 100, CellStatus.ERROR, None),
        (900, 0, CellStatus.OK, None),
        (900, None, CellStatus.OK, None),
    ],
)
def test_a_cells_class_comes_from_its_token_counts(
    prompt: int | None, completion: int | None, status: CellStatus, cell_class: CellClass | None
) -> None:
    assert classify(_cell(prompt, completion, status)) is cell_class
    assert classify(_cell(prompt, completion, status), AdvisorConfig()) is cell_class


def test_a_custom_config_moves_the_class_boundaries() -> None:
    config = AdvisorConfig(long_context_prompt_tokens=1_000, prompt_heavy_fraction=0.5)
    assert classify(_cell(1_000, 10), config) is CellClass.LONG_CONTEXT
    assert classify(_cell(50, 50), config) is CellClass.PROMPT_HEAVY
    assert classify(_cell(49, 51), config) is CellClass.GENERATION_HEAVY


def test_the_prefill_contention_is_the_least_squares_slope_of_elapsed_against_level() -> None:
    # 1.3x at 2 workers and 1.9x at 4: (0.3 * 1 + 0.9 * 3) / (1 + 9) = 0.3.
    assert fit_prefill_contention({1: [9.0, 11.0], 2: [13.0], 4: [19.0], 8: []}) == pytest.approx(0.3)
    assert fit_prefill_contention({1: [10.0], 2: [8.0]}) == 0.0  # faster in parallel: no contention
    assert fit_prefill_contention({2: [13.0], 4: [19.0]}) is None  # nothing alone to compare with
    assert fit_prefill_contention({1: [10.0]}) is None
    assert fit_prefill_contention({1: [10.0], 2: []}) is None
    assert fit_prefill_contention({1: [], 2: [13.0]}) is None
    assert fit_prefill_contention({1: [0.0], 2: [13.0]}) is None


CURVE = RateCurve(
    engine="q",
    points=[
        CurvePoint(streams=1, per_stream_rate=10.0, aggregate_rate=10.0, ci_low=9.0, ci_high=11.0),
        CurvePoint(streams=2, per_stream_rate=8.0, aggregate_rate=16.0),
        CurvePoint(streams=4, per_stream_rate=5.0, aggregate_rate=20.0, ci_low=4.0, ci_high=6.0),
    ],
)
JOBS = [_Job(2.0, 100.0, 1, False), _Job(0.0, 600.0, 1, False), _Job(0.0, 900.0, 2, True)]
CONFIG = AdvisorConfig(ceiling_s=100.0, ceiling_headroom=0.1)


def test_one_prediction_at_n_workers_worked_out_by_hand() -> None:
    # At 2 workers: rate 8, prefill x1.5; the cells take 15.5, 75 and 112.5 s (capped at 100);
    # the run of 3 ids takes max(3 * 190.5 / 3 / 2, 100) = 100 s; 112.5 s is past the 90 s limit.
    at_two = _predict(JOBS, CURVE, 2, contention=0.5, config=CONFIG, run_size=3)
    assert (at_two.workers, at_two.per_stream_rate, at_two.wall_s, at_two.speedup) == (2, 8.0, 100.0, 1.0)
    assert at_two.timeout_fraction == pytest.approx(1 / 3)
    # Serial: 12, 60 and 90 s; the recorded timeout predicted at exactly the limit times out again.
    serial = _predict(JOBS, CURVE, 1, contention=0.5, config=CONFIG, run_size=3)
    assert (serial.per_stream_rate, serial.wall_s, serial.timeout_fraction) == (
        10.0,
        162.0,
        pytest.approx(1 / 3),
    )
    finished = [_Job(0.0, 900.0, 1, False)]  # the same 90 s, but it finished last time
    assert _predict(finished, CURVE, 1, contention=0.5, config=CONFIG, run_size=1).timeout_fraction == 0.0
    # More distinct ids than workers can run at once: the mean sets the wall, not the longest.
    many = _predict(JOBS, CURVE, 2, contention=0.5, config=CONFIG, run_size=30)
    assert many.wall_s == pytest.approx(30 * 190.5 / 3 / 2)


def test_the_per_stream_cost_interval_takes_the_ends_against_each_other() -> None:
    assert per_stream_cost_interval(CURVE, 4) == pytest.approx((1 - 6 / 9, 1 - 4 / 11))
    assert per_stream_cost_interval(CURVE, 2) is None  # 2 streams has no interval
    assert per_stream_cost_interval(CURVE, 1) == pytest.approx((1 - 11 / 9, 1 - 9 / 11))
    zero = CURVE.model_copy(
        update={"points": [CURVE.points[0].model_copy(update={"ci_low": 0.0}), *CURVE.points[1:]]}
    )
    assert per_stream_cost_interval(zero, 4) is None
