"""`spark-otel cells --budget`'s whole output on a store worked out by hand: both tables, the line
that says where the queue/prefill split comes from (joined, or not split), each phase's note once
(snapshots), the whole --json, and what it says when no cell read has a budget.

The command's first test checks some figures; here every line is pinned, so requests read for
the wrong cell (or for every cell), server timings not passed, the joined count lost, a title or
the notes dropped or moved under the second table, or a renamed --json key, fails.

The store: review's r1 (100 s, 25 s admitted late, two requests of which the engine answered one,
queued 1 s and prefilled 3 s: its 30 s wait for first tokens splits 7.5 s queue, 22.5 s prefill),
review's r2 (10 s, its one request not answered by the engine), review's r3 (no budget), and
smoke's s1 (4 s, its one request queued 0.5 s and prefilled 0.5 s).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.support.snapshots import Snapshot

from spark_otel.cli import main
from spark_otel.model import Cell, Request, ServerTiming
from spark_otel.store import Store

S = 1_000_000_000
ENGINE = "engine server spans"


def _cell(uid: str, eval_name: str, start_s: int, end_s: int, **fields: object) -> Cell:
    return Cell(
        uid=uid,
        eval_name=eval_name,
        cell_id=uid.upper(),
        start_unix_ns=start_s * S,
        end_unix_ns=end_s * S,
        **fields,
    )


def _request(uid: str, cell_uid: str, start_s: int) -> Request:
    return Request(
        uid=uid,
        cell_uid=cell_uid,
        operation="chat",
        start_unix_ns=start_s * S,
        end_unix_ns=(start_s + 1) * S,
        streaming=True,
    )


def _timing(request_uid: str, queue_s: float, prefill_s: float) -> ServerTiming:
    return ServerTiming(
        request_uid=request_uid,
        trace_id=f"t-{request_uid}",
        span_uid=f"s-{request_uid}",
        arrival_unix_ns=0,
        queue_s=queue_s,
        prefill_s=prefill_s,
    )


@pytest.fixture
def budget_store(tmp_path: Path) -> str:
    path = tmp_path / "budget.sqlite"
    r1 = _cell(
        "r1", "review", 0, 100, first_token_s=30.0, decode_s=60.0, unsplit_s=0.0, other_s=10.0,
        attributes={"spark_otel.cell.queue_wait_s": 25.0},
    )  # fmt: skip
    r2 = _cell("r2", "review", 200, 210, first_token_s=2.0, decode_s=8.0, other_s=0.0)
    s1 = _cell("s1", "smoke", 300, 304, first_token_s=1.0, decode_s=3.0)
    with Store(path) as store:
        store.write_cells([r1, r2, _cell("r3", "review", 250, 251), s1])
        store.write_requests(
            [
                _request("q1", "r1", 1),
                _request("q2", "r1", 50),
                _request("q3", "r2", 201),
                _request("q4", "s1", 300),
            ]
        )
        store.write_server_timings([_timing("q1", 1.0, 3.0), _timing("q4", 0.5, 0.5)])
    return str(path)


def test_budget_tables_split_the_wait_by_the_engines_spans_and_note_each_phase_once(
    budget_store: str, capsys: pytest.CaptureFixture[str], snapshot: Snapshot
) -> None:
    """Shares of wall time: r1 125 s (25 + 100), review 135 s, smoke 4 s; 0.125 prints as 12%."""
    assert main(["cells", "--store", budget_store, "--budget"]) == 0
    snapshot(capsys.readouterr().out)


def test_budget_says_the_wait_is_not_split_where_no_request_was_joined(
    budget_store: str, capsys: pytest.CaptureFixture[str], snapshot: Snapshot
) -> None:
    """r3 (no budget) and r2, whose one request the engine did not answer: only the phases r2 has."""
    assert main(["cells", "--store", budget_store, "--budget", "--eval", "review", "-n", "2"]) == 0
    snapshot(capsys.readouterr().out)


def test_budget_json_is_every_cells_budget_and_every_evals_sum_with_their_sources(
    budget_store: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["cells", "--store", budget_store, "--budget", "--json"]) == 0
    client = "client"
    assert json.loads(capsys.readouterr().out) == {
        "cells": [
            {
                "uid": "s1", "eval_name": "smoke", "cell_id": "S1", "status": "ok",
                "elapsed_s": 4.0, "wall_s": 4.0,
                "seconds": {"queue": 0.5, "prefill": 0.5, "decode": 3.0},
                "sources": {"queue": ENGINE, "prefill": ENGINE, "decode": client},
                "requests": 1, "joined": 1,
            },
            {
                "uid": "r2", "eval_name": "review", "cell_id": "R2", "status": "ok",
                "elapsed_s": 10.0, "wall_s": 10.0,
                "seconds": {"first_token": 2.0, "decode": 8.0, "other": 0.0},
                "sources": {"first_token": client, "decode": client, "other": client},
                "requests": 1, "joined": 0,
            },
            {
                "uid": "r1", "eval_name": "review", "cell_id": "R1", "status": "ok",
                "elapsed_s": 100.0, "wall_s": 125.0,
                "seconds": {
                    "admission": 25.0, "queue": 7.5, "prefill": 22.5, "decode": 60.0, "unsplit": 0.0,
                    "other": 10.0,
                },
                "sources": {
                    "admission": "governor", "queue": ENGINE, "prefill": ENGINE, "decode": client,
                    "unsplit": client, "other": client,
                },
                "requests": 2, "joined": 1,
            },
        ],
        "evals": [
            {
                "eval_name": "review", "n_cells": 2, "unsplit_cells": 1, "requests": 3, "joined": 1,
                "wall_s": 135.0,
                "seconds": {
                    "admission": 25.0, "queue": 7.5, "prefill": 22.5, "first_token": 2.0, "decode": 68.0,
                    "unsplit": 0.0, "other": 10.0,
                },
                "sources": {
                    "admission": "governor", "queue": ENGINE, "prefill": ENGINE, "first_token": client,
                    "decode": client, "unsplit": client, "other": client,
                },
            },
            {
                "eval_name": "smoke", "n_cells": 1, "unsplit_cells": 0, "requests": 1, "joined": 1,
                "wall_s": 4.0,
                "seconds": {"queue": 0.5, "prefill": 0.5, "decode": 3.0},
                "sources": {"queue": ENGINE, "prefill": ENGINE, "decode": client},
            },
        ],
    }  # fmt: skip


def test_budget_of_cells_without_one_says_so_and_json_counts_them(
    budget_store: str, capsys: pytest.CaptureFixture[str]
) -> None:
    only_r3 = ["cells", "--store", budget_store, "--budget", "--eval", "review", "-n", "1"]
    assert main(only_r3) == 0
    assert capsys.readouterr().out == (
        "none of the 1 cells read has a time budget: a live cell() records one (store schema 2 on); "
        "a backfilled cell has one where its mapping names the fields\n"
    )
    assert main([*only_r3, "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {
        "cells": [],
        "evals": [
            {
                "eval_name": "review", "n_cells": 0, "unsplit_cells": 1, "requests": 0, "joined": 0,
                "wall_s": 0.0, "seconds": {}, "sources": {},
            }
        ],
    }  # fmt: skip
