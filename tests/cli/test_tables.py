"""`print_table`: as wide as COLUMNS or rich's default, never a word cut where the words fit,
numbers right-aligned and text left-aligned per column, terms explained once; model-time labels."""

from __future__ import annotations

import pytest
from tests.support.printed import rows_of

from spark_otel import _semconv as sc
from spark_otel.cli import reset_notes
from spark_otel.cli._common import print_table
from spark_otel.model import Cell
from spark_otel.views.tables import model_time, seconds, time_scales

EVAL = "golden-review-security-run-2026"  # one word, 31 characters
EVIDENCE = (
    "predicted 4.7x wall over serial from the probe curve measured on qwen at 1, 2, 4 and 8 streams, "
    "with no added timeouts under the per-cell ceiling; the serial run of the same cells took "
    "8,507 seconds against 1,801 at eight workers, which is what the recommendation rests upon"
)


def _lines(out: str) -> list[str]:
    return out.rstrip("\n").split("\n")


@pytest.mark.parametrize("width", [60, 200])
def test_a_long_name_stays_whole_and_no_line_is_wider_than_columns(
    width: int, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("COLUMNS", str(width))
    print_table("queue rules", ["eval", "evidence", "cells"], [[EVAL, EVIDENCE, 8], ["qwen-ab", "-", 12]])
    out = capsys.readouterr().out
    lines = _lines(out)
    assert max(len(line) for line in lines) <= width
    assert any(EVAL in line for line in lines)  # the name whole, on one line
    words = [word for line in lines for word in line.replace("│", " ").split()]
    for word in EVIDENCE.split():  # the evidence wraps at spaces, never inside a word
        assert word in words


def test_at_rich_default_width_without_columns_or_a_terminal(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from rich.console import Console

    monkeypatch.delenv("COLUMNS")
    default = Console().width  # what rich reads with nothing to say otherwise (80 when nothing does)
    print_table("queue rules", ["eval", "evidence"], [[EVAL, EVIDENCE]])
    lines = _lines(capsys.readouterr().out)
    assert max(len(line) for line in lines) == default  # the table used the whole width, no more
    assert any(EVAL in line for line in lines)


def test_a_table_whose_words_cannot_fit_side_by_side_prints_each_row_as_lines(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("COLUMNS", "60")
    columns = ["eval", "cell", "engine", "status", "output tok", "tok/s"]
    rows = [
        [EVAL, "B #454 security run2", "nemotron", "deadline", "5,690", "5.25"],
        ["qwen-ab", "F #11", "qwen", "ok", "3,563", "10.14"],
    ]
    print_table("cells", columns, rows)
    lines = _lines(capsys.readouterr().out)
    assert max(len(line) for line in lines) <= 60
    assert lines[0] == "cells"
    for row in rows:  # one line per column: the header, then its value whole
        for column, value in zip(columns, row, strict=True):
            assert any(line.split() == [*column.split(), *value.split()] for line in lines), (column, value)
    assert lines.count("") == 2  # the title and the two rows, apart


def test_fitting_or_not_is_the_words_and_no_cut_in_either(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    columns, rows = ["eval", "cells"], [[EVAL, "8"]]
    fits = len(EVAL) + len("cells") + 3 * 2 + 1
    for width, drawn_as_table in ((fits, True), (fits - 1, False)):
        monkeypatch.setenv("COLUMNS", str(width))
        print_table(None, columns, rows)
        out = capsys.readouterr().out
        assert ("│" in out) is drawn_as_table, width
        assert any(EVAL in line for line in _lines(out))
        assert max(len(line) for line in _lines(out)) <= width


def _alignment(out: str, column: int) -> set[str]:
    """How each body cell of ``column`` sits in its space: "left", "right" (or "full")."""
    found = set()
    for line in out.splitlines():
        if line.startswith("│"):
            cell = line[1:-1].split("│")[column]
            value = cell.strip()
            if len(value) + 2 == len(cell):
                found.add("full")
            elif cell.startswith(" " + value):
                found.add("left")
            else:
                assert cell.endswith(value + " ")
                found.add("right")
    return found


def test_numbers_are_right_aligned_and_text_left_aligned_column_by_column(
    capsys: pytest.CaptureFixture[str],
) -> None:
    rows = [
        ["1", "golden", "ok", "11.57", "-", "4.7x", "2026-09-17 06:39", "54 !", "1 more qwen stream"],
        ["16", "a-much-longer-eval", "timeout", "-", "10.20 to 10.25", "12.0x (other cells)", "-", "5", "x"],
        ["2 #2", "qwen-ab", "failed", "9.20", "-", "-", "2026-09-18 07:00", "-", "4 more qwen streams"],
    ]
    columns = ["streams", "eval", "status", "tok/s", "range tok/s", "speedup", "started", "cost %", "load"]
    print_table(None, columns, rows)
    out = capsys.readouterr().out
    assert [_alignment(out, i) - {"full"} for i in range(len(columns))] == [
        {"right"},  # a numeric first column too
        {"left"},
        {"left"},
        {"right"},
        {"right"},
        {"right"},
        {"left"},  # dates are text
        {"right"},
        {"left"},  # names that start with a count are text
    ]


def test_each_term_is_explained_once_under_the_first_table_that_uses_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    reset_notes()
    print_table("one", ["streams", "engine/probe"], [[1, "1.00"]], notes={"streams": "concurrent streams"})
    print_table("two", ["streams", "engine/probe"], [[2, "2.00"]])
    out = capsys.readouterr().out
    first, second = out.split("two", 1)
    assert "engine/probe: the engine's own generation counter over the probe's tokens" in first
    assert "streams: concurrent streams" in first
    assert "engine/probe:" not in second
    assert "streams:" not in second
    reset_notes()  # a new command run explains them again
    print_table("three", ["engine/probe"], [["1.00"]])
    assert "engine/probe: " in capsys.readouterr().out


def _cell(uid: str, scale: float | None) -> Cell:
    attributes = {} if scale is None else {sc.TIME_SCALE: scale}
    return Cell(
        uid=uid, eval_name="e", cell_id=uid, start_unix_ns=0, end_unix_ns=10**9, attributes=attributes
    )


def test_model_time_is_named_with_its_speed_and_a_mix_says_which_cells() -> None:
    assert time_scales([_cell("a", None), _cell("b", 100.0), _cell("c", 100.0)]) == [1.0, 100.0]
    assert model_time([1.0, None]) == ""
    assert seconds([1.0]) == "s"
    assert model_time([100.0]) == " (model time, 100x)"
    assert seconds([100.0]) == "model s"
    assert model_time(time_scales([_cell("a", None), _cell("b", 25.0)])) == (
        " (model time, 25x, for the cells recorded under a model clock)"
    )


def test_rows_of_reads_back_what_print_table_drew(capsys: pytest.CaptureFixture[str]) -> None:
    print_table("t", ["a", "b"], [["x y", 1], [None, "-"]])
    assert rows_of(capsys.readouterr().out) == [["x y", "1"], ["", "-"]]


@pytest.fixture
def model_time_store(tmp_path) -> str:
    """The article's cells as if recorded against the simulated box at 100x."""
    from tests.support.article import appendix_c_cells, appendix_d_cells, appendix_d_loads

    from spark_otel.store import Store

    probes, others = appendix_d_loads()
    cells = appendix_c_cells() + appendix_d_cells() + others
    path = tmp_path / "model.sqlite"
    with Store(path) as store:
        store.write_cells(
            [c.model_copy(update={"attributes": {**c.attributes, sc.TIME_SCALE: 100.0}}) for c in cells]
        )
        store.write_windows(probes)
    return str(path)


COMMANDS = [
    (["cells"], "elapsed model s"),
    (["concurrency", "--cells"], "wall model s"),
    (["neighbour-cost", "--eval", "qwen-serial"], "elapsed model s"),
    (["advise"], "1,800 model s per-cell ceiling"),
]


@pytest.mark.parametrize(("argv", "header"), COMMANDS)
def test_figures_in_model_time_say_so(
    argv: list[str], header: str, model_time_store: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from spark_otel.cli import main

    assert main([*argv, "--store", model_time_store]) == 0
    out = capsys.readouterr().out
    assert "(model time, 100x)" in out
    assert header in out


@pytest.mark.parametrize(("argv", "header"), COMMANDS)
def test_figures_in_real_time_say_nothing_of_it(
    argv: list[str], header: str, article_store: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from spark_otel.cli import main

    assert main([*argv, "--store", article_store]) == 0
    out = capsys.readouterr().out
    assert "model time" not in out
    assert "model s" not in out
    assert header.replace("model s", "s") in out


def test_tables_held_are_laid_out_at_once_and_written_unchanged_at_the_end(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from spark_otel.cli._common import tables_held

    def both() -> None:
        print_table("one", ["eval", "engine/probe"], [[EVAL, "1.00"]])
        print_table("two", ["eval", "cells"], [["qwen-ab", 3]])

    reset_notes()
    both()
    direct = capsys.readouterr().out
    reset_notes()
    with tables_held():
        both()
        assert capsys.readouterr().out == ""  # nothing written while the block runs
    assert capsys.readouterr().out == direct


def test_headers_wrap_before_a_cell_does(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("COLUMNS", "32")  # room for the cells whole only if the headers give way
    print_table(
        None,
        ["per-stream tok/s (median)", "p10 to p90 tok/s (of each stream)"],
        [["11.06", "10.20 to 10.25"]],
    )
    lines = _lines(capsys.readouterr().out)
    assert max(len(line) for line in lines) <= 32
    assert any("10.20 to 10.25" in line for line in lines)
    assert any("per-stream" in line for line in lines)  # header words whole too
