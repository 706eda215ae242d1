"""The model clock the environment asks for: a time scale or a simulated box's clock, held for
the pipeline's life, and each bad setting refused with the setting named."""

from __future__ import annotations

import pytest

from spark_otel import _clock
from spark_otel._exceptions import ConfigError
from spark_otel.sim.clock import MODEL_CLOCK_ENV
from spark_otel.telemetry.pipeline import TIME_SCALE_ENV, _model_clock_from_environment


@pytest.fixture(autouse=True)
def _no_clock_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(MODEL_CLOCK_ENV, raising=False)
    monkeypatch.delenv(TIME_SCALE_ENV, raising=False)


def test_a_time_scale_is_held_until_the_stack_closes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TIME_SCALE_ENV, " 4 ")
    held = _model_clock_from_environment()
    assert _clock.time_scale() == 4.0
    held.close()
    assert _clock.time_scale() == 1.0


def test_nothing_set_holds_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TIME_SCALE_ENV, "  ")
    with _model_clock_from_environment():
        assert _clock.time_scale() == 1.0


@pytest.mark.parametrize(
    ("scale", "message"),
    [
        ("fast", "SPARK_OTEL_TIME_SCALE='fast' is not a number (model seconds per real second)"),
        ("0", "SPARK_OTEL_TIME_SCALE='0': time scale must be a positive finite number, got 0.0"),
        ("-2", "SPARK_OTEL_TIME_SCALE='-2': time scale must be a positive finite number, got -2.0"),
        ("inf", "SPARK_OTEL_TIME_SCALE='inf': time scale must be a positive finite number, got inf"),
    ],
)
def test_a_bad_time_scale_is_refused_by_name(
    monkeypatch: pytest.MonkeyPatch, scale: str, message: str
) -> None:
    monkeypatch.setenv(TIME_SCALE_ENV, scale)
    with pytest.raises(ConfigError) as caught:
        _model_clock_from_environment()
    assert str(caught.value) == message
    assert _clock.time_scale() == 1.0


def test_both_settings_at_once_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TIME_SCALE_ENV, "4")
    monkeypatch.setenv(MODEL_CLOCK_ENV, "http://127.0.0.1:8011")
    with pytest.raises(ConfigError) as caught:
        _model_clock_from_environment()
    assert (
        str(caught.value)
        == "set SPARK_OTEL_MODEL_CLOCK (follow a simulated box) or SPARK_OTEL_TIME_SCALE, not both"
    )


def test_a_box_that_does_not_answer_is_refused_by_name(
    monkeypatch: pytest.MonkeyPatch, free_port: int
) -> None:
    url = f"http://127.0.0.1:{free_port}"
    monkeypatch.setenv(MODEL_CLOCK_ENV, f" {url} ")
    with pytest.raises(ConfigError) as caught:
        _model_clock_from_environment()
    assert str(caught.value).startswith(
        f"SPARK_OTEL_MODEL_CLOCK={url!r}: {url}/sim/info: cannot read the simulated box's clock: "
    )
    assert _clock.time_scale() == 1.0
