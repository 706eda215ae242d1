"""Where each cell's and each eval's wall time went, on plain cells, requests and server timings:
every phase, its source, and the engine's split of the wait for first tokens."""

from __future__ import annotations

from typing import Any

import pytest

from spark_otel import _semconv as sc
from spark_otel.analysis.budget import ENGINE, cell_budgets, eval_budgets
from spark_otel.model import Cell, CellStatus, Request, ServerTiming

S = 1_000_000_000


def _cell(uid: str, seconds: float, eval_name: str = "e", **kw: Any) -> Cell:
    return Cell(
        uid=uid, eval_name=eval_name, cell_id=uid, start_unix_ns=0, end_unix_ns=int(seconds * S), **kw
    )


def _request(uid: str, cell_uid: str | None) -> Request:
    return Request(uid=uid, cell_uid=cell_uid, operation="chat", start_unix_ns=0, end_unix_ns=S)


def _timing(request_uid: str, queue_s: float | None, prefill_s: float | None) -> ServerTiming:
    return ServerTiming(
        request_uid=request_uid,
        trace_id="t",
        span_uid=f"s-{request_uid}",
        arrival_unix_ns=0,
        queue_s=queue_s,
        prefill_s=prefill_s,
    )


GOVERNED = _cell(
    "gov",
    10,
    first_token_s=2.0,
    decode_s=7.0,
    other_s=1.0,
    attributes={sc.CELL_QUEUE_WAIT_S: 3.0},
)
BACKFILLED = _cell(
    "back", 4, first_token_s=1.0, decode_s=3.0, unsplit_s=0.0, source="nsight", status=CellStatus.DEADLINE
)
NO_FIRST_WAIT = _cell("instant", 2, first_token_s=0.0, decode_s=2.0)
UNSPLIT = _cell("old", 5)
REQUESTS = [
    _request("r1", "gov"),
    _request("r2", "gov"),
    _request("r3", None),
    _request("r4", "instant"),
]
TIMINGS = {
    "r1": _timing("r1", 0.5, 1.5),
    "r2": _timing("r2", 0.5, None),  # no prefill reported: not joined
    "r3": _timing("r3", 9.0, 9.0),  # a request outside every cell
    "r4": _timing("r4", 1.0, 1.0),
}


def test_a_cells_budget_lists_its_phases_in_order_with_their_sources() -> None:
    gov, back, instant = cell_budgets([GOVERNED, BACKFILLED, UNSPLIT, NO_FIRST_WAIT], REQUESTS, TIMINGS)
    assert (gov.uid, gov.status, gov.elapsed_s, gov.wall_s, gov.requests, gov.joined) == (
        "gov",
        "ok",
        10,
        13,
        2,
        1,
    )
    # The engine spent a quarter of its reported first-token time queued: the client's 2 s split so.
    assert list(gov.seconds.items()) == [
        ("admission", 3.0),
        ("queue", 0.5),
        ("prefill", 1.5),
        ("decode", 7.0),
        ("other", 1.0),
    ]
    assert gov.sources == {
        "admission": "governor",
        "queue": ENGINE,
        "prefill": ENGINE,
        "decode": "client",
        "other": "client",
    }
    assert (gov.share("decode"), gov.share("admission"), gov.share("first_token")) == (
        pytest.approx(7 / 13),
        pytest.approx(3 / 13),
        None,
    )
    assert (back.status, back.wall_s, back.requests, back.joined) == ("deadline", 4, 0, 0)
    assert list(back.seconds.items()) == [("first_token", 1.0), ("decode", 3.0), ("unsplit", 0.0)]
    assert back.sources == {"first_token": "nsight", "decode": "nsight", "unsplit": "nsight"}
    assert back.share("unsplit") == 0.0
    # Nothing to split when the client waited no time for the first token.
    assert (instant.seconds, instant.requests, instant.joined) == ({"first_token": 0.0, "decode": 2.0}, 1, 0)


def test_without_server_timings_or_with_an_empty_split_first_token_stays_the_clients() -> None:
    (alone,) = cell_budgets([GOVERNED])
    assert (list(alone.seconds), alone.requests, alone.joined) == (
        ["admission", "first_token", "decode", "other"],
        0,
        0,
    )
    zero = {"r1": _timing("r1", 0.0, 0.0)}
    (unsplit,) = cell_budgets([GOVERNED], REQUESTS, zero)
    assert (unsplit.seconds["first_token"], unsplit.sources["first_token"], unsplit.joined) == (
        2.0,
        "client",
        0,
    )
    queued_only = {"r1": _timing("r1", 1.0, 0.0)}
    (queued,) = cell_budgets([GOVERNED], REQUESTS, queued_only)
    assert (queued.seconds["queue"], queued.seconds["prefill"]) == (2.0, 0.0)


def test_a_cell_with_no_wall_time_has_no_shares() -> None:
    (empty,) = cell_budgets([_cell("z", 0, decode_s=0.0)])
    assert (empty.wall_s, empty.share("decode")) == (0.0, None)


def test_an_evals_budget_sums_its_cells_and_counts_the_cells_without_one() -> None:
    cells = [GOVERNED, BACKFILLED, NO_FIRST_WAIT, UNSPLIT, _cell("old2", 3, eval_name="a")]
    a, e = eval_budgets(cell_budgets(cells, REQUESTS, TIMINGS), cells)
    assert (a.eval_name, a.n_cells, a.unsplit_cells, a.wall_s, a.seconds, a.share("decode")) == (
        "a",
        0,
        1,
        0,
        {},
        None,
    )
    assert (e.eval_name, e.n_cells, e.unsplit_cells, e.requests, e.joined, e.wall_s) == ("e", 3, 1, 3, 1, 19)
    assert list(e.seconds.items()) == [
        ("admission", 3.0),
        ("queue", 0.5),
        ("prefill", 1.5),
        ("first_token", 1.0),
        ("decode", 12.0),
        ("unsplit", 0.0),
        ("other", 1.0),
    ]
    assert e.sources == {
        "admission": "governor",
        "queue": ENGINE,
        "prefill": ENGINE,
        "first_token": "client; nsight",
        "decode": "client; nsight",
        "unsplit": "nsight",
        "other": "client",
    }
    assert e.share("decode") == pytest.approx(12 / 19)
    (only,) = eval_budgets(cell_budgets(cells))  # without the cells: none counted as unsplit
    assert (only.eval_name, only.unsplit_cells) == ("e", 0)
