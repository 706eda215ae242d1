"""List recent eval cells from the embedded store, newest first.

Each row: eval, cell, engine, workers, status, prompt and completion tokens, elapsed seconds,
decode rate (completion tokens over elapsed) and salvaged findings. --json prints the cells as
the store keeps them, for scripts.
"""

from __future__ import annotations

import argparse
from datetime import UTC, datetime

from .._clock import NS_PER_S
from ..report.tables import model_time, seconds, time_scales
from ._common import add_store_argument, open_store, print_json, print_table


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_store_argument(parser)
    parser.add_argument("--eval", dest="eval_name", help="only cells of this eval")
    parser.add_argument("--engine", help="only cells on this engine")
    parser.add_argument("-n", "--limit", type=int, default=50, help="how many cells, newest first")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")


def run(args: argparse.Namespace) -> int:
    from ._common import COUNT

    COUNT.check("--limit", args.limit)
    with open_store(args) as store:
        cells = store.cells(eval_name=args.eval_name, engine=args.engine, limit=args.limit, newest_first=True)
    if args.json:
        print_json(
            [
                c.model_dump(mode="json") | {"elapsed_s": c.elapsed_s, "decode_rate": c.decode_rate}
                for c in cells
            ]
        )
        return 0
    rows = [
        [
            c.eval_name,
            c.cell_id,
            c.engine,
            c.workers,
            c.status.value + (" (degraded)" if c.degraded else ""),
            c.prompt_tokens,
            c.completion_tokens,
            f"{c.elapsed_s:.1f}",
            f"{c.decode_rate:.2f}" if c.decode_rate is not None else "-",
            c.salvaged_findings,
            datetime.fromtimestamp(c.start_unix_ns / NS_PER_S, UTC).strftime("%Y-%m-%d %H:%M:%S"),
        ]
        for c in cells
    ]
    print_table(
        f"{len(cells)} most recent cells" + model_time(time_scales(cells)),
        [
            "eval",
            "cell",
            "engine",
            "workers",
            "status",
            "prompt tok",
            "output tok",
            f"elapsed {seconds(time_scales(cells))}",
            "tok/s",
            "salvaged findings",
            "started (UTC)",
        ],
        rows,
    )
    return 0
