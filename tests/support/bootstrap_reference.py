"""The advisor's speedup bootstrap as it was before issue 38 (pure Python, one `_predict` per
resample), kept as the reference the bulk numpy bootstrap is checked against, and the check.

Both draw ``bootstrap_resamples`` resamples from different generators, so their intervals agree
within the bootstrap's own error, not exactly: `within_bootstrap_error` allows each end of an
interval to move by a share of the reference interval's width and holds every other figure equal.
"""

from __future__ import annotations

import random
import zlib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from spark_otel.analysis.advisor import predict
from spark_otel.analysis.advisor.advice_model import AdvisorConfig
from spark_otel.analysis.stats import percentile
from spark_otel.records.rate_curve import RateCurve

TOLERANCE = 0.25
"""How far an interval's end may move, as a share of the reference interval's width: 200
resamples put the 2.5% point between the 5th and 6th of them, whose spread over seeds is of
this order (`tests/analysis/test_bootstrap_bulk.py` measures it)."""


def reference_speedups(
    jobs: Sequence[Any],
    curve: RateCurve,
    workers: int,
    *,
    contention: float,
    config: AdvisorConfig,
    run_size: int,
    seed: int,
) -> list[float]:
    """Every resample's speedup, sorted, drawn by ``random.Random(seed)``."""
    rng = random.Random(seed)
    speedups = []
    for _ in range(config.bootstrap_resamples):
        sample = rng.choices(jobs, k=len(jobs))
        serial = predict._predict(sample, curve, 1, contention=contention, config=config, run_size=run_size)
        batched = predict._predict(
            sample, curve, workers, contention=contention, config=config, run_size=run_size
        )
        if batched.wall_s > 0:
            speedups.append(serial.wall_s / batched.wall_s)
    return sorted(speedups)


def reference_speedup_interval(
    jobs: Sequence[Any],
    curve: RateCurve,
    workers: int,
    *,
    contention: float,
    config: AdvisorConfig,
    run_size: int,
    seed: str,
) -> tuple[float, float] | None:
    """`predict._speedup_interval` before issue 38, figure for figure."""
    if len(jobs) < 2 or workers == 1:
        return None
    speedups = reference_speedups(
        jobs,
        curve,
        workers,
        contention=contention,
        config=config,
        run_size=run_size,
        seed=zlib.crc32(seed.encode()),
    )
    return percentile(speedups, 0.025), percentile(speedups, 0.975)


@contextmanager
def reference_bootstrap() -> Iterator[None]:
    """The advisor with the reference bootstrap in place of the bulk one, for a comparison."""
    bulk = predict._speedup_interval
    predict._speedup_interval = reference_speedup_interval  # type: ignore[assignment]
    try:
        yield
    finally:
        predict._speedup_interval = bulk


def within_bootstrap_error(ours: Any, reference: Any, *, where: str = "") -> list[str]:
    """Where two advice documents (JSON) differ beyond the bootstrap's error: intervals
    (``speedup_interval``) within `TOLERANCE` of the reference's width, everything else equal."""
    if isinstance(reference, dict) and isinstance(ours, dict):
        if ours.keys() != reference.keys():
            return [f"{where}: keys {sorted(ours)} != {sorted(reference)}"]
        problems = []
        for key in reference:
            if key == "speedup_interval" and reference[key] is not None and ours[key] is not None:
                lo, hi = reference[key]
                slack = TOLERANCE * (hi - lo) + 1e-9 * abs(hi)
                if abs(ours[key][0] - lo) > slack or abs(ours[key][1] - hi) > slack:
                    problems.append(f"{where}.{key}: {ours[key]} vs reference {reference[key]}")
            else:
                problems += within_bootstrap_error(ours[key], reference[key], where=f"{where}.{key}")
        return problems
    if isinstance(reference, list) and isinstance(ours, list) and len(ours) == len(reference):
        return [
            p
            for i, (a, b) in enumerate(zip(ours, reference, strict=True))
            for p in within_bootstrap_error(a, b, where=f"{where}[{i}]")
        ]
    return [] if ours == reference else [f"{where}: {ours!r} != reference {reference!r}"]
