"""The deadline-slack law beside no governor and static rules, on the simulated box (issue 37,
item 5's first case, small): a skeleton of the three-arm comparison, runnable at this size.

    .venv/bin/python benchmarks/bench_adaptive.py [--speed 20] [--serial-cells 4] [--ceiling 180]

Each arm runs a serial ceiling-bound eval on qwen (``--serial-tokens`` a cell: 99 model s alone,
215 beside four nemotron streams) and, from another process started once the first serial cell
runs, a 4-worker eval on nemotron (``--load-cells`` of ``--load-tokens``), both streaming from one
simulated box and sharing a fresh governor state file:

- ``open``: no governor;
- ``static``: the rule `advise` writes for this case (nemotron yields, ``cells = 0``, while a
  ceiling-bound cell runs on qwen), both runners governed by it;
- ``adaptive``: ``govern(adaptive=True)`` with no rules file.

Prints, per arm, from the cells' spans: the serial eval's longest cell and the cells past the
ceiling (no runner cuts a cell here, so a cell past it is one that would have hit it), the
nemotron eval's wall (its first cell's start to its last one's end) and the longest wait, both
evals' wall, all in model seconds; then adaptive's nemotron wall against static's. Item 5 asks
for the article's sizes (300-1,400 model s cells under 1,800 s), the generation-heavy and the
finder's cases, and the demo's third arm: not built yet.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

STATIC_RULES = """version = 2
[[cross_engine]]
engine = "nemotron"
while_engine = "qwen"
while_ceiling_bound = true
cells = 0
"""


def runner(args: list[str]) -> None:
    """One eval in this process: ``MODE STATE URL EVAL ENGINE WORKERS CELLS TOKENS DEADLINE``;
    MODE is ``open``, ``adaptive`` or a rules file. Prints each cell span's figures as JSON."""
    import openai
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    import spark_otel
    from spark_otel import _clock
    from spark_otel import _semconv as sc
    from spark_otel.governor import govern
    from spark_otel.sim import follow

    mode, state, url, eval_name, engine = args[:5]
    workers, cells, tokens = map(int, args[5:8])
    deadline = float(args[8]) or None
    if mode == "adaptive":
        govern(state=state, adaptive=True)
    elif mode != "open":
        govern(mode, state=state)
    exporter = InMemorySpanExporter()
    tp = TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(exporter))
    spark_otel.instrument(tracer_provider=tp)
    client = openai.OpenAI(base_url=url + "/v1", api_key="none", max_retries=0)
    model = client.models.list().data[0].id
    todo: queue.Queue[int] = queue.Queue()
    for i in range(cells):
        todo.put(i)

    def work() -> None:
        while True:
            try:
                i = todo.get_nowait()
            except queue.Empty:
                return
            with spark_otel.cell(
                eval_name, f"{eval_name}-{i}", engine=engine, deadline_s=deadline, tracer_provider=tp
            ):
                if i == 0:
                    print("started", flush=True)
                stream = client.chat.completions.create(
                    model=model,
                    messages=[{"role": "user", "content": "review this"}],
                    max_tokens=tokens,
                    extra_body={"min_tokens": tokens},
                    stream=True,
                )
                for _chunk in stream:
                    pass

    with _clock.hold(follow(url)):
        threads = [threading.Thread(target=work) for _ in range(workers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    for span in exporter.get_finished_spans():
        attrs = span.attributes or {}
        if sc.CELL_ELAPSED_S in attrs:  # a cell span (its requests' spans name the cell too)
            line = {
                "start_s": (span.start_time or 0) / 1e9,
                "end_s": (span.end_time or 0) / 1e9,
                "elapsed_s": attrs.get(sc.CELL_ELAPSED_S),
                "waited_s": attrs.get(sc.CELL_QUEUE_WAIT_S, 0.0),
            }
            print(json.dumps(line), flush=True)


def _spawn(*args: object) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "SPARK_OTEL_"))}
    command = [sys.executable, __file__, "--runner", *map(str, args)]
    return subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=env)


def _cells(proc: subprocess.Popen[str]) -> list[dict[str, Any]]:
    out, _ = proc.communicate(timeout=900)
    if proc.returncode != 0:
        raise SystemExit(f"a runner exited with {proc.returncode}")
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def arm(mode: str, box: Any, opts: argparse.Namespace, tmp: Path) -> dict[str, float]:
    state = tmp / f"{mode}.sqlite"
    if mode == "static":
        rules = tmp / "static.toml"
        rules.write_text(STATIC_RULES)
        mode = str(rules)
    serial = _spawn(mode, state, box.url("qwen"), "serial", "qwen", 1, opts.serial_cells, opts.serial_tokens,
                    opts.ceiling)  # fmt: skip
    assert serial.stdout is not None
    serial.stdout.readline()  # its first cell runs: the neighbour starts midway
    load = _spawn(
        mode, state, box.url("nemotron"), "batch", "nemotron", 4, opts.load_cells, opts.load_tokens, 0
    )
    s, n = _cells(serial), _cells(load)
    return {
        "serial_longest_s": max(c["elapsed_s"] for c in s),
        "serial_past_ceiling": sum(1 for c in s if c["elapsed_s"] >= opts.ceiling),
        # from when its first cell asked (its start less its wait) to its last cell's end
        "load_wall_s": max(c["end_s"] for c in n) - min(c["start_s"] - c["waited_s"] for c in n),
        "load_longest_wait_s": max(c["waited_s"] for c in n),
        "both_wall_s": max(c["end_s"] for c in (*s, *n)) - min(c["start_s"] for c in (*s, *n)),
    }


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--runner":
        runner(sys.argv[2:])
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--speed", type=float, default=20.0)
    parser.add_argument("--serial-cells", type=int, default=4)
    parser.add_argument("--serial-tokens", type=int, default=1100)
    parser.add_argument("--ceiling", type=float, default=180.0)
    parser.add_argument("--load-cells", type=int, default=24)
    parser.add_argument("--load-tokens", type=int, default=400)
    opts = parser.parse_args()
    from spark_otel.sim import run_box

    results = {}
    with (
        tempfile.TemporaryDirectory() as tmp,
        run_box({"qwen": "dense", "nemotron": "moe"}, speed=opts.speed) as box,
    ):
        for mode in ("open", "static", "adaptive"):
            results[mode] = arm(mode, box, opts, Path(tmp))
    print(
        f"{'arm':<10}{'serial longest':>16}{'past ceiling':>14}{'nemotron wall':>15}"
        f"{'longest wait':>14}{'both wall':>11}"
    )
    for mode, r in results.items():
        print(
            f"{mode:<10}{r['serial_longest_s']:>15.0f}s{r['serial_past_ceiling']:>14.0f}{r['load_wall_s']:>14.0f}s"
            f"{r['load_longest_wait_s']:>13.0f}s{r['both_wall_s']:>10.0f}s"
        )
    ratio = results["adaptive"]["load_wall_s"] / results["static"]["load_wall_s"]
    print(
        f"adaptive's nemotron wall / static's: {ratio:.2f} "
        "(item 5 asks for at most 0.75 at the article's sizes)"
    )


if __name__ == "__main__":
    main()
