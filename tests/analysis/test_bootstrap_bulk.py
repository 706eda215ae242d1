"""The advisor's speedup bootstrap in bulk (numpy, issue 38) against the pure-Python one it
replaced (`tests/support/bootstrap_reference`): each resample's speedup exactly what `_predict`
gives for it, the interval reproducible with its seed, and within the bootstrap's own error of the
reference on varied classes: short and long, with timeouts, cells at the ceiling, prompt-bound and
generation-bound, under a flat and a falling curve."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from tests.support.article import NEMOTRON_CURVE, QWEN_CURVE, appendix_c_cells, appendix_d_cells
from tests.support.bootstrap_reference import (
    QUANTILES,
    end_ranks,
    rank_tolerance,
    reference_bootstrap,
    reference_bootstrap_of,
    reference_speedups,
    within_bootstrap_error,
    within_ranks,
)

from spark_otel.analysis import advise
from spark_otel.analysis.advisor import predict
from spark_otel.analysis.advisor.advice_model import AdvisorConfig
from spark_otel.analysis.advisor.predict import _capped_times, _Job, _predict, _speedup_interval, _speedups
from spark_otel.analysis.stats import percentile
from spark_otel.records.rate_curve import CurvePoint, RateCurve

FALLING = RateCurve(
    engine="q",
    points=[
        CurvePoint(streams=1, per_stream_rate=40.0, aggregate_rate=40.0),
        CurvePoint(streams=2, per_stream_rate=34.0, aggregate_rate=68.0),
        CurvePoint(streams=4, per_stream_rate=25.0, aggregate_rate=100.0),
        CurvePoint(streams=8, per_stream_rate=14.0, aggregate_rate=112.0),
    ],
)
FLAT = RateCurve(
    engine="q",
    points=[
        CurvePoint(streams=1, per_stream_rate=10.0, aggregate_rate=10.0),
        CurvePoint(streams=4, per_stream_rate=10.0, aggregate_rate=40.0),
    ],
)


def _jobs(n: int, seed: int, *, prompt_s: float, tokens: int, timeout_share: float) -> list[_Job]:
    rng = random.Random(seed)
    return [
        _Job(rng.uniform(0, prompt_s), rng.uniform(0.1, 1) * tokens, 1, rng.random() < timeout_share)
        for _ in range(n)
    ]


CLASSES = {
    "two cells": (_jobs(2, 1, prompt_s=5, tokens=2_000, timeout_share=0), FALLING, 4, 0.37),
    "short generation-bound": (_jobs(60, 2, prompt_s=2, tokens=3_000, timeout_share=0), FALLING, 4, 0.0),
    "prompt-bound": (_jobs(150, 3, prompt_s=200, tokens=300, timeout_share=0), FALLING, 2, 0.37),
    "at the ceiling": (_jobs(300, 4, prompt_s=100, tokens=60_000, timeout_share=0.2), FALLING, 8, 0.37),
    "flat curve, many": (_jobs(2_000, 5, prompt_s=30, tokens=8_000, timeout_share=0.03), FLAT, 4, 0.1),
}


def _args(jobs: list[_Job], contention: float, config: AdvisorConfig | None = None) -> dict[str, Any]:
    """The keywords both bootstraps take: a run of about half the jobs' ids."""
    return {"contention": contention, "config": config or AdvisorConfig(), "run_size": len(jobs) // 2 + 1}


def _interval(
    fn: Callable[..., Any],
    jobs: list[_Job],
    curve: RateCurve,
    workers: int,
    contention: float,
    *,
    config: AdvisorConfig | None = None,
    seed: str = "q/g/generation-heavy",
) -> tuple[float, float] | None:
    interval: tuple[float, float] | None = fn(
        jobs, curve, workers, seed=seed, **_args(jobs, contention, config)
    )
    return interval


def _reference(
    jobs: list[_Job], curve: RateCurve, workers: int, contention: float, config: AdvisorConfig | None = None
) -> tuple[tuple[float, float], list[float]]:
    found = reference_bootstrap_of(
        jobs, curve, workers, seed="q/g/generation-heavy", **_args(jobs, contention, config)
    )
    assert found is not None
    return found


@pytest.mark.parametrize("name", CLASSES)
def test_each_resamples_speedup_is_what_predict_gives_for_it(name: str) -> None:
    """The arithmetic, exactly: the same resamples through `_predict` one by one and in bulk."""
    jobs, curve, workers, contention = CLASSES[name]
    args = _args(jobs, contention)
    rows = np.random.default_rng(7).integers(0, len(jobs), size=(20, len(jobs)))
    serial_t = _capped_times(jobs, curve, 1, contention=contention, config=args["config"])
    batched_t = _capped_times(jobs, curve, workers, contention=contention, config=args["config"])
    bulk = _speedups(serial_t, batched_t, rows, args["run_size"], workers).tolist()
    one_by_one = []
    for row in rows:
        sample = [jobs[k] for k in row]
        one_by_one.append(
            _predict(sample, curve, 1, **args).wall_s / _predict(sample, curve, workers, **args).wall_s
        )
    assert bulk == pytest.approx(one_by_one, rel=1e-12)


@pytest.mark.parametrize("name", CLASSES)
def test_the_bulk_interval_is_within_the_bootstrap_error_of_the_pure_python_one(name: str) -> None:
    jobs, curve, workers, contention = CLASSES[name]
    ours = _interval(_speedup_interval, jobs, curve, workers, contention)
    reference, speedups = _reference(jobs, curve, workers, contention)
    assert ours is not None
    assert ours[0] <= ours[1]
    assert within_ranks(ours, speedups), (ours, reference, end_ranks(ours, speedups))


def test_the_tolerance_is_of_the_order_of_the_bootstraps_own_error() -> None:
    """The reference under 16 other seeds lands within the tolerance of its own speedups, and at
    least once beyond a quarter of it: a much tighter check would fail the reference itself."""
    jobs, curve, workers, contention = CLASSES["at the ceiling"]
    _, speedups = _reference(jobs, curve, workers, contention)
    tolerance = rank_tolerance(len(speedups))
    moves = []
    for seed in range(16):
        other = reference_speedups(jobs, curve, workers, seed=seed, **_args(jobs, contention))
        interval = (percentile(other, QUANTILES[0]), percentile(other, QUANTILES[1]))
        low, high = end_ranks(interval, speedups)
        moves.append(max(abs(low - QUANTILES[0]), abs(high - QUANTILES[1])))
    assert max(moves) <= tolerance
    assert max(moves) > tolerance / 4


def test_with_many_resamples_both_converge_on_the_same_interval() -> None:
    """With 5,000 resamples each, the tolerance five times tighter, the two still agree."""
    jobs, curve, workers, contention = CLASSES["short generation-bound"]
    config = AdvisorConfig(bootstrap_resamples=5_000)
    ours = _interval(_speedup_interval, jobs, curve, workers, contention, config=config)
    _, speedups = _reference(jobs, curve, workers, contention, config)
    assert len(speedups) == 5_000
    assert ours is not None
    assert within_ranks(ours, speedups), end_ranks(ours, speedups)


def test_the_interval_is_reproducible_with_its_seed_and_moves_with_another() -> None:
    jobs, curve, workers, contention = CLASSES["prompt-bound"]
    first = _interval(_speedup_interval, jobs, curve, workers, contention)
    assert _interval(_speedup_interval, jobs, curve, workers, contention) == first
    assert _interval(_speedup_interval, jobs, curve, workers, contention, seed="q/h/prompt-heavy") != first


def test_resampling_in_blocks_draws_what_one_block_would(monkeypatch: pytest.MonkeyPatch) -> None:
    """A class too large for one block of resamples gets the interval one block would give."""
    jobs, curve, workers, contention = CLASSES["flat curve, many"]
    whole = _interval(_speedup_interval, jobs, curve, workers, contention)
    monkeypatch.setattr(predict, "_BOOTSTRAP_BLOCK", 3 * len(jobs) + 1)  # three resamples a block
    assert _interval(_speedup_interval, jobs, curve, workers, contention) == whole


def test_one_cell_or_serial_has_no_interval() -> None:
    jobs, curve, _, contention = CLASSES["two cells"]
    assert _interval(_speedup_interval, jobs[:1], curve, 4, contention) is None
    assert _interval(_speedup_interval, jobs, curve, 1, contention) is None


def test_the_articles_advice_is_the_references_within_the_bootstrap_error() -> None:
    """Every figure of the advice on the article's cells equal, the intervals within the error."""
    cells = appendix_c_cells() + appendix_d_cells()
    ours = advise(cells, [QWEN_CURVE, NEMOTRON_CURVE]).model_dump(mode="json")
    with reference_bootstrap() as drawn:
        reference = advise(cells, [QWEN_CURVE, NEMOTRON_CURVE]).model_dump(mode="json")
    assert drawn
    assert within_bootstrap_error(ours, reference, drawn) == []
    assert ours != reference  # the intervals moved: the check above is not of one thing twice


def test_a_small_error_in_the_model_falls_outside_the_tolerance() -> None:
    """Prefill contention off by 0.05 (of 0.37) moves the interval past the tolerance."""
    jobs, curve, workers, contention = CLASSES["prompt-bound"]
    _, speedups = _reference(jobs, curve, workers, contention)
    wrong = _interval(_speedup_interval, jobs, curve, workers, contention + 0.05)
    assert wrong is not None
    assert not within_ranks(wrong, speedups), end_ranks(wrong, speedups)
