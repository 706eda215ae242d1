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


def _help(command: str, capsys: pytest.CaptureFixture[str]) -> str:
    from spark_otel.cli import main

    with pytest.raises(SystemExit) as exc:
        main([command, "--help"])
    assert exc.value.code == 0
    return " ".join(capsys.readouterr().out.split())  # argparse wraps lines


def test_help_shows_each_options_default_once(capsys: pytest.CaptureFixture[str]) -> None:
    from spark_otel.analysis.advisor import AdvisorConfig
    from spark_otel.analysis.windows import DEFAULT_MERGE_GAP_S

    expected = {
        "probe": ["--tokens TOKENS output tokens per stream (default: 512)", "(default: 1,2,4,8,16,32)"],
        "concurrency": [f"(default: {DEFAULT_MERGE_GAP_S})"],
        "advise": [
            f"(default: {AdvisorConfig.model_fields['ceiling_s'].default})",
            f"(default: {AdvisorConfig.model_fields['threshold'].default})",
        ],
        "cells": ["how many cells, newest first (default: 50)"],
        "receive": ["seconds between scrapes (default: 5.0)"],
    }
    for command, defaults in expected.items():
        text = _help(command, capsys)
        for default in defaults:
            assert default in text, (command, default)


def test_every_option_with_a_default_shows_it_and_no_flag_or_unset_option_does(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from spark_otel.cli import COMMANDS, build_parser

    parser = build_parser()
    (commands,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    for name, module, _help_text in COMMANDS:
        if module == "demo":  # the lead's module: its own help strings
            continue
        text = _help(name, capsys)
        assert "(default " not in text, name  # the old hand-written form, now the formatter's
        for action in commands.choices[name]._actions:
            if not action.option_strings or action.default in (None, False, argparse.SUPPRESS):
                continue
            shown = ",".join(map(str, action.default)) if isinstance(action.default, list) else action.default
            assert f"(default: {shown})" in text, (name, action.dest)
        assert "(default: None)" not in text, name
        assert "(default: False)" not in text, name
