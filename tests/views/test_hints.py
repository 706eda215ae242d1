"""A hint line wraps at the terminal's width at spaces, never inside a word or a backticked
command, continuation lines indented two more."""

from __future__ import annotations

from spark_otel.views.hints import wrap


def test_a_hint_wraps_at_spaces_and_keeps_a_command_on_one_line() -> None:
    text = "energy: no GPU readings cover these cells; measure with `spark-otel receive --gpu auto`"
    assert wrap(text, 40) == (
        "energy: no GPU readings cover these\n  cells; measure with\n  `spark-otel receive --gpu auto`"
    )


def test_a_short_hint_is_left_as_it_is_and_an_indent_leads_every_line() -> None:
    assert wrap("note: fine", 80) == "note: fine"
    assert wrap("a b c d e f g h i j k l m n o p q r s t", 20, indent="  ") == (
        "  a b c d e f g h i\n    j k l m n o p q\n    r s t"
    )


def test_a_terminal_narrower_than_twenty_is_taken_as_twenty() -> None:
    assert wrap("one two three four five six", 5) == "one two three four\n  five six"
