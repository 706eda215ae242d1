"""The deadline-slack law beside no governor and static rules, on the simulated box, at the
article's sizes (issue 37, item 5's first case):

    .venv/bin/python benchmarks/bench_adaptive.py [--speed 100] [--load-cells 150]
    .venv/bin/python benchmarks/bench_adaptive.py --finder
    .venv/bin/python benchmarks/bench_adaptive.py --generation [--cells 96]

``--finder``: the finder's case instead (Appendix E; `spark_otel.demo.finder_case`): one
ceiling-bound eval at eight workers on nemotron, 24 cells of 300 to 1,200 tokens under a 30 s
ceiling, flat and under the law; per arm, the cells cut off at the ceiling, the longest cell, the
most in flight at once and the wall.

``--generation``: the generation-heavy case instead (item 5's second case;
`spark_otel.demo.generation_case`): one eval of ``--cells`` 600-token answers on nemotron, no
ceiling, no rules, at static worker counts 1, 2, 4, 8 and 16 and adaptive with 16 workers; per
arm, the wall, the width held longest and the most in flight; then the best static count and
wall, and adaptive's against them (item 5 asks for a width within one doubling and a wall within
15%).

A serial eval on qwen (cells of 1,400, 300, 1,000, 600, 1,200 and 500 model s alone, an
1,800 s ceiling, ``max_tokens`` 16,000 declared) and, from another process started once its
first cell runs, a 4-worker eval on nemotron (``--load-cells`` of 400 tokens, not streamed), in
three arms, one after another, each on a fresh box (`spark_otel.demo.article_case`):

- ``open``: no governor;
- ``static``: the rules file ``spark-otel advise --write-rules`` writes from the run a user
  measures first (`measure_rules`: the two evals ungoverned, the serial eval under a ceiling
  its cells finish within, so each is rated; the ``measure`` row): printed in full;
- ``adaptive``: ``govern(adaptive=True)`` with no rules file, nothing measured before.

The open arm runs first, and ``advise --write-rules`` runs on its store too: the cross-engine
rules it writes from it are counted (none: the one serial cell beside nemotron was cut off at
its ceiling, and a cut-off cell prices no neighbour).

Prints, per arm, from its store: the serial eval's longest cell and its cells cut off at the
ceiling, the nemotron eval's wall (its first cell asking to its last one's end) and longest
wait, both evals' wall, all in model seconds; then adaptive's nemotron wall over static's.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from dataclasses import replace
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--speed", type=float, default=100.0)
    parser.add_argument("--load-cells", type=int, default=150)
    parser.add_argument("--finder", action="store_true")
    parser.add_argument("--generation", action="store_true")
    parser.add_argument("--cells", type=int, default=96)
    opts = parser.parse_args()
    if opts.finder:
        finder()
        return
    if opts.generation:
        generation(opts.cells)
        return
    from spark_otel.demo.article_case import ArticleCase, advise_rules, measure_rules, run_arms
    from spark_otel.records.rules_file import load_rules

    case = replace(ArticleCase(), speed=opts.speed, load_cells=opts.load_cells)
    began = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        results = run_arms(case, folder, ("open",))
        from_open = load_rules(
            advise_rules(folder / "open" / "store.sqlite", folder / "open.toml", case.ceiling_s)
        )
        print(
            f"advise --write-rules on the open arm's store: {len(from_open.cross_engine)} cross-engine "
            f"rules, {len(from_open.rules)} in all"
        )
        rules, results["measure"] = measure_rules(case, folder)
        print(
            f"the static arm's rules, advise --write-rules on the measuring run's store:\n{rules.read_text()}"
        )
        results |= run_arms(case, folder, ("static", "adaptive"), rules=rules)
    print(
        f"{'arm':<10}{'serial longest':>16}{'ceiling hits':>14}{'nemotron wall':>15}"
        f"{'longest wait':>14}{'both wall':>11}"
    )
    for arm, r in results.items():
        print(
            f"{arm:<10}{r.serial_longest_s:>15.0f}s{r.serial_ceiling_hits:>14}{r.load_wall_s:>14.0f}s"
            f"{r.load_longest_wait_s:>13.0f}s{r.both_wall_s:>10.0f}s"
        )
    ratio = results["adaptive"].load_wall_s / results["static"].load_wall_s
    print(f"adaptive's nemotron wall / static's: {ratio:.2f} (item 5 asks for at most 0.75)")
    print(f"real time: {time.monotonic() - began:.0f} s at {case.speed:g}x")


def finder() -> None:
    from spark_otel.demo.finder_case import FinderCase, run_finder

    case = FinderCase()
    began = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        results = run_finder(case, Path(tmp))
    print(f"{'arm':<10}{'cells':>7}{'ceiling hits':>14}{'longest':>10}{'most at once':>14}{'wall':>9}")
    for arm, r in results.items():
        print(
            f"{arm:<10}{r.cells:>7}{r.ceiling_hits:>14}{r.longest_s:>9.1f}s{r.peak_width:>14}{r.wall_s:>8.0f}s"
        )
    print(f"real time: {time.monotonic() - began:.0f} s at {case.speed:g}x")


def generation(cells: int) -> None:
    from spark_otel.demo.generation_case import GenerationCase, run_generation

    case = replace(GenerationCase(), cells=cells)
    began = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        results = run_generation(case, Path(tmp))
    print(f"{'arm':<11}{'workers':>8}{'cells':>7}{'wall':>9}{'held width':>12}{'most at once':>14}")
    for arm, r in results.items():
        print(f"{arm:<11}{r.workers:>8}{r.cells:>7}{r.wall_s:>8.0f}s{r.held_width:>12}{r.peak_width:>14}")
    best = min((r for arm, r in results.items() if arm != "adaptive"), key=lambda r: r.wall_s)
    adaptive = results["adaptive"]
    print(
        f"best static: {best.workers} workers, {best.wall_s:.0f} s; adaptive held {adaptive.held_width} "
        f"wide ({adaptive.held_width / best.workers:.2f}x the best count; item 5: 0.5 to 2), its wall "
        f"{adaptive.wall_s / best.wall_s:.2f}x the best (item 5: at most 1.15)"
    )
    print(f"real time: {time.monotonic() - began:.0f} s at {case.speed:g}x")


if __name__ == "__main__":
    main()
