"""The article case's static arm is governed by the rules ``spark-otel advise --write-rules``
writes (issue 37, item 5): from the run a user measures first (`measure_rules`: the two evals
ungoverned, the serial eval under a ceiling its cells finish within), on the simulated box at
200x with real runner processes and the CLI in a process of its own; the file parsed, not read
as text."""

from __future__ import annotations

from pathlib import Path

import pytest

from spark_otel.demo.article_case import LOAD_EVAL, SERIAL_EVAL, ArticleCase, measure_rules
from spark_otel.governor.classing import profile
from spark_otel.records.rules_file import load_rules
from spark_otel.sim.box import BoxModel
from spark_otel.sim.profiles import DENSE, MOE

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

CASE = ArticleCase(speed=200.0, serial_alone_s=(1400.0, 300.0, 1000.0, 600.0))
"""The neighbour beside the first serial cell or two, the last two alone for the baseline
(about 25 real s)."""


def test_advise_writes_the_cross_engine_rule_that_holds_nemotron_beside_a_ceiling_bound_qwen_cell(
    tmp_path: Path,
) -> None:
    box = BoxModel({"qwen": DENSE, "nemotron": MOE}, speed=1.0)
    beside_throughout = 1 - box.predicted_rate("qwen", 1, {"nemotron": 4}) / box.predicted_rate("qwen", 1)

    path, measured = measure_rules(CASE, tmp_path)
    rules = load_rules(path)

    assert (measured.serial_cells, measured.serial_ceiling_hits) == (4, 0)
    assert measured.load_cells == CASE.measure_load_cells
    assert rules.ceiling_s == CASE.ceiling_s
    [rule] = rules.cross_engine
    assert (rule.engine, rule.while_engine, rule.cells) == ("nemotron", "qwen", 0)
    assert rule.while_ceiling_bound is True
    assert rule.while_eval is None  # the general form: it holds the next run whatever its name
    assert rule.figures["evals"] == [SERIAL_EVAL]
    # Flagged past advise's 20% threshold; at most what four neighbours throughout would cost
    # (they ran beside most of the window's cells, not all of them).
    assert 0.2 < rule.figures["neighbour_cost"] <= beside_throughout + 0.02
    assert rules.slowdown["qwen"] == pytest.approx(1 / (1 - rule.figures["neighbour_cost"]), abs=1e-3)
    # The next run of the serial eval, under a new name, is ceiling-bound at admission, so the
    # rule holds nemotron beside its cells; the nemotron eval's cells, with no ceiling, are not.
    renamed = f"{SERIAL_EVAL}-2026-12-08"
    assert profile(rules, engine="qwen", eval_name=renamed, deadline_s=CASE.ceiling_s).ceiling_bound
    assert not profile(rules, engine="nemotron", eval_name=LOAD_EVAL, deadline_s=None).ceiling_bound
