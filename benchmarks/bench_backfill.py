"""What backfill's mapping language costs per record: plain dotted paths against the forms issue 36
added (a records root, fields of the enclosing document, sums over several keys, literals), on
the same cells, at several sizes.

    .venv/bin/python benchmarks/bench_backfill.py [--records 1000,10000,30000] [--repeats 5]

For each size, two real files in a temporary directory holding the same cells: JSON Lines read by
the built-in ``spark-bench`` mapping (string paths, one record a line), and one JSON document with
the records under ``samples``, the eval and worker count in the document, and each record's
tokens split over two models, read by a mapping of the new forms (``{"document": ...}``,
``{"sum": "usage.*.output_tokens"}``, ``{"value": ...}``). Side by side in one process,
interleaved run by run: prints the best µs per record of each, and their ratio.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from spark_otel.receivers.backfill import BUILTIN_MAPPINGS, FieldMapping, backfill_files

T0 = 1_758_243_600

NEW_FORMS = FieldMapping.model_validate(
    {
        "name": "new-forms",
        "records": "samples",
        "cell_id": "id",
        "eval_name": {"document": "task"},
        "engine": {"value": "qwen"},
        "workers": {"document": "config.max_connections"},
        "prompt_tokens": {"sum": "usage.*.input_tokens"},
        "completion_tokens": {"sum": "usage.*.output_tokens"},
        "start": "started_at",
        "elapsed": "elapsed_s",
        "status": "status",
    }
)


def _files(where: Path, n: int) -> tuple[Path, Path]:
    flat, nested = where / f"flat-{n}.jsonl", where / f"nested-{n}.json"
    with flat.open("w") as out:
        for i in range(n):
            record = {
                "cell_id": f"c{i}",
                "eval": "bench",
                "engine": "qwen",
                "workers": 8,
                "usage": {"prompt_tokens": 140, "completion_tokens": 1020},
                "elapsed_s": 20.5,
                "started_at": T0 + i,
                "status": "ok",
            }
            out.write(json.dumps(record) + "\n")
    samples = [
        {
            "id": f"c{i}",
            "usage": {
                "openai/qwen3.8": {"input_tokens": 100, "output_tokens": 1000},
                "openai/grader-1.5": {"input_tokens": 40, "output_tokens": 20},
            },
            "elapsed_s": 20.5,
            "started_at": T0 + i,
            "status": "ok",
        }
        for i in range(n)
    ]
    nested.write_text(json.dumps({"task": "bench", "config": {"max_connections": 8}, "samples": samples}))
    return flat, nested


def _best_s(run: Callable[[], object], repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        began = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - began)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", default="1000,10000,30000")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    spark_bench = BUILTIN_MAPPINGS["spark-bench"]
    print(f"{'records':>8} {'paths µs/rec':>13} {'new forms µs/rec':>17} {'ratio':>6}")
    with tempfile.TemporaryDirectory() as tmp:
        for n in (int(x) for x in args.records.split(",")):
            flat, nested = _files(Path(tmp), n)
            plain = new = float("inf")
            for _ in range(args.repeats):  # interleaved, so a busy machine weighs on both alike
                plain = min(
                    plain, _best_s(lambda f=flat: backfill_files([f], spark_bench, eval_name=None), 1)
                )
                new = min(new, _best_s(lambda f=nested: backfill_files([f], NEW_FORMS, eval_name=None), 1))
            assert len(backfill_files([nested], NEW_FORMS, eval_name=None).cells) == n
            print(f"{n:>8,} {plain / n * 1e6:>13.1f} {new / n * 1e6:>17.1f} {new / plain:>6.2f}")


if __name__ == "__main__":
    main()
