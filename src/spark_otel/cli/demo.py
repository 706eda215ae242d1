"""Run the whole story on a simulated two-engine box, then print the answers and write the report.

A dense engine (qwen) and a mixture-of-experts engine (nemotron) share one simulated GPU, running
--speed times faster than real time; every figure reads in model time, as in the article. Every
eval is instrumented with spark_otel.instrument() and spark_otel.cell(). In the article's acts:

  Act 2  the probe on each engine with the box idle: what more streams buy, where a lane stops
  Act 3  one eval's cells on qwen at 1 worker, then the same cells at 8: wall against per cell
  Act 4  a serial eval on qwen alone, then beside 1 and 4 more qwen streams and an eval at 4
         workers on nemotron: what each neighbour cost it, from its own records
  Act 5  the advisor's rules written to DIR/rules.toml, then the serial eval and, started midway
         from another process, the nemotron eval at 4 workers, once without the rules and once
         governed by them (both processes through DIR/governor.sqlite), and once governed
         adaptively with no rules file (the deadline-slack law): side by side, the serial cells
         at the ceiling, the longest serial cell, the neighbour's wall, the cost and the wait

Each act ends in a one-line answer; the advisor's queue rules with their evidence come before
Act 5, and the HTML report (which opens with the same answers) covers Acts 2 to 4. About a
minute and a half; --quick about a minute. No server to install.

The demo's records are simulated, so they go to a store of their own, DIR/store.sqlite beside the
report (replaced on each run), never your own store. It prints the commands that read it, e.g.
`spark-otel neighbour-cost --store spark-otel-demo/own_store.sqlite --eval demo-serial-<tag>`.
--store PATH adds them to that store instead (eval names carry a short run tag, cells source
"demo"). --json prints the answers, the curves, the neighbour costs and the rules for scripts.
"""

from __future__ import annotations

import argparse
import shlex
from typing import TYPE_CHECKING, Any

from ._common import print_hint, print_json, print_table

if TYPE_CHECKING:
    from ..demo import DemoResult
    from ..demo.governed import RunFigures
    from ..views.answers import Answer


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--speed", type=float, default=100.0, help="model seconds per real second")
    parser.add_argument(
        "--store",
        metavar="PATH",
        default=None,
        help="store to add the demo's records to (default: its own, DIR/store.sqlite, replaced each run)",
    )
    parser.add_argument("--out", default="spark-otel-demo", metavar="DIR", help="report and store directory")
    parser.add_argument("--quick", action="store_true", help="a shorter schedule (about a minute)")
    parser.add_argument("--json", action="store_true", help="print the results as JSON instead of tables")


def _pct(value: float | None) -> str:
    return "-" if value is None else str(round(value * 100))


def _say(answers: list[Answer], topic: str, **match: str) -> None:
    """The act's one-line answers, under its tables."""
    for answer in answers:
        if answer.topic == topic and all(m in answer.text for m in match.values()):
            print_hint(f"=> {answer.text}")
    print()


def run(args: argparse.Namespace) -> int:
    from ..demo import run_demo
    from ..sim.box import MAX_SPEED, MIN_SPEED
    from ._common import Bounds
    from ._console import status

    Bounds(at_least=MIN_SPEED, at_most=MAX_SPEED).check("--speed", args.speed)  # inf too: the demo waits
    with status("starting") as phase:
        result = run_demo(
            speed=args.speed,
            store_path=args.store,
            out_dir=args.out,
            quick=args.quick,
            on_phase=phase.update,
        )
    if args.json:
        print_json(_as_json(result, args.speed))
        return 0
    _print_acts(result)
    print(f"report: {result.report_path}")
    rules = shlex.quote(str(result.rules_path))
    print(f"rules:  {result.rules_path} (check: spark-otel rules check {rules})")
    evals = ", ".join((result.review_eval, result.serial_eval, result.load_eval))
    print(f"store:  {result.store_path} (evals {evals})")
    print(f"took {result.wall_s:.0f} s at {args.speed:g}x")
    store = shlex.quote(str(result.store_path))
    print("to explore the demo's records:")
    for command in (
        f"spark-otel neighbour-cost --store {store} --eval {result.serial_eval}",
        f"spark-otel concurrency --store {store}",
        f"spark-otel advise --store {store}",
        f"spark-otel lanes --rules {rules} --state {shlex.quote(str(result.state_path))}",
        f"spark-otel report --store {store} --out {shlex.quote(str(result.report_path.parent))}",
    ):
        print(f"  {command}")
    return 0


def _print_acts(result: DemoResult) -> None:
    from ..analysis.neighbour import windows_touched
    from ..views.rules import rules_table
    from ..views.tables import fmt_number, probe_table

    answers = result.content.answers
    for probe in result.probes:
        columns, rows = probe_table(probe)
        print_table(f"Act 2. Probe on {probe.metadata.engine}, the box otherwise idle", columns, rows)
        _say(answers, "curve", engine=f"{probe.metadata.engine}:")

    conc = result.content.concurrency
    runs = (
        [] if conc is None else [r for e in conc.engines for r in e.runs if r.eval_name == result.review_eval]
    )
    if runs:
        print_table(
            f"Act 3. {result.review_eval}: the same cells at 1 and more workers (model time)",
            ["workers", "cells", "wall model s", "median tok/s per cell", "ceiling hits"],
            [
                [r.workers, r.n_cells, fmt_number(r.wall_s, 0), fmt_number(r.rate.median), r.ceiling_hits]
                for r in sorted(runs, key=lambda r: r.workers or 0)
            ],
        )
        _say(answers, "concurrency", eval=result.review_eval)
    energy = result.content.energy
    if energy is not None:
        from ..analysis.energy import restrict
        from ..views.tables import energy_table

        title, columns, rows = energy_table(
            restrict(energy, eval_name=result.review_eval), result.content.scales
        )
        print_table(f"Act 3. What each token cost: {title}", columns, rows)

    nb = result.neighbour
    truth = result.ground_truth
    base = nb.baseline
    print_table(
        f"Act 4. What other load cost {nb.eval_name} (alone: median {fmt_number(base.median)} tok/s over "
        f"{base.n} cells, p10 {fmt_number(base.p10)}, p90 {fmt_number(base.p90)})",
        ["load elsewhere on the box", "cells", "timeouts", "serial eval tok/s", "cost %", "simulated cost %"],
        [
            [
                w.name,
                w.n_cells,
                w.timeouts,
                fmt_number(w.rate.median),
                _pct(w.cost),
                _pct(truth.get("load") if w.engine == "nemotron" else truth.get(w.name)),
            ]
            for w in windows_touched(nb)
        ],
        notes={
            "simulated cost %": "what the simulated box was told the load costs: the answer to check against"
        },
    )
    _say(answers, "neighbour", eval=nb.eval_name)
    if result.content.instruments is not None:
        from .instruments import print_verdicts

        print_verdicts(
            result.content.instruments, title="Appendix F. The box's gauges against the probes' load"
        )

    advice = result.content.advice
    if advice is not None:
        print_table("Queue rules", *rules_table(advice))
        _say(answers, "rules")
    _print_governed(result)


def _act5_runs(result: DemoResult) -> list[RunFigures]:
    """Act 5's runs side by side: without and with the rules, then the adaptive one where it ran;
    none unless both of the first two did."""
    if len(result.governed) != 2:
        return []
    return [*result.governed, *([result.adaptive] if result.adaptive is not None else [])]


def _print_governed(result: DemoResult) -> None:
    from ..demo.governed import governed_answer
    from ..views.governed_runs import adaptive_answer, governed_runs_table

    runs = _act5_runs(result)
    if not runs:
        return
    columns, rows, notes = governed_runs_table(runs)
    print_table(
        f"Act 5. {result.serial_eval} and, from another process midway, {result.load_eval} at 4 workers",
        columns,
        rows,
    )
    for figure, note in notes.items():
        print_hint(f"{figure}: {note}")
    open_run, static = result.governed
    print_hint(f"=> {governed_answer(result.serial_eval, open_run, static)}")
    if result.adaptive is not None:
        print_hint(f"=> {adaptive_answer(open_run, static, result.adaptive)}")
    print()


def _as_json(result: DemoResult, speed: float) -> dict[str, Any]:
    from ..views.gauges import evidence
    from ..views.governed_runs import governed_runs_json
    from ..views.rules import advice_json

    content = result.content
    conc = content.concurrency
    return {
        "run_tag": result.run_tag,
        "speed": speed,
        "wall_s": round(result.wall_s, 1),
        "store": str(result.store_path),
        "report": str(result.report_path),
        "evals": {"review": result.review_eval, "serial": result.serial_eval, "load": result.load_eval},
        "answers": [a.model_dump(mode="json") for a in content.answers],
        "curves": [c.model_dump(mode="json") for c in content.curves],
        "speedups": []
        if conc is None
        else [s.model_dump(mode="json") for e in conc.engines for s in e.speedups],
        "neighbour": result.neighbour.model_dump(mode="json", exclude={"cells"}),
        "ground_truth": result.ground_truth,
        "rules": [] if content.advice is None else advice_json(content.advice)["rules"],
        "rules_file": str(result.rules_path),
        "governed": governed_runs_json(_act5_runs(result)),
        "instruments": None
        if content.instruments is None
        else [
            {"instrument": v.instrument, "verdict": v.verdict, "evidence": evidence(v, content.instruments)}
            for v in content.instruments.instruments
        ],
        "energy": None
        if content.energy is None
        else [e.model_dump(mode="json") for e in content.energy.evals],
    }
