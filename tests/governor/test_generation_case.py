"""The generation-heavy case on the simulated box (issue 37, item 5's second case): one eval of
long answers on the mixture-of-experts engine, no ceiling, no rules, at the best static worker
count and under the deadline-slack law with sixteen workers, which has nothing to protect and
caps the width at the engine's throughput knee; real runner processes, the figures read from
each arm's store."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from spark_otel.demo.generation_case import GenerationCase, run_generation
from spark_otel.sim.profiles import MOE

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

CELLS = 64
"""About 150 model s at eight streams: 15 real s an arm at 10x."""


def test_the_law_settles_near_the_best_static_width_and_wall(tmp_path: Path) -> None:
    case = replace(GenerationCase(), cells=CELLS)
    best = max(case.widths, key=MOE.aggregate_rate)
    assert best == 8  # 262 tok/s; sixteen streams give 181
    assert MOE.aggregate_rate(case.workers("adaptive")) / MOE.aggregate_rate(best) < 1 / 1.15
    # so admitting every worker, as the law did with nothing to protect, would miss by far

    figures = run_generation(case, tmp_path, [f"static-{best}", "adaptive"])
    static, adaptive = figures[f"static-{best}"], figures["adaptive"]
    assert (static.cells, adaptive.cells) == (CELLS, CELLS)
    assert static.held_width == static.peak_width == best
    assert best / 2 <= adaptive.held_width <= best * 2, adaptive
    assert adaptive.wall_s <= 1.15 * static.wall_s, (adaptive, static)
