"""`InstrumentationConfig.resolve`: every spelling each switch accepts, its default, and the exact
error or warning for what it does not (pure: resolving touches nothing but the environment)."""

from __future__ import annotations

import logging

import pytest

from spark_otel import ConfigError
from spark_otel.instrumentation._config import (
    CAPTURE_CONTENT_ENV,
    CHUNK_METRICS_ENV,
    INCLUDE_USAGE_ENV,
    TRACEPARENT_ENV,
    InstrumentationConfig,
)

# switch: (its environment variable, its value when the variable is unset or blank)
SWITCHES = {
    "capture_content": (CAPTURE_CONTENT_ENV, False),
    "include_usage": (INCLUDE_USAGE_ENV, False),
    "inject_traceparent": (TRACEPARENT_ENV, False),
    "chunk_metrics": (CHUNK_METRICS_ENV, True),
}
ON = ["1", "true", "yes", "on", "span_only", "span_and_event", " TRUE ", "Yes", "SPAN_ONLY"]
OFF = ["0", "false", "no", "off", "no_content", "event_only", " False ", "NO", "Event_Only"]


def _resolve(provider_name: str = "vllm", **switches: object) -> InstrumentationConfig:
    args = {name: switches.get(name) for name in SWITCHES}
    return InstrumentationConfig.resolve(provider_name=provider_name, **args)  # type: ignore[arg-type]


def _switches(config: InstrumentationConfig) -> dict[str, bool]:
    return {name: getattr(config, name) for name in SWITCHES}


@pytest.fixture(autouse=True)
def _no_switch_in_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for env, _ in SWITCHES.values():
        monkeypatch.delenv(env, raising=False)


def test_unset_everything_gives_the_defaults() -> None:
    config = _resolve()
    assert _switches(config) == {name: default for name, (_, default) in SWITCHES.items()}
    assert config.provider_name == "vllm"


@pytest.mark.parametrize("switch", SWITCHES)
@pytest.mark.parametrize(("raw", "expected"), [*((v, True) for v in ON), *((v, False) for v in OFF)])
def test_each_variable_sets_its_own_switch_only(
    switch: str, raw: str, expected: bool, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv(SWITCHES[switch][0], raw)
    with caplog.at_level(logging.WARNING):
        got = _switches(_resolve())
    defaults = {name: default for name, (_, default) in SWITCHES.items()}
    assert got == {**defaults, switch: expected}
    assert caplog.records == []


@pytest.mark.parametrize("switch", SWITCHES)
@pytest.mark.parametrize("raw", ["", "   "])
def test_a_blank_variable_is_the_default(switch: str, raw: str, monkeypatch: pytest.MonkeyPatch) -> None:
    env, default = SWITCHES[switch]
    monkeypatch.setenv(env, raw)
    assert getattr(_resolve(), switch) is default


@pytest.mark.parametrize("switch", SWITCHES)
def test_a_value_that_is_no_boolean_warns_once_and_keeps_the_default(
    switch: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    env, default = SWITCHES[switch]
    monkeypatch.setenv(env, " Maybe")
    with caplog.at_level(logging.WARNING):
        value = getattr(_resolve(), switch)
    assert value is default
    assert [(r.name, r.levelname, r.getMessage()) for r in caplog.records] == [
        (
            "spark_otel.instrumentation._config",
            "WARNING",
            f"{env}=' Maybe' is not a boolean; treating it as {str(default).lower()}",
        )
    ]


@pytest.mark.parametrize("switch", SWITCHES)
@pytest.mark.parametrize("value", [True, False])
def test_an_argument_wins_over_the_environment(
    switch: str, value: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(SWITCHES[switch][0], "off" if value else "on")
    assert getattr(_resolve(**{switch: value}), switch) is value


@pytest.mark.parametrize("switch", SWITCHES)
def test_an_argument_that_is_no_bool_is_refused_by_name(switch: str) -> None:
    with pytest.raises(ConfigError) as info:
        _resolve(**{switch: 1})
    assert str(info.value) == f"instrument({switch}=1): expected True, False or None"


def test_the_provider_name_is_stripped_and_must_be_a_non_empty_string() -> None:
    assert _resolve(provider_name="  sglang\n").provider_name == "sglang"
    for bad in ["", "  ", 3]:
        with pytest.raises(ConfigError) as info:
            _resolve(provider_name=bad)  # type: ignore[arg-type]
        assert str(info.value) == f"instrument(provider_name={bad!r}): expected a non-empty string"
