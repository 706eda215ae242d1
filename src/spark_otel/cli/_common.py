"""Options and output shared by several commands: the store, JSON output, tables."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from ..store import Store, default_store_path


def add_store_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--store",
        metavar="PATH",
        default=None,
        help=f"embedded store file (default: $SPARK_OTEL_STORE or {default_store_path()})",
    )


def add_advisor_arguments(parser: argparse.ArgumentParser, *, ceiling: bool = True) -> None:
    """--ceiling (unless ``ceiling`` is False) and --threshold, defaulting to `AdvisorConfig`'s, so
    advise, report and neighbour-cost agree on them."""
    from ..analysis.advisor import AdvisorConfig

    fields = AdvisorConfig.model_fields
    if ceiling:
        default_ceiling = fields["ceiling_s"].default
        parser.add_argument(
            "--ceiling",
            type=float,
            default=default_ceiling,
            metavar="SECONDS",
            help=f"per-cell ceiling (default {default_ceiling:g})",
        )
    default_threshold = fields["threshold"].default
    parser.add_argument(
        "--threshold",
        type=float,
        default=default_threshold,
        metavar="FRACTION",
        help=f"neighbour cost past which a load is flagged (default {default_threshold:g}, "
        f"i.e. {default_threshold:.0%}%)",  # argparse reads %% as %
    )


def open_store(args: argparse.Namespace, *, write: bool = False) -> Store:
    """The store ``--store`` names (else the default). A command that only reads opens it read
    only: a missing file or one that is not a spark-otel store is an error, never created."""
    path = getattr(args, "store", None) or None
    return Store(path, read_only=not write)


def print_json(value: Any) -> None:
    json.dump(value, sys.stdout, indent=2, default=str)
    sys.stdout.write("\n")


def fmt_number(value: float | None, digits: int = 2) -> str:
    """A table cell for a number that may be missing ("-"), thousands separated."""
    return "-" if value is None else f"{value:,.{digits}f}"


def rich_module(name: str) -> Any:
    """A module of ``rich``, which draws the tables and progress of the CLI (the ``cli`` extra):
    the core install that `instrument()` needs leaves it out, so a command that would draw one
    without it says which extra to install."""
    import importlib

    try:
        return importlib.import_module(f"rich.{name}")
    except ImportError:
        from .._exceptions import ConfigError

        raise ConfigError(
            "this command draws tables with rich, which the core install leaves out: "
            "pip install 'spark-otel[cli]' (or use --json where the command has it)"
        ) from None


def print_table(title: str | None, columns: list[str], rows: list[list[Any]]) -> None:
    """A table in the article's style, on stdout; plain text when not a terminal."""
    Console = rich_module("console").Console
    Table = rich_module("table").Table

    table = Table(title=title, show_lines=False)
    for column in columns:
        table.add_column(column, justify="left" if column == columns[0] else "right")
    for row in rows:
        table.add_row(*("" if v is None else str(v) for v in row))
    # A terminal gets its own width; a pipe or file gets lines long enough not to fold any cell.
    Console(width=None if sys.stdout.isatty() else 240).print(table)
