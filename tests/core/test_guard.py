"""`report_failure`: the first failure of a kind is a WARNING naming the kind (with spark-otel's
own error as one line, anything else with its traceback), every later one a DEBUG line with
its traceback; the user's call never sees any of them."""

from __future__ import annotations

import logging

import pytest

from spark_otel import ConfigError
from spark_otel._guard import guard, report_failure


def _records(caplog: pytest.LogCaptureFixture) -> list[tuple[int, str, BaseException | None]]:
    return [
        (r.levelno, r.getMessage(), r.exc_info[1] if r.exc_info else None)
        for r in caplog.records
        if r.name == "spark_otel"
    ]


def test_the_first_failure_of_a_kind_warns_and_the_rest_are_debug_lines(
    caplog: pytest.LogCaptureFixture,
) -> None:
    first, second = RuntimeError("boom"), RuntimeError("again")
    with caplog.at_level(logging.DEBUG, logger="spark_otel"):
        report_failure("recording a span", first)
        report_failure("recording a span", second)
    assert _records(caplog) == [
        (logging.WARNING, "spark_otel: recording a span failed; the call goes on untouched", first),
        (logging.DEBUG, "spark_otel: recording a span failed", second),
    ]


def test_spark_otels_own_error_warns_in_one_line_naming_it(caplog: pytest.LogCaptureFixture) -> None:
    error = ConfigError("the store /x.sqlite is not a spark-otel store")
    with caplog.at_level(logging.DEBUG, logger="spark_otel"):
        report_failure("opening the store", error)
    assert _records(caplog) == [
        (
            logging.WARNING,
            "spark_otel: opening the store failed; the call goes on untouched: "
            "the store /x.sqlite is not a spark-otel store",
            None,
        )
    ]


def test_guard_swallows_exceptions_but_not_cancellation(caplog: pytest.LogCaptureFixture) -> None:
    with guard("a step"):
        raise ValueError("swallowed")
    with pytest.raises(KeyboardInterrupt), guard("a step"):
        raise KeyboardInterrupt
    assert [m for _, m, _ in _records(caplog)] == ["spark_otel: a step failed; the call goes on untouched"]
