"""`spark-otel rules check FILE --store PATH`: which of a store's recent cells each rule would have
caught, on a real store of the day after the measured run (`tests.support.rule_catches`): the
rules in their general form catch the next runs under their new names, the rules by eval catch
none of them; the table as printed; bad options and stores refused, nothing written (that the
store's bytes stay as they were is `test_readers_never_write`'s)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.support.rule_catches import BY_EVAL_RULES, GENERAL_RULES, T0_NS, next_day_store

from spark_otel._clock import NS_PER_S
from spark_otel.cli import main

NEWEST_NS = T0_NS + 1000 * NS_PER_S
UNCHECKED = (
    "spark-otel: warning: nemotron: no url in [engines]: not checked\n"
    "spark-otel: warning: qwen: no url in [engines]: not checked\n"
)


@pytest.fixture
def files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)  # relative paths: the titles are the same on every run
    monkeypatch.setenv("COLUMNS", "96")
    Path("general.toml").write_text(GENERAL_RULES)
    Path("by-eval.toml").write_text(BY_EVAL_RULES)
    return next_day_store(tmp_path / "store.sqlite")


def _caught(out: str) -> dict[str, object]:
    data = json.loads(out)
    caught: dict[str, object] = data["caught"]
    rules = caught.pop("rules")
    assert isinstance(rules, list)
    caught["rules"] = [
        (r["rule"], r["by_eval"], [c["cell"] for c in r["catches"]], [c["cell"] for c in r["held_while"]])
        for r in rules
    ]
    return {"form": data["form"], "version": data["version"], "store": data["store"], **caught}


def test_the_general_rules_catch_today_s_runs_and_the_rules_by_eval_none(
    files: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["rules", "check", "general.toml", "--store", "store.sqlite", "--json"]) == 0
    out, err = capsys.readouterr()
    assert (_caught(out), err) == (
        {
            "form": "general",
            "version": 2,
            "store": "store.sqlite",
            "since_unix_ns": NEWEST_NS - 24 * 3600 * NS_PER_S,
            "until_unix_ns": NEWEST_NS,
            "cells": 15,
            "no_engine": 1,
            "rules": [
                ("qwen lane at most 8 cells", False, ["s1", "s2", "s3", "q1", "p1", "f1", "d1"], []),
                (
                    "ceiling-bound generation-heavy cells on qwen at most 1 at once",
                    False,
                    ["s1", "s2", "s3"],
                    [],
                ),
                ("not ceiling-bound generation-heavy cells on qwen at most 8 at once", False, ["q1"], []),
                ("long-context cells on qwen at most 2 at once", False, ["d1"], []),
                (
                    "prompt-heavy cells on nemotron at most 4 at once",
                    False,
                    ["m1", "m2", "m3", "m4", "m5", "m6", "m7", "a1"],
                    [],
                ),
                (
                    "nemotron yields while a ceiling-bound cell runs on qwen",
                    False,
                    ["m1", "m2", "m3", "m6"],
                    ["s1", "s2", "s3", "p1"],
                ),
            ],
        },
        "",
    )

    assert main(["rules", "check", "by-eval.toml", "--store", "store.sqlite", "--recent", "1", "--json"]) == 0
    out, err = capsys.readouterr()
    assert _caught(out) == {
        "form": "by eval",
        "version": 1,
        "store": "store.sqlite",
        "since_unix_ns": NEWEST_NS - 3600 * NS_PER_S,
        "until_unix_ns": NEWEST_NS,
        "cells": 15,
        "no_engine": 1,
        "rules": [
            ("demo-serial-2e14 generation-heavy cells on qwen at most 1 at once", True, [], []),
            ("demo-nemotron-2e14 cells on nemotron at most 4 at once", True, [], []),
            ("nemotron yields while demo-serial-2e14 runs on qwen", True, [], []),
        ],
    }


def test_the_table_counts_each_rule_s_catch_by_eval(files: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Under the rules and engines tables: the window looked at, then per rule its form, how many
    cells it catches and of which evals (the three commonest named), and for the cross-engine
    rule the cells that make it hold."""
    assert main(["rules", "check", "general.toml", "--store", "store.sqlite"]) == 0
    out, err = capsys.readouterr()
    assert out[out.index("     what each rule") :].splitlines() == [
        "     what each rule would have caught in store.sqlite: 15 cells started 2026-11-29 01:10 to     ",
        "                       2026-11-30 01:10 UTC; 1 naming no engine left out                        ",
        "┏━━━━━━━━━━━━━━━━━━━┳━━━━━━━━━┳━━━━━━━━━┳━━━━━━━━━━━━━━━━━━━━┳━━━━━━━━━━━━┳━━━━━━━━━━━━━━━━━━━━┓",
        "┃ rule              ┃ form    ┃ catches ┃ caught evals       ┃ held while ┃ holding evals      ┃",
        "┡━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━╇━━━━━━━━━╇━━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━━━┩",
        "│ qwen lane at most │ general │       7 │ demo-serial-7f3a   │          - │ -                  │",
        "│ 8 cells           │         │         │ 3, quick-gen-7f3a  │            │                    │",
        "│                   │         │         │ 1, nightly-proof   │            │                    │",
        "│                   │         │         │ 1, 2 more evals    │            │                    │",
        "│ ceiling-bound     │ general │       3 │ demo-serial-7f3a 3 │          - │ -                  │",
        "│ generation-heavy  │         │         │                    │            │                    │",
        "│ cells on qwen at  │         │         │                    │            │                    │",
        "│ most 1 at once    │         │         │                    │            │                    │",
        "│ not ceiling-bound │ general │       1 │ quick-gen-7f3a 1   │          - │ -                  │",
        "│ generation-heavy  │         │         │                    │            │                    │",
        "│ cells on qwen at  │         │         │                    │            │                    │",
        "│ most 8 at once    │         │         │                    │            │                    │",
        "│ long-context      │ general │       1 │ doc-qa-1 1         │          - │ -                  │",
        "│ cells on qwen at  │         │         │                    │            │                    │",
        "│ most 2 at once    │         │         │                    │            │                    │",
        "│ prompt-heavy      │ general │       8 │ demo-nemotron-7f3a │          - │ -                  │",
        "│ cells on nemotron │         │         │ 7, adhoc 1         │            │                    │",
        "│ at most 4 at once │         │         │                    │            │                    │",
        "│ nemotron yields   │ general │       4 │ demo-nemotron-7f3a │          4 │ demo-serial-7f3a   │",
        "│ while a           │         │         │ 4                  │            │ 3, nightly-proof 1 │",
        "│ ceiling-bound     │         │         │                    │            │                    │",
        "│ cell runs on qwen │         │         │                    │            │                    │",
        "└───────────────────┴─────────┴─────────┴────────────────────┴────────────┴────────────────────┘",
        "catches: the cells the rule counts against its cap (a cross-engine rule: those on its engine ",
        "while it holds)",
        "held while: a cross-engine rule's: the cells that make it hold (ceiling-bound, of its eval, or ",
        "with a ceiling, as the rule says)",
    ]
    assert err == UNCHECKED


@pytest.mark.parametrize(
    ("recent", "problem"),
    [
        ("0", "--recent must be a finite number > 0 and <= 8,784, got 0"),
        ("nan", "--recent must be a finite number > 0 and <= 8,784, got nan"),
        ("9000", "--recent must be a finite number > 0 and <= 8,784, got 9000"),
    ],
)
def test_a_bad_recent_is_refused_by_name(
    files: Path, recent: str, problem: str, capsys: pytest.CaptureFixture[str]
) -> None:
    before = files.read_bytes()
    assert main(["rules", "check", "general.toml", "--store", "store.sqlite", "--recent", recent]) == 2
    out, err = capsys.readouterr()
    assert (out, err) == ("", f"spark-otel: error: {problem}\n")
    assert files.read_bytes() == before


def test_a_missing_store_is_named_and_not_created(files: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["rules", "check", "general.toml", "--store", "none.sqlite"]) == 1
    out, err = capsys.readouterr()
    assert (out, err) == (
        "",
        "spark-otel: error: none.sqlite: no such store (nothing was recorded there; check --store or "
        "$SPARK_OTEL_STORE)\n",
    )
    assert not Path("none.sqlite").exists()


def test_recent_without_a_store_is_refused(files: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--recent alone would be ignored: said, as advise says --by-eval without --write-rules."""
    assert main(["rules", "check", "general.toml", "--recent", "2"]) == 2
    assert capsys.readouterr() == (
        "",
        "spark-otel: error: --recent picks the cells of the store --store names: name it with --store PATH\n",
    )
