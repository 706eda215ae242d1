"""Polling for a condition, failing the test with what never happened rather than on stale data."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

import pytest

T = TypeVar("T")


def wait_for(predicate: Callable[[], T], what: str, timeout_s: float, interval_s: float = 0.2) -> T:
    """Poll ``predicate`` until it returns something truthy, and return that; fail the test
    saying what never happened, rather than letting a later assertion fail on stale data."""
    deadline = time.monotonic() + timeout_s
    while True:
        result = predicate()
        if result:
            return result
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout_s:g}s waiting for {what} (last: {result!r})")
        time.sleep(interval_s)
