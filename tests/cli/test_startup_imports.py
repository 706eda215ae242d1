"""What a command's start-up imports: the parser loads only the module of the command it runs, so
`spark-otel --help` and a command's ``--help`` never pay for numpy, the analyses or another
command's dependencies. Each case runs in a fresh interpreter (this process has imported them
all) and reads its ``sys.modules`` after the help is printed."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from spark_otel.cli import COMMANDS

_PROBE = """
import contextlib, io, json, sys
from spark_otel.cli import main
with contextlib.redirect_stdout(io.StringIO()):
    try:
        main(sys.argv[1:])
    except SystemExit:
        pass
print(json.dumps(sorted(sys.modules)))
"""

HEAVY = ("numpy", "matplotlib", "spark_otel.analysis", "spark_otel.report", "spark_otel.demo", "rich")
"""Never imported to build a parser or print its help."""

# Commands whose options take a default from an analysis (the merge gap, the advisor's ceiling, a
# bin width) import that analysis to build their options: `spark_otel.analysis` loads all of them.
_OPTIONS_FROM_ANALYSES = {"concurrency", "neighbour-cost", "advise", "report", "instruments"}


def _imported(*argv: str) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-c", _PROBE, *argv], capture_output=True, text=True, check=True, timeout=60
    )
    return set(json.loads(out.stdout))


def _loaded(modules: set[str], names: tuple[str, ...]) -> list[str]:
    return sorted(m for m in modules if any(m == n or m.startswith(n + ".") for n in names))


def test_the_top_level_help_imports_no_command_module_nor_pydantic() -> None:
    modules = _imported("--help")
    commands = tuple(f"spark_otel.cli.{module}" for _name, module, _help in COMMANDS)
    assert _loaded(modules, commands) == []
    assert _loaded(modules, (*HEAVY, "pydantic", "spark_otel.model", "spark_otel.store")) == []


@pytest.mark.parametrize("name", [name for name, _m, _h in COMMANDS if name not in _OPTIONS_FROM_ANALYSES])
def test_a_commands_help_imports_its_module_only_and_nothing_heavy(name: str) -> None:
    modules = _imported(name, "--help")
    (own,) = [module for command, module, _help in COMMANDS if command == name]
    others = tuple(f"spark_otel.cli.{module}" for _n, module, _h in COMMANDS if module != own)
    assert f"spark_otel.cli.{own}" in modules
    assert _loaded(modules, others) == []
    assert _loaded(modules, HEAVY) == []


def test_running_a_command_imports_no_other_commands_module() -> None:
    modules = _imported("rules", "check", "/nonexistent/rules.toml")
    others = tuple(f"spark_otel.cli.{module}" for _n, module, _h in COMMANDS if module != "rules")
    assert _loaded(modules, others) == []
