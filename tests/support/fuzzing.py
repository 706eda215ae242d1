"""What the fuzz suites share: one hypothesis profile, a per-call time bound, hostile values.

Every property ends in a result or one of spark-otel's own errors naming the input, never
another exception, and within `TIME_BOUND_S` per call (hypothesis' own deadline is off: a
loaded 2-core CI machine makes it flaky; the bound here is per reader call, and generous).
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from typing import Any, TypeVar

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

T = TypeVar("T")

TIME_BOUND_S = 3.0
"""One reader call on a fuzzed input (a few KB) takes milliseconds; seconds means a hang."""

FUZZ = settings(
    max_examples=int(os.environ.get("SPARK_OTEL_FUZZ_EXAMPLES", "120")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
"""The profile of every property here: the whole suite in well under a minute on a loaded 2-core
box. ``SPARK_OTEL_FUZZ_EXAMPLES=2000`` searches deeper, by hand."""


def timed(call: Callable[[], T], what: str, bound_s: float = TIME_BOUND_S) -> T:
    """``call()``'s result; fails the test when it took longer than ``bound_s``. An exception
    passes through (the caller decides whether its type is allowed), timed all the same."""
    start = time.perf_counter()
    try:
        return call()
    finally:
        took = time.perf_counter() - start
        assert took < bound_s, f"{what} took {took:.2f} s (bound {bound_s} s)"


def finite_or_none(value: Any) -> bool:
    return value is None or (isinstance(value, int | float) and math.isfinite(value))


# -- hostile values ------------------------------------------------------------------------------------
HOSTILE_TEXT = st.sampled_from(
    [
        "",
        " ",
        "\t\n",
        "NaN",
        "nan",
        "inf",
        "-Infinity",
        "-1",
        "0",
        "1e400",
        "1,234",
        "0x10",
        "²",
        "1" * 400,
        "2026-09-17T06:39:00Z",
        "2026-09-17T06:39:00",
        "9999-12-31T23:59:59+00:00",
        "0001-01-01T00:00:00+14:00",
        "1789786000",
        "1789786000000",
        "1789786000000000000",
        "timeout",
        "TIMEOUT",
        "ok",
        "exploded",
        "true",
        "{",
        "}",
        "||",
        "a\x00b",
        "\ufeff",
        "\u2028",
        "é" * 3,
    ]
)
HOSTILE_NUMBERS = st.sampled_from(
    [0, -1, 1, 2**53, 2**63, 2**64, 10**30, 10**400, -(10**400), 1e300, -1e300, 1e-300, 0.5]
) | st.floats(allow_nan=True, allow_infinity=True)
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    HOSTILE_NUMBERS,
    HOSTILE_TEXT,
    st.text(max_size=20),
)
JSON_VALUES = st.recursive(
    SCALARS,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)
"""Anything `json.dumps` writes (NaN and infinities included, as Python's json does), with the
values that break number and time parsing: huge ints, non-finite floats, unit mix-ups."""
