"""`spark-otel` itself, before and after a command runs: its version, its help when no command is
given, `--debug` reaching the log, and the exit code and the one line each kind of failure in a
command ends in. The commands stand in as plain functions here: what is pinned is the shell."""

from __future__ import annotations

import argparse
import gc
import logging

import pytest

from spark_otel import __version__, cli
from spark_otel.cli import _run, main


def test_version_names_the_program_and_its_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out == f"spark-otel {__version__}\n"


def test_no_command_prints_the_help_as_written_and_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    out = capsys.readouterr().out
    assert out.startswith("usage: spark-otel [-h] [--version] [--debug] COMMAND ...\n\n")
    assert f"\n\n{cli.DESCRIPTION}\npositional arguments:\n  COMMAND\n" in out  # the description unwrapped


def test_debug_shows_a_commands_debug_records_and_their_absence_hides_them(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def run(_args: argparse.Namespace) -> int:
        logging.getLogger("spark_otel.tests.entry").debug("3 cells read")
        return 0

    monkeypatch.setattr("spark_otel.cli.cells.run", run)
    assert main(["cells"]) == 0
    assert capsys.readouterr().err == ""
    assert main(["--debug", "cells"]) == 0
    assert capsys.readouterr().err == "spark-otel: debug: 3 cells read\n"


def _failing(exc: BaseException) -> argparse.Namespace:
    def run(_args: argparse.Namespace) -> int:
        raise exc

    return argparse.Namespace(run=run, debug=False)


@pytest.mark.parametrize(
    ("exc", "code", "err"),
    [
        (KeyboardInterrupt(), 130, ""),
        (BrokenPipeError(), 0, ""),
        (
            ZeroDivisionError("float division by zero"),
            1,
            "spark-otel: internal error: ZeroDivisionError: float division by zero (rerun with --debug)\n",
        ),
    ],
)
def test_each_kind_of_failure_exits_with_its_code_and_line(
    exc: BaseException, code: int, err: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _run(_failing(exc)) == code
    assert capsys.readouterr() == ("", err)


@pytest.mark.parametrize("fails", [False, True])
def test_a_command_runs_with_rare_collections_and_leaves_the_thresholds_as_they_were(
    monkeypatch: pytest.MonkeyPatch, fails: bool
) -> None:
    seen: list[tuple[int, int, int]] = []

    def run(_args: argparse.Namespace) -> int:
        seen.append(gc.get_threshold())
        if fails:
            raise RuntimeError("boom")
        return 0

    monkeypatch.setattr("spark_otel.cli.cells.run", run)
    before = gc.get_threshold()
    gc.set_threshold(900, 11, 12)
    try:
        assert main(["cells"]) == (1 if fails else 0)
        assert gc.get_threshold() == (900, 11, 12)
    finally:
        gc.set_threshold(*before)
    assert seen == [(50_000, 20, 100)]
