"""A state file an older runner wrote (the first version's columns: no live figures, no verdict
of the deadline-slack law, `governor.state._ADDED`), read by `lanes` without taking part: each
cell in use keeps its id, beside the blanks for what that runner never published
(`views.live_cells`)."""

from __future__ import annotations

import json
import os
import socket
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from spark_otel._clock import NS_PER_S, real_wall_ns
from spark_otel.cli import main
from spark_otel.governor import RULES_ENV, STATE_ENV
from spark_otel.governor.state import read_lanes
from spark_otel.views.live_cells import in_flight_json, in_flight_table

_FIRST_SCHEMA = """
CREATE TABLE slots (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    host TEXT NOT NULL, pid INTEGER NOT NULL, lease_until_ns INTEGER NOT NULL,
    engine TEXT NOT NULL, eval_name TEXT NOT NULL, cell_class TEXT, has_deadline INTEGER NOT NULL,
    cell_id TEXT, admitted_ns INTEGER NOT NULL, waited_s REAL NOT NULL
);
CREATE TABLE waiting (
    ticket INTEGER PRIMARY KEY AUTOINCREMENT,
    host TEXT NOT NULL, pid INTEGER NOT NULL, lease_until_ns INTEGER NOT NULL,
    engine TEXT NOT NULL, eval_name TEXT NOT NULL, cell_class TEXT, has_deadline INTEGER NOT NULL,
    cell_id TEXT, since_ns INTEGER NOT NULL, rule TEXT
);
CREATE TABLE present (
    engine TEXT NOT NULL, eval_name TEXT NOT NULL, cell_class TEXT, has_deadline INTEGER NOT NULL,
    last_end_ns INTEGER NOT NULL, PRIMARY KEY (engine, eval_name)
);
"""


@pytest.fixture
def old_state(tmp_path: Path) -> Path:
    """Two cells in use on qwen, one with an id and one without, held by this (live) process."""
    path = tmp_path / "governor.sqlite"
    lease = real_wall_ns() + 60 * NS_PER_S
    with closing(sqlite3.connect(path)) as conn, conn:
        conn.executescript(_FIRST_SCHEMA)
        conn.executemany(
            "INSERT INTO slots (host, pid, lease_until_ns, engine, eval_name, cell_class, has_deadline,"
            " cell_id, admitted_ns, waited_s) VALUES (?, ?, ?, 'qwen', ?, NULL, 1, ?, 0, 0)",
            [
                (socket.gethostname(), os.getpid(), lease, "old-eval", "o1"),
                (socket.gethostname(), os.getpid(), lease, "old-eval", None),
            ],
        )
    return path


def test_the_lanes_table_shows_each_old_cells_id_and_blanks_for_what_it_never_published(
    old_state: Path,
) -> None:
    [lane] = read_lanes(old_state)
    headers, rows, _ = in_flight_table([lane])
    assert [dict(zip(headers, row, strict=True)) for row in rows] == [
        {"engine": "qwen", "eval": "old-eval", "cell": cell}
        | dict.fromkeys(("elapsed s", "tokens", "live tok/s"), "-")
        for cell in ("o1", "-")
    ]
    assert [(c["eval"], c["cell"], c["elapsed_s"], c["admitted_on"]) for c in in_flight_json(lane)] == [
        ("old-eval", "o1", None, None),
        ("old-eval", None, None, None),
    ]


def test_lanes_json_reads_the_old_file_and_leaves_it_as_it_was(
    old_state: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in (RULES_ENV, STATE_ENV):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("SPARK_OTEL_STORE", str(tmp_path / "elsewhere" / "store.sqlite"))
    before = old_state.read_bytes()
    assert main(["lanes", "--state", str(old_state), "--json"]) == 0
    [lane] = json.loads(capsys.readouterr().out)["lanes"]
    assert (lane["engine"], lane["in_use"]) == ("qwen", ["old-eval", "old-eval"])
    assert [c["cell"] for c in lane["in_flight"]] == ["o1", None]
    assert old_state.read_bytes() == before  # a reader adds no column: that is a writer's work
