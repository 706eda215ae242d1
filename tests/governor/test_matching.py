"""Which cells each rule catches (issue 37, item 1: "`rules check` and `lanes` show which cells each
rule would catch"), as facts: among a real store's cells of the day after the measured run
(`tests.support.rule_catches`), and among the cells in a real state file, in use and waiting,
as governed runners wrote them."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.support.rule_catches import BY_EVAL_RULES, GENERAL_RULES, T0_NS, next_day_store

from spark_otel import _clock
from spark_otel._clock import NS_PER_S
from spark_otel.governor.classing import profile
from spark_otel.governor.decision import InFlight
from spark_otel.governor.matching import Caught, Seen, caught_in_lanes, caught_in_store
from spark_otel.governor.state import SharedState, read_lanes
from spark_otel.records.rules_file import RulesFile, parse_rules
from spark_otel.store import Store

GENERAL = parse_rules(GENERAL_RULES, where="general")
BY_EVAL = parse_rules(BY_EVAL_RULES, where="by eval")


def _ids(cells: list[Seen]) -> list[str | None]:
    return [s.cell_id for s in cells]


def _catches(caught: list[Caught]) -> list[tuple[str, list[str | None], list[str | None]]]:
    return [(c.rule.describe(), _ids(c.held), _ids(c.triggers)) for c in caught]


def test_the_general_rules_catch_the_next_run_under_its_new_name_and_what_has_a_ceiling(
    tmp_path: Path,
) -> None:
    """Each cell classed as admission would: the serial eval's next run by its family's history,
    the quick one not ceiling-bound, an eval never measured ceiling-bound by its ceiling alone, a
    long prompt long-context; the neighbour caught only while a ceiling-bound cell runs (or its
    eval is between two cells), never beside the quick or the uncapped one."""
    with Store(next_day_store(tmp_path / "store.sqlite"), read_only=True) as store:
        catch = caught_in_store(GENERAL, store, recent_s=24 * 3600)
    newest = T0_NS + 1000 * NS_PER_S
    assert (catch.since_ns, catch.until_ns, catch.cells, catch.no_engine) == (
        newest - 24 * 3600 * NS_PER_S,
        newest,
        15,
        1,
    )
    assert _catches(catch.caught) == [
        ("qwen lane at most 8 cells", ["s1", "s2", "s3", "q1", "p1", "f1", "d1"], []),
        ("ceiling-bound generation-heavy cells on qwen at most 1 at once", ["s1", "s2", "s3"], []),
        ("not ceiling-bound generation-heavy cells on qwen at most 8 at once", ["q1"], []),
        ("long-context cells on qwen at most 2 at once", ["d1"], []),
        (
            "prompt-heavy cells on nemotron at most 4 at once",
            ["m1", "m2", "m3", "m4", "m5", "m6", "m7", "a1"],
            [],
        ),
        (
            "nemotron yields while a ceiling-bound cell runs on qwen",
            ["m1", "m2", "m3", "m6"],
            ["s1", "s2", "s3", "p1"],
        ),
    ]
    cross = catch.caught[-1]
    assert [(s.cell.eval_name, s.cell.cell_class, s.cell.bound) for s in cross.triggers] == [
        ("demo-serial-7f3a", "generation-heavy", True),
        ("demo-serial-7f3a", "generation-heavy", True),
        ("demo-serial-7f3a", "generation-heavy", True),
        ("nightly-proof", None, True),  # no history: its ceiling alone makes it ceiling-bound
    ]


def test_the_rules_by_eval_catch_nothing_of_the_next_run(tmp_path: Path) -> None:
    """The narrow form names yesterday's evals: today's runs, under new names, go uncaught (what
    `advise --by-eval` gives, and why it is not the default)."""
    with Store(next_day_store(tmp_path / "store.sqlite"), read_only=True) as store:
        catch = caught_in_store(BY_EVAL, store, recent_s=24 * 3600)
    assert _catches(catch.caught) == [
        ("demo-serial-2e14 generation-heavy cells on qwen at most 1 at once", [], []),
        ("demo-nemotron-2e14 cells on nemotron at most 4 at once", [], []),
        ("nemotron yields while demo-serial-2e14 runs on qwen", [], []),
    ]


def test_the_window_ends_at_the_store_s_newest_cell(tmp_path: Path) -> None:
    """--recent counts back from the newest cell, not from now: 26 h takes in the run of two days
    before (o1), caught as the serial eval's family; an empty store catches nothing."""
    with Store(next_day_store(tmp_path / "store.sqlite"), read_only=True) as store:
        catch = caught_in_store(GENERAL, store, recent_s=26 * 3600)
    assert catch.cells == 16
    assert _ids(catch.caught[1].held) == ["o1", "s1", "s2", "s3"]
    with Store(tmp_path / "empty.sqlite") as store:
        empty = caught_in_store(GENERAL, store, recent_s=3600)
    assert (empty.since_ns, empty.until_ns, empty.cells, empty.no_engine) == (None, None, 0, 0)
    assert [(len(c.held), len(c.triggers)) for c in empty.caught] == [(0, 0)] * 6


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    now = [T0_NS]
    monkeypatch.setattr(_clock, "real_wall_ns", lambda: now[0])
    return now


def _admitted(rules: RulesFile, engine: str, eval_name: str, deadline_s: float | None) -> InFlight:
    """The cell as `spark_otel.cell` puts it before its governor."""
    p = profile(rules, engine=engine, eval_name=eval_name, deadline_s=deadline_s)
    return InFlight(engine, eval_name, p.cell_class, deadline_s is not None, p.ceiling_bound)


def test_lanes_catch_the_cells_in_use_and_waiting_as_they_were_classed_at_admission(
    state_path: Path, clock: list[int]
) -> None:
    """A serial cell of the next run in use on qwen holds nemotron's cell back; the rule catches
    it, waiting, and names the serial cell as what makes it hold (not a second serial cell, which
    waits: it runs nowhere yet); once the serial cell ends its eval still counts for
    ``eval_gap_s``, then nothing holds."""
    state_path.parent.mkdir()
    state = SharedState(state_path)
    serial = _admitted(GENERAL, "qwen", "demo-serial-7f3a", 1800.0)
    quick = _admitted(GENERAL, "qwen", "quick-gen-7f3a", 1800.0)
    cards = _admitted(GENERAL, "nemotron", "demo-nemotron-7f3a", 1800.0)
    try:
        slot = state.attempt(serial, "s1", GENERAL, ticket=None, waited_s=0.0).slot
        assert slot is not None
        assert state.attempt(quick, "q1", GENERAL, ticket=None, waited_s=0.0).slot is not None
        held = state.attempt(cards, "m1", GENERAL, ticket=None, waited_s=0.0)
        assert held.rule == "nemotron yields while a ceiling-bound cell runs on qwen"
        second = state.attempt(serial, "s2", GENERAL, ticket=None, waited_s=0.0)
        assert second.rule == "ceiling-bound generation-heavy cells on qwen at most 1 at once"

        caught = caught_in_lanes(GENERAL, read_lanes(state_path, GENERAL))
        assert _catches(caught) == [
            ("qwen lane at most 8 cells", ["s1", "q1", "s2"], []),
            ("ceiling-bound generation-heavy cells on qwen at most 1 at once", ["s1", "s2"], []),
            ("not ceiling-bound generation-heavy cells on qwen at most 8 at once", ["q1"], []),
            ("long-context cells on qwen at most 2 at once", [], []),
            ("prompt-heavy cells on nemotron at most 4 at once", ["m1"], []),
            ("nemotron yields while a ceiling-bound cell runs on qwen", ["m1"], ["s1"]),
        ]
        [waiting] = caught[-1].held
        assert (waiting.waiting, waiting.cell) == (True, cards)

        clock[0] += NS_PER_S
        state.release(slot, serial)
        present = caught_in_lanes(GENERAL, read_lanes(state_path, GENERAL))[-1]
        assert [(s.cell.eval_name, s.cell.bound) for s in present.triggers] == [("demo-serial-7f3a", True)]
        assert len(present.held) == 1

        clock[0] += 3 * NS_PER_S  # past eval_gap_s (2 s)
        state.renew()
        gone = caught_in_lanes(GENERAL, read_lanes(state_path, GENERAL))[-1]
        assert (gone.held, gone.triggers) == ([], [])
    finally:
        state.close()
