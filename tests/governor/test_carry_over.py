"""Rules that carry over to the next run (issue 37, item 1): the rules `advise` writes from one
run's evidence govern the next run of the same eval under a new name, and an eval never measured
that has a ceiling, across real runner processes; and they leave alone a neighbour of cells far
inside their ceiling."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from tests.support.queue_rules import batched_rule, yields_rule

from spark_otel.analysis.advisor import Advice, AdvisorConfig, CellClass
from spark_otel.records.rules_file import CrossEngineRule, History, RulesFile, load_rules
from spark_otel.views.rules_file import dump_rules, rules_from_advice

RUNNER = Path(__file__).with_name("class_runner.py")


def _measured() -> Advice:
    """What one run measured: a serial eval on qwen whose p90 cell takes 1,300 s alone (1 worker);
    a short generation-heavy eval (60 s, 8 workers); nemotron's card eval (4 workers); and
    nemotron's load costing the serial eval 54%."""
    serial = batched_rule("qwen", "demo-serial-2e14", 1, ceiling_bound=True, serial_p90_s=1300.0, n_cells=30)
    quick = batched_rule("qwen", "quick-gen-2e14", 8, serial_p90_s=60.0, n_cells=50)
    cards = batched_rule(
        "nemotron", "demo-nemotron-2e14", 4, CellClass.PROMPT_HEAVY, serial_p90_s=100.0, n_cells=572
    )
    yields = yields_rule("nemotron", "demo-serial-2e14", "qwen", cost=0.54)
    classes = [r.advice for r in (serial, quick, cards) if r.advice is not None]
    return Advice(
        config=AdvisorConfig(ceiling_s=1800.0), classes=classes, rules=[serial, quick, cards, yields]
    )


def test_advise_writes_the_general_forms_with_each_family_s_history() -> None:
    rules = rules_from_advice(_measured())
    assert (rules.version, rules.form) == (2, "general")
    assert [
        (r.engine, r.eval, r.cell_class, r.ceiling_bound, r.cells, r.figures["evals"]) for r in rules.limit
    ] == [
        # 1,300 s alone, 2.17x beside the neighbour: past 75% of 1,800 s. 60 s: far inside it.
        ("qwen", None, "generation-heavy", False, 8, ["quick-gen-2e14"]),
        ("qwen", None, "generation-heavy", True, 1, ["demo-serial-2e14"]),
        # Only one side measured: the limit holds the whole class.
        ("nemotron", None, "prompt-heavy", None, 4, ["demo-nemotron-2e14"]),
    ]
    [cross] = rules.cross_engine
    assert cross == CrossEngineRule(
        engine="nemotron",
        cells=0,
        while_engine="qwen",
        while_ceiling_bound=True,
        evidence=cross.evidence,
        figures={"n_cells": 5, "neighbour_cost": 0.54, "evals": ["demo-serial-2e14"]},
    )
    assert cross.describe() == "nemotron yields while a ceiling-bound cell runs on qwen"
    assert rules.slowdown == {"qwen": round(1 / 0.46, 3)}
    assert rules.history == [
        History(engine="nemotron", family="demo-nemotron", cell_class="prompt-heavy", n_cells=572, share=1.0,
                p90_alone_s=100.0, evals=["demo-nemotron-2e14"]),
        History(engine="qwen", family="demo-serial", cell_class="generation-heavy", n_cells=30, share=1.0,
                p90_alone_s=1300.0, evals=["demo-serial-2e14"]),
        History(engine="qwen", family="quick-gen", cell_class="generation-heavy", n_cells=50, share=1.0,
                p90_alone_s=60.0, evals=["quick-gen-2e14"]),
    ]  # fmt: skip


def test_two_evals_of_one_class_give_the_fewest_workers_and_one_history() -> None:
    """Two runs of one family measured (both in the store): one limit, the stricter; one history,
    their cells together, the longer p90."""
    one = batched_rule("qwen", "review-20261206", 4, serial_p90_s=100.0, n_cells=10)
    two = batched_rule("qwen", "review-20261207", 2, serial_p90_s=150.0, n_cells=30)
    advice = Advice(config=AdvisorConfig(), classes=[one.advice, two.advice], rules=[one, two])  # type: ignore[list-item]
    rules = rules_from_advice(advice)
    assert [(r.cell_class, r.ceiling_bound, r.cells, r.figures["evals"]) for r in rules.limit] == [
        ("generation-heavy", None, 2, ["review-20261206", "review-20261207"])
    ]
    assert [(h.family, h.n_cells, h.p90_alone_s, h.evals) for h in rules.history] == [
        ("review", 40, 150.0, ["review-20261206", "review-20261207"])
    ]


def _write(tmp_path: Path) -> Path:
    rules: RulesFile = rules_from_advice(_measured())
    rules = rules.model_copy(update={"eval_gap_s": 1.0})
    path = tmp_path / "rules.toml"
    path.write_text(dump_rules(rules), encoding="utf-8")
    assert load_rules(path) == rules
    return path


def _runner(*args: str) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "SPARK_OTEL_"))}
    return subprocess.Popen([sys.executable, str(RUNNER), *args], stdout=subprocess.PIPE, text=True, env=env)


def _lines(proc: subprocess.Popen[str], first: list[str]) -> list[dict[str, float]]:
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0
    return [json.loads(line) for line in [*first, *out.splitlines()]]


@pytest.mark.parametrize(
    ("serial_eval", "held"),
    [
        ("demo-serial-7f3a", True),  # the measured eval's next run, under a new name
        ("nightly-proof-check", True),  # never measured, with a ceiling: taken as ceiling-bound
        ("quick-gen-7f3a", False),  # measured far inside its ceiling: the neighbour runs beside it
    ],
    ids=["next-run", "never-measured", "far-inside-ceiling"],
)
def test_the_neighbour_is_held_while_a_ceiling_bound_cell_runs_from_another_process(
    serial_eval: str, held: bool, tmp_path: Path, state_path: Path
) -> None:
    """The issue's trial: rules from one run; then, from two processes, an eval on qwen named
    differently and an eval at 4 workers on nemotron started while it runs."""
    rules = _write(tmp_path)
    flag = tmp_path / "neighbour-arrived"
    serial = _runner(str(rules), str(state_path), serial_eval, "qwen", "3", "1", "0.4", "--until", str(flag))
    assert serial.stdout is not None
    first = serial.stdout.readline()  # its first cell has run: the eval is under way
    neighbour = _runner(
        str(rules), str(state_path), "demo-nemotron-7f3a", "nemotron", "8", "4", "0.1", "--flag", str(flag)
    )
    cells = _lines(neighbour, [])
    protected = _lines(serial, [first])
    assert len(cells) == 8
    assert len(protected) >= 5  # the three, then two more once the neighbour had arrived
    beside = [c for c in cells if any(c["start"] < p["end"] and p["start"] < c["end"] for p in protected)]
    waited = [c for c in cells if c["start"] - c["entered"] > 0.3]
    # The protected eval never waits: the rules hold the neighbour, not it.
    assert [p for p in protected if p["start"] - p["entered"] > 0.3] == []
    if held:
        assert beside == []
        assert min(c["start"] for c in cells) >= max(p["end"] for p in protected)
        assert len(waited) >= 4  # the first wave of four, at least, waited for the qwen eval to end
    else:
        assert len(beside) == 8
        assert waited == []
        starts = sorted(c["start"] for c in cells)
        assert max(sum(1 for c in cells if c["start"] <= s < c["end"]) for s in starts) == 4


_OLD_SCHEMA = """
CREATE TABLE slots (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    host TEXT NOT NULL, pid INTEGER NOT NULL, lease_until_ns INTEGER NOT NULL,
    engine TEXT NOT NULL, eval_name TEXT NOT NULL, cell_class TEXT, has_deadline INTEGER NOT NULL,
    cell_id TEXT, admitted_ns INTEGER NOT NULL, waited_s REAL NOT NULL
);
CREATE TABLE waiting (
    ticket INTEGER PRIMARY KEY AUTOINCREMENT,
    host TEXT NOT NULL, pid INTEGER NOT NULL, lease_until_ns INTEGER NOT NULL,
    engine TEXT NOT NULL, eval_name TEXT NOT NULL, cell_class TEXT, has_deadline INTEGER NOT NULL,
    cell_id TEXT, since_ns INTEGER NOT NULL, rule TEXT
);
CREATE TABLE present (
    engine TEXT NOT NULL, eval_name TEXT NOT NULL, cell_class TEXT, has_deadline INTEGER NOT NULL,
    last_end_ns INTEGER NOT NULL, PRIMARY KEY (engine, eval_name)
);
"""


def test_a_state_file_an_older_runner_wrote_is_read_and_completed(tmp_path: Path, state_path: Path) -> None:
    """A file without the ceiling_bound columns: a reader does without them, a writer adds them,
    and the older runner's cell (no column: version 1's meaning, any cell with a ceiling) still
    holds the neighbour."""
    import socket
    import sqlite3

    from spark_otel._clock import NS_PER_S, real_wall_ns
    from spark_otel.governor.decision import InFlight
    from spark_otel.governor.state import SharedState, read_lanes

    state_path.parent.mkdir(parents=True)
    with sqlite3.connect(state_path) as conn:
        conn.executescript(_OLD_SCHEMA)
        conn.execute(
            "INSERT INTO slots (host, pid, lease_until_ns, engine, eval_name, cell_class, has_deadline,"
            " cell_id, admitted_ns, waited_s)"
            " VALUES (?, ?, ?, 'qwen', 'old-runner-eval', NULL, 1, 'o1', 0, 0)",
            (socket.gethostname(), os.getpid(), real_wall_ns() + 60 * NS_PER_S),
        )
    rules = load_rules(_write(tmp_path))
    [lane] = read_lanes(state_path, rules)
    assert lane.in_use == [InFlight("qwen", "old-runner-eval", None, True, None)]
    assert lane.in_use_live == [None]  # no live columns: nothing published, nothing invented
    assert lane.in_use_admitted_on == [None]  # no verdict columns: the law judged nothing here
    state = SharedState(state_path)
    try:
        decision = state.attempt(
            InFlight("nemotron", "cards", "prompt-heavy", True, False), "n1", rules, ticket=None, waited_s=0.0
        )
        assert decision.slot is None
        assert decision.rule == "nemotron yields while a ceiling-bound cell runs on qwen"
    finally:
        state.close()
    with sqlite3.connect(state_path) as conn:
        for table in ("slots", "waiting", "present"):
            assert "ceiling_bound" in {r[1] for r in conn.execute(f"PRAGMA table_info({table})")}
        slots = {r[1] for r in conn.execute("PRAGMA table_info(slots)")}
        assert {"live_ns", "live_elapsed_s", "live_tokens", "live_rate"} <= slots
        assert {"adaptive_reason", "adaptive_protected", "adaptive_margin", "adaptive_rate"} <= slots
        assert "adaptive_finish_s" in slots
        # Columns, no new table: an older runner's check (it refuses unknown tables) still passes.
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert tables == {"slots", "waiting", "present", "lapses", "sqlite_sequence"}
