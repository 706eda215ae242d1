"""The store commands issue 38 found without progress (timeouts, cells, requests, instruments,
rules check --store) name their phase on a spinner when stderr is a terminal; stdout, with or
without --json, holds the answer alone and reads the same piped."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.support.printed import stderr_on_a_terminal
from tests.support.rule_catches import GENERAL_RULES, next_day_store

from spark_otel.cli import main


def _rules_check(tmp_path: Path) -> list[str]:
    rules = tmp_path / "rules.toml"
    rules.write_text(GENERAL_RULES)
    store = next_day_store(tmp_path / "next-day.sqlite")
    return ["rules", "check", str(rules), "--store", str(store)]


@pytest.mark.parametrize(
    ("argv", "phase"),
    [
        (["timeouts"], "judging the timeouts of "),
        (["cells", "-n", "7"], "reading the 7 most recent cells from "),
        (["cells"], "pricing the energy of 50 cells"),
        (["cells", "--budget"], "splitting the time of 50 cells"),
        (["requests"], "reading requests from "),
        (["instruments"], "grading the gauges over "),
        (None, "matching the rules to the recent cells of "),
    ],
)
def test_a_store_command_names_its_phase_on_a_terminal_and_prints_only_its_answer(
    argv: list[str] | None, phase: str, article_store: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = _rules_check(tmp_path) if argv is None else [*argv, "--store", article_store]
    for as_json in (False, True):
        command = [*args, "--json"] if as_json else args
        with stderr_on_a_terminal() as terminal:
            assert main(command) == 0
        on_a_terminal = capsys.readouterr().out
        assert phase in terminal.getvalue()
        if as_json:
            json.loads(on_a_terminal)  # stdout is the JSON alone, the spinner on stderr
        assert main(command) == 0  # piped: nothing drawn, the same answer
        piped = capsys.readouterr()
        assert piped.out == on_a_terminal
        # Only log records (the rules' unchecked engines) reach a piped stderr, never a phase.
        assert all(line.startswith("spark-otel: warning: ") for line in piped.err.splitlines())
        assert phase not in piped.err


def test_neighbour_cost_names_the_drawing_of_its_plot_on_a_terminal(
    article_store: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    png = tmp_path / "t.png"
    args = ["neighbour-cost", "--eval", "qwen-serial", "--store", article_store, "--plot", str(png), "--json"]
    with stderr_on_a_terminal() as terminal:
        assert main(args) == 0
    assert f"drawing the timeline of qwen-serial to {png}" in terminal.getvalue()
    json.loads(capsys.readouterr().out)
    assert main(args) == 0
    assert capsys.readouterr().err == f"wrote {png}\n"  # piped: the file written, no phase
