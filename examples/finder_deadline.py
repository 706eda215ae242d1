"""Three finder seeds under one ceiling, each keeping what it wrote in time (Appendix E).

The deep review pass runs three seeds of the same prompt concurrently against one engine, each
with a 32,768-token output cap and an 1,800 s ceiling. At about 10.5 tok/s per seed, a seed can
emit about 19K tokens before the ceiling; one that runs longer is cut off there, and instead of
returning nothing it keeps every complete finding and is marked degraded.

    python examples/finder_deadline.py                       # against the simulated box
    python examples/finder_deadline.py --base-url http://127.0.0.1:8011/v1   # a real vLLM

The simulated engine writes filler words, not JSON, and its answers are short unless asked
otherwise. So against it each seed asks for at least a given length with vLLM's ``min_tokens``
(``--seed-tokens``, one of them past what fits in the ceiling), and a finding is each complete
pass of its vocabulary (a regex extractor). Against a real engine the finder's JSON findings
are salvaged with the default extractor (``--extractor json``).

Each seed is a `spark_otel.cell`, recorded in the embedded store (``$SPARK_OTEL_STORE`` or the
default path; ``spark-otel cells --eval finder-deep-pass`` lists them) or sent to a collector
when the ``OTEL_EXPORTER_OTLP_*`` variables name one. The run flushes them before it exits.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import re
from collections.abc import Iterator
from typing import Any

import openai

import spark_otel
from spark_otel.deadline import DeadlineResult
from spark_otel.telemetry import current_telemetry

PROMPT = (
    "Review the diff below. Think it through, then answer with a JSON document "
    '{"findings": [{"file": ..., "line": ..., "title": ..., "severity": ...}, ...]}.\n\n'
    "<diff omitted in this example>"
)
# One pass of the simulated engine's vocabulary ends with these words.
SIM_FINDING = re.compile(r"the gauge does not move ")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--base-url", help="a real OpenAI-compatible engine (…/v1); default: the simulated box"
    )
    parser.add_argument("--model", help="model id; default: the first one /v1/models lists")
    parser.add_argument("--ceiling-s", type=float, default=1800.0, help="per-seed deadline, seconds")
    parser.add_argument("--max-tokens", type=int, default=32768, help="the engine's output cap per seed")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument(
        "--speed", type=float, default=200.0, help="simulated box only: times faster than real"
    )
    parser.add_argument(
        "--seed-tokens",
        default="12000,17000,26000",
        help="simulated box only: how long each seed's answer runs at least (min_tokens), comma-separated",
    )
    parser.add_argument("--extractor", choices=["json", "jsonl"], default="json", help="for a real engine")
    return parser.parse_args()


@contextlib.contextmanager
def engine(args: argparse.Namespace) -> Iterator[str]:
    """The base URL to talk to: the user's engine, or a simulated Qwen3.8 box for the run."""
    if args.base_url:
        yield args.base_url
        return
    from spark_otel.sim import run_box

    with run_box({"qwen": "dense"}, speed=args.speed, seed=0) as box:
        yield box.url("qwen") + "/v1"


async def seed(
    client: openai.AsyncOpenAI, args: argparse.Namespace, model: str, index: int, simulated: bool
) -> tuple[DeadlineResult, spark_otel.CellState]:
    extra: dict[str, Any] = {}
    extractor: Any = args.extractor
    if simulated:
        lengths = [int(n) for n in args.seed_tokens.split(",")]
        extra["extra_body"] = {"min_tokens": lengths[index % len(lengths)]}
        extractor = SIM_FINDING
    async with spark_otel.cell(
        "finder-deep-pass", f"seed-{index + 1}", engine="qwen", deadline_s=args.ceiling_s, workers=args.seeds
    ) as cell:
        result = await spark_otel.astream_with_deadline(
            client,
            model=model,
            messages=[{"role": "user", "content": PROMPT}],
            max_tokens=args.max_tokens,
            deadline_s=args.ceiling_s,
            extractor=extractor,
            **extra,
        )
    return result, cell


async def main() -> None:
    args = parse_args()
    try:
        await run(args)
    finally:
        # Flush the cells to the store (or collector) before the process exits.
        spark_otel.shutdown()


async def run(args: argparse.Namespace) -> None:
    with engine(args) as base_url:
        async with openai.AsyncOpenAI(base_url=base_url, api_key="none") as client:
            model = args.model or (await client.models.list()).data[0].id
            print(f"{args.seeds} seeds of {model} at {base_url}, ceiling {args.ceiling_s:g} s each")
            outcomes = await asyncio.gather(
                *(seed(client, args, model, i, simulated=not args.base_url) for i in range(args.seeds))
            )
    print(
        f"{'seed':<6} {'status':<10} {'tokens':>7} {'source':<8} {'elapsed s':>9} {'tok/s':>6} "
        f"{'findings':>8}  cell"
    )
    for i, (result, cell) in enumerate(outcomes, 1):
        rate = f"{result.timings.decode_rate:.1f}" if result.timings.decode_rate else "-"
        verdict = "degraded" if cell.degraded else ("lost" if cell.deadline_hit else "whole")
        print(
            f"{i:<6} {result.status.value:<10} {result.usage.completion_tokens:>7} {result.usage.source:<8} "
            f"{result.timings.elapsed_s:>9.0f} {rate:>6} {result.findings_count:>8}  {verdict}"
        )
    telemetry = current_telemetry()
    if telemetry is not None and telemetry.store is not None:
        print(f"cells recorded in {telemetry.store.path}")


if __name__ == "__main__":
    asyncio.run(main())
