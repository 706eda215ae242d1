"""Analysis results are built through their typed constructors: a field that is not theirs, or a
value of the wrong type, is refused, and a built result cannot change."""

from __future__ import annotations

import pydantic
import pytest

from spark_otel.analysis.concurrency import CellLoad
from spark_otel.model import CellStatus

FIELDS = {
    "uid": "u",
    "eval_name": "e",
    "cell_id": "c",
    "engine": "q",
    "workers": 1,
    "start_unix_ns": 0,
    "end_unix_ns": 10,
    "elapsed_s": 1e-8,
    "prompt_tokens": None,
    "completion_tokens": 3,
    "decode_rate": None,
    "status": CellStatus.OK,
    "ceiling_hit": False,
    "failed": False,
    "in_flight": 1.0,
    "level": 1,
}


def test_a_row_refuses_a_field_it_does_not_have_and_a_value_of_the_wrong_type() -> None:
    assert CellLoad(**FIELDS).uid == "u"
    with pytest.raises(pydantic.ValidationError, match=r"extra_forbidden|Extra inputs"):
        CellLoad(**FIELDS, surprise=1)
    with pytest.raises(pydantic.ValidationError, match="workers"):
        CellLoad(**FIELDS | {"workers": "two"})


def test_a_row_is_frozen() -> None:
    row = CellLoad(**FIELDS)
    with pytest.raises(pydantic.ValidationError, match="frozen"):
        row.uid = "v"  # type: ignore[misc]
