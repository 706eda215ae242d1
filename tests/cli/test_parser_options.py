"""Every command's options as the user meets them: the flags, what each takes (type, choices,
how many, its metavar), its default and its help text, and each command's description, read
from the parser and compared with tests/cli/data/parser_options.json.

The help is what a user reads before anything runs, and a default is a decision: a changed word,
unit or default must show up in review as a change to that file, not pass unnoticed. The file
holds the parser's own fields rather than the formatted `--help` text, whose layout differs
between Python versions; how the defaults are shown is pinned in test_parser.py.

After a deliberate change: `SPARK_OTEL_WRITE_PARSER_OPTIONS=1 pytest tests/cli/test_parser_options.py`
rewrites the file, and the diff is what the change does to the command line."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

import pytest

from spark_otel.cli import COMMANDS, build_parser

EXPECTED = Path(__file__).parent / "data" / "parser_options.json"


def _name(value: Any) -> Any:
    """A callable (an option's `type`) by its qualified name; anything else as JSON holds it."""
    if callable(value):
        return f"{value.__module__}.{value.__qualname__}"
    if isinstance(value, tuple):
        return list(value)
    return value


def _action(action: argparse.Action) -> dict[str, Any]:
    """The fields that shape what the option takes and says; None and a not-required flag left
    out, so each option reads as what is set on it."""
    fields = {
        "flags": action.option_strings or [action.dest],
        "action": type(action).__name__,
        "dest": action.dest,
        "type": _name(action.type),
        "choices": None if action.choices is None else list(action.choices),
        "nargs": action.nargs,
        "const": _name(action.const),
        "default": _name(action.default) if action.default is not argparse.SUPPRESS else "SUPPRESS",
        "required": action.required,
        "metavar": _name(action.metavar),
        "help": action.help,
    }
    return {k: v for k, v in fields.items() if v is not None and not (k == "required" and v is False)}


def _options() -> dict[str, Any]:
    parser = build_parser()
    (commands,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    out: dict[str, Any] = {
        "spark-otel": {
            "description": parser.description,
            "options": [_action(a) for a in parser._actions if a is not commands and a.dest != "help"],
        }
    }
    helps = {choice.dest: choice.help for choice in commands._choices_actions}
    for name, _module, _help in COMMANDS:
        command = commands.choices[name]
        out[name] = {
            "help": helps[name],
            "description": command.description,
            "options": [_action(a) for a in command._actions if a.dest != "help"],
        }
    return out


def _dump(options: dict[str, Any]) -> str:
    """One option a line, so a review diff shows the option that changed."""
    lines = ["{"]
    for i, (command, shape) in enumerate(options.items()):
        lines.append(f" {json.dumps(command)}: {{")
        for key in ("help", "description"):
            if key in shape:
                lines.append(f"  {json.dumps(key)}: {json.dumps(shape[key], ensure_ascii=False)},")
        rows = [f"   {json.dumps(a, ensure_ascii=False)}" for a in shape["options"]]
        lines.append('  "options": [\n' + ",\n".join(rows) + "\n  ]")
        lines.append(" }" + ("," if i < len(options) - 1 else ""))
    return "\n".join(lines) + "\n}\n"


@pytest.fixture
def _fixed_home(monkeypatch: pytest.MonkeyPatch) -> None:
    """The store's default path, shown in help, from a home that is the same on every machine."""
    monkeypatch.setenv("HOME", "/home/eval")
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    monkeypatch.delenv("SPARK_OTEL_STORE", raising=False)


@pytest.mark.usefixtures("_fixed_home")
def test_every_commands_options_and_help_are_the_reviewed_ones() -> None:
    options = _options()
    if os.environ.get("SPARK_OTEL_WRITE_PARSER_OPTIONS"):
        EXPECTED.parent.mkdir(exist_ok=True)
        EXPECTED.write_text(_dump(options), encoding="utf-8")
    expected = json.loads(EXPECTED.read_text(encoding="utf-8"))
    assert list(options) == list(expected)  # the commands, in the README's order
    for command, shape in options.items():
        assert shape == expected[command], command
