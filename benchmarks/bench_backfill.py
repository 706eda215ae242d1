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

With ``--cli SIZES`` it instead times the command line at scale (issue 38): for each size it
writes a CSV in ``generic-csv``'s columns (`write_generic_csv`: ISO 8601 starts, elapsed seconds,
token counts, a status of ok, timeout, error or length; seeded, not timed), checks that
`backfill_files` gives the cells, errors and warnings of reading each record on its own
(`tests/support/backfill_reference.py`) up to ``--reference-up-to`` records, then runs
``spark-otel backfill FILE --mapping generic-csv --eval ev --store NEW --json`` (stdout to a
pipe, start-up included) with this tree's ``src`` and, with ``--before-src``, another's,
alternating, ``--rounds`` times; checks the two stores hold the same rows and the two documents
the same JSON; and prints wall and CPU seconds, peak MB and records per CPU second.

    .venv/bin/python benchmarks/bench_backfill.py --cli 10000,100000 [--before-src /tmp/before/src]
        [--rounds 2] [--reference-up-to 100000] [--no-json]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import random
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

from bench_scale import run_child  # noqa: E402

from spark_otel.receivers.backfill import BUILTIN_MAPPINGS, FieldMapping, backfill_files  # noqa: E402

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


GENERIC_CSV_HEADER = (
    "cell_id",
    "engine",
    "start",
    "elapsed_s",
    "prompt_tokens",
    "completion_tokens",
    "status",
    "workers",
)
ENGINES = ("qwen-vllm", "llama-sglang", "mistral-llamacpp", "qwen-vllm-2")


def write_generic_csv(path: Path, n: int, *, seed: int = 38) -> None:
    """``n`` rows in ``generic-csv``'s columns: a cell every 0-4 s from 2025-09-19 (ISO 8601 to the
    ms, UTC), 2-120 s each, ok (90%), timeout (6%, half without completion tokens), error or
    length (2% each), on four engines at 1-16 workers. The same rows for the same seed."""
    rng = random.Random(seed)
    with path.open("w", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(GENERIC_CSV_HEADER)
        t_ms = T0 * 1000
        for i in range(n):
            t_ms += rng.randint(0, 4000)
            status = rng.choices(["ok", "timeout", "error", "length"], [90, 6, 2, 2])[0]
            completion = "" if status == "timeout" and rng.random() < 0.5 else str(rng.randint(1, 4000))
            start = datetime.fromtimestamp(t_ms / 1000, UTC).isoformat(timespec="milliseconds")
            writer.writerow(
                [
                    f"pr{i % 97} angle{i % 7} run{i}",
                    ENGINES[i % 4],
                    start.replace("+00:00", "Z"),
                    round(rng.uniform(2, 120), 3),
                    rng.randint(20, 3000),
                    completion,
                    status,
                    rng.choice([1, 2, 4, 8, 16]),
                ]
            )


def _check_against_records_one_by_one(path: Path) -> None:
    from tests.support.backfill_reference import backfill_one_by_one

    mapping = BUILTIN_MAPPINGS["generic-csv"]
    assert isinstance(mapping, FieldMapping)
    result = backfill_files([path], mapping, eval_name="ev")
    reference = backfill_one_by_one(path, mapping, eval_name="ev")
    same = (result.errors, result.warnings, result.records) == (
        reference.errors,
        reference.warnings,
        reference.records,
    )
    if not same or result.cells != reference.cells:
        raise SystemExit(f"{path}: the column path's cells differ from reading each record on its own")


def _store_rows(path: Path) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(path)
    try:
        names = [row[1] for row in conn.execute("PRAGMA table_info(cells)")]
        typed = ", ".join(f"{n}, typeof({n})" for n in names)
        return conn.execute(f"SELECT {typed} FROM cells ORDER BY uid").fetchall()
    finally:
        conn.close()


def cli_side_by_side(args: argparse.Namespace) -> None:
    trees = [("now", HERE.parent / "src")]
    if args.before_src:
        trees.insert(0, ("before", args.before_src))
    print(f"python {sys.version.split()[0]}, load average {os.getloadavg()[0]:.1f}, {os.cpu_count()} cores")
    print(f"{'records':>9} {'code':7} {'wall s':>8} {'cpu s':>8} {'peak MB':>8} {'records/cpu s':>14}")
    with tempfile.TemporaryDirectory() as tmp:
        for n in (int(x) for x in args.cli.split(",")):
            data = Path(tmp) / f"cells-{n}.csv"
            write_generic_csv(data, n)
            if n <= args.reference_up_to:
                _check_against_records_one_by_one(data)
            for round_ in range(args.rounds):
                printed: dict[str, Any] = {}
                rows: dict[str, list[tuple[Any, ...]]] = {}
                for label, src in trees:
                    store = Path(tmp) / f"{label}.sqlite"
                    for old in Path(tmp).glob(f"{label}.sqlite*"):
                        old.unlink()
                    argv = [
                        sys.executable,
                        "-m",
                        "spark_otel",
                        "backfill",
                        str(data),
                        "--mapping",
                        "generic-csv",
                    ]
                    argv += ["--eval", "ev", "--store", str(store)] + ([] if args.no_json else ["--json"])
                    out, err, code, wall, cpu, rss = run_child(argv, dict(os.environ, PYTHONPATH=str(src)))
                    if code:
                        raise SystemExit(f"{label}: exited {code}: {err.decode()[-2000:]}")
                    if round_ == 0:
                        printed[label] = None if args.no_json else json.loads(out) | {"store": None}
                        rows[label] = _store_rows(store)
                    print(f"{n:>9,} {label:7} {wall:>8.2f} {cpu:>8.2f} {rss:>8.0f} {n / cpu:>14,.0f}")
                if round_ == 0 and len(trees) == 2:
                    if rows["before"] != rows["now"]:
                        raise SystemExit(f"{n:,} records: the stores differ row for row")
                    if printed["before"] != printed["now"]:
                        raise SystemExit(f"{n:,} records: the --json documents differ")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", default="1000,10000,30000")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--cli", metavar="SIZES", help="time the command line at these sizes instead")
    parser.add_argument(
        "--before-src", type=Path, help="with --cli: the src folder of the code to compare with"
    )
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--reference-up-to", type=int, default=100_000)
    parser.add_argument("--no-json", action="store_true", help="with --cli: without --json")
    args = parser.parse_args()
    if args.cli:
        cli_side_by_side(args)
        return
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
