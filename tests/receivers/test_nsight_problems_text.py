"""How a left-out row is quoted: text cut at 40 characters, and the parts of a line that are optional.

The bad-input tests see these through whole captures, where every table has a rowid and a count;
here the two functions are pinned at their edges: a value of exactly 40 and of 41 characters, a
table without rowids (no "row N"), and a caller that does not know the total (no "of n").
"""

from __future__ import annotations

from pathlib import Path

import pytest

from spark_otel.receivers.nsight.problems import left_out, shown

FORTY = "0123456789" * 4


@pytest.mark.parametrize(
    ("value", "quoted"),
    [
        (FORTY, repr(FORTY)),  # 40 characters are quoted whole
        (FORTY + "X", repr(FORTY + "...")),  # the 41st is cut, and the cut is marked
        (None, "NULL"),
        (b"\x00\x01\x02", "a 3-byte blob"),
        (2.5, "2.5"),
    ],
)
def test_a_value_is_quoted_whole_up_to_40_characters_and_cut_after(value: object, quoted: str) -> None:
    assert shown(value) == quoted


def test_a_table_without_rowids_and_an_unknown_total_leave_those_parts_out() -> None:
    path = Path("/captures/a.sqlite")
    assert left_out(path, "GPU_METRICS", None, "value is NULL, not a number", bad=1, total=None) == (
        "/captures/a.sqlite: GPU_METRICS: value is NULL, not a number (1 row left out)"
    )
    assert left_out(path, "GPU_METRICS", 7, "typeId is 'x', not an integer", bad=1234, total=None) == (
        "/captures/a.sqlite: GPU_METRICS row 7: typeId is 'x', not an integer (1,234 rows left out)"
    )
    assert left_out(path, "GPU_METRICS", 0, "p", bad=2, total=12_345) == (
        "/captures/a.sqlite: GPU_METRICS row 0: p (2 rows of 12,345 left out)"
    )
