"""The rules file: what validates, what is refused (with the key named), and the admission
decision on plain data."""

from __future__ import annotations

from pathlib import Path

import pytest

from spark_otel import ConfigError
from spark_otel.governor.decision import InFlight, admitted_in_order, holding_rule
from spark_otel.records.rules_file import load_rules, parse_rules

GOOD = """
version = 1
computed_at = 2026-09-23T10:00:00Z
ceiling_s = 1800
eval_gap_s = 1.5

[engines.qwen]
model = "qwen3.8-27b"
url = "http://127.0.0.1:8011"

[[lane]]
engine = "nemotron"
cells = 8
evidence = "aggregate peaks at 262 tok/s at 8 streams and falls to 181 at 16"

[[limit]]
engine = "qwen"
eval = "thinking-review"
cell_class = "generation-heavy"
cells = 8

[[limit]]
engine = "qwen"
cell_class = "long-context"
cells = 2

[[cross_engine]]
engine = "nemotron"
cells = 0
while_engine = "qwen"
"""


def test_a_good_file_reads_every_rule_with_its_evidence(tmp_path: Path) -> None:
    path = tmp_path / "rules.toml"
    path.write_text(GOOD)
    rules = load_rules(path)
    assert [r.describe() for r in rules.rules] == [
        "nemotron lane at most 8 cells",
        "thinking-review generation-heavy cells on qwen at most 8 at once",
        "long-context cells on qwen at most 2 at once",
        "nemotron yields while a cell with a ceiling runs on qwen",
    ]
    assert rules.eval_gap_s == 1.5
    assert rules.engines["qwen"].model == "qwen3.8-27b"
    assert rules.lane[0].evidence.startswith("aggregate peaks at 262")
    assert rules.class_of("thinking-review") == "generation-heavy"
    assert rules.class_of("other") is None
    assert rules.engines_governed() == {"qwen", "nemotron"}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[[lane]]\nengine = 'e'\ncells = 2\nstreams = 4\n", "rules.toml: lane[0].streams: unknown key"),
        ("[[lane]]\nengine = 'e'\ncels = 2\n", "rules.toml: lane[0].cels: unknown key (did you mean cells?)"),
        ("colour = 'red'\n", "rules.toml: colour: unknown key"),
        (
            "[[limit]]\nengine = 'e'\ncells = 2\n",
            "a limit names the eval, the cell_class or the ceiling_bound cells it holds",
        ),
        ("[[lane]]\nengine = 'e'\n", "rules.toml: lane[0].cells: missing"),
        (
            "[[lane]]\nengine = 'e'\ncells = 0\n",
            "rules.toml: lane[0].cells: Input should be greater than or equal to 1",
        ),
        (
            "[[cross_engine]]\nengine = 'q'\ncells = 0\nwhile_engine = 'q'\n",
            "engine and while_engine are both 'q'",
        ),
        ("version = 3\n", "rules.toml: version: Input should be less than or equal to 2"),
        ("[[lane]\n", "rules.toml: not valid TOML"),
        ("[engines.q]\nmodle = 'x'\n", "rules.toml: engines.q.modle: unknown key"),
    ],
)
def test_a_bad_file_is_refused_naming_the_key(text: str, message: str) -> None:
    with pytest.raises(ConfigError) as raised:
        parse_rules(text, where="rules.toml")
    assert message in str(raised.value)


def test_a_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as raised:
        load_rules(tmp_path / "nope.toml")
    assert str(raised.value) == f"rules file {tmp_path / 'nope.toml'}: no such file"


def _c(engine: str, eval_name: str = "e", cell_class: str | None = None, deadline: bool = True) -> InFlight:
    return InFlight(engine, eval_name, cell_class, deadline)


def test_the_lane_cap_counts_every_cell_on_the_engine() -> None:
    rules = parse_rules("[[lane]]\nengine = 'n'\ncells = 2\n", where="r")
    assert holding_rule(_c("n"), [_c("n", "a")], rules) is None
    held = holding_rule(_c("n"), [_c("n", "a"), _c("n", "b")], rules)
    assert held is not None
    assert held.describe() == "n lane at most 2 cells"
    assert holding_rule(_c("q"), [_c("n", "a"), _c("n", "b")], rules) is None  # another engine


def test_a_limit_counts_only_the_cells_it_selects() -> None:
    rules = parse_rules("[[limit]]\nengine = 'q'\neval = 'r'\ncells = 1\n", where="r")
    assert holding_rule(_c("q", "r"), [_c("q", "other"), _c("q", "other")], rules) is None
    assert holding_rule(_c("q", "r"), [_c("q", "r")], rules) is rules.limit[0]
    assert holding_rule(_c("q", "other"), [_c("q", "r")], rules) is None
    by_class = parse_rules("[[limit]]\nengine = 'q'\ncell_class = 'long'\ncells = 1\n", where="r")
    assert holding_rule(_c("q", "x", "long"), [_c("q", "y", "long")], by_class) is by_class.limit[0]
    assert holding_rule(_c("q", "x", "short"), [_c("q", "y", "long")], by_class) is None


def test_a_cross_engine_rule_holds_while_its_eval_runs_or_was_just_there() -> None:
    rules = parse_rules(
        "[[cross_engine]]\nengine = 'n'\ncells = 0\nwhile_engine = 'q'\nwhile_eval = 'serial'\n", where="r"
    )
    rule = rules.cross_engine[0]
    assert holding_rule(_c("n"), [_c("q", "serial")], rules) is rule
    assert holding_rule(_c("n"), [_c("q", "other")], rules) is None  # another eval on q
    assert holding_rule(_c("n"), [], rules) is None
    assert holding_rule(_c("n"), [], rules, present=[_c("q", "serial")]) is rule  # between its cells
    one = parse_rules("[[cross_engine]]\nengine = 'n'\ncells = 1\nwhile_engine = 'q'\n", where="r")
    assert holding_rule(_c("n"), [_c("q", "x", deadline=True)], one) is None  # one admitted
    assert holding_rule(_c("n"), [_c("q", "x"), _c("n", "y")], one) is one.cross_engine[0]
    # Without while_eval, only a cell with a per-cell ceiling triggers it.
    assert holding_rule(_c("n"), [_c("q", "x", deadline=False), _c("n", "y")], one) is None


def test_the_queue_is_fifo_for_a_shared_rule_but_an_own_limit_blocks_no_one_else() -> None:
    lane = parse_rules("[[lane]]\nengine = 'q'\ncells = 2\n", where="r")
    waiting = [_c("q", "a"), _c("q", "b"), _c("q", "c")]
    assert admitted_in_order(waiting, [_c("q", "z")], lane) == [True, False, False]
    limit = parse_rules("[[limit]]\nengine = 'q'\neval = 'a'\ncells = 1\n", where="r")
    assert admitted_in_order([_c("q", "a"), _c("q", "b")], [_c("q", "a")], limit) == [False, True]


def test_a_cross_engine_rule_that_admits_some_says_how_many() -> None:
    rules = parse_rules(
        "[[cross_engine]]\nengine = 'n'\ncells = 1\nwhile_engine = 'q'\nwhile_eval = 'serial'\n"
        "[[cross_engine]]\nengine = 'n'\ncells = 2\nwhile_engine = 'q'\n",
        where="r",
    )
    assert [r.describe() for r in rules.rules] == [
        "n admits at most 1 cell while serial runs on q",
        "n admits at most 2 cells while a cell with a ceiling runs on q",
    ]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        # Exactly the message, nothing after it, when no key is close to the unknown one.
        ("[[lane]]\nengine = 'e'\ncells = 2\nstreams = 4\n", "rules.toml: lane[0].streams: unknown key"),
        ("Xcolour = 'red'\n", "rules.toml: Xcolour: unknown key"),
        ('".x" = 1\n', "rules.toml: .x: unknown key"),  # a key that starts with a dot keeps it
        ("[[lane]]\nengine = 'e'\ncels = 2\n", "rules.toml: lane[0].cels: unknown key (did you mean cells?)"),
    ],
)
def test_an_unknown_key_is_named_exactly(text: str, message: str) -> None:
    with pytest.raises(ConfigError) as raised:
        parse_rules(text, where="rules.toml")
    assert str(raised.value) == message


def test_a_rules_file_that_is_not_utf8_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "rules.toml"
    path.write_bytes(b"\xff[[lane]]\n")
    with pytest.raises(ConfigError) as raised:
        load_rules(path)
    assert str(raised.value) == f"rules file {path}: not UTF-8 text (invalid start byte at byte 0)"


def test_a_limit_of_two_admits_the_second_cell_and_holds_the_third() -> None:
    rules = parse_rules("[[limit]]\nengine = 'q'\neval = 'r'\ncells = 2\n", where="r")
    assert holding_rule(_c("q", "r"), [_c("q", "r"), _c("q", "other")], rules) is None
    assert holding_rule(_c("q", "r"), [_c("q", "r"), _c("q", "r")], rules) is rules.limit[0]


def test_every_cross_engine_rule_on_the_candidates_engine_is_checked() -> None:
    # The first rule limits another engine; the second, on the candidate's, must still hold it.
    rules = parse_rules(
        "[[cross_engine]]\nengine = 'x'\ncells = 0\nwhile_engine = 'q'\n"
        "[[cross_engine]]\nengine = 'n'\ncells = 0\nwhile_engine = 'q'\n",
        where="r",
    )
    assert holding_rule(_c("n"), [_c("q", "a")], rules) is rules.cross_engine[1]


def test_the_queue_counts_an_eval_between_its_cells_as_present() -> None:
    rules = parse_rules(
        "[[cross_engine]]\nengine = 'n'\ncells = 0\nwhile_engine = 'q'\nwhile_eval = 'serial'\n", where="r"
    )
    waiting = [_c("n", "a"), _c("q", "b")]
    assert admitted_in_order(waiting, [], rules) == [True, True]
    assert admitted_in_order(waiting, [], rules, present=[_c("q", "serial")]) == [False, True]
