"""The clock a process runs on, as `configure()` takes it: given (``clock=``), or from the
environment (``SPARK_OTEL_CLOCK``; ``SPARK_OTEL_TIME_SCALE``, its older spelling, with a warning),
held for the pipeline's life; each bad setting refused with the setting named; 0.1's
``SPARK_OTEL_MODEL_CLOCK`` read no more, and a warning naming what replaces it."""

from __future__ import annotations

import time

import pytest

from spark_otel import ConfigError, _clock
from spark_otel._clock import CLOCK_ENV, Clock
from spark_otel.telemetry import configure
from spark_otel.telemetry.pipeline import RETIRED_MODEL_CLOCK_ENV, TIME_SCALE_ENV, _held_clock

S = _clock.NS_PER_S


@pytest.fixture(autouse=True)
def _no_clock_setting(monkeypatch: pytest.MonkeyPatch, restore_clock: None) -> None:
    for name in (CLOCK_ENV, TIME_SCALE_ENV, RETIRED_MODEL_CLOCK_ENV):
        monkeypatch.delenv(name, raising=False)


def test_a_clock_given_is_held_until_the_stack_closes() -> None:
    held = _held_clock(Clock(4.0))
    assert _clock.rate() == 4.0
    held.close()
    assert _clock.rate() == 1.0


def test_a_clock_given_wins_over_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CLOCK_ENV, "9")
    with _held_clock(Clock(4.0)):
        assert _clock.rate() == 4.0


def test_nothing_set_holds_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CLOCK_ENV, "  ")
    with _held_clock(None):
        assert _clock.rate() == 1.0


def test_the_environment_clock_is_read_at_its_rate_and_epoch(monkeypatch: pytest.MonkeyPatch) -> None:
    """A spec anchored 10 real seconds ago at 100x reads 1,000 model seconds on from its epoch: a
    runner started later joins the clock where it is now, not where it was when written."""
    epoch = 1_800_000_000 * S
    monkeypatch.setenv(CLOCK_ENV, f"100@{epoch}@{time.time_ns() - 10 * S}")
    with _held_clock(None):
        assert _clock.rate() == 100.0
        assert _clock.wall_ns() == pytest.approx(epoch + 1_000 * S, abs=S)  # a second at 100x: 10 ms real


def test_a_spec_written_by_one_clock_is_read_as_the_same_clock_by_another_process() -> None:
    written = Clock(50.0, 1_800_000_000 * S).spec()
    rate, epoch, at = written.split("@")
    assert (float(rate), int(epoch)) == (50.0, 1_800_000_000 * S)
    assert abs(int(at) - time.time_ns()) < S
    assert Clock.parse(written).epoch_now() == pytest.approx(1_800_000_000 * S, abs=S)
    assert Clock(3.0).spec() == "3.0"


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("fast", "SPARK_OTEL_CLOCK: 'fast' is not a clock: could not convert string to float: 'fast'"),
        (
            "0",
            "SPARK_OTEL_CLOCK: '0' is not a clock: a clock's rate must be a positive finite number, got 0.0",
        ),
        (
            "inf",
            "SPARK_OTEL_CLOCK: 'inf' is not a clock: "
            "a clock's rate must be a positive finite number, got inf",
        ),
        (
            "100@1",
            "SPARK_OTEL_CLOCK: '100@1' is not a clock: expected RATE (e.g. 100) or RATE@EPOCH_NS@AT_REAL_NS "
            "(what a simulated box's clock() spec() writes)",
        ),
        (
            "100@x@1",
            "SPARK_OTEL_CLOCK: '100@x@1' is not a clock: invalid literal for int() with base 10: 'x'",
        ),
    ],
)
def test_a_bad_clock_is_refused_by_name(monkeypatch: pytest.MonkeyPatch, spec: str, message: str) -> None:
    monkeypatch.setenv(CLOCK_ENV, spec)
    with pytest.raises(ConfigError) as caught:
        _held_clock(None)
    assert str(caught.value) == message
    assert _clock.rate() == 1.0


def test_the_older_time_scale_still_sets_the_rate_with_one_warning(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv(TIME_SCALE_ENV, " 4 ")
    with _held_clock(None):
        assert _clock.rate() == 4.0
    with _held_clock(None):
        pass
    assert caplog.messages == [
        "spark_otel: SPARK_OTEL_TIME_SCALE is deprecated (removed in 0.3): set SPARK_OTEL_CLOCK=4"
    ]


@pytest.mark.parametrize(
    ("scale", "message"),
    [
        ("fast", "SPARK_OTEL_TIME_SCALE='fast' is not a number (clock seconds per real second)"),
        ("0", "SPARK_OTEL_TIME_SCALE='0': a clock's rate must be a positive finite number, got 0.0"),
        ("-2", "SPARK_OTEL_TIME_SCALE='-2': a clock's rate must be a positive finite number, got -2.0"),
    ],
)
def test_a_bad_time_scale_is_refused_by_name(
    monkeypatch: pytest.MonkeyPatch, scale: str, message: str
) -> None:
    monkeypatch.setenv(TIME_SCALE_ENV, scale)
    with pytest.raises(ConfigError) as caught:
        _held_clock(None)
    assert str(caught.value) == message
    assert _clock.rate() == 1.0


def test_both_settings_at_once_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TIME_SCALE_ENV, "4")
    monkeypatch.setenv(CLOCK_ENV, "4")
    with pytest.raises(ConfigError) as caught:
        _held_clock(None)
    assert str(caught.value) == "set SPARK_OTEL_CLOCK or SPARK_OTEL_TIME_SCALE (its older spelling), not both"


def test_the_retired_model_clock_is_not_read_and_says_what_replaces_it(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, free_port: int
) -> None:
    """No request is made to the URL (nothing listens there) and the process stays on real time."""
    monkeypatch.setenv(RETIRED_MODEL_CLOCK_ENV, f"http://127.0.0.1:{free_port}")
    with _held_clock(None):
        assert _clock.rate() == 1.0
    assert caplog.messages == [
        "spark_otel: SPARK_OTEL_MODEL_CLOCK is no longer read (spark-otel 0.2): to follow a simulated box, "
        'set SPARK_OTEL_CLOCK="$(spark-otel sim --clock-of URL)" or call '
        "spark_otel.configure(clock=spark_otel.sim.follow(URL)); this process runs on real time"
    ]


def test_configure_holds_its_clock_until_its_telemetry_shuts_down() -> None:
    telemetry = configure(store=False, set_global=False, clock=Clock(25.0))
    try:
        assert _clock.rate() == 25.0
    finally:
        telemetry.shutdown()
    assert _clock.rate() == 1.0
