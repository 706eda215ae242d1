"""A verdict for every timeout: the article's Appendix D rebuilt from its rows, a re-run's
needed time, a cell long by itself, one queued, and one the data cannot explain."""

from __future__ import annotations

import pytest
from tests.support.article import D_EVAL, S, appendix_d_cells, appendix_d_loads

from spark_otel import _semconv as sc
from spark_otel.analysis.timeouts import timeout_verdicts
from spark_otel.model import Cell, CellStatus
from spark_otel.views.timeouts import verdict_line

NEMOTRON = "nemotron-cards eval, 4 workers on nemotron"


def _article(rename: dict[str, str] | None = None) -> list:
    probes, others = appendix_d_loads()
    cells = [
        c.model_copy(update={"cell_id": (rename or {}).get(c.cell_id, c.cell_id)}) for c in appendix_d_cells()
    ]
    return timeout_verdicts(cells + others, probes, eval_name=D_EVAL)


def test_appendix_d_timeouts_were_slowed_by_the_nemotron_eval() -> None:
    verdicts = _article()
    assert [v.cell_id for v in verdicts] == [
        "B #454 security run2", "F #11 correctness run1", "F #11 correctness run2",
    ]  # fmt: skip
    for v in verdicts:
        assert v.kind == "slowed"
        assert v.loads == [NEMOTRON]
        assert v.completion_tokens is None  # a timeout record carries no tokens
        assert v.needed_at_baseline_s is None
        assert v.baseline_rate == pytest.approx(11.51, abs=1e-6)
        assert v.baseline_n == 113
        assert v.share_of_baseline == pytest.approx(5.25 / 11.51, abs=1e-6)
        assert v.ceiling_s == 1800.0
    assert verdict_line(verdicts[0]) == (
        f"slowed by {NEMOTRON} (ran at 46% of baseline, as the eval's cells inside the load (n=1))"
    )


def test_a_cell_run_again_after_its_timeout_gives_what_it_needed() -> None:
    """The article: "one of them needed 1,072 seconds at full speed on its next seed, so at half
    speed it could not fit"."""
    same = "F #11 correctness"
    verdicts = _article({f"{same} run{k}": same for k in (1, 2, 3)})
    first, second = (v for v in verdicts if v.cell_id == same)
    assert first.rerun is not None
    assert second.rerun is not None
    assert first.rerun.uid == second.rerun.uid  # run 3, the first that completed
    assert first.rerun.elapsed_s == pytest.approx(11_763 / 10.97, abs=1e-6)
    assert f"{first.rerun.elapsed_s:,.0f}" == "1,072"
    assert first.rerun.share_of_baseline == pytest.approx(10.97 / 11.51, abs=1e-6)
    assert verdict_line(first) == (
        f"slowed by {NEMOTRON} (ran at 46% of baseline, as the eval's cells inside the load (n=1)); "
        "its re-run took 1,072 s at 95% of baseline, so at 46% it needed about 2,241 s, ceiling 1,800 s"
    )


def _cell(
    cell_id: str, start_s: int, elapsed_s: int, tokens: int | None, *, timed_out: bool = False, **attrs
) -> Cell:
    return Cell(
        uid=f"{cell_id}@{start_s}",
        eval_name="review",
        cell_id=cell_id,
        engine="qwen",
        start_unix_ns=start_s * S,
        end_unix_ns=(start_s + elapsed_s) * S,
        completion_tokens=tokens,
        status=CellStatus.DEADLINE if timed_out else CellStatus.OK,
        deadline_s=1800.0,
        workers=1,
        attributes=attrs,
    )


def _alone(n: int = 5) -> list[Cell]:
    return [_cell(f"b{k}", k * 1000, 600, 6000) for k in range(n)]  # 10 tok/s, nothing beside them


def test_a_cell_at_baseline_speed_that_did_not_fit_was_long_by_itself() -> None:
    cut = _cell("big", 10_000, 1800, 18_000, timed_out=True)
    (v,) = timeout_verdicts([*_alone(), cut])
    assert (v.kind, v.share_of_baseline, v.needed_at_baseline_s) == ("long", 1.0, 1800.0)
    assert verdict_line(v) == "long by itself: needed at least 1,800 s at baseline, ceiling 1,800 s"
    (v,) = timeout_verdicts([*_alone(), cut, _cell("big", 20_000, 2500, 25_000)])
    assert verdict_line(v) == "long by itself: its re-run took 2,500 s at 100% of baseline, ceiling 1,800 s"


def test_a_cell_the_governor_held_is_queued_first() -> None:
    cut = _cell("held", 10_000, 1800, 18_000, timed_out=True, **{sc.CELL_QUEUE_WAIT_S: 600.0})
    (v,) = timeout_verdicts([*_alone(), cut])
    assert (v.kind, v.admission_s) == ("queued", 600.0)
    assert verdict_line(v) == "queued 600 s before it started (ceiling 1,800 s)"


def test_without_a_baseline_or_any_tokens_there_is_no_verdict_and_it_says_what_would_give_one() -> None:
    cut = _cell("c", 10_000, 1800, None, timed_out=True)
    (v,) = timeout_verdicts([cut])
    assert v.kind == "unknown"
    assert verdict_line(v) == (
        "no verdict: review has no baseline (no cell of it ran alone); run some of its cells with "
        "nothing else on the box, then `spark-otel timeouts --eval review`"
    )
    (v,) = timeout_verdicts([*_alone(), cut])
    assert v.kind == "unknown"
    assert verdict_line(v).startswith(
        "no verdict: it overlapped no measured load and recorded no tokens; stream it"
    )
    assert timeout_verdicts(_alone()) == []
