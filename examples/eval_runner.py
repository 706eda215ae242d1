"""A small eval runner of the article's kind, instrumented with spark-otel.

Each cell is one prompt and one streamed answer under a wall-clock ceiling; `--concurrency`
sets how many cells run at once; every cell writes a record (tokens, elapsed, status) to
`--out`, the layout `spark-otel backfill --mapping spark-bench` reads back.

Against a real engine:

    python examples/eval_runner.py --base-url http://127.0.0.1:8011/v1 --cells cells.jsonl --concurrency 4

Self-contained, on a simulated engine started in-process (requires the `sim` extra):

    python examples/eval_runner.py --sim --cells 6 --concurrency 2

Against a real engine spark-otel records into your store (`--store`, else its default); with
`--sim` the simulated cells go to a store of their own, `<out>/spark-otel.sqlite`, replaced on
each run, so they never mix with real ones. Either way the runner ends by printing where the
cells went and the command that lists them. The spark-otel lines are marked `# spark-otel`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import openai

import spark_otel  # spark-otel

SIM_STORE = "spark-otel.sqlite"


@dataclass(frozen=True)
class Engine:
    base_url: str
    model: str
    now: Callable[[], float]
    """Unix seconds for the records: the wall clock, or the simulated box's model clock (the
    clock spark-otel stamps its cells with there, so records and cells line up)."""


def load_cells(spec: str) -> list[dict[str, Any]]:
    """Cells from a JSONL file (cell_id, prompt, optional max_tokens), or N synthetic ones."""
    if spec.isdigit():
        return [
            {
                "cell_id": f"cell-{i}",
                "prompt": f"Review pull request #{i}: " + "diff line\n" * 40,
                "max_tokens": 600,
            }
            for i in range(int(spec))
        ]
    with open(spec, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def run_cell(
    client: openai.OpenAI, target: Engine, spec: dict[str, Any], args: argparse.Namespace
) -> dict[str, Any]:
    record: dict[str, Any] = {
        "eval": args.eval,
        "cell_id": spec["cell_id"],
        "engine": args.engine,
        "workers": args.concurrency,
    }
    with spark_otel.cell(
        args.eval,
        spec["cell_id"],
        engine=args.engine,  # spark-otel
        deadline_s=args.ceiling,
        workers=args.concurrency,
    ):
        started = target.now()  # inside the cell, as its span's times are
        try:
            stream = client.chat.completions.create(
                model=target.model,
                messages=[{"role": "user", "content": spec["prompt"]}],
                max_tokens=spec.get("max_tokens", 1024),
                stream=True,
                stream_options={"include_usage": True},
                timeout=args.ceiling,
            )
            usage = None
            for chunk in stream:
                if chunk.usage is not None:
                    usage = chunk.usage
            record["status"] = "ok"
            record["usage"] = usage.model_dump() if usage else None
        except openai.APITimeoutError:
            record["status"] = "timeout"
        except openai.APIError as exc:
            record["status"] = "error"
            record["error"] = type(exc).__name__
        finished = target.now()
    record["elapsed_s"] = round(finished - started, 3)
    record["finished_at_unix_s"] = round(finished, 3)
    out = Path(args.out) / f"{spec['cell_id'].replace('/', '_')}.json"
    out.write_text(json.dumps(record, indent=2))
    return record


@contextlib.contextmanager
def engine(args: argparse.Namespace) -> Iterator[Engine]:
    """The engine to run against: a real one from the flags, or a simulated one started here."""
    if not args.sim:
        yield Engine(args.base_url, args.model, time.time)
        return
    from spark_otel.sim import run_box

    # The box runs this process's clock at its speed, so spark-otel's cells read in model time.
    with run_box({args.engine: "dense"}, speed=args.speed) as box:
        base = box.url(args.engine) + "/v1"
        model = openai.OpenAI(base_url=base, api_key="sim").models.list().data[0].id
        yield Engine(base, model, box.now_unix_s)


def store_path(args: argparse.Namespace) -> Path | None:
    """Where spark-otel records: --store, the sim's own store (started afresh), or the default."""
    if args.store:
        return Path(args.store)
    if not args.sim:
        return None
    path = Path(args.out) / SIM_STORE
    for stale in (path, *(path.with_name(path.name + s) for s in ("-wal", "-shm"))):
        stale.unlink(missing_ok=True)  # an earlier run's model-time cells would overlap this one's
    return path


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--base-url", default="http://127.0.0.1:8011/v1")
    parser.add_argument("--model", default="qwen3.8-27b")
    parser.add_argument("--engine", default="qwen", help="the engine's name in the records")
    parser.add_argument("--eval", default="golden-review", help="the eval's name")
    parser.add_argument("--cells", default="4", help="JSONL file of cells, or a number of synthetic cells")
    parser.add_argument("--concurrency", type=int, default=1, help="cells in flight at once")
    parser.add_argument("--ceiling", type=float, default=1800.0, help="per-cell wall-clock ceiling, seconds")
    parser.add_argument("--out", default="records", help="directory for one JSON record per cell")
    parser.add_argument(
        "--store",
        help=f"spark-otel's store (default: its usual one; with --sim, <out>/{SIM_STORE}, replaced each run)",
    )
    parser.add_argument("--sim", action="store_true", help="run against a simulated engine started here")
    parser.add_argument(
        "--speed",
        type=float,
        default=40.0,
        help="the simulated engine's speed factor (client and engine share a core)",
    )
    args = parser.parse_args()
    cells = load_cells(args.cells)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    telemetry = spark_otel.configure(store=store_path(args))  # spark-otel: where cells go
    spark_otel.instrument()  # spark-otel: every call below gets a span and GenAI metrics
    with engine(args) as target:
        client = openai.OpenAI(base_url=target.base_url, api_key="EMPTY", max_retries=0)
        with ThreadPoolExecutor(max_workers=args.concurrency) as pool:
            for record in pool.map(lambda spec: run_cell(client, target, spec, args), cells):
                tokens = (record.get("usage") or {}).get("completion_tokens")
                status, elapsed = record["status"], record["elapsed_s"]
                print(f"{record['cell_id']:>10}  {status:>7}  {elapsed:>9.1f} s  {tokens} tokens")
    where = telemetry.store.path if telemetry.store is not None else None
    spark_otel.shutdown()  # spark-otel: flush before exit
    print(f"records: {args.out}/")
    if where is not None:
        print(f"cells:   {where}")
        print(f"next:    spark-otel cells --store {where} --eval {args.eval}")


if __name__ == "__main__":
    main()
