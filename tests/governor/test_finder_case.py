"""The finder's case on the simulated box (the article's Appendix E; issue 37, item 5): one
ceiling-bound eval at eight workers on the mixture-of-experts engine, flat and under the
deadline-slack law with no rules file; real runner processes, the figures read from each arm's
store."""

from __future__ import annotations

from pathlib import Path

import pytest

from spark_otel.demo.finder_case import FinderCase, run_finder
from spark_otel.sim.box import BoxModel
from spark_otel.sim.profiles import DENSE, MOE

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def test_the_law_cuts_fewer_cells_off_at_the_ceiling_than_a_flat_eight(tmp_path: Path) -> None:
    case = FinderCase()
    box = BoxModel({"qwen": DENSE, "nemotron": MOE}, speed=1.0)
    long_cells = sum(1 for t in case.tokens if t / box.predicted_rate("nemotron", 8) > case.ceiling_s)
    assert long_cells == 8  # at eight streams, the 1,100- and 1,200-token answers run past it

    figures = run_finder(case, tmp_path)
    flat, adaptive = figures["flat"], figures["adaptive"]
    assert (flat.cells, adaptive.cells) == (len(case.tokens), len(case.tokens))
    assert flat.peak_width == case.workers
    assert flat.ceiling_hits >= 1
    assert adaptive.ceiling_hits < flat.ceiling_hits
    assert adaptive.peak_width < case.workers  # the law kept the width down
    assert adaptive.longest_s < case.ceiling_s
