"""The command line's shared wording, word for word: the "(default: X)" the help adds (and leaves
out where an option's help already says its default), an option's bounds as its error names them,
and a pydantic validation error as one line naming each field.

These are what a user reads when a command refuses an input, so each is pinned as a whole text."""

from __future__ import annotations

import argparse

import pydantic
import pytest

from spark_otel import ConfigError
from spark_otel.cli import HelpFormatter, _one_line, _run
from spark_otel.cli._common import COUNT, DURATION_S, FRACTION, INTERVAL_S, Bounds


def _help_of(**option: object) -> str:
    parser = argparse.ArgumentParser(prog="p", formatter_class=HelpFormatter)
    parser.add_argument("--n", **option)  # type: ignore[arg-type]
    return " ".join(parser.format_help().split())


def test_help_adds_the_default_once_and_never_where_the_help_says_it() -> None:
    assert "--n N how many (default: 3)" in _help_of(default=3, help="how many")
    said = _help_of(default=3, help="how many (default: three, the usual)")
    assert said.endswith("--n N how many (default: three, the usual)")


@pytest.mark.parametrize(
    ("bounds", "text"),
    [
        (Bounds(), "a finite number"),
        (Bounds(whole=True), "a whole number"),
        (Bounds(at_most=5), "a finite number <= 5"),
        (Bounds(at_least=0.5), "a finite number >= 0.5"),
        (INTERVAL_S, "a finite number > 0 and <= 86,400"),
        (DURATION_S, "a finite number >= 0 and <= 31,536,000"),
        (FRACTION, "a finite number >= 0 and <= 1"),
        (COUNT, "a whole number >= 1 and <= 1,000,000,000"),
    ],
)
def test_bounds_read_as_the_error_names_them(bounds: Bounds, text: str) -> None:
    assert str(bounds) == text


class _Cell(pydantic.BaseModel):
    n: int
    budget: dict[str, float]


def _validation_error() -> pydantic.ValidationError:
    with pytest.raises(pydantic.ValidationError) as caught:
        _Cell.model_validate({"n": "many", "budget": {"decode": "slow"}})
    return caught.value


def test_a_validation_error_is_one_line_naming_each_field() -> None:
    assert _one_line(_validation_error()) == (
        "n: Input should be a valid integer, unable to parse string as an integer; "
        "budget.decode: Input should be a valid number, unable to parse string as a number"
    )


def test_a_command_that_raises_a_validation_error_exits_2_with_that_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    def run(_args: argparse.Namespace) -> int:
        raise _validation_error()

    assert _run(argparse.Namespace(run=run, debug=False)) == 2
    assert capsys.readouterr().err == f"spark-otel: error: {_one_line(_validation_error())}\n"


@pytest.mark.parametrize(
    ("bounds", "edge", "past"),
    [(INTERVAL_S, 86_400, 86_400.5), (DURATION_S, 0, -0.5), (FRACTION, 1, 1.5), (COUNT, 1, 0)],
)
def test_a_bound_takes_its_edge_and_refuses_past_it_naming_the_option(
    bounds: Bounds, edge: float, past: float
) -> None:
    bounds.check("--n", edge)
    with pytest.raises(ConfigError) as refused:
        bounds.check("--n", past)
    assert str(refused.value) == f"--n must be {bounds}, got {past:g}"
