"""The bounds every number spark-otel reads must keep (`_validate`), each refusal's exact words:
readers put their own place in front of them, so the words are what the user reads."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from spark_otel import ConfigError
from spark_otel._validate import (
    EARLIEST_NS,
    LATEST_NS,
    MAX_COUNT,
    check_cell_arguments,
    check_count,
    check_time_ns,
    finite_number,
    year_of,
)

YEAR_NS = 31_556_952 * 10**9  # the mean Gregorian year, as year_of counts past datetime's range


def _refusal(call: Callable[[], object]) -> str:
    """The words of the ValueError ``call`` raises."""
    try:
        call()
    except ValueError as exc:
        return str(exc)
    raise AssertionError("not refused")


@pytest.mark.parametrize(("value", "want"), [(3, 3.0), (2.5, 2.5), (-1, -1.0), (0, 0.0)])
def test_a_finite_number_is_taken_as_a_float(value: Any, want: float) -> None:
    got = finite_number(value, "x")
    assert (got, type(got)) == (want, float)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (True, "tokens is True, not a number"),
        ("5", "tokens is '5', not a number"),
        (None, "tokens is None, not a number"),
        (10**400, f"tokens is {10**400!r}, too large for a number"),
        (math.inf, "tokens is inf; expected a finite number"),
        (math.nan, "tokens is nan; expected a finite number"),
    ],
)
def test_a_number_that_is_not_finite_is_refused_by_name(value: Any, message: str) -> None:
    assert _refusal(lambda: finite_number(value, "tokens")) == message


@pytest.mark.parametrize(("value", "want"), [(0, 0), (7, 7), (2.0, 2), (MAX_COUNT - 1, MAX_COUNT - 1)])
def test_a_count_is_a_whole_number_below_2_to_the_53(value: Any, want: int) -> None:
    got = check_count(value, "n")
    assert (got, type(got)) == (want, int)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (False, "n is False, not a number"),
        ("3", "n is '3', not a number"),
        (2.5, "n is 2.5, not a whole number"),
        (math.inf, "n is inf, not a whole number"),
        (math.nan, "n is nan, not a whole number"),
        (-1, "n is -1; expected a whole number from 0 to 2**53"),
        (MAX_COUNT, f"n is {MAX_COUNT}; expected a whole number from 0 to 2**53"),
        (10**400, f"n is {10**400}; expected a whole number from 0 to 2**53"),
    ],
)
def test_a_count_out_of_bounds_is_refused_by_name(value: Any, message: str) -> None:
    assert _refusal(lambda: check_count(value, "n")) == message


@pytest.mark.parametrize("ns", [EARLIEST_NS, LATEST_NS - 1, 1_764_800_000 * 10**9])
def test_a_time_from_2000_to_2100_is_taken(ns: int) -> None:
    assert check_time_ns(ns, "t") == ns


@pytest.mark.parametrize(
    ("ns", "message"),
    [
        (1.5e18, "start is 1.5e+18, not a whole number of nanoseconds"),
        (True, "start is True, not a whole number of nanoseconds"),
        (EARLIEST_NS - 1, "start reads as the year 1999, outside 2000-2100"),
        (LATEST_NS, "start reads as the year 2100, outside 2000-2100"),
        (1_764_800_000, "start reads as the year 1970, outside 2000-2100"),  # seconds, not ns
        (1_764_800_000 * 10**12, "start reads as the year ~57894, outside 2000-2100"),  # ps
    ],
)
def test_a_time_outside_2000_to_2100_names_the_year_it_reads_as(ns: Any, message: str) -> None:
    assert _refusal(lambda: check_time_ns(ns, "start")) == message


@pytest.mark.parametrize(
    ("ns", "want"),
    [
        (100_000 * YEAR_NS, "~101970"),  # past datetime's year 9999: counted in mean years
        (-100_000 * YEAR_NS, "~-98030"),
        (998_030 * YEAR_NS, "~1e+06"),  # a million years on: three figures
        (997_030 * YEAR_NS, "~999000"),
        (int(898_030.51 * YEAR_NS), "~900001"),
        (10**30, "~3.17e+13"),
        (-(10**30), "~-3.17e+13"),
    ],
)
def test_a_year_past_the_calendar_is_counted_in_mean_years(ns: int, want: str) -> None:
    assert year_of(ns) == want


@pytest.fixture
def tokyo(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("TZ", "Asia/Tokyo")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def test_the_year_is_the_utc_year_in_any_time_zone(tokyo: None) -> None:
    assert year_of(EARLIEST_NS - 3_600 * 10**9) == "1999"  # 08:00 on 1 January 2000 in Tokyo


@pytest.mark.parametrize(
    "kwargs",
    [
        {"eval_name": "golden"},
        {"eval_name": "golden", "cell_id": "B#1", "engine": "qwen", "deadline_s": 0.5, "workers": 1},
        {"eval_name": "golden", "deadline_s": 1800, "workers": MAX_COUNT - 1},
        {"eval_name": "golden", "max_tokens": 1},
    ],
)
def test_good_cell_arguments_pass(kwargs: dict[str, Any]) -> None:
    check_cell_arguments(**kwargs)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"eval_name": 5}, "cell(eval_name=5): expected a non-empty string"),
        ({"eval_name": " "}, "cell(eval_name=' '): expected a non-empty string"),
        ({"eval_name": "e", "cell_id": 7}, "cell(cell_id=7): expected a non-empty string or None"),
        ({"eval_name": "e", "cell_id": ""}, "cell(cell_id=''): expected a non-empty string or None"),
        ({"eval_name": "e", "engine": 1}, "cell(engine=1): expected a non-empty string or None"),
        ({"eval_name": "e", "engine": "\t"}, "cell(engine='\\t'): expected a non-empty string or None"),
        *(
            (
                {"eval_name": "e", "deadline_s": bad},
                f"cell(deadline_s={bad!r}): expected a finite number of seconds > 0",
            )
            for bad in (True, "30", 0, -1, math.inf, math.nan)
        ),
        *(
            ({"eval_name": "e", "workers": bad}, f"cell(workers={bad!r}): expected a whole number >= 1")
            for bad in (True, 2.0, "2", 0, MAX_COUNT)
        ),
        *(
            (
                {"eval_name": "e", "max_tokens": bad},
                f"cell(max_tokens={bad!r}): expected a whole number >= 1 or None",
            )
            for bad in (True, 2.0, "2", 0, -1)
        ),
    ],
)
def test_a_bad_cell_argument_is_refused_naming_it(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        check_cell_arguments(**kwargs)
    assert str(caught.value) == message
