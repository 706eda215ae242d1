"""How `print_table` lays a table out, pinned as whole texts at a given width: a header wraps at
its spaces when that is what fits (to the exact character), the widest column gives way first,
a table with no rows or a short row still draws, numbers read right-aligned by how many of a
column's cells are numbers; and `print_json`'s layout and `open_store`'s default."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pytest

from spark_otel.cli._common import _numeric_column, open_store, print_json, print_table
from spark_otel.store import Store


def _drawn(capsys: pytest.CaptureFixture[str]) -> list[str]:
    return capsys.readouterr().out.splitlines()


def test_a_header_wraps_when_the_words_fit_to_the_last_character(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("COLUMNS", "18")  # 10 + 1 for the columns' words, 7 for the borders: no room left
    print_table(None, ["name", "a b"], [["abcdefghij", "x"]])
    assert _drawn(capsys) == [
        "┏━━━━━━━━━━━━┳━━━┓",
        "┃            ┃ a ┃",
        "┃ name       ┃ b ┃",
        "┡━━━━━━━━━━━━╇━━━┩",
        "│ abcdefghij │ x │",
        "└────────────┴───┘",
    ]


def test_the_widest_column_gives_way_first(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("COLUMNS", "30")
    print_table(None, ["eval name of the run", "n", "median tok/s per cell"], [["a", "3", "12.5"]])
    assert _drawn(capsys) == [
        "┏━━━━━━━━━━━┳━━━┳━━━━━━━━━━━━┓",
        "┃ eval name ┃   ┃     median ┃",
        "┃ of the    ┃   ┃  tok/s per ┃",
        "┃ run       ┃ n ┃       cell ┃",
        "┡━━━━━━━━━━━╇━━━╇━━━━━━━━━━━━┩",
        "│ a         │ 3 │       12.5 │",
        "└───────────┴───┴────────────┘",
    ]


def test_a_short_row_leaves_its_missing_cells_empty(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("COLUMNS", "40")
    print_table(None, ["engine", "cells", "tok/s"], [["qwen", "12", "10.5"], ["nemotron"]])
    assert _drawn(capsys) == [
        "┏━━━━━━━━━━┳━━━━━━━┳━━━━━━━┓",
        "┃ engine   ┃ cells ┃ tok/s ┃",
        "┡━━━━━━━━━━╇━━━━━━━╇━━━━━━━┩",
        "│ qwen     │    12 │  10.5 │",
        "│ nemotron │       │       │",
        "└──────────┴───────┴───────┘",
    ]


def test_a_table_with_no_rows_wraps_its_headers(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("COLUMNS", "20")
    print_table("t", ["median decode rate", "p90 decode rate"], [])
    assert [line.rstrip() for line in _drawn(capsys)] == [
        "         t",
        "┏━━━━━━━━┳━━━━━━━━━┓",
        "┃ median ┃ p90     ┃",
        "┃ decode ┃ decode  ┃",
        "┃ rate   ┃ rate    ┃",
        "┡━━━━━━━━╇━━━━━━━━━┩",
        "└────────┴─────────┘",
    ]


@pytest.mark.parametrize(
    ("values", "numeric"),
    [
        ([], False),  # an empty column: text
        (["-"], True),  # only placeholders: missing numbers
        (["-", "", "-"], True),
        (["1", "x"], True),  # a tie reads as numbers
        (["1", "2", "x", "y"], True),
        (["1", "x", "y"], False),
        (["1", "2", "x"], True),
        (["-", "x"], False),
    ],
)
def test_a_column_is_numeric_when_at_least_half_its_filled_cells_are(
    values: list[str], numeric: bool
) -> None:
    assert _numeric_column(values) is numeric


def test_json_is_indented_by_two_and_names_what_json_cannot_hold(capsys: pytest.CaptureFixture[str]) -> None:
    print_json({"store": Path("/tmp/s.sqlite"), "cells": [1, 2]})
    assert capsys.readouterr().out == '{\n  "store": "/tmp/s.sqlite",\n  "cells": [\n    1,\n    2\n  ]\n}\n'


def test_json_larger_than_one_write_is_printed_whole(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    value = {"rows": [{"uid": f"c{k}", "rate": k / 7, "none": None} for k in range(3000)]}
    writes: list[str] = []
    write = sys.stdout.write

    def counting(text: str) -> int:
        writes.append(text)
        return write(text)

    monkeypatch.setattr(sys.stdout, "write", counting)
    print_json(value)
    assert capsys.readouterr().out == json.dumps(value, indent=2) + "\n"
    chunks = len(list(json.JSONEncoder(indent=2).iterencode(value)))
    assert chunks > 2 * 8192
    assert len(writes) == chunks // 8192 + 1  # the last write carries the newline


def test_a_command_without_a_store_option_opens_the_default_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "store.sqlite"
    Store(path).close()
    monkeypatch.setenv("SPARK_OTEL_STORE", str(path))
    store = open_store(argparse.Namespace())
    try:
        assert store.path == path
    finally:
        store.close()


@pytest.mark.parametrize("width", [80, 24])  # as a table, and row by row as lines
def test_brackets_print_as_written_never_as_rich_markup(
    width: int, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("COLUMNS", str(width))
    print_table("[/x] map", ["[b]metric", "GPU"], [["SM Issue [fa2a1d7d]", "[3]"]])
    drawn = capsys.readouterr().out
    for text in ("[/x] map", "[b]metric", "SM Issue", "[fa2a1d7d]", "[3]"):
        assert text in drawn, text
