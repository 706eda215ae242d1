"""Which columns of a list fit a terminal: all of them while they fit, else the highest priority
number left out first (the rightmost of a priority first), never a priority-0 column; widths in
terminal cells."""

from __future__ import annotations

import pytest

from spark_otel.views.layout import Fit, display_width, fit_columns

COLUMNS = ["eval", "cell", "engine", "status", "started (UTC)"]
ROWS = [["golden-review", "B#265", "qwen", "ok", "2026-09-19 23:20:00"]]
# Longest line per column: 13, 5, 6, 6, 19 (the header where it is longer); 3 cells a column + 1.
ALL = 13 + 5 + 6 + 6 + 19 + 3 * 5 + 1


def test_every_column_while_all_fit() -> None:
    assert fit_columns(COLUMNS, ROWS, ALL, [0, 0, 1, 0, 1]) == Fit((0, 1, 2, 3, 4), ())


def test_the_highest_priority_number_goes_first_and_the_rightmost_of_one_priority() -> None:
    assert fit_columns(COLUMNS, ROWS, ALL - 1, [0, 0, 1, 0, 1]) == Fit((0, 1, 2, 3), (4,))
    assert fit_columns(COLUMNS, ROWS, ALL - 1, [0, 0, 2, 0, 1]) == Fit((0, 1, 3, 4), (2,))
    assert fit_columns(COLUMNS, ROWS, 10, [0, 0, 1, 0, 1]) == Fit((0, 1, 3), (2, 4))


def test_priority_zero_columns_stay_however_narrow() -> None:
    assert fit_columns(COLUMNS, ROWS, 1, [0, 0, 0, 0, 0]) == Fit((0, 1, 2, 3, 4), ())


def test_a_priority_per_column_is_required() -> None:
    with pytest.raises(ValueError, match="5 columns but 2 priorities"):
        fit_columns(COLUMNS, ROWS, 80, [0, 1])


def test_a_wide_character_takes_two_cells_and_a_combining_mark_none() -> None:
    assert display_width("tok/s") == 5
    assert display_width("評価") == 4
    assert display_width("e\u0301") == 1


def test_a_header_wraps_at_its_spaces_so_its_longest_word_is_what_it_needs() -> None:
    columns = ["streams", "per-stream tok/s (median)"]
    rows = [["1", "11.14"]]
    # 7 + 10 ("per-stream") + 3 * 2 + 1 = 24: both fit at 24 columns, the second header wrapped.
    assert fit_columns(columns, rows, 24, [0, 1]) == Fit((0, 1), ())
    assert fit_columns(columns, rows, 23, [0, 1]) == Fit((0,), (1,))
