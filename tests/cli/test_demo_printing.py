"""What `spark-otel demo` prints after its run and what its --json holds, from a `DemoResult` built
by hand with known figures: every act's table with its title and the notes it is the first to
need, each act's one-line answers (only those of its topic that name its engine or eval), the
acts left out where the run has nothing for them, Act 5 only with both of its runs, and the
JSON document whole.

tests/cli/test_demo.py runs the real demo (a minute on the simulated box) and checks its
figures against the simulation's truth; too slow to run for each mutant, it leaves the printing
of those figures to these tests, which take milliseconds."""

from __future__ import annotations

from typing import Any

import pytest
from tests.support.demo_result import (
    ACT_2,
    ACT_4,
    GOVERNED,
    NOTHING_BUT_PROBES_AND_LOADS,
    OUT,
    WIDTH,
    demo_result,
    expected_json,
    json_result,
)
from tests.support.report_content import engine_concurrency

from spark_otel.analysis.concurrency import ConcurrencyReport
from spark_otel.cli import reset_notes
from spark_otel.cli.demo import _as_json, _pct, _print_acts


@pytest.fixture(autouse=True)
def _a_new_command_run_on_a_narrow_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test a command run of its own (every term explained again, under the first table
    that uses it) on a terminal `WIDTH` wide."""
    monkeypatch.setenv("COLUMNS", str(WIDTH))
    reset_notes()


def printed(capsys: pytest.CaptureFixture[str]) -> list[str]:
    """stdout's lines, without the spaces rich pads each line of a table with."""
    return [line.rstrip() for line in capsys.readouterr().out.split("\n")]


# The review eval's runs by workers, the unrecorded count first; walls to the second (1,799.5
# to even), medians to the hundredth (9.125 to even); the other eval's run and answer left out.
ACT_3 = [
    "Act 3. demo-review-t1: the same cells at 1 and more workers",
    "                        (model time)",
    "┏━━━━━━━━━┳━━━━━━━┳━━━━━━━━━━━━┳━━━━━━━━━━━━━┳━━━━━━━━━━━━━┓",
    "┃         ┃       ┃            ┃      median ┃             ┃",
    "┃         ┃       ┃ wall model ┃   tok/s per ┃     ceiling ┃",
    "┃ workers ┃ cells ┃          s ┃        cell ┃        hits ┃",
    "┡━━━━━━━━━╇━━━━━━━╇━━━━━━━━━━━━╇━━━━━━━━━━━━━╇━━━━━━━━━━━━━┩",
    "│         │     2 │         50 │           - │           0 │",
    "│       1 │     8 │      1,800 │       10.50 │           0 │",
    "│       8 │     8 │        302 │        9.12 │           1 │",
    "└─────────┴───────┴────────────┴─────────────┴─────────────┘",
    "ceiling hits: cells cut off at their per-cell ceiling:",
    "counted, never rated",
    "=> demo-review-t1 at 8 workers on qwen: 6.0x the wall speed",
    "",
]
# The review eval's energy alone (the serial eval's cell left out), in model time; J/tok was
# explained under Act 2. At 1 worker: 5,000 + 6,000 J over 2,000 tokens, 14:13:20 to 14:16:40.
ENERGY = [
    "Act 3. What each token cost: energy on the box (GPU 0,",
    "energy counter): 13,400 J while cells ran, 2,001 J idle",
    "between them (model time, 20x)",
    "",
    "eval                     demo-review-t1",
    "workers                  1",
    "cells measured           2 of 2",
    "output tok               2,000",
    "energy J                 11,000",
    "J/tok                    5.500",
    "J/cell (median, 95% CI)  5,500 [5,000 to 6,000]",
    "span (UTC)               09-21 14:13 to 09-21 14:16",
    "",
    "eval                     demo-review-t1",
    "workers                  8",
    "cells measured           1 of 1",
    "output tok               1,000",
    "energy J                 1,500",
    "J/tok                    1.500",
    "J/cell (median, 95% CI)  1,500",
    "span (UTC)               09-21 14:18 to 09-21 14:20",
    "J/cell (median, 95% CI): each cell's share of the box's",
    "energy: split by tokens among the cells in flight, stretch",
    "by stretch; median over the cells and its 95% interval",
]
# `print_verdicts` under the demo's title: 1,234.56 over 12.5 tok/s is 98.8x.
APPENDIX_F = [
    "Appendix F. The box's gauges against the probes' load: 2",
    "probe intervals, 12.5 to 1,234.6 tok/s (98.8x) (model time,",
    "100x): does each gauge move with load?",
    "",
    "instrument               GPU 0 power",
    "verdict                  not load",
    "intervals                2",
    "tok/s                    -",
    "reads                    -",
    "elasticity               0.04",
    "rank corr                -",
    "zero / constant samples  0 / 0 of 2",
    "",
    "instrument               qwen requests running",
    "verdict                  tracks load",
    "intervals                3",
    "tok/s                    -",
    "reads                    -",
    "elasticity               -",
    "rank corr                0.95",
    "zero / constant samples  0 / 0 of 3",
    "elasticity: least-squares slope of the gauge on throughput,",
    "times mean throughput over mean gauge: 1 moves in",
    "proportion, 0 not at all; tracks load from 0.5",
    "rank corr: Spearman rank correlation with throughput; tracks",
    "load from 0.8",
    "zero / constant samples: samples inside the intervals",
    "reading 0, and reading the gauge's most common value",
    "why:",
    "  GPU 0 power: not load: no readings in 2 loaded intervals (12.5 to 1,234.5 tok/s): i"
    "ts source recorded other quantities but not this one",
    "  qwen requests running: tracks load: no readings in 2 loaded intervals (12.5 to 1,234.5 tok/s): i"
    "ts source recorded other quantities but not this one",
    "note: no GPU samples & no Nsight",
    "note: one engine",
]
RULES = [
    "                        Queue rules",
    "┏━━━━━━━━━━━━━━━━━━━━━━━━━━━━┳━━━━━━━━━━━━━━━━━━━━━━━━━━━━━┓",
    "┃ queue rule                 ┃ evidence                    ┃",
    "┡━━━━━━━━━━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━━━━━━━━━━━━┩",
    "│ nemotron lane at most 8    │ aggregate peaks at 8        │",
    "│ streams                    │ streams                     │",
    "│ nemotron yields while      │ cost 62% (n=5)              │",
    "│ demo-serial-t1 runs on     │                             │",
    "│ qwen                       │                             │",
    "└────────────────────────────┴─────────────────────────────┘",
    "=> 2 queue rules, from the curves and the neighbour costs",
    "",
]
# Without rules: the rate of the 3 cells beside the neighbour, 62.5% to even; with them none
# ran beside it, so the rate of all 6 (9.875 to even). Waits and walls to the second.
ACT_5 = [
    "Act 5. demo-serial-t1 and, from another process midway,",
    "demo-nemotron-t1 at 4 workers (model time)",
    "",
    "run                   without rules",
    "serial cells          6",
    "beside                3",
    "serial tok/s          3.75",
    "cost %                62",
    "ceiling hits          1",
    "nemotron cells        12",
    "most at once          4",
    "longest queue wait s  0",
    "both evals' wall s    1,234",
    "",
    "run                   with the rules",
    "serial cells          6",
    "beside                0",
    "serial tok/s          9.88",
    "cost %                1",
    "ceiling hits          0",
    "nemotron cells        12",
    "most at once          4",
    "longest queue wait s  457",
    "both evals' wall s    1,789",
    "beside: serial cells that ran at least 90% of their time",
    "while the nemotron eval ran",
    "cost %: 1 - serial tok/s (of the cells beside it, else of",
    "all) over its Act 4 baseline alone",
    "=> with the rules, demo-serial-t1 paid 1% (n=6 cells, 0 beside the neighbour) against 62% without "
    "(n=3 beside), 0 ceiling hits against 1; the nemotron eval waited up to 457 model s, then ran 4 wide; "
    "both evals took 1789 model s against 1234",
    "",
]


def test_a_cost_reads_in_whole_percent_or_a_dash() -> None:
    assert [_pct(v) for v in (None, 0.0, 0.6, 0.625, 0.666, -0.05)] == ["-", "0", "60", "62", "67", "-5"]


def test_every_act_prints_its_tables_with_the_notes_they_need_first_and_its_answers(
    capsys: pytest.CaptureFixture[str],
) -> None:
    _print_acts(demo_result())
    assert printed(capsys) == [*ACT_2, *ACT_3, *ENERGY, *ACT_4, *APPENDIX_F, *RULES, *ACT_5, ""]


@pytest.mark.parametrize(
    "left_out",
    [
        pytest.param(NOTHING_BUT_PROBES_AND_LOADS, id="nothing"),
        pytest.param(
            NOTHING_BUT_PROBES_AND_LOADS
            | {
                "concurrency": ConcurrencyReport(eval_name=None, engines=[engine_concurrency("qwen", [], [])])
            },
            id="no run of the review eval",
        ),
        pytest.param(NOTHING_BUT_PROBES_AND_LOADS | {"governed": GOVERNED[:1]}, id="one Act 5 run"),
        pytest.param(NOTHING_BUT_PROBES_AND_LOADS | {"governed": [*GOVERNED, GOVERNED[0]]}, id="three"),
    ],
)
def test_an_act_with_nothing_to_show_is_left_out(
    left_out: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    _print_acts(demo_result(**left_out))
    assert printed(capsys) == [*ACT_2, *ACT_4, ""]


def test_the_json_holds_the_run_its_answers_figures_rules_and_act_5() -> None:
    # wall_s: 83.46 s to a tenth; a rule's interval a list, as JSON has it.
    assert _as_json(json_result(), 20.0) == expected_json(OUT, 20.0)


def test_the_json_of_a_run_without_concurrency_rules_gauges_energy_or_act_5() -> None:
    assert _as_json(json_result(**NOTHING_BUT_PROBES_AND_LOADS), 100.0) == expected_json(OUT, 100.0) | {
        "speedups": [],
        "rules": [],
        "governed": [],
        "instruments": None,
        "energy": None,
    }
