"""What commands show on stderr beside their results: each warning once, printed above a live
spinner or bar without breaking it, and the phase on a spinner only when stderr is a terminal."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path

import pytest
from tests.support.backfill_records import CSV, SERIAL
from tests.support.printed import stderr_on_a_terminal
from tests.support.report_records import report_records

from spark_otel.cli import main
from spark_otel.cli._console import cli_logging, progress, status
from spark_otel.store import Store

_logger = logging.getLogger("spark_otel.tests.console")
_CONTROL = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def _on_a_line_of_its_own(drawn: str, text: str) -> bool:
    """Whether ``text`` was drawn at the start of a line (after the display was cleared), not
    appended to a spinner's or a bar's frame."""
    before = drawn[: drawn.index(text)]
    return _CONTROL.sub("", re.split(r"[\r\n]", before)[-1]) == ""


def test_the_same_record_prints_once_per_command_run(capsys: pytest.CaptureFixture[str]) -> None:
    with cli_logging():
        for _ in range(3):
            _logger.warning("engine %s: down", "qwen")
        _logger.error("engine %s: down", "qwen")  # another level: another record
        _logger.info("not shown without --debug")
    with cli_logging():  # a new run prints it again
        _logger.warning("engine %s: down", "qwen")
    err = capsys.readouterr().err
    assert err == (
        "spark-otel: warning: engine qwen: down\n"
        "spark-otel: error: engine qwen: down\n"
        "spark-otel: warning: engine qwen: down\n"
    )
    assert not any(type(h).__name__ == "CliHandler" for h in logging.getLogger().handlers)


def test_a_command_that_warns_twice_prints_the_warning_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Two stored probe runs of one name, both of a version this spark-otel does not read: each
    # is skipped with the same words, which the command prints once.
    path = tmp_path / "s.sqlite"
    cells, windows = report_records()
    with Store(path) as store:
        store.write_cells(cells)
        store.write_windows(windows)
        for _ in range(2):
            store.put_document("probe", "old probe", {"metadata": {"version": 0}})
    assert main(["report", "--store", str(path), "--out", str(tmp_path / "r")]) == 0
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert len(lines) == len(set(lines)) == 2, err
    assert all(line.startswith("spark-otel: warning: ") and "'old probe'" in line for line in lines)


def test_a_spinner_names_the_phase_on_a_terminal_and_warnings_print_above_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with cli_logging(), status("reading 3 cells from s.sqlite", force_terminal=True) as phase:
        _logger.warning("skipping a broken line")
        _logger.warning("skipping a broken line")
        phase.update("computing in-flight levels")
    captured = capsys.readouterr()
    assert captured.out == ""  # stdout is the command's result, untouched
    assert "reading 3 cells from s.sqlite" in captured.err
    assert "computing in-flight levels" in captured.err
    assert captured.err.count("spark-otel: warning: skipping a broken line") == 1
    assert _on_a_line_of_its_own(captured.err, "spark-otel: warning: skipping a broken line")


def test_nothing_is_drawn_when_stderr_is_not_a_terminal(capsys: pytest.CaptureFixture[str]) -> None:
    with status("reading", force_terminal=False) as phase:
        phase.update("computing")
    with progress("probing", 3, force_terminal=False) as bar:
        bar.advance()
    assert phase.text == "computing"
    assert bar.done == 1
    assert capsys.readouterr() == ("", "")


def test_a_progress_bar_on_a_terminal_keeps_warnings_whole(capsys: pytest.CaptureFixture[str]) -> None:
    with cli_logging(), progress("probing http://127.0.0.1:8011", 2, force_terminal=True) as bar:
        bar.advance()
        _logger.warning("level 1: the client is over its CPU budget")
        bar.advance()
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "probing http://127.0.0.1:8011" in captured.err
    assert captured.err.count("spark-otel: warning: level 1: the client is over its CPU budget\n") == 1
    assert _on_a_line_of_its_own(captured.err, "spark-otel: warning: level 1")


def test_concurrency_shows_its_phases_on_a_terminal_and_stdout_does_not_change(
    article_store: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with Store(article_store, read_only=True) as store:
        n = len(store.cells())
    with stderr_on_a_terminal() as terminal:
        assert main(["concurrency", "--store", article_store]) == 0
    on_a_terminal = capsys.readouterr().out
    assert f"reading cells from {article_store}" in terminal.getvalue()
    assert f"computing in-flight levels over {n:,} cells" in terminal.getvalue()
    assert f"laying out the tables of {n:,} cells" in terminal.getvalue()

    assert main(["concurrency", "--store", article_store]) == 0
    captured = capsys.readouterr()
    assert captured.out == on_a_terminal
    assert captured.err == ""  # nothing drawn where stderr is not a terminal


@pytest.mark.parametrize(
    ("argv", "phase"),
    [
        (["neighbour-cost", "--eval", "qwen-serial"], "pricing neighbours of qwen-serial over"),
        (["advise"], "computing the queue rules over"),
    ],
)
def test_store_commands_name_their_phase_on_a_terminal(
    argv: list[str], phase: str, article_store: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with stderr_on_a_terminal() as terminal:
        assert main([*argv, "--store", article_store]) == 0
    assert phase in terminal.getvalue()
    assert main([*argv, "--store", article_store]) == 0
    assert capsys.readouterr().err == ""


def test_report_names_its_phases_on_a_terminal(tmp_path: Path) -> None:
    cells, windows = report_records()
    path = tmp_path / "s.sqlite"
    with Store(path) as store:
        store.write_cells(cells)
        store.write_windows(windows)
    with stderr_on_a_terminal() as terminal:
        assert main(["report", "--store", str(path), "--out", str(tmp_path / "r")]) == 0
    drawn = terminal.getvalue()
    for text in (f"reading {path}", f"computing the analyses over {len(cells):,} cells", "drawing the plots"):
        assert text in drawn


def test_backfill_names_each_file_on_a_terminal(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["backfill", str(SERIAL), str(CSV), "--mapping", "spark-bench", "--dry-run", "--json"]
    with stderr_on_a_terminal() as terminal:
        assert main(args) == 1  # the CSV's rows do not fit the mapping
    drawn = terminal.getvalue()
    assert f"reading {SERIAL} (1 of 2 files)" in drawn
    assert f"reading {CSV} (2 of 2 files)" in drawn
    assert f"spark-otel: error: {CSV}:" in drawn  # the rejected records, said once the spinner is gone
    json.loads(capsys.readouterr().out)  # stdout is the JSON alone


def test_ingest_nsight_names_each_capture_on_a_terminal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.support.nsight import small_capture

    path, _, _ = small_capture(tmp_path, "raw")
    with stderr_on_a_terminal() as terminal:
        assert main(["ingest-nsight", str(path), "--store", str(tmp_path / "s.sqlite")]) == 0
    drawn = terminal.getvalue()
    assert f"reading {path} (1 of 1 captures)" in drawn
    assert f"storing the series of {path}" in drawn
    assert "raw.sqlite" in capsys.readouterr().out  # the summary table, on stdout as ever
