"""The command line's stderr in the cases its other tests leave out: a record with a traceback, a
record whose arguments do not format (reported by logging, not dropped as a repeat), a progress bar
that counts each step it is given and draws the count, and a phase's name before its first update."""

from __future__ import annotations

import logging
import re

import pytest

from spark_otel.cli._console import cli_logging, progress, status

_logger = logging.getLogger("spark_otel.tests.console_records")
_CONTROL = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def test_an_error_with_a_traceback_prints_the_line_then_the_traceback(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with cli_logging():
        try:
            raise ValueError("row 3: no tokens")
        except ValueError:
            _logger.exception("could not read records.csv")
    err = capsys.readouterr().err
    assert err.startswith(
        "spark-otel: error: could not read records.csv\nTraceback (most recent call last):\n"
    )
    assert err.endswith("\nValueError: row 3: no tokens\n")


def test_a_record_whose_arguments_do_not_format_is_reported_by_logging(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(logging, "raiseExceptions", True)
    record = _logger.makeRecord(
        _logger.name, logging.WARNING, "probe.py", 1, "rate %d tok/s", ("fast",), None
    )
    with cli_logging() as handler:  # straight to it: pytest's own capture handler would raise
        handler.handle(record)
    err = capsys.readouterr().err
    assert err.startswith("--- Logging error ---\n")
    assert "TypeError: %d format: a real number is required, not str\n" in err
    assert err.endswith("Message: 'rate %d tok/s'\nArguments: ('fast',)\n")


def test_a_progress_bar_counts_every_step_and_draws_the_count(capsys: pytest.CaptureFixture[str]) -> None:
    with progress("reading captures", 4, force_terminal=True) as bar:
        bar.advance()
        bar.advance(3)
        assert bar.done == 4
    drawn = _CONTROL.sub("", capsys.readouterr().err)
    assert "reading captures" in drawn
    assert "100%" in drawn


def test_a_phase_names_its_first_text_until_updated() -> None:
    with status("reading 3 cells", force_terminal=False) as phase:
        assert phase.text == "reading 3 cells"
        phase.update("computing")
        assert phase.text == "computing"
