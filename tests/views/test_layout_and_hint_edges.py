"""Edges of the views' layout: a combining mark inside a word and a fullwidth letter take their
terminal cells, a row shorter than the columns fits, a hint never breaks a word longer than the
line, and a request standing in for a cell is marked as one in the timeouts table."""

from __future__ import annotations

from spark_otel.analysis.timeouts import TimeoutKind, TimeoutVerdict, Unjudged
from spark_otel.views.hints import wrap
from spark_otel.views.layout import Fit, display_width, fit_columns
from spark_otel.views.requests import cell_label
from spark_otel.views.timeouts import timeouts_table


def test_a_combining_mark_takes_no_cell_and_the_characters_after_it_count() -> None:
    assert display_width("e\u0301te") == 3


def test_a_fullwidth_letter_takes_two_cells() -> None:
    assert display_width("\uff21\uff22") == 4


def test_a_row_shorter_than_the_columns_fits_by_the_cells_it_has() -> None:
    assert fit_columns(["eval", "note"], [["golden-review"]], 80, [0, 1]) == Fit((0, 1), ())


def test_a_word_longer_than_the_line_is_kept_whole_on_a_line_of_its_own() -> None:
    path = "/var/lib/spark-otel/stores/a-very-long-store-name.sqlite"
    assert wrap(f"see {path} now", 20).splitlines() == ["see", f"  {path}", "  now"]


def test_a_request_standing_in_for_a_cell_is_marked_in_the_timeouts_table() -> None:
    verdict = TimeoutVerdict(
        uid="u", eval_name="g", cell_id="r1", engine="q", start_unix_ns=0, elapsed_s=60.0, ceiling_s=60.0,
        completion_tokens=100, rate=1.0, baseline_rate=None, baseline_n=0, share_of_baseline=None,
        share_cells=None, loads=[], admission_s=None, needed_at_baseline_s=None, rerun=None,
        kind=TimeoutKind.UNKNOWN, unjudged=Unjudged.NO_BASELINE, request_as_cell=True,
    )  # fmt: skip
    _, [row] = timeouts_table([verdict])
    assert row[0] == cell_label("r1", request_as_cell=True)
    assert row[0] != cell_label("r1", request_as_cell=False)
