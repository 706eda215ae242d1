"""Where `spark-otel report`'s time goes at a lab's scale (issue 38): the command end to end in a
subprocess (start-up included: wall and CPU seconds and peak MB),
then its phases in this process: reading the store, the overview (`overview_from_inputs`, the
analyses `advise` runs), the rest of `build_report` (timeouts, outcomes, budgets, decisions),
drawing the plots (`render_images`) and the page (`render_html`), each in CPU and wall seconds.
"Beside the overview" is the total less the overview. Run it against another tree with
``PYTHONPATH=<tree>/src``.

    PYTHONPATH=src .venv/bin/python benchmarks/bench_report.py [--store PATH | --cells 100000]
        [--repeat 1] [--skip-cli]
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_scale import build_store, run_child  # noqa: E402

from spark_otel.cli import rare_collections  # noqa: E402
from spark_otel.report import content as content_module  # noqa: E402
from spark_otel.report import html as html_module  # noqa: E402
from spark_otel.report import inputs_from_store  # noqa: E402
from spark_otel.store import Store  # noqa: E402


def _cpu() -> float:
    """CPU seconds of this process and of its reaped children."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


class Phases:
    """CPU and wall seconds spent in each wrapped function, summed over its calls."""

    def __init__(self) -> None:
        self.cpu: dict[str, float] = {}
        self.wall: dict[str, float] = {}

    def wrap(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kw: Any) -> Any:
            cpu, wall = _cpu(), time.perf_counter()
            try:
                return fn(*args, **kw)
            finally:
                self.cpu[name] = self.cpu.get(name, 0.0) + _cpu() - cpu
                self.wall[name] = self.wall.get(name, 0.0) + time.perf_counter() - wall

        return timed


def in_process(store_path: Path) -> Phases:
    """One report's phases, the page written to a temporary folder."""
    phases = Phases()
    overview, images, page = (
        content_module.overview_from_inputs,
        html_module.render_images,
        html_module.render_html,
    )
    content_module.overview_from_inputs = phases.wrap("overview", overview)
    html_module.render_images = phases.wrap("plots", images)
    html_module.render_html = phases.wrap("page", page)
    try:
        with rare_collections(), tempfile.TemporaryDirectory() as out:
            total = phases.wrap("total", _report)
            total(store_path, out, phases)
    finally:
        content_module.overview_from_inputs = overview
        html_module.render_images = images
        html_module.render_html = page
    return phases


def _report(store_path: Path, out: str, phases: Phases) -> None:
    with Store(store_path) as store:
        inputs = phases.wrap("read", inputs_from_store)(store)
    content = phases.wrap("build", content_module.build_report)(inputs)
    html_module.write_report(content, out)


def cli(store_path: Path) -> tuple[float, float, float]:
    """`spark-otel report` end to end: wall s, CPU s, peak MB."""
    with tempfile.TemporaryDirectory() as out:
        argv = [sys.executable, "-m", "spark_otel", "report", "--store", str(store_path), "--out", out]
        _, err, code, wall, cpu, rss = run_child(argv, dict(os.environ, COLUMNS="200"))
        if code:
            raise SystemExit(f"{' '.join(argv)} exited {code}: {err.decode()[-2000:]}")
    return wall, cpu, rss


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--store", type=Path, help="an existing store (read only); else one is built")
    parser.add_argument("--cells", type=int, default=100_000, help="cells of the store built without --store")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each measurement")
    parser.add_argument("--skip-cli", action="store_true", help="time the phases in process only")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        store_path = args.store
        if store_path is None:
            store_path = Path(tmp) / f"box-{args.cells}.sqlite"
            build_store(store_path, args.cells)
        for run in range(args.repeat):
            if not args.skip_cli:
                took, used, rss = cli(store_path)
                print(f"run {run + 1}: report: wall {took:.2f} s, CPU {used:.2f} s, {rss:,.0f} MB")
            phases = in_process(store_path)
            cpu, wall = phases.cpu, phases.wall
            beside = cpu["total"] - cpu["overview"]
            rest = cpu["build"] - cpu["overview"]
            print(
                f"run {run + 1}: in process, CPU s (wall s): read {cpu['read']:.2f} ({wall['read']:.2f})  "
                f"overview {cpu['overview']:.2f} ({wall['overview']:.2f})  rest of the analyses {rest:.2f}  "
                f"plots {cpu['plots']:.2f} ({wall['plots']:.2f})  "
                f"page {cpu['page']:.2f} ({wall['page']:.2f})  "
                f"total {cpu['total']:.2f} ({wall['total']:.2f})  beside the overview {beside:.2f} "
                f"({wall['total'] - wall['overview']:.2f})"
            )


if __name__ == "__main__":
    main()
