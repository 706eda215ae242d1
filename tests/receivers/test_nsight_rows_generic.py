"""GENERIC_EVENTS rows and values left out: the message each kind of damage gets, word for word.

The bad-input tests name one bad JSON, one NULL time and one text value; these pin the rest of
the branches: a bad typeId, a bad time with bad JSON (the time is named), a time outside
2000-2100, arrays and objects where a number belongs, several bad values (plural), and a bad
value in the row whose rowid is 0 (still reported).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.support.nsight import SESSION_START_UNIX_NS, damaged

from spark_otel._validate import EARLIEST_NS
from spark_otel.receivers.nsight import read_capture

BEFORE_2000 = EARLIEST_NS - SESSION_START_UNIX_NS - 1  # 1999-12-31 23:59:59.999999999
SET_SM_ISSUE = "UPDATE GENERIC_EVENTS SET data = json_set(data, '$.\"SM Issue\"', {}) WHERE rowid {}"


@pytest.mark.parametrize(
    ("sql", "line", "samples"),
    [
        (
            "UPDATE GENERIC_EVENTS SET typeId = NULL WHERE rowid = 2",
            "row 2: typeId is NULL, not an integer (1 row of 50 left out)",
            49,
        ),
        (
            "UPDATE GENERIC_EVENTS SET timestamp = NULL, data = '[1]' WHERE rowid = 2",
            "row 2: timestamp is NULL, not an integer (1 row of 50 left out)",
            49,
        ),
        (
            f"UPDATE GENERIC_EVENTS SET timestamp = {BEFORE_2000} WHERE rowid = 2",
            f"row 2: timestamp {BEFORE_2000} reads as the year 1999, outside 2000-2100 "
            "(1 row of 50 left out)",
            49,
        ),
        (
            SET_SM_ISSUE.format("json('[1, 2]')", "= 2"),
            "row 2: 'SM Issue' is a JSON array, not a finite number (1 value left out)",
            49,
        ),
        (
            SET_SM_ISSUE.format("json('{\"a\": 1}')", "= 2"),
            "row 2: 'SM Issue' is a JSON object, not a finite number (1 value left out)",
            49,
        ),
        (
            SET_SM_ISSUE.format("'high'", "IN (2, 3)"),
            "row 2: 'SM Issue' is text 'high', not a finite number (2 values left out)",
            48,
        ),
        (  # rowid 0 is a row like any other, not "no bad value"
            "UPDATE GENERIC_EVENTS SET rowid = 0 WHERE rowid = 2; " + SET_SM_ISSUE.format("'high'", "= 0"),
            "row 0: 'SM Issue' is text 'high', not a finite number (1 value left out)",
            49,
        ),
    ],
)
def test_a_bad_generic_event_or_value_gets_its_own_message(
    captures: dict[str, Path], tmp_path: Path, sql: str, line: str, samples: int
) -> None:
    path = damaged(captures, tmp_path, "generic", sql)
    capture = read_capture(path)
    assert capture.skipped == [f"{path}: GENERIC_EVENTS {line}"]
    assert capture.summary.metric("SM Issue").samples == samples
