"""The advisor's model on plain numbers worked out by hand: a cell's class at its boundaries, the
fitted prefill contention, one prediction at N workers, and the per-stream cost's interval."""

from __future__ import annotations

import pytest

from spark_otel.analysis.advisor.advice_model import AdvisorConfig, CellClass
from spark_otel.analysis.advisor.classes import class_advice
from spark_otel.analysis.advisor.predict import (
    _Job,
    _predict,
    classify,
    fit_prefill_contention,
    per_stream_cost_interval,
)
from spark_otel.model import Cell, CellStatus
from spark_otel.records.rate_curve import CurvePoint, RateCurve

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


def test_a_class_advice_worked_out_by_hand() -> None:
    def cell(cell_id: str, elapsed_s: int, tokens: int, prompt: int | None, **kw: object) -> Cell:
        return Cell(
            uid=cell_id,
            eval_name="g",
            cell_id=cell_id,
            engine="q",
            start_unix_ns=0,
            end_unix_ns=elapsed_s * S,
            prompt_tokens=prompt,
            completion_tokens=tokens,
            **kw,  # type: ignore[arg-type]
        )

    members = [
        (cell("a", 110, 1_000, 100), 1),  # 10 s of prompt, then 1,000 tokens at 10 tok/s
        (cell("b", 130, 800, 300), 2),  # at 2 in flight: 100 s decoding at 8 tok/s, 30 s of prompt / 1.5
        (cell("c", 1_000, 5_000, None, status=CellStatus.DEADLINE), 1),  # at least 10,000 tokens
    ]
    config = AdvisorConfig(ceiling_s=1_000.0, prefill_contention=0.5)
    a = class_advice(
        "q", "g", cell_class=CellClass.GENERATION_HEAVY, members=members, curve=CURVE, config=config
    )
    # Serial: 110, 100 and 1,000 s (the timeout again: 1/3); the run of 3 takes 1,210 s.
    # At 2: 140, 130 and 1,250 s capped at 1,000: 1,000 s, 1.21x; at 4: 225, 210, 1,000: also 1.21x.
    assert [(c.workers, c.per_stream_rate, c.wall_s) for c in a.candidates] == [
        (1, 10.0, 1_210.0),
        (2, 8.0, 1_000.0),
        (4, 5.0, 1_000.0),
    ]
    assert [c.speedup for c in a.candidates] == pytest.approx([1.0, 1.21, 1.21])
    assert [c.timeout_fraction for c in a.candidates] == pytest.approx([1 / 3] * 3)
    assert (a.recommended_workers, a.speedup, a.per_stream_cost) == (
        2,
        pytest.approx(1.21),
        pytest.approx(0.2),
    )
    assert (a.timeout_fraction, a.serial_timeout_fraction) == (pytest.approx(1 / 3), pytest.approx(1 / 3))
    assert (a.n_cells, a.historical_timeouts, a.prompt_tokens_median, a.output_tokens_p90) == (
        3,
        1,
        200.0,
        pytest.approx(980.0),
    )
    assert (a.prefill_contention, a.prefill_contention_fitted) == (0.5, False)
    # p90 of the serial times 100, 110 and 1,000 s is 822 s: past 75% of the ceiling.
    assert a.ceiling_bound is True
    assert a.per_stream_cost_interval is None  # 2 streams has no interval on the curve
    assert a.speedup_interval is not None
    low, high = a.speedup_interval
    assert 1.0 <= low <= 1.21 <= high
    again = class_advice(
        "q", "g", cell_class=CellClass.GENERATION_HEAVY, members=members, curve=CURVE, config=config
    )
    assert again.speedup_interval == a.speedup_interval  # seeded by the class: reproducible
    roomy = class_advice(
        "q",
        "g",
        cell_class=CellClass.GENERATION_HEAVY,
        members=members[:2],
        curve=CURVE,
        config=AdvisorConfig(ceiling_s=1_000.0, prefill_contention=0.5),
    )
    assert (roomy.ceiling_bound, roomy.historical_timeouts, roomy.output_tokens_p90) == (
        False,
        0,
        pytest.approx(980.0),
    )


def test_a_prompt_heavy_class_fits_its_own_contention_from_its_levels() -> None:
    def cell(cell_id: str, elapsed_s: float) -> Cell:
        return Cell(
            uid=cell_id,
            eval_name="g",
            cell_id=cell_id,
            engine="q",
            start_unix_ns=0,
            end_unix_ns=int(elapsed_s * S),
            prompt_tokens=9_000,
            completion_tokens=100,
        )

    members = [(cell("a", 10.0), 1), (cell("b", 13.0), 2), (cell("c", 19.0), 4)]
    a = class_advice(
        "q", "g", cell_class=CellClass.PROMPT_HEAVY, members=members, curve=CURVE, config=AdvisorConfig()
    )
    assert (a.prefill_contention, a.prefill_contention_fitted) == (pytest.approx(0.3), True)
    (alone,) = [c for c in a.candidates if c.workers == 1]
    assert alone.speedup == 1.0


def test_a_class_of_one_cell_or_a_serial_answer_has_no_speedup_interval() -> None:
    one = [
        (
            Cell(
                uid="a",
                eval_name="g",
                cell_id="a",
                start_unix_ns=0,
                end_unix_ns=100 * S,
                completion_tokens=1_000,
            ),
            1,
        )
    ]
    a = class_advice(
        "q", "g", cell_class=CellClass.GENERATION_HEAVY, members=one, curve=CURVE, config=AdvisorConfig()
    )
    assert a.speedup_interval is None
    assert a.n_cells == 1
