"""The advisor's speedup bootstrap as it was before issue 38 (pure Python, one `_predict` per
resample), kept as the reference the bulk numpy bootstrap is checked against, and the check.

Both draw ``bootstrap_resamples`` resamples from different generators, so their intervals agree
within the bootstrap's own error, not exactly. The check is in ranks: placed among the
reference's own resampled speedups, each end of the bulk interval must sit within
`rank_tolerance` of its quantile (2.5% and 97.5%), which narrows with the resamples as the
bootstrap's error does. Every other figure is held equal.
"""

from __future__ import annotations

import math
import random
import zlib
from bisect import bisect_left, bisect_right
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from spark_otel.analysis.advisor import predict
from spark_otel.analysis.advisor.advice_model import AdvisorConfig
from spark_otel.analysis.stats import percentile
from spark_otel.records.rate_curve import RateCurve

QUANTILES = (0.025, 0.975)


def rank_tolerance(resamples: int) -> float:
    """How far an interval end's rank among the reference's speedups may be from its quantile:
    0.1 at 200 resamples, narrowing as the bootstrap's error does (with the square root of the
    resamples). Measured on the 16 classes of `bench_scale`'s 10,000-cell box, the two
    implementations' ends at 200 resamples sat 0.022 from their quantiles (root mean square), at
    most 0.065: more than a smooth distribution's standard error (0.016), because a class whose
    batched wall is often its longest cell has lumps in its speedups. At 4,000 resamples every end
    sat within 0.008. A wrong model moves an end to rank 0 or 1."""
    return 0.1 * math.sqrt(200 / resamples)


def end_ranks(interval: Sequence[float], speedups: Sequence[float]) -> tuple[float, float]:
    """The share of the (sorted) reference speedups below each end of ``interval``."""
    n = len(speedups)
    return bisect_left(speedups, interval[0]) / n, bisect_left(speedups, interval[1]) / n


def within_ranks(interval: Sequence[float], speedups: Sequence[float]) -> bool:
    """Whether both ends of ``interval`` sit within `rank_tolerance` of their quantiles among
    the reference's ``speedups`` (an end equal to several of them, as in a class of a few cells,
    takes any rank among those)."""
    tolerance, n = rank_tolerance(len(speedups)), len(speedups)
    return all(
        max(bisect_left(speedups, end) / n, q - tolerance)
        <= min(bisect_right(speedups, end) / n, q + tolerance)
        for end, q in zip(interval, QUANTILES, strict=True)
    )


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


def reference_bootstrap_of(
    jobs: Sequence[Any],
    curve: RateCurve,
    workers: int,
    *,
    contention: float,
    config: AdvisorConfig,
    run_size: int,
    seed: str,
) -> tuple[tuple[float, float], list[float]] | None:
    """`predict._speedup_interval` before issue 38, figure for figure, with the sorted speedups
    it took the interval from."""
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
    return (percentile(speedups, QUANTILES[0]), percentile(speedups, QUANTILES[1])), speedups


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
    found = reference_bootstrap_of(
        jobs, curve, workers, contention=contention, config=config, run_size=run_size, seed=seed
    )
    return None if found is None else found[0]


@contextmanager
def reference_bootstrap() -> Iterator[dict[tuple[float, float], list[float]]]:
    """The advisor with the reference bootstrap in place of the bulk one, for a comparison; yields
    each interval it gave with the sorted speedups it took it from."""
    bulk = predict._speedup_interval
    drawn: dict[tuple[float, float], list[float]] = {}

    def recording(*args: Any, **kwargs: Any) -> tuple[float, float] | None:
        found = reference_bootstrap_of(*args, **kwargs)
        if found is None:
            return None
        drawn[found[0]] = found[1]
        return found[0]

    predict._speedup_interval = recording  # type: ignore[assignment]
    try:
        yield drawn
    finally:
        predict._speedup_interval = bulk


def within_bootstrap_error(
    ours: Any, reference: Any, drawn: Mapping[tuple[float, float], list[float]], *, where: str = ""
) -> list[str]:
    """Where two advice documents (JSON) differ beyond the bootstrap's error: each
    ``speedup_interval`` `within_ranks` of the reference's speedups it came from (``drawn``, from
    `reference_bootstrap`), everything else equal."""
    if isinstance(reference, dict) and isinstance(ours, dict):
        if ours.keys() != reference.keys():
            return [f"{where}: keys {sorted(ours)} != {sorted(reference)}"]
        problems = []
        for key in reference:
            if key == "speedup_interval" and reference[key] is not None and ours[key] is not None:
                speedups = drawn[tuple(reference[key])]  # type: ignore[index]
                if not within_ranks(ours[key], speedups):
                    ranks = ", ".join(f"{r:.3f}" for r in end_ranks(ours[key], speedups))
                    problems.append(
                        f"{where}.{key}: {ours[key]} vs reference {reference[key]} "
                        f"(ranks {ranks} among its {len(speedups)} resamples)"
                    )
            else:
                problems += within_bootstrap_error(ours[key], reference[key], drawn, where=f"{where}.{key}")
        return problems
    if isinstance(reference, list) and isinstance(ours, list) and len(ours) == len(reference):
        return [
            p
            for i, (a, b) in enumerate(zip(ours, reference, strict=True))
            for p in within_bootstrap_error(a, b, drawn, where=f"{where}[{i}]")
        ]
    return [] if ours == reference else [f"{where}: {ours!r} != reference {reference!r}"]
