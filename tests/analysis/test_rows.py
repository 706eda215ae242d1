"""Rows built in bulk without validation behave exactly as validated instances: equal, hashed,
copied, dumped and pickled alike (`spark_otel.analysis._rows` relies on this)."""

from __future__ import annotations

import copy
import pickle
from typing import Any

from spark_otel.analysis._rows import rows
from spark_otel.analysis.stats import RateSummary
from spark_otel.model import LoadWindow

VALUES: dict[str, Any] = {
    "uid": "w",
    "name": "g eval",
    "kind": "eval",
    "engine": "q",
    "start_unix_ns": 0,
    "end_unix_ns": 10,
    "streams": 2,
    "attributes": {"cells": 3},
}


def test_a_row_is_what_validation_would_have_built() -> None:
    validated = LoadWindow(**VALUES)
    (row,) = rows(LoadWindow, [dict(VALUES)])
    assert row == validated
    assert repr(row) == repr(validated)
    assert row.model_dump() == validated.model_dump()
    assert row.model_fields_set == validated.model_fields_set
    assert row.model_copy(update={"name": "h"}) == validated.model_copy(update={"name": "h"})
    assert copy.deepcopy(row) == validated
    assert pickle.loads(pickle.dumps(row)) == validated
    frozen = rows(
        RateSummary,
        [{"n": 1, "median": 2.0, "p10": 2.0, "p90": 2.0, "mean": 2.0, "ci_low": None, "ci_high": None}],
    )
    assert hash(frozen[0]) == hash(RateSummary(n=1, median=2.0, p10=2.0, p90=2.0, mean=2.0))


def test_each_dict_becomes_one_row_in_order() -> None:
    made = rows(LoadWindow, [VALUES | {"uid": str(k)} for k in range(3)])
    assert [w.uid for w in made] == ["0", "1", "2"]
    assert rows(LoadWindow, []) == []
