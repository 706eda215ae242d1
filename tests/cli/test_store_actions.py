"""`spark-otel store`'s two actions as the user meets them in `--help`: each one's help line and
description, and its options (--store, --json) with their help.

tests/cli/test_parser_options.py pins every command's own options, the store's ACTION among them,
but not what each action's parser holds; here a changed or lost word in them fails.
"""

from __future__ import annotations

import argparse

import pytest

from spark_otel.cli import build_parser

INFO = "the store's schema version and rows per table (reads only)"
MIGRATE = "migrate an older store to this spark-otel's schema, in place"


def _store_actions() -> argparse._SubParsersAction:
    (commands,) = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    store = commands.choices["store"]
    (actions,) = [a for a in store._actions if isinstance(a, argparse._SubParsersAction)]
    return actions


def test_each_store_action_says_what_it_does_and_takes_store_and_json() -> None:
    actions = _store_actions()
    assert {choice.dest: choice.help for choice in actions._choices_actions} == {
        "info": INFO,
        "migrate": MIGRATE,
    }
    for name, text in (("info", INFO), ("migrate", MIGRATE)):
        parser = actions.choices[name]
        assert parser.description == text, name
        options = [(a.option_strings, type(a).__name__, a.dest) for a in parser._actions if a.dest != "help"]
        assert options == [(["--store"], "_StoreAction", "store"), (["--json"], "_StoreTrueAction", "json")]
        (json_flag,) = [a for a in parser._actions if a.dest == "json"]
        assert json_flag.help == "print JSON instead of a table", name


def test_store_migrate_help_is_its_usage_description_and_options(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from spark_otel.cli import main

    monkeypatch.setenv("HOME", "/home/eval")  # the default store path the help names, fixed
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    with pytest.raises(SystemExit) as exc:
        main(["store", "migrate", "--help"])
    assert exc.value.code == 0
    assert " ".join(capsys.readouterr().out.split()) == (  # argparse wraps lines
        f"usage: spark-otel store migrate [-h] [--store PATH] [--json] {MIGRATE} options: "
        "-h, --help show this help message and exit --store PATH embedded store file (default: "
        "$SPARK_OTEL_STORE or /home/eval/.local/share/spark-otel/store.sqlite) --json print JSON "
        "instead of a table"
    )
