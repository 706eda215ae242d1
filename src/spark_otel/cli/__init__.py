"""The ``spark-otel`` command line: a thin shell over the library, one module per command.

Every command module defines ``add_arguments(parser)`` and ``run(args) -> int`` and keeps heavy
imports inside ``run``; `main` imports only the module of the command it runs (`COMMANDS` names
each command and its one-line help), so ``--help`` and every command start fast. Errors the
library raises on purpose (`SparkOtelError`) become one line on stderr and their exit code;
anything else is reported as an internal error (``--debug`` shows the traceback). Every
``--help`` shows the defaults of the options that have one (`HelpFormatter`); log records print
once each, on stderr (`_console`).
"""

from __future__ import annotations

import argparse
import gc
import importlib
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, cast

from .._exceptions import SparkOtelError
from .._version import __version__
from ._common import reset_notes
from ._console import cli_logging

# (command, module, one-line help), in the order the README introduces them.
COMMANDS: tuple[tuple[str, str, str], ...] = (
    ("demo", "demo", "run the whole story on a simulated two-engine box and write the report"),
    ("cells", "cells", "list recent eval cells from the embedded store"),
    ("requests", "requests", "list recent requests from the embedded store, those outside any cell marked"),
    ("probe", "probe", "measure what concurrent streams buy on one engine (Appendix A)"),
    ("concurrency", "concurrency", "per-cell decode rate against cells in flight, from recorded cells"),
    ("neighbour-cost", "neighbour_cost", "what other load on the box cost an eval's cells"),
    ("timeouts", "timeouts", "why each cell that hit its ceiling did: slowed, long by itself, or queued"),
    ("advise", "advise", "recommend worker counts per cell class and flag costly neighbours"),
    ("rules", "rules", "check a governor rules file (valid, still about the models served)"),
    ("lanes", "lanes", "the governor's lanes now: cells in use and their live tok/s, cells waiting and why"),
    ("report", "report", "write a self-contained HTML report with plots"),
    ("receive", "receive", "scrape engines' /metrics and re-export them as OpenTelemetry metrics"),
    ("ingest-nsight", "ingest_nsight", "read Nsight Systems SQLite exports: GPU metrics and summaries"),
    ("gpu-sample", "gpu_sample", "sample GPU utilization, power and clocks (NVML or nvidia-smi)"),
    ("instruments", "instruments", "which gauges measure load: each against token throughput (Appendix F)"),
    ("backfill", "backfill", "turn existing eval records (JSON, JSONL, CSV, Inspect logs) into cells"),
    ("sim", "sim", "serve simulated vLLM-compatible engines on 127.0.0.1"),
    ("store", "store", "the embedded store's schema and rows; migrate an older one in place"),
)

DESCRIPTION = """\
spark-otel shows where an LLM evaluation box spends its time. The GPU's busy gauge reads 96%
while the chip mostly waits; the truth is in token counts over time.

Record:   instrument your eval runner (spark_otel.instrument(), spark_otel.cell(...)),
          or backfill records of an eval that already ran.
Measure:  probe an engine's concurrency curve; receive engine /metrics, GPU samples, Nsight exports.
Answer:   concurrency, neighbour-cost, advise and report read the embedded store
          (default ~/.local/share/spark-otel/store.sqlite, or $SPARK_OTEL_STORE, or --store).

Start with `spark-otel demo`: a simulated two-engine box, no server to install.
"""


class HelpFormatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """Descriptions as written, and "(default: X)" after every option that has a default. Not for
    flags (their default is off), options without one (None), or help that already says it."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        help_text = action.help or ""
        if action.default is None or action.default is False or "(default" in help_text:
            return action.help
        return super()._get_help_string(action)


class _Commands(argparse._SubParsersAction):  # type: ignore[type-arg]  # argparse's own subcommands
    """Subcommands whose options are added only when one is chosen: each command's module (and what
    it imports) loads when its name is parsed, so one command never pays for the others'."""

    pending: dict[str, str]
    """Command name -> module, for the commands not yet filled in."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        name = values[0]
        module_name = self.pending.pop(name, None)
        if module_name is not None:
            _fill(self.choices[name], module_name)
        super().__call__(parser, namespace, values, option_string)


def _fill(command: argparse.ArgumentParser, module_name: str) -> None:
    """The command's description, options and ``run``, from its module (a missing one is an error)."""
    module = importlib.import_module(f".{module_name}", __name__)
    command.description = (module.__doc__ or command.description or "").strip()
    module.add_arguments(command)
    command.set_defaults(run=module.run)


def build_parser(*, lazy: bool = False) -> argparse.ArgumentParser:
    """The whole command line; ``lazy``: each command's options added only once it is chosen
    (`main`'s parser: the top level's help needs no command's module)."""
    parser = argparse.ArgumentParser(
        prog="spark-otel", description=DESCRIPTION, formatter_class=HelpFormatter
    )
    parser.add_argument("--version", action="version", version=f"spark-otel {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks and debug logs")
    sub = cast(_Commands, parser.add_subparsers(dest="command", metavar="COMMAND", action=_Commands))
    sub.pending = {}
    for name, module_name, help_text in COMMANDS:
        command = sub.add_parser(name, help=help_text, description=help_text, formatter_class=HelpFormatter)
        if lazy:
            sub.pending[name] = module_name
        else:
            _fill(command, module_name)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser(lazy=True)
    args = parser.parse_args(argv)
    if getattr(args, "run", None) is None:
        parser.print_help()
        return 2
    reset_notes()
    with cli_logging(debug=args.debug), rare_collections():
        return _run(args)


COLLECTION_THRESHOLDS = (50_000, 20, 100)
"""The cyclic collector's thresholds while a command runs (Python's are 700, 10, 10)."""


@contextmanager
def rare_collections() -> Iterator[None]:
    """The cyclic collector's passes made rare while a command runs, its thresholds as they were
    after: an answer holds the store's cells (100,000 records and their dicts, which make no
    cycles) while it builds as many objects again, and at Python's thresholds the passes that
    scan them all took half of `concurrency`'s and two fifths of `advise`'s time at 100,000
    cells. Collections still run: garbage in cycles waits at most some 50,000 allocations."""
    before = gc.get_threshold()
    gc.set_threshold(*COLLECTION_THRESHOLDS)
    try:
        yield
    finally:
        gc.set_threshold(*before)


def _run(args: argparse.Namespace) -> int:
    try:
        return int(args.run(args) or 0)
    except SparkOtelError as exc:
        if args.debug:
            raise
        print(f"spark-otel: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0
    except Exception as exc:
        if args.debug:
            raise
        return _unexpected(exc)


def _unexpected(exc: Exception) -> int:
    """One line for an error no command raised on purpose: a full disk and a model's validation
    are named as what they are (exit 1 and 2); anything else is an internal error."""
    from pydantic import ValidationError

    from .._files import disk_full

    if disk_full(exc):
        print(f"spark-otel: error: {_full(exc)}", file=sys.stderr)
        return 1
    if isinstance(exc, ValidationError):
        print(f"spark-otel: error: {_one_line(exc)}", file=sys.stderr)
        return 2
    print(f"spark-otel: internal error: {type(exc).__name__}: {exc} (rerun with --debug)", file=sys.stderr)
    return 1


def _full(exc: BaseException) -> str:
    """A full disk, named with the file it stopped (where the error names one): what a command
    wrote before stays (the store's transactions, the outputs written whole or not at all)."""
    where = next(
        (
            str(e.filename)
            for e in (exc, exc.__cause__, exc.__context__)
            if isinstance(e, OSError) and e.filename
        ),
        None,
    )
    return (
        f"disk full{f': cannot write {where}' if where else ''} ({exc}); "
        "nothing written before was lost; free some space and run it again"
    )


def _one_line(exc: object) -> str:
    from pydantic import ValidationError

    assert isinstance(exc, ValidationError)
    parts = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"]) or exc.title
        parts.append(f"{where}: {err['msg']}")
    return "; ".join(parts)
