"""A table too wide for the terminal, printed a row at a time: "header  value" lines, every value
whole. Pinned as the whole text: a value wider than the room folds onto the next line (a path is
never cut short, nor is a long header word), a header wider than its column wraps at its spaces
instead of pushing the value off the line, and a row with fewer values than columns prints the
ones it has."""

from __future__ import annotations

import pytest

from spark_otel.cli._common import print_table


def _printed(capsys: pytest.CaptureFixture[str]) -> list[str]:
    return [line.rstrip() for line in capsys.readouterr().out.splitlines()]


def test_a_path_wider_than_the_terminal_folds_and_a_short_row_prints_what_it_has(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("COLUMNS", "40")
    print_table(
        "Stores",
        ["store file", "cells recorded"],
        [["/home/user/.local/share/spark-otel/store.sqlite", "1,204"], ["/tmp/demo.sqlite"]],
    )
    assert _printed(capsys) == [
        "Stores",
        "",
        "store file      /home/user/.local/share/",
        "                spark-otel/store.sqlite",
        "cells recorded  1,204",
        "",
        "store file  /tmp/demo.sqlite",
    ]


def test_a_header_wider_than_the_terminal_wraps_and_its_value_still_shows(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("COLUMNS", "24")
    print_table(
        None, ["engine", "store file of the engine's cells"], [["qwen", "/tmp/spark-otel/qwen.sqlite"]]
    )
    assert _printed(capsys) == [  # no_wrap headers took the whole width: "store file of the eng…" alone
        "engine      qwen",
        "store file  /tmp/spark-o",
        "of the      tel/qwen.sql",
        "engine's    ite",
        "cells",
    ]


def test_a_word_wider_than_its_column_folds_in_the_header_as_in_the_value(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("COLUMNS", "20")
    print_table(None, ["supercalifragilisticexpialidocious", "v"], [["x" * 30, "1"]])
    assert _printed(capsys) == [
        "supercal  xxxxxxxxxx",
        "ifragili  xxxxxxxxxx",
        "sticexpi  xxxxxxxxxx",
        "alidocio",
        "us",
        "v         1",
    ]
