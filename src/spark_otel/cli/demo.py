"""Run the whole story on a simulated two-engine box, then print the answers and write the report.

A dense engine (qwen) and a mixture-of-experts engine (nemotron) share one simulated GPU, running
--speed times faster than real time; every figure reads in model time, as in the article. A
serial, generation-heavy eval runs on qwen under a 1,800 s ceiling throughout, instrumented with
spark_otel.instrument() and spark_otel.cell(). Meanwhile the demo probes qwen (one and four more
streams) and, later, runs an eval at four workers on nemotron. Then it prints:

  - the probe's concurrency curve (Appendix A),
  - per-cell decode rate against cells in flight,
  - what each load cost the serial eval, from the eval's own records (Act 4),
  - the advisor's queue rules, with their evidence,

and writes the HTML report. About a minute; no server to install.

The demo's records are simulated, so they go to a store of their own, DIR/store.sqlite beside the
report (replaced on each run), never your own store. It prints the commands that read it, e.g.
`spark-otel neighbour-cost --store spark-otel-demo/store.sqlite --eval demo-serial-<tag>`.
--store PATH adds them to that store instead (eval names carry a run tag, cells source "demo").
"""

from __future__ import annotations

import argparse
import shlex

from .._exceptions import ConfigError
from ._common import fmt_number, print_table, rich_module


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--speed", type=float, default=100.0, help="model seconds per real second (default 100)"
    )
    parser.add_argument(
        "--store",
        metavar="PATH",
        default=None,
        help="store to add the demo's records to (default: its own, DIR/store.sqlite, replaced each run)",
    )
    parser.add_argument(
        "--out",
        default="spark-otel-demo",
        metavar="DIR",
        help="report and store directory (default %(default)s)",
    )
    parser.add_argument("--quick", action="store_true", help="a shorter schedule (about 30 s)")


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def run(args: argparse.Namespace) -> int:
    from ..analysis.neighbour import windows_touched
    from ..demo import run_demo
    from .probe import level_rows

    if not args.speed > 0 or args.speed == float("inf"):
        raise ConfigError(f"--speed must be a positive finite number, got {args.speed}")
    console = rich_module("console").Console(stderr=True)
    with console.status("starting") as status:
        result = run_demo(
            speed=args.speed,
            store_path=args.store,
            out_dir=args.out,
            quick=args.quick,
            on_phase=status.update,
        )
    columns, rows = level_rows(result.probe)
    print_table("Probe on qwen, with the serial eval in the background", columns, rows)

    conc = result.content.concurrency
    if conc is not None:
        print_table(
            "Per-cell decode rate against cells in flight",
            ["engine", "cells in flight", "cells", "median tok/s", "p10", "p90", "ceiling hits"],
            [
                [
                    e.engine,
                    lv.level,
                    lv.n_cells,
                    fmt_number(lv.rate.median),
                    fmt_number(lv.rate.p10),
                    fmt_number(lv.rate.p90),
                    lv.ceiling_hits,
                ]
                for e in conc.engines
                for lv in e.levels
            ],
        )  # fmt: skip

    nb = result.neighbour
    truth = result.ground_truth
    rows = [
        [
            w.name,
            str(w.n_cells),
            str(w.timeouts),
            fmt_number(w.rate.median),
            _pct(w.cost),
            _pct(truth.get("load") if w.engine == "nemotron" else truth.get(w.name)),
        ]
        for w in windows_touched(nb)
    ]
    print_table(
        f"What other load cost {nb.eval_name} (baseline {fmt_number(nb.baseline.median)} tok/s over "
        f"{nb.baseline.n} cells, p10 {fmt_number(nb.baseline.p10)}, p90 {fmt_number(nb.baseline.p90)})",
        ["load elsewhere on the box", "cells", "timeouts", "serial eval tok/s", "cost", "simulated cost"],
        rows,
    )
    advice = result.content.advice
    if advice is not None:
        print_table("Queue rules", ["queue rule", "evidence"], [[r.rule, r.evidence] for r in advice.rules])
    print(f"report: {result.report_path}")
    print(f"store:  {result.store_path} (evals {result.serial_eval}, {result.load_eval})")
    print(f"took {result.wall_s:.0f} s at {args.speed:g}x")
    store = shlex.quote(str(result.store_path))
    print("to explore the demo's records:")
    for command in (
        f"spark-otel neighbour-cost --store {store} --eval {result.serial_eval}",
        f"spark-otel concurrency --store {store}",
        f"spark-otel advise --store {store}",
        f"spark-otel report --store {store} --out {shlex.quote(str(result.report_path.parent))}",
    ):
        print(f"  {command}")
    return 0
