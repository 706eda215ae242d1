"""The adaptive governor's decisions as facts and as words: the figures of a run worked out by
hand (tests/support/adaptive_cells), equal on the fact model; then the glance line, the tables
as the command line prints them, and the JSON, each pinned by a snapshot."""

from __future__ import annotations

import json

import pytest
from tests.support.adaptive_cells import decided, decided_run, protected, verdict
from tests.support.cells import cell
from tests.support.snapshots import Snapshot

from spark_otel import _semconv as sc
from spark_otel.analysis.adaptive_decisions import (
    AdaptiveDecisions,
    HoldCount,
    Spread,
    adaptive_decisions,
    cell_decision,
)
from spark_otel.cli._common import print_table
from spark_otel.governor.slack import SlackReason
from spark_otel.views.adaptive_decisions import (
    decisions_json,
    evals_table,
    holds_tables,
    no_decisions_line,
    recent_table,
    summary_line,
)


def test_each_evals_figures_are_those_worked_out_by_hand() -> None:
    found = adaptive_decisions([*decided_run(), cell("plain", 0, 10, 5, eval_name="other")])
    assert (found.cells_seen, found.cells, found.held, found.hold_s) == (9, 8, 3, 177.75)
    assert found.longest is not None
    assert (found.longest.cell_id, found.longest.waited_s, found.longest.held_for) == (
        "b2",
        120.0,
        "serial-1",
    )
    batch, serial = found.evals
    assert (batch.eval_name, batch.engines, batch.cells) == ("batch", ["nemotron"], 6)
    assert (batch.at_once, batch.held, batch.waited_for_rules, batch.hold_s) == (2, 3, 1, 177.75)
    assert batch.reasons == [
        HoldCount(key="length unknown", cells=1, hold_s=120.0),
        HoldCount(key="waiting for sustained slack", cells=1, hold_s=45.5),
        HoldCount(key="projection under the margin", cells=1, hold_s=12.25),
    ]
    assert batch.held_for == [
        HoldCount(key="serial-1", cells=2, hold_s=165.5),
        HoldCount(key="next cell of serial", cells=1, hold_s=12.25),
    ]
    assert batch.admitted_on == [
        HoldCount(key="slack", cells=3, hold_s=120.0),
        HoldCount(key="nothing to protect", cells=2, hold_s=75.5),
        HoldCount(key="-", cells=1, hold_s=12.25),
    ]
    assert batch.margin == Spread(n=3, low=0.2, median=0.25, high=0.3)
    assert batch.rate_used == Spread(n=3, low=6.5, median=7.25, high=8.0)
    assert (serial.cells, serial.at_once, serial.held, serial.hold_s, serial.longest) == (2, 2, 0, 0.0, None)
    assert serial.margin == Spread(n=0)


def test_a_cell_the_law_never_judged_has_no_decision() -> None:
    assert cell_decision(cell("plain", 0, 10, 5)) is None
    assert adaptive_decisions([cell("plain", 0, 10, 5)]) == AdaptiveDecisions(
        cells_seen=1, cells=0, held=0, hold_s=0.0, longest=None, evals=[]
    )


@pytest.fixture
def printed(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> object:
    monkeypatch.setenv("COLUMNS", "110")

    def table(title: str, shape: tuple[list[str], list[list[str]], dict[str, str]]) -> str:
        columns, rows, notes = shape
        print_table(title, columns, rows, notes=notes)
        return capsys.readouterr().out

    return table


def test_the_words_tables_and_json_of_a_run(snapshot: Snapshot, printed: object) -> None:
    found = adaptive_decisions(decided_run())
    table = printed  # type: ignore[assignment]
    snapshot(summary_line(found, "model s") + "\n", "summary")
    snapshot(table("by eval", evals_table(found, "model s")), "evals")  # type: ignore[operator]
    holds = "".join(
        table(title, (columns, rows, {}))  # type: ignore[operator]
        for title, columns, rows in holds_tables(found, "model s")
    )
    snapshot(holds, "holds")
    recent = sorted(
        (d for c in decided_run() if (d := cell_decision(c)) is not None), key=lambda d: -d.end_unix_ns
    )
    snapshot(table("recent", recent_table(recent)), "recent")  # type: ignore[operator]
    snapshot(json.dumps(decisions_json(found), indent=2) + "\n", "json")


def test_a_run_held_nothing_and_a_store_without_decisions_say_so(snapshot: Snapshot) -> None:
    serial = [c for c in decided_run() if c.eval_name == "serial"]
    snapshot(summary_line(adaptive_decisions(serial)) + "\n", "none-held")
    plain = adaptive_decisions([cell("plain", 0, 10, 5), cell("other", 0, 10, 5)])
    assert holds_tables(plain) == []
    snapshot(summary_line(plain) + "\n" + no_decisions_line(500, newest=True) + "\n", "no-decisions")


def test_a_holds_length_is_the_laws_share_where_the_span_records_it_else_the_whole_wait() -> None:
    """b0 waited 50 s, 20 of them on a static rule: the law held it 30 s in two holds. b1 comes
    from a runner that recorded no share: its whole 12 s wait counts. b2 the law never held: no
    hold, however long it waited on a rule. A recorded share past the wait counts as the wait."""

    tight = verdict(SlackReason.TIGHT, protected("s0"))
    slack = verdict(SlackReason.SLACK, protected("s0"), finish_s=1500.0, rate=6.0)
    b0 = decided("b0", 100, 200, eval_name="batch", engine="nemotron", admitted_on=slack, held=tight,
                 waited_s=50.0, held_s=30.0, holds=2)  # fmt: skip
    b1 = decided(
        "b1", 120, 220, eval_name="batch", engine="nemotron", admitted_on=slack, held=tight, waited_s=12.0
    )
    older = b1.model_copy(
        update={
            "attributes": {
                k: v
                for k, v in b1.attributes.items()
                if k not in (sc.CELL_ADAPTIVE_HELD_S, sc.CELL_ADAPTIVE_HOLDS)
            }
        }
    )
    b2 = decided("b2", 130, 230, eval_name="batch", engine="nemotron", admitted_on=slack, waited_s=40.0)
    b3 = decided("b3", 140, 240, eval_name="batch", engine="nemotron", admitted_on=slack, held=tight,
                 waited_s=5.0, held_s=9.0, holds=1)  # fmt: skip
    found = adaptive_decisions([b0, older, b2, b3])
    [batch] = found.evals
    assert [(d.hold_s, d.holds) for d in map(cell_decision, (b0, older, b2, b3)) if d is not None] == [
        (30.0, 2), (12.0, None), (0.0, 0), (5.0, 1),
    ]  # fmt: skip
    assert (batch.held, batch.hold_s, batch.waited_for_rules) == (3, 47.0, 1)
    assert batch.longest is not None
    assert batch.longest.cell_id == "b0"
    assert batch.reasons == [HoldCount(key="projection under the margin", cells=3, hold_s=47.0)]
