"""Check a governor rules file: valid, and still about the models the engines serve.

    spark-otel rules check rules.toml

Validates the file (an unknown key is named, with the table it is in; exit 2), prints every
rule with its evidence and when it was measured, and asks each engine with a URL in
[engines] what it serves now: a rule whose engine serves another model than it was measured on
is stale. Stale rules are still applied by the governor; the line says which command measures
them again. --json prints the same for scripts. Write a file with `spark-otel advise
--write-rules FILE`, or by hand (docs/governor.md).
"""

from __future__ import annotations

import argparse
import logging

from ._common import print_json, print_table

_logger = logging.getLogger(__name__)


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


def run(args: argparse.Namespace) -> int:
    from ..governor import load_rules
    from ..receivers.served_models import check_engines
    from ._common import TIMEOUT_S

    TIMEOUT_S.check("--timeout", args.timeout)
    rules = load_rules(args.file)
    checks = check_engines(rules, timeout_s=args.timeout)
    if args.json:
        print_json(
            {
                "file": args.file,
                "valid": True,
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
        f"{args.file}: {n} rule{'' if n == 1 else 's'}, valid (computed {when})",
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
    for c in checks:
        if c.problem is not None:
            _logger.warning("%s: %s", c.engine, c.problem)
    for line in rules.unmeasured:
        print(f"not covered yet: {line}")
    if not rules.rules:
        _logger.warning("%s: no rules: the governor holds no cell with this file", args.file)
    return 0
