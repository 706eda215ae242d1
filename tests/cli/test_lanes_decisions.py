"""`spark-otel lanes` with a store: the adaptive governor's decisions on the latest finished cells
(tests/support/adaptive_cells, their attributes the governor's own), as a table and in --json;
the command that records them where the store holds none; a store named but missing refused;
and the verdict each cell in flight was admitted on, from the state file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.support.adaptive_cells import T0_NS, decided_run
from tests.support.cells import cell
from tests.support.snapshots import Snapshot

from spark_otel import _clock
from spark_otel.analysis.adaptive_decisions import cell_decision
from spark_otel.cli import lanes, main
from spark_otel.governor import RULES_ENV, STATE_ENV
from spark_otel.governor.decision import InFlight
from spark_otel.governor.slack import Projection, Protected, SlackReason, SlackVerdict
from spark_otel.governor.state import SharedState
from spark_otel.model import Cell
from spark_otel.records.rules_file import RulesFile
from spark_otel.store import Store


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A state file with one serial cell in use on qwen, admitted with nothing to protect, and a
    batch cell on nemotron the law admitted into its slack, read under a stopped clock (their
    leases never lapse); paths relative, so the printed titles are the same on every run."""
    monkeypatch.setattr(_clock, "real_wall_ns", lambda: T0_NS + 950 * 1_000_000_000)
    monkeypatch.setenv("COLUMNS", "110")
    monkeypatch.chdir(tmp_path)
    for name in (RULES_ENV, STATE_ENV):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("SPARK_OTEL_STORE", str(tmp_path / "elsewhere" / "store.sqlite"))
    shared = SharedState("governor.sqlite")
    try:
        flight = InFlight("qwen", "serial", None, True, deadline_s=1800.0)
        nothing = SlackVerdict(SlackReason.NOTHING_PROTECTED)
        assert shared.attempt(
            flight, "serial-2", RulesFile(), ticket=None, waited_s=0.0, judge=lambda _c, _b: nothing
        ).slot
        batch = InFlight("nemotron", "batch", None, False)
        assert shared.attempt(
            batch, "b6", RulesFile(), ticket=None, waited_s=0.0, judge=lambda _c, _b: INTO_SLACK
        ).slot
    finally:
        shared.close()
    return "governor.sqlite"


SERIAL_2 = Protected("serial-2", "qwen", "serial", 1800.0, 300.0, 4000, 9.5, 12000.0)
INTO_SLACK = SlackVerdict(
    SlackReason.SLACK, SERIAL_2, Projection("serial-2", "qwen", 1260.04, 0.299978, 8.25049)
)


def test_lanes_shows_the_verdict_each_cell_in_flight_was_admitted_on(
    state: str, snapshot: Snapshot, capsys: pytest.CaptureFixture[str]
) -> None:
    """The "admission verdict" column names the reason, the protected cell, its projected finish
    and margin and the rate used (1,260.04 s to 1,260; 29.9978% to 30%; 8.25049 to 8.3); --json
    rounds them as the span does."""
    assert main(["lanes", "--state", state]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    snapshot(out[out.index("cells in flight") :])
    assert main(["lanes", "--state", state, "--json"]) == 0
    lanes_json = {lane["engine"]: lane for lane in json.loads(capsys.readouterr().out)["lanes"]}
    assert [c["admitted_on"] for c in lanes_json["nemotron"]["in_flight"]] == [
        {
            "reason": "slack",
            "protected_cell": "serial-2",
            "projected_finish_s": 1260.04,
            "margin": 0.3,
            "rate_used_tok_s": 8.25,
        }
    ]
    assert [c["admitted_on"] for c in lanes_json["qwen"]["in_flight"]] == [
        {
            "reason": "nothing to protect",
            "protected_cell": None,
            "projected_finish_s": None,
            "margin": None,
            "rate_used_tok_s": None,
        }
    ]


def _store(path: str, cells: list[Cell]) -> str:
    with Store(path) as store:
        store.write_cells(cells)
    return path


def test_lanes_lists_the_latest_decisions_newest_first(
    state: str, snapshot: Snapshot, capsys: pytest.CaptureFixture[str]
) -> None:
    store = _store("store.sqlite", [*decided_run(), cell("plain", 0, 10, 5, eval_name="other")])
    assert main(["lanes", "--state", state, "--store", store]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    snapshot(out)

    assert main(["lanes", "--state", state, "--store", store, "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)["decisions"]
    newest = sorted((d for c in decided_run() if (d := cell_decision(c))), key=lambda d: -d.end_unix_ns)
    assert shown == {
        "store": store,
        "cells_read": 9,
        "recent": [d.model_dump(mode="json") for d in newest],
        "note": None,
    }
    assert [d["cell_id"] for d in shown["recent"]] == ["b4", "b5", "s1", "b3", "b2", "s0", "b1", "b0"]
    assert (shown["recent"][4]["margin"], shown["recent"][4]["held_for"]) == (0.25, "serial-1")


def test_only_the_newest_cells_are_read_and_the_latest_ending_shown(
    state: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The decisions among the store's newest cells (by start), at most ten, newest end first."""
    monkeypatch.setattr(lanes, "CELLS_READ", 4)
    store = _store("store.sqlite", decided_run())
    assert main(["lanes", "--state", state, "--store", store, "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)["decisions"]
    assert shown["cells_read"] == 4  # started last: b4 (910 s), b5 (905), b3 (600) and b2 (530)
    assert [d["cell_id"] for d in shown["recent"]] == ["b4", "b5", "b3", "b2"]  # by end: 1,000 s to 700
    monkeypatch.setattr(lanes, "CELLS_READ", 500)
    monkeypatch.setattr(lanes, "DECISIONS_SHOWN", 3)
    assert main(["lanes", "--state", state, "--store", store, "--json"]) == 0
    assert [d["cell_id"] for d in json.loads(capsys.readouterr().out)["decisions"]["recent"]] == [
        "b4",
        "b5",
        "s1",
    ]


def test_a_store_without_decisions_says_which_command_records_them(
    state: str, snapshot: Snapshot, capsys: pytest.CaptureFixture[str]
) -> None:
    store = _store("store.sqlite", [cell("plain", 0, 10, 5), cell("more", 5, 20, 5)])
    assert main(["lanes", "--state", state, "--store", store]) == 0
    snapshot(capsys.readouterr().out)
    assert main(["lanes", "--state", state, "--store", store, "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)["decisions"]
    assert (shown["cells_read"], shown["recent"]) == (2, [])
    assert "SPARK_OTEL_GOVERN=adaptive" in shown["note"]


def test_a_store_named_but_missing_is_refused_and_not_created(
    state: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["lanes", "--state", state, "--store", "nowhere.sqlite"]) == 1
    assert capsys.readouterr().err == "spark-otel: error: nowhere.sqlite: no such store file\n"
    assert not Path("nowhere.sqlite").exists()


def test_a_default_store_that_is_no_store_is_warned_about_and_the_lanes_still_shown(
    state: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    Path("not-a-store.sqlite").write_text("plain text, not SQLite\n")
    monkeypatch.setenv("SPARK_OTEL_STORE", "not-a-store.sqlite")
    assert main(["lanes", "--state", state, "--json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["decisions"] is None
    assert err.startswith("spark-otel: warning: ")
    assert "not-a-store.sqlite" in err
    assert err.endswith("; no adaptive decision shown\n")
