"""The article's case on the simulated box (issue 37, item 5): a serial eval on qwen whose cells
take 1,400, 300, 1,000, 600 and 1,200 model seconds alone under an 1,800 s ceiling (``max_tokens`` 16,000
declared), and a 4-worker eval on nemotron started from another process while the first serial
cell runs; real runner processes, a box of its own per arm, the figures read from each arm's
store. The full-size three arms, with longer serial evals, are `benchmarks/bench_adaptive.py`'s."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from spark_otel.demo.article_case import ArticleCase, run_arms
from spark_otel.sim.box import BoxModel
from spark_otel.sim.profiles import DENSE, MOE

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

CASE = ArticleCase(speed=200.0, serial_alone_s=(1400.0, 300.0, 1000.0, 600.0, 1200.0), load_cells=150)
"""At 200x: a 1,400 s cell is 7 real seconds; its stream's 2,200 chunks a second are what one
loaded core carries beside the box."""


def test_ungoverned_a_serial_cell_hits_its_ceiling_adaptive_none_and_the_neighbour_runs_in_the_slack(
    tmp_path: Path,
) -> None:
    box = BoxModel({"qwen": DENSE, "nemotron": MOE}, speed=1.0)
    beside = box.predicted_rate("qwen", 1, {"nemotron": 4})
    alone_rate = box.predicted_rate("nemotron", 4)
    assert 1400 * 11.1 / beside > CASE.ceiling_s  # four neighbours throughout would cut it off

    # Ungoverned, the first serial cell alone shows the harm (the later ones would only add time).
    # Its neighbour gets twice the cells, so it runs beside the whole cell: 150 last about 900
    # model s at four wide, barely past the 742 s of overlap the cut-off needs, and a loaded
    # machine's gaps between the neighbour's requests once let the cell end at 1,757 s.
    open_case = replace(CASE, serial_alone_s=CASE.serial_alone_s[:1], load_cells=2 * CASE.load_cells)
    ungoverned = run_arms(open_case, tmp_path, ("open",))["open"]
    adaptive = run_arms(CASE, tmp_path, ("adaptive",))["adaptive"]

    assert (ungoverned.serial_cells, ungoverned.load_cells) == (1, open_case.load_cells)
    assert ungoverned.serial_ceiling_hits >= 1
    assert ungoverned.serial_longest_s >= CASE.ceiling_s

    assert (adaptive.serial_cells, adaptive.load_cells) == (5, CASE.load_cells)
    assert adaptive.serial_ceiling_hits == 0
    assert adaptive.serial_longest_s < CASE.ceiling_s * 0.95
    # Under the static rule (nemotron yields while a ceiling-bound qwen cell runs, and between
    # its cells) the nemotron eval cannot start before the serial eval ends, then needs its
    # tokens' time alone: its wall is at least that. Adaptive's is at least 25% shorter.
    static_at_least = adaptive.serial_end_after_load_asked_s + CASE.load_cells * CASE.load_tokens / (
        4 * alone_rate
    )
    assert adaptive.load_wall_s <= 0.75 * static_at_least, (adaptive, static_at_least)
