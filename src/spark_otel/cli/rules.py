"""Check a governor rules file: valid, and still about the models the engines serve.

    spark-otel rules check rules.toml

Validates the file (an unknown key is named, with the table it is in; exit 2), prints every
rule with its evidence and when it was measured, and asks each engine with a URL in
[engines] what it serves now: a rule whose engine serves another model than it was measured on
is stale. Stale rules are still applied by the governor; the line says which command measures
them again. The title says which form the rules take: general (by cell class and for any
ceiling-bound cell: they carry to the next run of an eval, whatever it is called), by eval
(naming the evals measured: version 1's forms), or mixed.

--store PATH also lists, per rule, how many and which of the store's recent cells (those that
started up to --recent HOURS before its newest cell, default 24) it would have caught, each
cell classed as the governor would at admission under these rules (its recorded prompt size
taken as declared): the cells it counts against its cap and, for a cross-engine rule, the
cells that make it hold. Before relying on rules in their general form, this shows that they
catch the evals meant, whatever each run was called. --json prints the same for scripts.

Write a file with `spark-otel advise --write-rules FILE`, or by hand (docs/governor.md).
"""

from __future__ import annotations

import argparse
import logging
from typing import TYPE_CHECKING

from ._common import Bounds, open_store, print_json, print_table
from ._console import status

if TYPE_CHECKING:
    from ..governor import RulesFile
    from ..governor.matching import StoreCatch

_logger = logging.getLogger(__name__)

RECENT_H = Bounds(above=0, at_most=24 * 366)
"""--recent: hours before the store's newest cell, at most a year."""
RECENT_DEFAULT_H = 24.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="rules_command", metavar="ACTION", required=True)
    check = sub.add_parser(
        "check",
        help="validate a rules file and check its engines' models",
        formatter_class=parser.formatter_class,  # the command line's: --help shows the defaults
    )
    check.add_argument("file", metavar="FILE", help="the rules file (TOML)")
    check.add_argument("--timeout", type=float, default=2.0, metavar="SECONDS", help="per engine")
    check.add_argument("--json", action="store_true", help="print JSON instead of tables")
    check.add_argument(
        "--store", metavar="PATH", help="also show which of this store's recent cells each rule would catch"
    )
    check.add_argument(
        "--recent",
        type=float,
        metavar="HOURS",
        help=f"with --store: the cells that started this long before the store's newest cell (default "
        f"{RECENT_DEFAULT_H:g})",
    )


def run(args: argparse.Namespace) -> int:
    from ..governor import load_rules
    from ..receivers.served_models import check_engines
    from ._common import TIMEOUT_S

    TIMEOUT_S.check("--timeout", args.timeout)
    if args.recent is not None and not args.store:
        from .._exceptions import ConfigError

        raise ConfigError("--recent picks the cells of the store --store names: name it with --store PATH")
    rules = load_rules(args.file)
    catch = _catch(args, rules) if args.store else None
    checks = check_engines(rules, timeout_s=args.timeout)
    if args.json:
        from ..views.rule_catches import store_catch_json

        print_json(
            {
                "file": args.file,
                "valid": True,
                "version": rules.format_version,
                "form": rules.form,
                **({"store": args.store, "caught": store_catch_json(catch)} if catch is not None else {}),
                "rules": [r.model_dump(mode="json") for r in rules.rules],
                "unmeasured": rules.unmeasured,
                "engines": [
                    {
                        "engine": c.engine,
                        "measured_model": c.measured_model,
                        "serving": list(c.serving) if c.serving is not None else None,
                        "stale": c.stale,
                        "problem": c.problem,
                    }
                    for c in checks
                ],
            }
        )
        return 0
    when = rules.computed_at.strftime("%Y-%m-%d %H:%M UTC") if rules.computed_at else "unknown"
    n = len(rules.rules)
    print_table(
        f"{args.file}: {n} rule{'' if n == 1 else 's'}, valid, {rules.form} (version {rules.format_version}, "
        f"computed {when})",
        ["rule", "evidence", "measured (UTC)"],
        [
            [
                r.describe(),
                r.evidence or "-",
                r.measured_at.strftime("%Y-%m-%d %H:%M") if r.measured_at else "-",
            ]
            for r in rules.rules
        ],
    )
    print_table(
        "engines",
        ["engine", "measured on", "serving now", "state"],
        [
            [
                c.engine,
                c.measured_model or "-",
                ", ".join(c.serving) if c.serving else "-",
                "stale" if c.stale else ("current" if c.problem is None else "unchecked"),
            ]
            for c in checks
        ],
    )
    if catch is not None:
        from ..views.rule_catches import catches_table, store_catch_title

        headers, rows, notes = catches_table(catch.caught)
        print_table(store_catch_title(args.store, catch), headers, rows, notes=notes)
    for c in checks:
        if c.problem is not None:
            _logger.warning("%s: %s", c.engine, c.problem)
    for line in rules.unmeasured:
        print(f"not covered yet: {line}")
    if not rules.rules:
        _logger.warning("%s: no rules: the governor holds no cell with this file", args.file)
    return 0


def _catch(args: argparse.Namespace, rules: RulesFile) -> StoreCatch:
    from ..governor.matching import caught_in_store

    recent_h = RECENT_DEFAULT_H if args.recent is None else args.recent
    RECENT_H.check("--recent", recent_h)
    with open_store(args) as store, status(f"matching the rules to the recent cells of {store.path}"):
        return caught_in_store(rules, store, recent_s=recent_h * 3600)
