"""What the table and JSON of the cells each rule catches say of a store's recorded cells
(`views.rule_catches`): an ended cell's state is "ended", not "running", and the window the
title names is in UTC whatever the machine's time zone."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.support.rule_catches import GENERAL_RULES, T0_NS, next_day_store

from spark_otel._clock import NS_PER_S
from spark_otel.governor.matching import StoreCatch, caught_in_store
from spark_otel.records.rules_file import parse_rules
from spark_otel.store import Store
from spark_otel.views.rule_catches import catches_json, store_catch_title

NEWEST_NS = T0_NS + 1000 * NS_PER_S  # a1's start: 2026-11-30 01:10:00 UTC, 10:10 in Tokyo


@pytest.fixture
def catch(tmp_path: Path) -> StoreCatch:
    with Store(next_day_store(tmp_path / "store.sqlite"), read_only=True) as store:
        return caught_in_store(parse_rules(GENERAL_RULES, where="general"), store, recent_s=24 * 3600)


@pytest.fixture
def tokyo(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("TZ", "Asia/Tokyo")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def test_every_recorded_cell_caught_has_ended(catch: StoreCatch) -> None:
    states = {(c["cell"], c["state"]) for rule in catches_json(catch.caught) for c in rule["catches"]}
    assert {cell for cell, _ in states} >= {"s1", "q1", "m1", "a1"}
    assert {state for _, state in states} == {"ended"}


def test_the_windows_ends_are_in_utc_whatever_the_machines_time_zone(catch: StoreCatch, tokyo: None) -> None:
    assert time.strftime("%H", time.localtime(NEWEST_NS / NS_PER_S)) == "10"
    since, until = re.findall(r"\d{4}-\d\d-\d\d \d\d:\d\d", store_catch_title("store.sqlite", catch))
    assert (since, until) == ("2026-11-29 01:10", "2026-11-30 01:10")
