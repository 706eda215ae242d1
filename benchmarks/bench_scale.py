"""How each answer's cost grows with a lab's history (issue 38): stores of 10,000 cells doubling up
to 100,000 (``--max-cells 1000000`` goes on to a million; one load window per 100 cells), each
answer's time and peak memory per size, and the growth exponent (the slope of log time against
log cells).

For each size it builds the box `bench_analysis.make_box` builds and writes it to a fresh SQLite
store (not timed). Then, for each answer (`concurrency`, `neighbour-cost --eval serial-review`,
`timeouts`, `advise`, `report`), it:

* computes the answer's pure analysis in this process from the same store, timing it (CPU
  seconds, on cells already read), and for the advice (up to ``--reference-up-to`` cells) checks
  it against the pure-Python bootstrap it replaced (`tests/support/bootstrap_reference.py`):
  each class's resampled speedups exactly `_predict`'s on the same resamples, every other figure
  equal, the speedup intervals within the bootstrap's own error;
* runs the command end to end in a subprocess, start-up included (``python -m spark_otel``):
  wall seconds, CPU seconds (user + system of the child) and peak resident memory; and checks
  that its answer (``--json``; for `report`, every rule's words on the page it wrote) is the
  in-process one, stopping at the first that is not.

It also times the store's read of all cells, as `Cell` records (`cells_from_store`) and as columns
(`Store.cell_columns`, what `concurrency --json` reads), and checks that `concurrency` over
columns is `concurrency` over cells before timing the former. On a shared machine the wall
figures include waiting for a core; the CPU figures do not.

    .venv/bin/python benchmarks/bench_scale.py [--min-cells 10000] [--max-cells 100000]
        [--answers concurrency,advise,...] [--reference-up-to 100000] [--skip-cli]
"""

from __future__ import annotations

import argparse
import gc
import html
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

from bench_analysis import TARGET, make_box  # noqa: E402

from spark_otel.analysis import AdvisorConfig  # noqa: E402
from spark_otel.analysis.concurrency import concurrency  # noqa: E402
from spark_otel.analysis.concurrency_columns import concurrency_of_columns  # noqa: E402
from spark_otel.analysis.neighbour import neighbour_costs  # noqa: E402
from spark_otel.analysis.neighbour_columns import neighbour_costs_of_columns  # noqa: E402
from spark_otel.analysis.request_cells import columns_with_requests_as_cells  # noqa: E402
from spark_otel.analysis.timeouts import timeout_verdicts, timeout_verdicts_of_columns  # noqa: E402
from spark_otel.report import build_report, overview_from_inputs  # noqa: E402
from spark_otel.report.inputs import cells_from_store, inputs_from_store  # noqa: E402
from spark_otel.store import Store  # noqa: E402
from spark_otel.views.rules import advice_json  # noqa: E402
from spark_otel.views.timeouts import verdict_json  # noqa: E402

COMMANDS: dict[str, list[str]] = {
    "concurrency": ["concurrency"],
    "neighbour-cost": ["neighbour-cost", "--eval", TARGET],
    "timeouts": ["timeouts"],
    "advise": ["advise"],
    "report": ["report"],
}


def sizes(low: int, high: int) -> list[int]:
    out = []
    n = low
    while n < high:
        out.append(n)
        n *= 2
    return [*out, high]


def build_store(path: Path, n_cells: int) -> None:
    cells, windows = make_box(n_cells, max(1, n_cells // 100))
    with Store(path) as store:
        store.write_cells(cells)
        store.write_windows(windows)


def in_process(name: str, store: Store) -> tuple[Callable[[], Any], Callable[[Any], Any]]:
    """The answer's pure analysis on what the store holds (read once, not timed), and its JSON
    as the command prints it."""
    if name in ("advise", "report"):
        inputs = inputs_from_store(store, probe_tables=name == "report")
        config = AdvisorConfig()
        if name == "report":
            return lambda: build_report(inputs, config=config), lambda found: advice_json(found.advice)
        return (
            lambda: overview_from_inputs(inputs, config=config),
            lambda found: advice_json(found.advice),
        )
    cells, windows = cells_from_store(store), store.windows()
    if name == "concurrency":
        # The command answers over columns; the report over cells is checked equal to it first.
        columns = columns_from_store(store)
        rows = concurrency(cells)
        if concurrency_of_columns(columns) != rows:
            raise SystemExit("concurrency over columns differs from concurrency over cells")
        # The command lists no cell without --cells, so neither analysis nor answer holds their rows.
        return (
            lambda: concurrency_of_columns(columns, with_cells=False),
            lambda r: (
                r.model_dump(mode="json", exclude={"engines": {"__all__": {"cells"}}}) | {"energy": None}
            ),
        )
    if name == "neighbour-cost":
        # The command prices over columns; the row path's reports are checked equal to it first.
        threshold = AdvisorConfig().threshold
        columns = columns_from_store(store)
        rows = neighbour_costs(cells, windows, eval_names=[TARGET], min_cells=1)
        found = neighbour_costs_of_columns(columns, windows, eval_names=[TARGET], min_cells=1)
        if [f.dump() for f in found] != [r.model_dump(mode="json") for r in rows]:
            raise SystemExit("neighbour cost over columns differs from neighbour cost over cells")

        def dump(reports: Any) -> Any:
            dumped = [r.dump() | {"threshold": threshold} for r in reports]
            return dumped[0] if len(dumped) == 1 else dumped

        return lambda: neighbour_costs_of_columns(columns, windows, eval_names=[TARGET], min_cells=1), dump
    # The timeouts command judges over columns, each cut-off cell's governor wait read from its record.
    columns = columns_from_store(store)
    waits = {c.uid: c.admission_s for c in cells if c.deadline_hit and c.admission_s is not None}
    if timeout_verdicts_of_columns(columns, windows, admissions=waits) != timeout_verdicts(cells, windows):
        raise SystemExit("timeout verdicts over columns differ from timeout verdicts over cells")
    return (
        lambda: timeout_verdicts_of_columns(columns, windows, admissions=waits),
        lambda vs: [verdict_json(v) for v in vs],
    )


def columns_from_store(store: Store) -> Any:
    """`cells_from_store`'s cells as columns, as `concurrency --json` reads them."""
    return columns_with_requests_as_cells(
        store.cell_columns(),
        store.requests_outside_cells(),
        engine_urls=store.engine_urls(),
        windows=store.windows(kind="load") + store.windows(kind="probe"),
    )


_LAUNCHER = """
import json, resource, subprocess, sys, time
wall = time.perf_counter()
code = subprocess.call(sys.argv[1:])
wall = time.perf_counter() - wall
u = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps([code, wall, u.ru_utime + u.ru_stime, u.ru_maxrss / 1024]), file=sys.stderr)
"""
"""Runs the command and reports its rusage. A child forked from this benchmark would report this
process's resident size as its own peak (Linux carries it across fork and exec); one forked from
the small launcher does not."""


def run_child(argv: list[str], env: dict[str, str]) -> tuple[bytes, bytes, int, float, float, float]:
    """stdout, stderr, exit status, wall s, CPU s and peak RSS MB of one command, start-up included."""
    done = subprocess.run([sys.executable, "-c", _LAUNCHER, *argv], capture_output=True, env=env, check=False)
    *err, last = done.stderr.rstrip(b"\n").split(b"\n")
    code, wall, cpu, rss = json.loads(last)
    return done.stdout, b"\n".join(err), code, wall, cpu, rss


def cli_run(store: Path, name: str) -> tuple[Any, float, float, float]:
    """The command's answer (its --json; the report's page) and its wall s, CPU s and peak MB."""
    env = dict(os.environ, PYTHONPATH=str(HERE.parent / "src"), COLUMNS="200")
    out_dir = store.parent / f"{store.stem}-report"
    tail = ["--out", str(out_dir)] if name == "report" else ["--json"]
    argv = [sys.executable, "-m", "spark_otel", *COMMANDS[name], "--store", str(store), *tail]
    out, err, code, wall, cpu, rss = run_child(argv, env)
    if code:
        raise SystemExit(f"{' '.join(argv)} exited {code}: {err.decode()[-2000:]}")
    if name == "report":
        return (out_dir / "report.html").read_text(), wall, cpu, rss
    return json.loads(out), wall, cpu, rss


def report_shows(page: str, advice: Any) -> bool:
    """Every rule of the in-process advice, in its words, on the report's page."""
    return all(html.escape(rule["rule"]) in page for rule in advice["rules"])


def cpu_timed(fn: Callable[[], Any]) -> tuple[Any, float, float]:
    gc.collect()
    wall, cpu = time.perf_counter(), time.process_time()
    result = fn()
    return result, time.perf_counter() - wall, time.process_time() - cpu


def same(a: Any, b: Any) -> bool:
    return json.loads(json.dumps(a, default=str)) == json.loads(json.dumps(b, default=str))


def check_arithmetic(compute: Callable[[], Any]) -> int:
    """Every class's resampled speedups, in bulk, exactly what `_predict` gives one resample at a
    time (20 resamples a class); the number of classes checked."""
    import numpy as np

    from spark_otel.analysis.advisor import predict

    bulk = predict._speedup_interval
    checked = 0

    def checking(jobs: Any, curve: Any, workers: int, **kw: Any) -> Any:
        nonlocal checked
        if len(jobs) >= 2 and workers != 1:
            args = {k: kw[k] for k in ("contention", "config", "run_size")}
            rows = np.random.default_rng(checked).integers(0, len(jobs), size=(20, len(jobs)))
            times = [
                predict._capped_times(jobs, curve, n, contention=args["contention"], config=args["config"])
                for n in (1, workers)
            ]
            got = predict._speedups(*times, rows, args["run_size"], workers)
            want = []
            for row in rows:
                sample = [jobs[k] for k in row]
                serial = predict._predict(sample, curve, 1, **args).wall_s
                want.append(serial / predict._predict(sample, curve, workers, **args).wall_s)
            if len(got) != len(want) or not np.allclose(got, want, rtol=1e-12, atol=0):
                raise SystemExit(
                    f"{kw['seed']}: the bulk speedups differ from _predict's on the same resamples"
                )
            checked += 1
        return bulk(jobs, curve, workers, **kw)

    predict._speedup_interval = checking  # type: ignore[assignment]
    try:
        compute()
    finally:
        predict._speedup_interval = bulk
    return checked


def check_bootstrap(compute: Callable[[], Any], found: Any) -> None:
    """Every advice figure equal to the pure-Python reference bootstrap's, the speedup intervals
    within the bootstrap's own error of it (in ranks among the reference's own resamples)."""
    from tests.support.bootstrap_reference import reference_bootstrap, within_bootstrap_error

    with reference_bootstrap() as drawn:
        reference = compute()
    # The facts, not the words: a rule's evidence prints its interval.
    problems = within_bootstrap_error(
        found.advice.model_dump(mode="json"), reference.advice.model_dump(mode="json"), drawn
    )
    if problems:
        raise SystemExit("advice differs from the reference bootstrap: " + "; ".join(problems[:5]))


def slope(xs: list[int], ys: list[float]) -> float:
    """Least-squares slope of log y on log x: 1 is linear, 2 quadratic."""
    lx = [math.log(x) for x in xs]
    ly = [math.log(max(y, 1e-6)) for y in ys]
    mx, my = sum(lx) / len(lx), sum(ly) / len(ly)
    den = sum((x - mx) ** 2 for x in lx)
    return sum((x - mx) * (y - my) for x, y in zip(lx, ly, strict=True)) / den if den else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--min-cells", type=int, default=10_000)
    parser.add_argument("--max-cells", type=int, default=100_000)
    parser.add_argument("--answers", default=",".join(COMMANDS), help="comma-separated subset")
    parser.add_argument(
        "--reference-up-to",
        type=int,
        default=100_000,
        help="check the advice against the pure-Python reference bootstrap up to this many cells",
    )
    parser.add_argument("--skip-cli", action="store_true", help="time the analyses in process only")
    args = parser.parse_args()
    answers = [a for a in args.answers.split(",") if a]
    rows: dict[str, list[tuple[int, float, float, float, float]]] = {a: [] for a in answers}
    reads: list[tuple[int, float]] = []
    column_reads: list[tuple[int, float]] = []
    print(f"python {sys.version.split()[0]}, load average {os.getloadavg()[0]:.1f}, {os.cpu_count()} cores")
    header = (
        f"{'answer':16} {'cells':>9} {'cli wall s':>10} {'cli cpu s':>9} {'peak MB':>8} {'analysis cpu':>12}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes(args.min_cells, args.max_cells):
            path = Path(tmp) / f"box-{n}.sqlite"
            build_store(path, n)
            with Store(path, read_only=True) as store:
                read, _, read_cpu = cpu_timed(lambda: cells_from_store(store))
                columns, _, columns_cpu = cpu_timed(lambda: columns_from_store(store))
                reads.append((n, read_cpu))
                column_reads.append((n, columns_cpu))
                print(
                    f"\n{n:,} cells, {n // 100:,} windows: store read {len(read) / read_cpu:,.0f} cells/s as "
                    f"cells, {len(columns) / columns_cpu:,.0f} cells/s as columns"
                )
                print(header)
                del read, columns
                for name in answers:
                    compute, dump = in_process(name, store)
                    # Same answers first: the command line's against the pure analysis's.
                    result, _, analysis_cpu = cpu_timed(compute)
                    if name == "advise" and n <= args.reference_up_to:
                        classes = check_arithmetic(compute)
                        check_bootstrap(compute, result)
                        print(f"  advice: {classes} classes' resamples exact, intervals within the error")
                    if args.skip_cli:
                        wall = cpu = rss = float("nan")
                    else:
                        printed, wall, cpu, rss = cli_run(path, name)
                        agrees = report_shows if name == "report" else same
                        if not agrees(printed, dump(result)):
                            raise SystemExit(f"{name}: the command line's answer differs at {n:,} cells")
                    rows[name].append((n, wall, cpu, rss, analysis_cpu))
                    print(f"{name:16} {n:>9,} {wall:>10.2f} {cpu:>9.2f} {rss:>8.0f} {analysis_cpu:>12.2f}")
                    del result, compute, dump
                    gc.collect()
            for made in Path(tmp).glob(f"box-{n}*"):  # the store, its WAL files, the report's folder
                shutil.rmtree(made) if made.is_dir() else made.unlink()
    print("\ngrowth exponent (log-log slope over the sizes; 1 is linear):")
    print(f"  {'store read':16} cpu {slope([n for n, _ in reads], [c for _, c in reads]):.2f}")
    print(
        f"  {'columnar read':16} cpu {slope([n for n, _ in column_reads], [c for _, c in column_reads]):.2f}"
    )
    for name, got in rows.items():
        ns = [r[0] for r in got]
        cli_part = "" if args.skip_cli else f"cli cpu {slope(ns, [r[2] for r in got]):.2f}  "
        print(f"  {name:16} {cli_part}analysis cpu {slope(ns, [r[4] for r in got]):.2f}")


if __name__ == "__main__":
    main()
