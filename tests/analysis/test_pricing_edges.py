"""Neighbour cost and timeout verdicts at their edges: an eval at one or several worker counts,
cells and windows without an engine, a share of exactly the slowed line, a ceiling that is not
the elapsed time, and cells too short (or too empty) to have a rate of their own."""

from __future__ import annotations

from typing import Any

import pytest
from tests.support.cells import S, cell

from spark_otel import InputError
from spark_otel.analysis.neighbour import neighbour_cost, neighbour_costs
from spark_otel.analysis.timeouts import Rerun, TimeoutVerdict, timeout_verdicts
from spark_otel.model import Cell, CellStatus, LoadWindow
from spark_otel.views.timeouts import verdict_line

# -- neighbour cost: worker counts and engines ---------------------------------------------------


def test_an_eval_at_one_worker_count_is_priced_without_a_warning() -> None:
    cells = [cell(f"g{k}", 100 * k, 100 * k + 50, 500, workers=2) for k in range(3)]
    assert neighbour_cost("g", cells).warnings == []


def test_an_eval_at_several_worker_counts_is_warned_about_its_own_batching() -> None:
    cells = [cell("g1", 0, 50, 500, workers=1), cell("g4", 100, 150, 500, workers=4)]
    assert neighbour_cost("g", cells).warnings == [
        "g ran at 1, 4 workers: one baseline across them prices its own batching as load; "
        "price one worker count at a time"
    ]


def test_a_worker_count_the_eval_never_ran_at_is_refused_with_the_counts_it_ran_at() -> None:
    cells = [cell("g1", 0, 50, 500, workers=1), cell("g4", 100, 150, 500, workers=4)]
    with pytest.raises(InputError) as raised:
        neighbour_cost("g", cells, workers=8)
    assert str(raised.value) == "eval 'g' has no cells at 8 workers (has: 1, 4)"


def _load(engine: str | None) -> LoadWindow:
    return LoadWindow(
        uid="w", name="job", kind="load", engine=engine, start_unix_ns=1000 * S, end_unix_ns=1100 * S
    )


def test_whether_a_load_shares_the_engine_is_unknown_when_either_side_names_none() -> None:
    """Cells at 10 tok/s alone, one at 5 beside the job: the job costs 50% either way, but
    whether it ran on the eval's engine cannot be said without both engines."""
    alone = [cell(f"a{k}", 100 * k, 100 * k + 50, 500) for k in range(3)]
    beside = cell("b", 1000, 1100, 500)
    unnamed = [c.model_copy(update={"engine": None}) for c in [*alone, beside]]
    report = neighbour_cost("g", unnamed, [_load("n")])
    assert report.engine is None
    [job] = report.windows
    assert (job.same_engine, job.n_cells, job.cost) == (None, 1, 0.5)
    [job] = neighbour_cost("g", [*alone, beside], [_load(None)]).windows
    assert (job.same_engine, job.n_cells, job.cost) == (None, 1, 0.5)


# -- timeout verdicts ----------------------------------------------------------------------------


def _alone() -> list[Cell]:
    """Five cells at 10 tok/s with nothing beside them: the baseline, 10.0 over 5 cells."""
    return [cell(f"b{k}", 1000 * k, 1000 * k + 600, 6000, cell_id=f"b{k}") for k in range(5)]


def _cut(uid: str, start_s: float, end_s: float, tokens: int | None, **fields: Any) -> Cell:
    """A cell cut off at its ceiling (``deadline_s`` unless given: its elapsed time)."""
    fields.setdefault("deadline_s", end_s - start_s)
    return cell(uid, start_s, end_s, tokens, status=CellStatus.DEADLINE, **fields)


def test_a_cell_at_exactly_the_slowed_line_with_a_rerun_is_long_by_itself() -> None:
    """900 tokens in its 100 s ceiling is 9 tok/s, 90% of baseline: not below `SLOWED_BELOW`,
    so no slowed share is worked into what its re-run (1,200 tokens in 120 s) says."""
    cut = _cut("cut", 10_000, 10_100, 900, cell_id="x")
    again = cell("again", 20_000, 20_120, 1200, cell_id="x")
    (v,) = timeout_verdicts([*_alone(), cut, again])
    assert v == TimeoutVerdict(
        uid="cut",
        eval_name="g",
        cell_id="x",
        engine="q",
        start_unix_ns=10_000 * S,
        elapsed_s=100.0,
        ceiling_s=100.0,
        completion_tokens=900,
        rate=9.0,
        baseline_rate=10.0,
        baseline_n=6,  # the five alone, and the re-run: alone too, at 10 tok/s
        share_of_baseline=0.9,
        share_cells=None,
        loads=[],
        admission_s=None,
        needed_at_baseline_s=90.0,
        rerun=Rerun(uid="again", elapsed_s=120.0, completion_tokens=1200, share_of_baseline=1.0),
        kind="long",
        unjudged=None,
    )
    assert verdict_line(v) == "long by itself: its re-run took 120 s at 100% of baseline, ceiling 100 s"


def test_the_ceiling_is_the_recorded_deadline_else_the_elapsed_time() -> None:
    """One cell ran a second past its 1,800 s deadline; one was cut with no deadline recorded.
    Both ran at baseline speed, 10 tok/s."""
    late = _cut("late", 10_000, 11_801, 18_010, deadline_s=1800.0)
    unrecorded = _cut("unrecorded", 20_000, 21_800, 18_000, deadline_s=None)
    first, second = timeout_verdicts([*_alone(), late, unrecorded])
    assert (first.elapsed_s, first.ceiling_s, verdict_line(first)) == (
        1801.0,
        1800.0,
        "long by itself: needed at least 1,801 s at baseline, ceiling 1,800 s",
    )
    assert (second.elapsed_s, second.ceiling_s, verdict_line(second)) == (
        1800.0,
        1800.0,
        "long by itself: needed at least 1,800 s at baseline, ceiling 1,800 s",
    )


def test_a_one_second_cell_is_judged_by_its_own_rate() -> None:
    """10 tokens in a 1 s ceiling is 10 tok/s: the baseline's speed, so long by itself."""
    (v,) = timeout_verdicts([*_alone(), _cut("short", 10_000, 10_001, 10)])
    assert (v.share_of_baseline, v.share_cells, v.kind, verdict_line(v)) == (
        1.0,
        None,
        "long",
        "long by itself: needed at least 1 s at baseline, ceiling 1 s",
    )


def test_a_cut_cell_of_no_duration_has_no_rate_to_judge_it_by() -> None:
    """Tokens in no time at all give no rate (and no division by zero): no verdict."""
    (v,) = timeout_verdicts([*_alone(), _cut("instant", 10_000, 10_000, 10, deadline_s=1.0)])
    assert (v.share_of_baseline, v.share_cells, v.needed_at_baseline_s, v.kind, v.unjudged) == (
        None,
        None,
        1.0,
        "unknown",
        "no rate",
    )
    assert verdict_line(v) == (
        "no verdict: it overlapped no measured load and has no rate; stream it "
        "(spark_otel.stream_with_deadline keeps a cut-off cell's tokens) to judge its next timeout"
    )


def test_a_rerun_without_a_baseline_has_no_share_of_one() -> None:
    """Every cell ran beside the job, so no baseline: the re-run is listed, its share unknown."""
    cut = _cut("cut", 1000, 1050, 250, cell_id="x")
    again = cell("again", 1060, 1100, 400, cell_id="x")
    (v,) = timeout_verdicts([cut, again], [_load("n")])
    assert (v.baseline_rate, v.kind) == (None, "unknown")
    assert v.rerun == Rerun(uid="again", elapsed_s=40.0, completion_tokens=400, share_of_baseline=None)


def test_a_cut_cell_without_a_worker_count_beside_counted_ones_still_gets_a_verdict() -> None:
    cells = [
        cell("g1", 0, 10, 100, workers=1),
        cell("g4", 20, 30, 100, workers=4),
        _cut("cut", 40, 50, 100),
    ]
    assert [v.uid for v in timeout_verdicts(cells)] == ["cut"]
    labels = [r.label for r in neighbour_costs(cells, min_cells=1)]
    assert labels == ["g at 1 worker", "g at 4 workers", "g (cells without a worker count)"]


def test_with_no_least_cell_count_an_eval_at_two_worker_counts_and_none_without_has_two_reports() -> None:
    cells = [cell("g1", 0, 10, 100, workers=1), cell("g4", 20, 30, 100, workers=4)]
    assert [r.label for r in neighbour_costs(cells, min_cells=0)] == ["g at 1 worker", "g at 4 workers"]
