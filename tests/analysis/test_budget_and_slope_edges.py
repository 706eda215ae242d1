"""Wall-time shares of budgets shorter than a second or of no length, the engine's split summed
over every request it answered, the count of cells without a budget, and the elasticity of a
gauge that never moves."""

from __future__ import annotations

from typing import Any

from spark_otel.analysis.budget import ENGINE, EvalBudget, cell_budgets, eval_budgets
from spark_otel.analysis.stats import elasticity
from spark_otel.model import Cell, Request, ServerTiming

S = 1_000_000_000


def _cell(uid: str, seconds: float, **kw: Any) -> Cell:
    return Cell(uid=uid, eval_name="e", cell_id=uid, start_unix_ns=0, end_unix_ns=int(seconds * S), **kw)


def test_a_budget_shorter_than_a_second_still_has_shares() -> None:
    """A 0.5 s cell: 0.1 s to the first token, 0.4 s decoding, a fifth and four fifths of it."""
    (half,) = cell_budgets([_cell("short", 0.5, first_token_s=0.1, decode_s=0.4)])
    assert (half.wall_s, half.share("first_token"), half.share("decode")) == (0.5, 0.2, 0.8)
    (e,) = eval_budgets([half])
    assert (e.wall_s, e.share("first_token"), e.share("decode"), e.share("other")) == (0.5, 0.2, 0.8, None)


def test_an_evals_budget_of_no_wall_time_has_no_shares() -> None:
    """Cells of no duration with a budget: a phase of 0 s of 0 s is no share at all."""
    cells = [_cell("z1", 0, decode_s=0.0), _cell("z2", 0, decode_s=0.0)]
    (e,) = eval_budgets(cell_budgets(cells))
    assert (e.n_cells, e.wall_s, e.seconds, e.share("decode")) == (2, 0.0, {"decode": 0.0}, None)
    empty = EvalBudget(
        eval_name="e", n_cells=0, unsplit_cells=0, requests=0, joined=0, wall_s=0.0, seconds={}, sources={}
    )
    assert empty.share("decode") is None


def _request(uid: str) -> Request:
    return Request(uid=uid, cell_uid="c", operation="chat", start_unix_ns=0, end_unix_ns=S)


def _timing(request_uid: str, queue_s: float, prefill_s: float) -> ServerTiming:
    return ServerTiming(
        request_uid=request_uid,
        trace_id="t",
        span_uid=f"s-{request_uid}",
        arrival_unix_ns=0,
        queue_s=queue_s,
        prefill_s=prefill_s,
    )


def test_the_engines_split_sums_every_request_it_answered_past_one_it_did_not() -> None:
    """The first request has no server span; the next two queued 1 s + 0.5 s and prefilled
    1 s + 1.5 s: 1.5 of 4 s queued, so the client's 2 s wait splits 0.75 s and 1.25 s."""
    c = _cell("c", 10, first_token_s=2.0, decode_s=8.0)
    requests = [_request("r0"), _request("r1"), _request("r2")]
    timings = {"r1": _timing("r1", 1.0, 1.0), "r2": _timing("r2", 0.5, 1.5)}
    (b,) = cell_budgets([c], requests, timings)
    assert (b.requests, b.joined) == (3, 2)
    assert b.seconds == {"queue": 0.75, "prefill": 1.25, "decode": 8.0}
    assert b.sources == {"queue": ENGINE, "prefill": ENGINE, "decode": "client"}


def test_every_cell_without_a_budget_is_counted() -> None:
    cells = [_cell("b", 4, decode_s=4.0), _cell("old1", 5), _cell("old2", 6)]
    (e,) = eval_budgets(cell_budgets(cells), cells)
    assert (e.n_cells, e.unsplit_cells, e.wall_s) == (1, 2, 4.0)


def test_a_gauge_that_never_moves_has_an_elasticity_of_exactly_zero() -> None:
    """A flat gauge does not move with throughput: 0, whatever the figures' rounding (the
    instruments print it, and "-0.00" would read as a gauge that falls)."""
    assert elasticity([10.0, 20.0, 30.0], [0.1, 0.1, 0.1]) == 0.0
    assert elasticity([0.1, 0.2, 0.3], [5.0, 5.0, 5.0]) == 0.0
