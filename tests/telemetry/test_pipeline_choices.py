"""What the pipeline records to for each setting: the store, OTLP, or both, decided from the
arguments first and the environment second, and who closes a store handed in."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from spark_otel.store import STORE_ENV, Store
from spark_otel.telemetry.pipeline import Telemetry, _pipeline

ENDPOINTS = (
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
)


@pytest.fixture(autouse=True)
def _nothing_set(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (*ENDPOINTS, STORE_ENV, "OTEL_EXPORTER_OTLP_PROTOCOL"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def built() -> Iterator[list[Telemetry]]:
    made: list[Telemetry] = []
    yield made
    for telemetry in made:
        telemetry.shutdown()


def _where(built: list[Telemetry], *args: object) -> tuple[Path | None, bool, bool]:
    telemetry = _pipeline(None, *args)  # type: ignore[arg-type]
    built.append(telemetry)
    return (telemetry.store.path if telemetry.store else None, telemetry.otlp, telemetry.owns_store)


def test_without_an_endpoint_everything_goes_to_the_store(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, built: list[Telemetry]
) -> None:
    monkeypatch.setenv(STORE_ENV, str(tmp_path / "env.sqlite"))
    assert _where(built, None, None, None) == (tmp_path / "env.sqlite", False, True)
    assert _where(built, str(tmp_path / "given.sqlite"), None, None) == (
        tmp_path / "given.sqlite",
        False,
        True,
    )
    assert _where(built, False, None, None) == (None, False, True)
    assert _where(built, None, False, None) == (tmp_path / "env.sqlite", False, True)


@pytest.mark.parametrize("endpoint", ENDPOINTS)
def test_an_endpoint_for_any_signal_turns_otlp_on_and_the_store_off_unless_named(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, built: list[Telemetry], endpoint: str, free_port: int
) -> None:
    monkeypatch.setenv(endpoint, f"http://127.0.0.1:{free_port}")
    assert _where(built, None, None, None) == (None, True, True)
    monkeypatch.setenv(STORE_ENV, str(tmp_path / "env.sqlite"))
    assert _where(built, None, None, None) == (tmp_path / "env.sqlite", True, True)  # named: both
    assert _where(built, None, False, None) == (tmp_path / "env.sqlite", False, True)


def test_otlp_asked_for_without_an_endpoint_keeps_the_store(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, built: list[Telemetry]
) -> None:
    monkeypatch.setenv(STORE_ENV, str(tmp_path / "env.sqlite"))
    assert _where(built, True, True, None) == (tmp_path / "env.sqlite", True, True)
    assert _where(built, False, True, None) == (None, True, True)


def test_a_store_handed_in_is_used_and_left_to_its_owner(tmp_path: Path, built: list[Telemetry]) -> None:
    with Store(tmp_path / "mine.sqlite") as mine:
        telemetry = _pipeline(None, mine, False, None)
        assert (telemetry.store, telemetry.owns_store, telemetry.otlp) == (mine, False, False)
        telemetry.shutdown()
        assert mine.write_windows([]) == 0  # still open: the caller closes it
