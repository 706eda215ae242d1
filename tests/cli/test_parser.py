"""The `spark-otel` parser: every command listed in its help, a missing command module an error."""

from __future__ import annotations

import argparse

import pytest


def test_cli_help_lists_every_command() -> None:
    from spark_otel.cli import COMMANDS, build_parser

    parser = build_parser()
    (commands,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    assert list(commands.choices) == [name for name, _module, _help in COMMANDS]
    listed = {choice.dest for choice in commands._choices_actions}
    assert listed == {name for name, _module, _help in COMMANDS}


def test_a_missing_command_module_is_an_error_not_a_silent_skip(monkeypatch: pytest.MonkeyPatch) -> None:
    from spark_otel import cli

    monkeypatch.setattr(
        cli, "COMMANDS", (*cli.COMMANDS, ("ghost", "ghost", "a command whose module is missing"))
    )
    with pytest.raises(ModuleNotFoundError, match="ghost"):
        cli.build_parser()
