"""Load windows from cells, on plain cells: the names a person reads, where a run ends, and the
gap that joins cells into one load."""

from __future__ import annotations

import pytest
from tests.support.cells import S, cell

from spark_otel import ConfigError
from spark_otel.analysis.windows import merge_gap_ns, peak_concurrency, split_at_gaps, windows_from_cells


def test_a_window_is_named_by_its_eval_worker_count_and_engine() -> None:
    cells = [
        cell("one", 0, 10, workers=1),
        cell("four", 100, 110, workers=4, engine=None),
        cell("two", 200, 210, workers=2, eval_name="h"),
        cell("unknown", 300, 310),
        cell("empty", 400, 400, eval_name="z"),  # no duration: no window
    ]
    assert [(w.name, w.streams, w.engine) for w in windows_from_cells(cells)] == [
        ("g eval, 1 worker on q", 1, "q"),
        ("g eval, 4 workers", 4, None),
        ("h eval, 2 workers on q", 2, "q"),
        ("g eval on q", 1, "q"),  # no worker count: the most cells in flight at once
    ]


def test_cells_join_a_run_up_to_the_gap_after_its_latest_end() -> None:
    def spans(items: list[tuple[int, int]], gap: int) -> list[list[tuple[int, int]]]:
        return split_at_gaps(items, gap, lambda x: x)

    assert spans([(10, 20), (0, 30), (30, 40)], 0) == [[(0, 30), (10, 20), (30, 40)]]  # touching joins
    assert spans([(0, 10), (15, 20)], 5) == [[(0, 10), (15, 20)]]  # exactly the gap after
    assert spans([(0, 10), (16, 20)], 5) == [[(0, 10)], [(16, 20)]]
    assert spans([(0, 100), (10, 20), (104, 110)], 5) == [[(0, 100), (10, 20), (104, 110)]]  # the latest end
    assert spans([(1, 2)], 0) == [[(1, 2)]]
    assert spans([], 5) == []


def test_the_merge_gap_is_seconds_never_negative() -> None:
    assert merge_gap_ns(0) == 0
    assert merge_gap_ns(0.5) == 500_000_000
    assert merge_gap_ns(60) == 60 * S
    for bad in (-1.0, float("nan")):
        with pytest.raises(ConfigError, match=f"merge gap {bad} s must not be negative"):
            merge_gap_ns(bad)


def test_the_peak_counts_what_is_open_after_earlier_intervals_closed() -> None:
    assert peak_concurrency([(0, 10), (20, 30), (25, 35)]) == 2
    assert peak_concurrency([(0, 10), (5, 5), (6, 6)]) == 1  # zero-length intervals are nothing
