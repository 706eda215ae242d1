"""`spark-otel backfill`'s whole output: the summary table, the --json document, stderr's lines,
the refusal of --no-store alone, and the phases it names on a terminal.

The command's own tests check a count or a row; here two small CSV files (worked out by hand:
rates 10 and 15 tok/s, a timeout that kept 900 tokens, a record without tokens, a bad row in
each file) are read, and every line it prints is pinned: a changed title, header, key, count, or
a warning printed to stdout instead of stderr, fails. Cells are the records' own (--engine fills
in the engine the records lack); each file's cells, errors and warnings are kept, not only the
last file's.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path

import pytest
from tests.cli.tables import stderr_on_a_terminal, unpadded_lines

from spark_otel.cli import main
from spark_otel.receivers.backfill.records import record_uid
from spark_otel.store import Store

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


def _argv(tmp_path: Path, *more: str) -> list[str]:
    b, a = _files(tmp_path)
    return ["backfill", str(b), str(a), "--mapping", "generic-csv", "--eval", "e", "--engine", "qwen", *more]


def _stderr(tmp_path: Path) -> list[str]:
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


def _document(tmp_path: Path, *, dry_run: bool, store: str | None, otlp: bool) -> dict:
    b, a = tmp_path / "b.csv", tmp_path / "a.csv"
    return {
        "mapping": "generic-csv",
        "dry_run": dry_run,
        "store": store,
        "otlp": otlp,
        # 6 records, 4 cells; the timeout (0.5 tok/s) and the cell without tokens are not rated:
        # the median of 10 and 15 tok/s.
        "counts": {"records": 6, "cells": 4, "rejected": 2, "timeouts": 1, "rated": 2, "median_tok_s": 12.5},
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


SUMMARY = [
    "┏━━━━━━━━━┳━━━━━━━┳━━━━━━━━━━┳━━━━━━━━━━┳━━━━━━━━━━━━━━━━━━━┳━━━━━━━━━━━━━━┓",
    "┃ records ┃ cells ┃ rejected ┃ timeouts ┃ cells with a rate ┃ median tok/s ┃",
    "┡━━━━━━━━━╇━━━━━━━╇━━━━━━━━━━╇━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━━━━━┩",
    "│       6 │     4 │        2 │        1 │                 2 │        12.50 │",
    "└─────────┴───────┴──────────┴──────────┴───────────────────┴──────────────┘",
]


def test_a_dry_run_prints_the_whole_summary_and_each_error_and_warning_on_stderr(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(_argv(tmp_path, "--dry-run")) == 1  # a rejected record: non-zero
    captured = capsys.readouterr()
    title = "                backfill with mapping generic-csv (dry run)"
    assert unpadded_lines(captured.out) == [title, *SUMMARY]
    assert captured.err.splitlines() == _stderr(tmp_path)


def test_a_run_that_writes_has_no_dry_run_in_its_title_and_stores_every_files_cells(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store_path = tmp_path / "s.sqlite"
    assert main(_argv(tmp_path, "--store", str(store_path))) == 1
    captured = capsys.readouterr()
    title = "                     backfill with mapping generic-csv"
    assert unpadded_lines(captured.out) == [title, *SUMMARY]
    assert captured.err.splitlines() == _stderr(tmp_path)
    with Store(store_path) as store:
        assert sorted((c.cell_id, c.engine) for c in store.cells(eval_name="e")) == [
            ("a1", "qwen"),
            ("a2", "qwen"),
            ("a3", "qwen"),
            ("b1", "qwen"),
        ]


def test_json_of_a_dry_run_is_the_whole_document(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(_argv(tmp_path, "--dry-run", "--json", "--otlp")) == 1  # a dry run exports nothing
    captured = capsys.readouterr()
    assert json.loads(captured.out) == _document(tmp_path, dry_run=True, store=None, otlp=False)
    assert captured.err.splitlines() == _stderr(tmp_path)


def test_json_of_a_run_that_writes_names_the_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store_path = tmp_path / "s.sqlite"
    assert main(_argv(tmp_path, "--json", "--store", str(store_path))) == 1
    captured = capsys.readouterr()
    assert json.loads(captured.out) == _document(tmp_path, dry_run=False, store=str(store_path), otlp=False)
    assert captured.err.splitlines() == _stderr(tmp_path)


def test_model_time_and_no_rated_cell_show_in_the_title_and_as_a_dash(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mapping = tmp_path / "scaled.json"
    mapping.write_text(
        json.dumps(
            {
                "name": "scaled",
                "cell_id": "cell_id",
                "start": "start",
                "elapsed": "elapsed_s",
                "attributes": {"spark_otel.time_scale": "scale"},
            }
        )
    )
    records = tmp_path / "s.csv"
    records.write_text(
        "cell_id,start,elapsed_s,scale\nm1,2026-09-19T05:00:00Z,50,100\nm2,2026-09-19T06:00:00Z,20,100\n"
    )
    argv = ["backfill", str(records), "--mapping", str(mapping), "--eval", "m", "--dry-run"]
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert unpadded_lines(captured.out) == [
        "         backfill with mapping scaled (dry run) (model time, 100x)",
        "┏━━━━━━━━━┳━━━━━━━┳━━━━━━━━━━┳━━━━━━━━━━┳━━━━━━━━━━━━━━━━━━━┳━━━━━━━━━━━━━━┓",
        "┃ records ┃ cells ┃ rejected ┃ timeouts ┃ cells with a rate ┃ median tok/s ┃",
        "┡━━━━━━━━━╇━━━━━━━╇━━━━━━━━━━╇━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━━━━━┩",
        "│       2 │     2 │        0 │        0 │                 0 │            - │",
        "└─────────┴───────┴──────────┴──────────┴───────────────────┴──────────────┘",
    ]
    assert captured.err == ""
    assert main([*argv, "--json"]) == 0  # nothing rejected
    assert json.loads(capsys.readouterr().out)["counts"] == {
        "records": 2,
        "cells": 2,
        "rejected": 0,
        "timeouts": 0,
        "rated": 0,
        "median_tok_s": None,
    }


def test_no_store_alone_is_refused_and_with_dry_run_is_a_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(_argv(tmp_path, "--no-store")) == 2
    assert capsys.readouterr() == (
        "",
        "spark-otel: error: --no-store without --otlp would keep nothing; add --otlp or --dry-run\n",
    )
    assert main(_argv(tmp_path, "--no-store", "--dry-run", "--json")) == 1
    captured = capsys.readouterr()
    assert json.loads(captured.out) == _document(tmp_path, dry_run=True, store=None, otlp=False)
    assert captured.err.splitlines() == _stderr(tmp_path)


def drawn_lines(drawn: str) -> list[str]:
    """What a terminal showed, in order: each spinner frame's text (the spinner's dot cut off)
    and each printed line, once where frames repeat it."""
    frames = [_CONTROL.sub("", frame) for frame in re.split(r"[\r\n]", drawn)]
    texts = [frame[2:] if frame[:1] in _SPINNER_DOTS else frame for frame in frames if frame]
    return [text for i, text in enumerate(texts) if i == 0 or text != texts[i - 1]]


_CONTROL = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_SPINNER_DOTS = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"


def test_on_a_terminal_it_names_each_phase(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store_path = tmp_path / "s.sqlite"
    with stderr_on_a_terminal() as terminal:
        assert main(_argv(tmp_path, "--store", str(store_path))) == 1
    assert drawn_lines(terminal.getvalue()) == [
        "reading records",
        f"reading {tmp_path / 'b.csv'} (1 of 2 files)",
        f"reading {tmp_path / 'a.csv'} (2 of 2 files)",
        f"writing 4 cells to {store_path}",
        *_stderr(tmp_path),  # once the spinner is gone
    ]
    capsys.readouterr()
