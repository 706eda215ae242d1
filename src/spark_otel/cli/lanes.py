"""The governor's lanes now: per engine, the cells admitted, the cells waiting and what holds them.

    spark-otel lanes [--rules rules.toml] [--state PATH]

Reads the shared admission state every governed runner on this box uses (default: beside the
embedded store; $SPARK_OTEL_GOVERNOR_STATE) and, with --rules (else $SPARK_OTEL_RULES), the
rules: per engine, its lane cap, the cells in use by eval, the cells waiting with the rule that
holds each back and how long it has waited, and the evals that count as running there between
cells, and the cells whose lease lapsed while they ran in the last hour (their runner was
stopped or starved past it; "slot taken": another cell was admitted in theirs meanwhile).
Then each cell in flight: how long it has run, its tokens so far and its live decode rate, as
its runner publishes them about once a second (no rate for a cell that has not streamed), and,
under adaptive governing, the verdict the deadline-slack law admitted it on (why, the protected
cell, that cell's projected finish and margin, the rate used).
Then, from the embedded store (--store, else the default, where one exists), what the adaptive
governor decided for the latest finished cells it judged: admitted on what (slack, nothing to
protect), the margin and the protected cell the admission rested on, how long each waited and
why the law last held it; where the store holds no such decision, the command that records them.
Engines whose rules are stale (now serving another model) are flagged, with the command that
re-measures them. With rules, a second table shows which cells each rule catches now, in use
or waiting, each as it was classed at admission: the cells it counts against its cap, and for
a cross-engine rule the cells (and evals between two of their cells) that make it hold. --json
prints the same for scripts.

Reading changes nothing: the state file is opened read-only, and a path that is missing, a
directory, not a SQLite file, locked, or not a governor state file (another program's SQLite
file, a store) is refused by name, exit 1.
"""

from __future__ import annotations

import argparse
import logging
import os
from collections import Counter
from typing import TYPE_CHECKING

from .._exceptions import InputError, StoreError
from ._common import add_store_argument, print_hint, print_json, print_table

if TYPE_CHECKING:
    from ..analysis.adaptive_decisions import CellDecision
    from ..governor.state import LaneView

_logger = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rules", metavar="FILE", help="the rules file (default: $SPARK_OTEL_RULES)")
    parser.add_argument(
        "--state",
        metavar="PATH",
        help="the shared state file (default: $SPARK_OTEL_GOVERNOR_STATE, else beside the store)",
    )
    add_store_argument(parser)
    parser.add_argument("--json", action="store_true", help="print JSON instead of tables")


CELLS_READ = 500
"""The newest cells of the store the recent decisions are looked for among."""
DECISIONS_SHOWN = 10
"""The recent decisions listed, newest first."""


def _recent_decisions(args: argparse.Namespace) -> tuple[str, int, list[CellDecision]] | None:
    """The store's path, how many of its newest cells were read, and the adaptive decisions among
    them, newest first; None where no store exists (one named by --store must)."""
    from pathlib import Path

    from ..analysis.adaptive_decisions import cell_decision
    from ..store import Store, default_store_path

    path = Path(args.store).expanduser() if args.store else default_store_path()
    if not path.exists():
        if args.store:
            raise InputError(f"{args.store}: no such store file")
        return None
    try:
        with Store(path, read_only=True) as store:
            cells = store.cells(limit=CELLS_READ, newest_first=True)
    except (InputError, StoreError) as exc:
        if args.store:
            raise
        _logger.warning("%s; no adaptive decision shown", exc)  # the lanes are still worth showing
        return None
    decided = [d for c in cells if (d := cell_decision(c)) is not None]
    decided.sort(key=lambda d: d.end_unix_ns, reverse=True)
    return str(path), len(cells), decided[:DECISIONS_SHOWN]


def _lapses(lane: LaneView | None) -> str:
    """The lane's lease lapses of the last hour: how many, how many lost their slot, how many of
    the cells in use now run on a lapsed lease."""
    if lane is None or not lane.lapses:
        return "-"
    taken = sum(1 for lapse in lane.lapses if lapse.taken)
    text = f"{len(lane.lapses)}" + (f" ({taken} slot taken)" if taken else "")
    return text + (f", {lane.lapsed_in_use} still in use" if lane.lapsed_in_use else "")


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from ..governor import RULES_ENV, STATE_ENV, load_rules
    from ..governor.matching import caught_in_lanes
    from ..governor.state import default_state_path, read_lanes
    from ..receivers.served_models import check_engines

    rules_path = args.rules or os.environ.get(RULES_ENV)
    rules = load_rules(rules_path) if rules_path else None
    state_path = Path(args.state or os.environ.get(STATE_ENV) or default_state_path())
    lanes = read_lanes(state_path, rules)
    checks = {c.engine: c for c in check_engines(rules)} if rules is not None else {}
    engines = sorted({lane.engine for lane in lanes} | set(checks))
    by_engine = {lane.engine: lane for lane in lanes}
    caps = {r.engine: r.cells for r in rules.lane} if rules is not None else {}
    caught = caught_in_lanes(rules, lanes) if rules is not None else None
    recent = _recent_decisions(args)
    if args.json:
        from ..views.adaptive_decisions import no_decisions_line, recent_json
        from ..views.live_cells import in_flight_json
        from ..views.rule_catches import catches_json

        print_json(
            {
                "state": str(state_path),
                "rules": rules_path,
                **({"caught": catches_json(caught)} if caught is not None else {}),
                "lanes": [
                    {
                        "engine": e,
                        "cap": caps.get(e),
                        "in_use": [c.eval_name for c in by_engine[e].in_use] if e in by_engine else [],
                        "waiting": [
                            {"eval": c.eval_name, "rule": rule, "waited_s": round(waited, 3)}
                            for c, rule, waited in (by_engine[e].waiting if e in by_engine else [])
                        ],
                        "present": [c.eval_name for c in by_engine[e].present] if e in by_engine else [],
                        "in_flight": in_flight_json(by_engine.get(e)),
                        "lapsed_in_use": by_engine[e].lapsed_in_use if e in by_engine else 0,
                        "lease_lapses": [
                            {
                                "eval": lapse.eval_name,
                                "cell": lapse.cell_id,
                                "lapsed_s": round(lapse.lapsed_s, 3),
                                "slot_taken": lapse.taken,
                                "noticed_unix_ns": lapse.noticed_ns,
                            }
                            for lapse in (by_engine[e].lapses if e in by_engine else [])
                        ],
                        "stale": checks[e].stale if e in checks else False,
                        "problem": checks[e].problem if e in checks else None,
                    }
                    for e in engines
                ],
                "decisions": None
                if recent is None
                else {
                    "store": recent[0],
                    "cells_read": recent[1],
                    "recent": recent_json(recent[2]),
                    "note": None if recent[2] else no_decisions_line(recent[1], newest=True),
                },
            }
        )
        return 0
    rows = []
    for e in engines:
        lane = by_engine.get(e)
        in_use = Counter(c.eval_name for c in lane.in_use) if lane else Counter()
        waiting = lane.waiting if lane else []
        held = Counter(rule or "-" for _, rule, _ in waiting)
        rows.append(
            [
                e + (" (stale)" if e in checks and checks[e].stale else ""),
                caps.get(e, "-"),
                sum(in_use.values()),
                ", ".join(f"{name} {n}" for name, n in sorted(in_use.items())) or "-",
                len(waiting),
                "; ".join(f"{rule} ({n})" for rule, n in held.items()) or "-",
                f"{max(w for _, _, w in waiting):,.1f}" if waiting else "-",
                _lapses(lane),
            ]
        )
    headers = ["engine", "lane cap", "in use", "in use by eval", "waiting", "held back by", "longest wait s"]
    notes = {"longest wait s": "real seconds the longest-waiting cell has waited so far"}
    if any(lane.lapses for lane in lanes):  # the column only when there is something to say
        headers.append("lease lapses 1 h")
        notes["lease lapses 1 h"] = (
            "cells that ran past their lease (runner stopped or starved) in the last hour; slot "
            "taken: another cell was admitted in theirs meanwhile"
        )
    else:
        rows = [row[:-1] for row in rows]
    print_table(f"governor lanes ({state_path})", headers, rows, notes=notes)
    if any(lane.in_use for lane in lanes):
        from ..views.live_cells import in_flight_table

        columns, live_rows, live_notes = in_flight_table(lanes)
        print_table("cells in flight", columns, live_rows, notes=live_notes)
    if caught is not None:
        from ..views.rule_catches import catches_table

        columns, caught_rows, caught_notes = catches_table(caught)
        print_table("what each rule catches now", columns, caught_rows, notes=caught_notes)
    if recent is not None:
        _print_decisions(*recent)
    for e in engines:
        if e in checks and checks[e].problem is not None:
            _logger.warning("%s: %s", e, checks[e].problem)
    return 0


def _print_decisions(store: str, cells_read: int, decided: list[CellDecision]) -> None:
    from ..views.adaptive_decisions import no_decisions_line, recent_table

    if not decided:
        print_hint(no_decisions_line(cells_read, newest=True))
        return
    columns, rows, notes = recent_table(decided)
    print_table(f"adaptive decisions, latest finished cells ({store})", columns, rows, notes=notes)
