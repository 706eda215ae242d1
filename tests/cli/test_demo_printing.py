"""What `spark-otel demo` prints after its run and what its --json holds, from a `DemoResult` built
by hand with known figures: every act's table with its title and the notes it is the first to
need, each act's one-line answers (only those of its topic that name its engine or eval), the
acts left out where the run has nothing for them, Act 5 only with its open and static runs (the
adaptive one beside them where it ran), and the JSON document whole.

tests/cli/test_demo.py runs the real demo (a minute on the simulated box) and checks its
figures against the simulation's truth; too slow to run for each mutant, it leaves the printing
of those figures to these tests, which take milliseconds."""

from __future__ import annotations

from typing import Any

import pytest
from tests.support.demo_result import (
    ACT_2,
    ACT_4,
    ADAPTIVE,
    GOVERNED,
    NOTHING_BUT_PROBES_AND_LOADS,
    OUT,
    WIDTH,
    demo_result,
    expected_json,
    json_result,
)
from tests.support.report_content import engine_concurrency
from tests.support.snapshots import Snapshot

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


def test_a_cost_reads_in_whole_percent_or_a_dash() -> None:
    assert [_pct(v) for v in (None, 0.0, 0.6, 0.625, 0.666, -0.05)] == ["-", "0", "60", "62", "67", "-5"]


def test_every_act_prints_its_tables_with_the_notes_they_need_first_and_its_answers(
    capsys: pytest.CaptureFixture[str], snapshot: Snapshot
) -> None:
    """Act 3: the review eval's runs by workers, the unrecorded count first, walls to the second
    (1,799.5 to even), medians to the hundredth (9.125 to even), the other eval's run and answer
    left out; the energy per eval; the gauges; the rules; Act 5's three runs side by side, with
    the rate of the 3 cells beside the neighbour without rules (62.5% to even) and of all 6 with
    them, each run's serial cells at the ceiling of its 6, its longest cell (1,800.4 to 1,800) and
    the nemotron eval's wall; the adaptive run's answer (30% shorter than the rules' wall)."""
    _print_acts(demo_result())
    lines = printed(capsys)
    assert lines[: len(ACT_2)] == ACT_2
    snapshot("\n".join(lines))


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
        pytest.param(NOTHING_BUT_PROBES_AND_LOADS | {"adaptive": ADAPTIVE}, id="the adaptive run alone"),
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


def test_act_5_without_its_adaptive_run_shows_the_two_others(
    capsys: pytest.CaptureFixture[str], snapshot: Snapshot
) -> None:
    """A result from before the third arm (or one where it did not run): the two runs and the
    rules' answer, no adaptive line; the JSON lists the two."""
    result = demo_result(**(NOTHING_BUT_PROBES_AND_LOADS | {"governed": GOVERNED}))
    _print_acts(result)
    lines = printed(capsys)
    act5 = lines[len(ACT_2) + len(ACT_4) :]
    assert not any("adaptive" in line for line in act5)
    snapshot("\n".join(act5))
    assert [run["label"] for run in _as_json(result, 20.0)["governed"]] == ["without rules", "with the rules"]
