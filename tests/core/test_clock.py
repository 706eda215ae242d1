"""The model-time clock: back on real time when the scale is reset, monotonic throughout,
anchorable to another process."""

from __future__ import annotations

import time

import pytest

from spark_otel import _clock

pytestmark = pytest.mark.usefixtures("restore_clock")


def test_model_time_runs_scale_times_faster_and_never_goes_back() -> None:
    _clock.set_time_scale(50)
    wall0, perf0 = _clock.wall_ns(), _clock.perf_ns()
    time.sleep(0.05)
    elapsed_model_s = (_clock.perf_ns() - perf0) / 1e9
    assert elapsed_model_s >= 50 * 0.05
    assert (_clock.wall_ns() - wall0) / 1e9 >= 50 * 0.05
    perf_before = _clock.perf_ns()
    _clock.set_time_scale(1)
    assert _clock.perf_ns() >= perf_before
    assert abs(_clock.wall_ns() - time.time_ns()) < 10**8
    assert _clock.to_wall_s(10) == 10
    assert _clock.to_model_s(2) == 2


def test_anchor_to_another_process_model_clock() -> None:
    anchor = time.time_ns() + 3_600 * 10**9
    _clock.set_time_scale(100, model_unix_ns=anchor)
    assert 0 <= _clock.wall_ns() - anchor < 10**9 * 100
    assert _clock.to_wall_s(100) == pytest.approx(1.0)


@pytest.mark.parametrize("scale", [0, -1, float("inf"), float("nan")])
def test_non_positive_or_infinite_scale_is_rejected(scale: float) -> None:
    with pytest.raises(ValueError, match="positive finite"):
        _clock.set_time_scale(scale)
