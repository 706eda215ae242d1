"""`spark-otel lanes`, whole: the table, the --json and the warnings for a governor state built
on a real SQLite file under a stepped wall clock, with rules whose engines are stale, unchecked
or absent from the state, and engines in the state that no rule names.

One state covers every branch of the command: a governed engine with cells in use and cells
held back by two different rules, an engine only a rule names (no row in the state), an engine
with cells in use that no rule names, and one whose eval only counts as present between cells.
The engine "q" is asked what it serves over real HTTP (a /metrics page on 127.0.0.1 naming
another model than the rules were measured on), so it reads stale."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from tests.support.metrics_server import MetricsServer

from spark_otel import _clock
from spark_otel._clock import NS_PER_S
from spark_otel.cli import lanes, main
from spark_otel.governor import RULES_ENV, STATE_ENV
from spark_otel.governor.decision import InFlight
from spark_otel.governor.state import SharedState
from spark_otel.live_progress import LiveProgress
from spark_otel.records.rules_file import parse_rules

START_NS = 1_800_000_000 * NS_PER_S
LONGEST_WAIT_NS = 1_234_567_890_000  # 1,234.56789 s: three decimals in --json, one in the table
SERVING = "qwen3.8-27b"
METRICS = f'# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{{model_name="{SERVING}"}} 1\n'

Q_IN_FLIGHT = [  # as `box` published them: rounded to three decimals in --json; static rules
    # admitted them, so no verdict of the deadline-slack law
    {
        "eval": "ev-x",
        "cell": None,
        "elapsed_s": 31.25,
        "tokens": None,
        "rate_tok_s": None,
        "admitted_on": None,
    },
    {
        "eval": "ev-y",
        "cell": None,
        "elapsed_s": 612.346,
        "tokens": 6789,
        "rate_tok_s": 10.612,
        "admitted_on": None,
    },
]
Z_IN_FLIGHT = [  # nothing published: each figure null, never a guess
    {"eval": e, "cell": None, "elapsed_s": None, "tokens": None, "rate_tok_s": None, "admitted_on": None}
    for e in ("ev-b", "ev-a", "ev-b")
]
IN_FLIGHT_TABLE = (
    "cells in flight".center(58),
    "┏━━━━━━━━┳━━━━━━┳━━━━━━┳━━━━━━━━━━━┳━━━━━━━━┳━━━━━━━━━━━━┓",
    "┃ engine ┃ eval ┃ cell ┃ elapsed s ┃ tokens ┃ live tok/s ┃",
    "┡━━━━━━━━╇━━━━━━╇━━━━━━╇━━━━━━━━━━━╇━━━━━━━━╇━━━━━━━━━━━━┩",
    "│ q      │ ev-x │    - │      31.2 │      - │          - │",
    "│ q      │ ev-y │    - │     612.3 │  6,789 │       10.6 │",
    "│ z      │ ev-b │    - │         - │      - │          - │",
    "│ z      │ ev-a │    - │         - │      - │          - │",
    "│ z      │ ev-b │    - │         - │      - │          - │",
    "└────────┴──────┴──────┴───────────┴────────┴────────────┘",
    "elapsed s: model seconds since the cell was admitted",
    "tokens: completion tokens so far: its finished requests' plus one per chunk of its running ",
    "streams",
    "live tok/s: its streams' decode rate over the last 5 real seconds; '-': it has not streamed (no ",
    "rate is guessed), or its runner published nothing within the lease",
)


def _rules_text(url: str) -> str:
    return (
        "eval_gap_s = 5\n\n"
        f"[engines.q]\nmodel = 'qwen3.6-27b'\nurl = '{url}'\n\n"
        "[[lane]]\nengine = 'q'\ncells = 2\n\n"
        "[[limit]]\nengine = 'q'\neval = 'ev-x'\ncells = 1\n\n"
        "[[cross_engine]]\nengine = 'n'\nwhile_engine = 'q'\ncells = 0\n"
    )


@dataclass
class Box:
    """The files `spark-otel lanes` reads, relative to the test's working directory."""

    rules: str
    state: str
    url: str


@pytest.fixture
def box(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, metrics_server: MetricsServer) -> Iterator[Box]:
    """The state every test here reads, written through `SharedState` as governed runners do;
    the clock stops 1,234.56789 s after the first cell queued."""
    now = [START_NS]
    monkeypatch.setattr(_clock, "real_wall_ns", lambda: now[0])
    monkeypatch.setenv("COLUMNS", "96")  # the table as printed fits a line of this file
    monkeypatch.chdir(tmp_path)  # relative paths: the table's title is the same on every run
    for name in (RULES_ENV, STATE_ENV):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("SPARK_OTEL_STORE", str(tmp_path / "elsewhere" / "store.sqlite"))
    metrics_server.set_text(METRICS)
    Path("rules.toml").write_text(_rules_text(metrics_server.url))
    rules = parse_rules(_rules_text(metrics_server.url), where="test")
    state = SharedState("governor.sqlite")

    def cell(engine: str, eval_name: str) -> tuple[int | None, InFlight]:
        c = InFlight(engine, eval_name, None, False)
        return state.attempt(c, None, rules, ticket=None, waited_s=0.0).slot, c

    def walk_to(end_ns: int) -> None:
        """The clock on to ``end_ns``, the runners' leases renewed on the way, as `Lease` does."""
        while now[0] < end_ns:
            now[0] = min(end_ns, now[0] + 3 * NS_PER_S)
            state.renew()

    try:
        assert cell("q", "ev-x")[0] == 1
        assert cell("q", "ev-x")[0] is None  # held by its eval's limit
        assert cell("q", "ev-y")[0] == 2  # passes it: only ev-x's own limit holds ev-x
        now[0] += NS_PER_S // 2
        assert cell("q", "ev-z")[0] is None  # the lane is full
        now[0] += NS_PER_S // 2
        assert cell("q", "ev-z")[0] is None
        z_slots = [cell("z", name) for name in ("ev-b", "ev-b", "ev-a", "ev-b")]  # no rule for z
        p_slot = cell("p", "ev-p")
        walk_to(START_NS + LONGEST_WAIT_NS - 3 * NS_PER_S)
        for slot, c in (z_slots[0], p_slot):
            assert slot is not None
            state.release(slot, c)  # their evals count as present on z and p for 5 s
        walk_to(START_NS + LONGEST_WAIT_NS)
        # What the runners published of their cells in flight with that renewal: ev-x's has not
        # streamed (progress, no rate); ev-y's streams; z's cells published nothing.
        state.renew({1: LiveProgress(31.25, None, None), 2: LiveProgress(612.3456, 6789, 10.61234)})
        yield Box("rules.toml", "governor.sqlite", metrics_server.url)
    finally:
        state.close()


def _problem(url: str) -> str:
    return (
        f"measured on qwen3.6-27b, now serves {SERVING}: stale (still applied); re-measure with "
        f"`spark-otel probe --engine q={url} --streams 1,2,4,8`, then `spark-otel advise --write-rules FILE`"
    )


def _on_q(eval_name: str, state: str) -> dict[str, object]:
    """A cell on q in --json's "caught", as `box` queued it: no id, no class, no ceiling."""
    return {
        "eval": eval_name,
        "cell": None,
        "engine": "q",
        "class": None,
        "ceiling_bound": False,
        "state": state,
    }


def _lanes_json(url: str, *, state: str = "governor.sqlite", rules: str = "rules.toml") -> object:
    """The --json of the state in `box` read with its rules, worked out from the cells queued there."""
    waiting = [_on_q("ev-x", "waiting"), _on_q("ev-z", "waiting"), _on_q("ev-z", "waiting")]
    return {
        "state": state,
        "rules": rules,
        "caught": [
            {
                "rule": "q lane at most 2 cells",  # every cell on q, in use or waiting
                "kind": "lane",
                "by_eval": False,
                "catches": [_on_q("ev-x", "running"), _on_q("ev-y", "running"), *waiting],
                "held_while": [],
            },
            {
                "rule": "ev-x cells on q at most 1 at once",
                "kind": "limit",
                "by_eval": True,
                "catches": [_on_q("ev-x", "running"), waiting[0]],
                "held_while": [],
            },
            {
                "rule": "n yields while a cell with a ceiling runs on q",  # no cell on q has one
                "kind": "cross_engine",
                "by_eval": False,
                "catches": [],
                "held_while": [],
            },
        ],
        "lanes": [
            {
                "engine": "n",  # only a rule names it: no row in the state
                "cap": None,
                "in_use": [],
                "waiting": [],
                "present": [],
                "in_flight": [],
                "lapsed_in_use": 0,
                "lease_lapses": [],
                "stale": False,
                "problem": "no url in [engines]: not checked",
            },
            {
                "engine": "p",  # its cell ended 3 s ago, within eval_gap_s
                "cap": None,
                "in_use": [],
                "waiting": [],
                "present": ["ev-p"],
                "in_flight": [],
                "lapsed_in_use": 0,
                "lease_lapses": [],
                "stale": False,
                "problem": None,
            },
            {
                "engine": "q",
                "cap": 2,
                "in_use": ["ev-x", "ev-y"],
                "waiting": [
                    {"eval": "ev-x", "rule": "ev-x cells on q at most 1 at once", "waited_s": 1234.568},
                    {"eval": "ev-z", "rule": "q lane at most 2 cells", "waited_s": 1234.068},
                    {"eval": "ev-z", "rule": "q lane at most 2 cells", "waited_s": 1233.568},
                ],
                "present": [],
                "in_flight": Q_IN_FLIGHT,
                "lapsed_in_use": 0,
                "lease_lapses": [],
                "stale": True,
                "problem": _problem(url),
            },
            {
                "engine": "z",  # no rule names it
                "cap": None,
                "in_use": ["ev-b", "ev-a", "ev-b"],
                "waiting": [],
                "present": ["ev-b"],
                "in_flight": Z_IN_FLIGHT,
                "lapsed_in_use": 0,
                "lease_lapses": [],
                "stale": False,
                "problem": None,
            },
        ],
        "decisions": None,  # no store: no finished cell's decision to show
    }


def _centred(title: str) -> str:
    """A table's title as rich prints it: centred over the table, 96 columns wide here."""
    return title.center(96)


def _lines(*lines: str) -> str:
    return "".join(f"{line}\n" for line in lines)


def test_lanes_table_shows_each_engine_with_its_cap_cells_and_what_holds_them(
    box: Box, capsys: pytest.CaptureFixture[str]
) -> None:
    """Evals in use counted and sorted by name, the rules holding cells back counted in queue
    order, the longest wait to a tenth; the stale engine flagged in its row, and a warning per
    engine whose rules are stale or unchecked. Under it, what each rule catches now: the lane
    rule every cell on q, in use or waiting; the limit its eval's."""
    assert main(["lanes", "--rules", box.rules, "--state", box.state]) == 0
    out, err = capsys.readouterr()
    assert out == _lines(
        _centred("governor lanes (governor.sqlite)"),
        "┏━━━━━━━━━━━┳━━━━━━━━━━┳━━━━━━━━┳━━━━━━━━━━━━━━━━┳━━━━━━━━━┳━━━━━━━━━━━━━━━━━━┳━━━━━━━━━━━━━━━━┓",
        "┃ engine    ┃ lane cap ┃ in use ┃ in use by eval ┃ waiting ┃ held back by     ┃ longest wait s ┃",
        "┡━━━━━━━━━━━╇━━━━━━━━━━╇━━━━━━━━╇━━━━━━━━━━━━━━━━╇━━━━━━━━━╇━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━━━━━━━┩",
        "│ n         │        - │      0 │ -              │       0 │ -                │              - │",
        "│ p         │        - │      0 │ -              │       0 │ -                │              - │",
        "│ q (stale) │        2 │      2 │ ev-x 1, ev-y 1 │       3 │ ev-x cells on q  │        1,234.6 │",
        "│           │          │        │                │         │ at most 1 at     │                │",
        "│           │          │        │                │         │ once (1); q lane │                │",
        "│           │          │        │                │         │ at most 2 cells  │                │",
        "│           │          │        │                │         │ (2)              │                │",
        "│ z         │        - │      3 │ ev-a 1, ev-b 2 │       0 │ -                │              - │",
        "└───────────┴──────────┴────────┴────────────────┴─────────┴──────────────────┴────────────────┘",
        "longest wait s: real seconds the longest-waiting cell has waited so far",
        *IN_FLIGHT_TABLE,
        _centred("what each rule catches now"),
        "┏━━━━━━━━━━━━━━━━━━━━━━┳━━━━━━━━━┳━━━━━━━━━┳━━━━━━━━━━━━━━━━━━━━━━┳━━━━━━━━━━━━┳━━━━━━━━━━━━━━━┓",
        "┃ rule                 ┃ form    ┃ catches ┃ caught evals         ┃ held while ┃ holding evals ┃",
        "┡━━━━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━╇━━━━━━━━━╇━━━━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━━━╇━━━━━━━━━━━━━━━┩",
        "│ q lane at most 2     │ general │       5 │ ev-x 2, ev-z 2, ev-y │          - │             - │",
        "│ cells                │         │         │ 1                    │            │               │",
        "│ ev-x cells on q at   │ by eval │       2 │ ev-x 2               │          - │             - │",
        "│ most 1 at once       │         │         │                      │            │               │",
        "│ n yields while a     │ general │       0 │ -                    │          0 │             - │",
        "│ cell with a ceiling  │         │         │                      │            │               │",
        "│ runs on q            │         │         │                      │            │               │",
        "└──────────────────────┴─────────┴─────────┴──────────────────────┴────────────┴───────────────┘",
        "catches: the cells the rule counts against its cap (a cross-engine rule: those on its engine ",
        "while it holds)",
        "held while: a cross-engine rule's: the cells that make it hold (ceiling-bound, of its eval, or ",
        "with a ceiling, as the rule says)",
    )
    assert err == (
        "spark-otel: warning: n: no url in [engines]: not checked\n"
        f"spark-otel: warning: q: {_problem(box.url)}\n"
    )


def test_lanes_json_reads_the_files_given_named_in_the_environment_or_beside_the_store(
    box: Box, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """--rules and --state; else $SPARK_OTEL_RULES and $SPARK_OTEL_GOVERNOR_STATE; else the state
    beside $SPARK_OTEL_STORE. The same lanes each time, with the paths they were read from."""
    assert main(["lanes", "--rules", box.rules, "--state", box.state, "--json"]) == 0
    out, err = capsys.readouterr()
    assert (json.loads(out), err) == (_lanes_json(box.url), "")

    monkeypatch.setenv(RULES_ENV, box.rules)
    monkeypatch.setenv(STATE_ENV, box.state)
    assert main(["lanes", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == _lanes_json(box.url)

    monkeypatch.delenv(STATE_ENV)
    monkeypatch.setenv("SPARK_OTEL_STORE", str(tmp_path / "store.sqlite"))
    assert main(["lanes", "--json"]) == 0
    beside = str(tmp_path / "governor.sqlite")
    assert json.loads(capsys.readouterr().out) == _lanes_json(box.url, state=beside)


def test_lanes_without_rules_shows_the_state_alone(box: Box, capsys: pytest.CaptureFixture[str]) -> None:
    """No rules: no caps, nothing checked, no engine that only a rule names, and an eval counts
    as present for 2 s after its last cell (the default gap), so p's, 3 s ago, is gone."""
    assert main(["lanes", "--state", box.state, "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {
        "state": "governor.sqlite",
        "rules": None,
        "lanes": [
            {
                "engine": "q",
                "cap": None,
                "in_use": ["ev-x", "ev-y"],
                "waiting": [
                    {"eval": "ev-x", "rule": "ev-x cells on q at most 1 at once", "waited_s": 1234.568},
                    {"eval": "ev-z", "rule": "q lane at most 2 cells", "waited_s": 1234.068},
                    {"eval": "ev-z", "rule": "q lane at most 2 cells", "waited_s": 1233.568},
                ],
                "present": [],
                "in_flight": Q_IN_FLIGHT,
                "lapsed_in_use": 0,
                "lease_lapses": [],
                "stale": False,
                "problem": None,
            },
            {
                "engine": "z",
                "cap": None,
                "in_use": ["ev-b", "ev-a", "ev-b"],
                "waiting": [],
                "present": [],
                "in_flight": Z_IN_FLIGHT,
                "lapsed_in_use": 0,
                "lease_lapses": [],
                "stale": False,
                "problem": None,
            },
        ],
        "decisions": None,  # no store: no finished cell's decision to show
    }
    assert main(["lanes", "--state", box.state]) == 0
    out, err = capsys.readouterr()
    assert out == _lines(
        _centred("governor lanes (governor.sqlite)"),
        "┏━━━━━━━━┳━━━━━━━━━━┳━━━━━━━━┳━━━━━━━━━━━━━━━━┳━━━━━━━━━┳━━━━━━━━━━━━━━━━━━━━━┳━━━━━━━━━━━━━━━━┓",
        "┃ engine ┃ lane cap ┃ in use ┃ in use by eval ┃ waiting ┃ held back by        ┃ longest wait s ┃",
        "┡━━━━━━━━╇━━━━━━━━━━╇━━━━━━━━╇━━━━━━━━━━━━━━━━╇━━━━━━━━━╇━━━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━━━━━━━┩",
        "│ q      │        - │      2 │ ev-x 1, ev-y 1 │       3 │ ev-x cells on q at  │        1,234.6 │",
        "│        │          │        │                │         │ most 1 at once (1); │                │",
        "│        │          │        │                │         │ q lane at most 2    │                │",
        "│        │          │        │                │         │ cells (2)           │                │",
        "│ z      │        - │      3 │ ev-a 1, ev-b 2 │       0 │ -                   │              - │",
        "└────────┴──────────┴────────┴────────────────┴─────────┴─────────────────────┴────────────────┘",
        "longest wait s: real seconds the longest-waiting cell has waited so far",
        *IN_FLIGHT_TABLE,
    )
    assert err == ""


def test_lanes_without_a_state_file_names_it_and_creates_none(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = tmp_path / "none.sqlite"
    assert main(["lanes", "--state", str(state)]) == 1
    assert capsys.readouterr().err == (
        f"spark-otel: error: {state}: no governor state here: "
        "no governed runner has started on this box yet\n"
    )
    assert not state.exists()


def test_lanes_help_names_each_option_and_its_default(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("COLUMNS", "96")
    monkeypatch.setenv("SPARK_OTEL_STORE", "store.sqlite")  # the default the help names
    with pytest.raises(SystemExit) as exited:
        main(["lanes", "--help"])
    assert exited.value.code == 0
    assert capsys.readouterr().out == (
        "usage: spark-otel lanes [-h] [--rules FILE] [--state PATH] [--store PATH] [--json]\n\n"
        f"{lanes.__doc__.strip()}\n\n"
        "options:\n"
        "  -h, --help    show this help message and exit\n"
        "  --rules FILE  the rules file (default: $SPARK_OTEL_RULES)\n"
        "  --state PATH  the shared state file (default: $SPARK_OTEL_GOVERNOR_STATE, else beside the\n"
        "                store)\n"
        "  --store PATH  embedded store file (default: $SPARK_OTEL_STORE or store.sqlite)\n"
        "  --json        print JSON instead of tables\n"
    )
