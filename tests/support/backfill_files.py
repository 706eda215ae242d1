"""Two small backfill CSV files worked out by hand, the command's arguments for them, and what it
prints of them (the --json document, stderr's lines)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from spark_otel.receivers.backfill.records import record_uid

SEPT_19 = int(datetime(2026, 9, 19, tzinfo=UTC).timestamp()) * 1_000_000_000  # 00:00 UTC


HOUR = 3_600 * 1_000_000_000


NO_TOKENS_WARNING = (
    "no record has completion_tokens ('completion_tokens'): check the mapping's path (its cells "
    "have no decode rate)"
)


BAD_ELAPSED = "elapsed (elapsed_s) is {!r}, not a number"


def _files(tmp_path: Path) -> tuple[Path, Path]:
    """b.csv: one cell without tokens (its file's warning) and a row whose elapsed is not a number
    (line 3); a.csv: 10 and 15 tok/s, a timeout that kept 900 tokens in 1,800 s, and another bad
    row (line 5)."""
    b = tmp_path / "b.csv"
    b.write_text("cell_id,start,elapsed_s\nb1,2026-09-19T05:00:00Z,50\nb2,2026-09-19T06:00:00Z,y\n")
    a = tmp_path / "a.csv"
    a.write_text(
        "cell_id,start,elapsed_s,completion_tokens,status\n"
        "a1,2026-09-19T01:00:00Z,100,1000,ok\n"
        "a2,2026-09-19T02:00:00Z,200,3000,ok\n"
        "a3,2026-09-19T03:00:00Z,1800,900,timeout\n"
        "bad,2026-09-19T04:00:00Z,x,1,ok\n"
    )
    return b, a


def backfill_argv(tmp_path: Path, *more: str) -> list[str]:
    b, a = _files(tmp_path)
    return ["backfill", str(b), str(a), "--mapping", "generic-csv", "--eval", "e", "--engine", "qwen", *more]


def backfill_stderr(tmp_path: Path) -> list[str]:
    return [
        f"spark-otel: error: {tmp_path / 'b.csv'}:3: {BAD_ELAPSED.format('y')}",
        f"spark-otel: error: {tmp_path / 'a.csv'}:5: {BAD_ELAPSED.format('x')}",
        f"spark-otel: warning: {tmp_path / 'b.csv'}: {NO_TOKENS_WARNING}",
    ]


def _cell(path: Path, line: int, cell_id: str, hour: int, elapsed_s: int, tokens: int | None) -> dict:
    """A cell as --json prints it: its fields, then elapsed_s and decode_rate."""
    timeout = cell_id == "a3"
    return {
        "uid": record_uid(path.resolve(), line),
        "eval_name": "e",
        "cell_id": cell_id,
        "engine": "qwen",
        "start_unix_ns": SEPT_19 + hour * HOUR,
        "end_unix_ns": SEPT_19 + hour * HOUR + elapsed_s * 1_000_000_000,
        "prompt_tokens": None,
        "completion_tokens": tokens,
        "status": "deadline" if timeout else "ok",
        "deadline_s": None,
        "deadline_hit": timeout,
        "workers": None,
        "salvaged_findings": 0,
        "degraded": False,
        "source": "backfill",
        "trace_id": None,
        "first_token_s": None,
        "decode_s": None,
        "unsplit_s": None,
        "other_s": None,
        "attributes": {"spark_otel.backfill.mapping": "generic-csv"}
        | ({"error.type": "deadline"} if timeout else {}),
        "elapsed_s": float(elapsed_s),
        "decode_rate": None if tokens is None else tokens / elapsed_s,
    }


def backfill_document(tmp_path: Path, *, dry_run: bool, store: str | None, otlp: bool) -> dict:
    b, a = tmp_path / "b.csv", tmp_path / "a.csv"
    return {
        "mapping": "generic-csv",
        "dry_run": dry_run,
        "store": store,
        "otlp": otlp,
        # 6 records, 4 cells; the timeout (0.5 tok/s) and the cell without tokens are not rated:
        # the median of 10 and 15 tok/s.
        "counts": {
            "records": 6,
            "cells": 4,
            "rejected": 2,
            "timeouts": 1,
            "rated": 2,
            "median_tok_s": 12.5,
            "replaced_live": 0,  # no Inspect sample the live hook recorded
            "kept_live": 0,
        },
        "cells": [
            _cell(b, 2, "b1", 5, 50, None),
            _cell(a, 2, "a1", 1, 100, 1000),
            _cell(a, 3, "a2", 2, 200, 3000),
            _cell(a, 4, "a3", 3, 1800, 900),
        ],
        "errors": [
            {"file": str(b), "line": 3, "message": BAD_ELAPSED.format("y")},
            {"file": str(a), "line": 5, "message": BAD_ELAPSED.format("x")},
        ],
        "warnings": [f"{b}: {NO_TOKENS_WARNING}"],
    }
