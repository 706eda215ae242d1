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
from pathlib import Path

import pytest
from tests.support.backfill_files import backfill_argv, backfill_document, backfill_stderr
from tests.support.printed import drawn_lines, stderr_on_a_terminal, unpadded_lines

from spark_otel.cli import main
from spark_otel.store import Store

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
    assert main(backfill_argv(tmp_path, "--dry-run")) == 1  # a rejected record: non-zero
    captured = capsys.readouterr()
    title = "                backfill with mapping generic-csv (dry run)"
    assert unpadded_lines(captured.out) == [title, *SUMMARY]
    assert captured.err.splitlines() == backfill_stderr(tmp_path)


def test_a_run_that_writes_has_no_dry_run_in_its_title_and_stores_every_files_cells(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store_path = tmp_path / "s.sqlite"
    assert main(backfill_argv(tmp_path, "--store", str(store_path))) == 1
    captured = capsys.readouterr()
    title = "                     backfill with mapping generic-csv"
    assert unpadded_lines(captured.out) == [title, *SUMMARY]
    assert captured.err.splitlines() == backfill_stderr(tmp_path)
    with Store(store_path) as store:
        assert sorted((c.cell_id, c.engine) for c in store.cells(eval_name="e")) == [
            ("a1", "qwen"),
            ("a2", "qwen"),
            ("a3", "qwen"),
            ("b1", "qwen"),
        ]


def test_json_of_a_dry_run_is_the_whole_document(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(backfill_argv(tmp_path, "--dry-run", "--json", "--otlp")) == 1  # a dry run exports nothing
    captured = capsys.readouterr()
    assert json.loads(captured.out) == backfill_document(tmp_path, dry_run=True, store=None, otlp=False)
    assert captured.err.splitlines() == backfill_stderr(tmp_path)


def test_json_of_a_run_that_writes_names_the_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store_path = tmp_path / "s.sqlite"
    assert main(backfill_argv(tmp_path, "--json", "--store", str(store_path))) == 1
    captured = capsys.readouterr()
    assert json.loads(captured.out) == backfill_document(
        tmp_path, dry_run=False, store=str(store_path), otlp=False
    )
    assert captured.err.splitlines() == backfill_stderr(tmp_path)


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
        "replaced_live": 0,
        "kept_live": 0,
    }


def test_no_store_alone_is_refused_and_with_dry_run_is_a_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(backfill_argv(tmp_path, "--no-store")) == 2
    assert capsys.readouterr() == (
        "",
        "spark-otel: error: --no-store without --otlp would keep nothing; add --otlp or --dry-run\n",
    )
    assert main(backfill_argv(tmp_path, "--no-store", "--dry-run", "--json")) == 1
    captured = capsys.readouterr()
    assert json.loads(captured.out) == backfill_document(tmp_path, dry_run=True, store=None, otlp=False)
    assert captured.err.splitlines() == backfill_stderr(tmp_path)


def test_on_a_terminal_it_names_each_phase(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store_path = tmp_path / "s.sqlite"
    with stderr_on_a_terminal() as terminal:
        assert main(backfill_argv(tmp_path, "--store", str(store_path))) == 1
    assert drawn_lines(terminal.getvalue()) == [
        "reading records",
        f"reading {tmp_path / 'b.csv'} (1 of 2 files)",
        f"reading {tmp_path / 'a.csv'} (2 of 2 files)",
        f"writing 4 cells to {store_path}",
        *backfill_stderr(tmp_path),  # once the spinner is gone
    ]
    capsys.readouterr()
