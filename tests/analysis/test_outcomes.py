"""How each eval's cells ended, per worker count, on plain cells: every field of the outcome."""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from spark_otel import _semconv as sc
from spark_otel.analysis.outcomes import DeadlineOutcome, deadline_outcomes
from spark_otel.model import Cell, CellStatus

S = 1_000_000_000


def _cell(uid: str, eval_name: str, workers: int | None, **kw: Any) -> Cell:
    return Cell(
        uid=uid, eval_name=eval_name, cell_id=uid, start_unix_ns=0, end_unix_ns=10 * S, workers=workers, **kw
    )


def _waited(s: float, rule: str | None = None) -> dict[str, Any]:
    attributes: dict[str, Any] = {sc.CELL_QUEUE_WAIT_S: s}
    if rule is not None:
        attributes[sc.CELL_QUEUE_RULE] = rule
    return attributes


def test_each_eval_and_worker_count_is_one_outcome_in_name_then_count_order() -> None:
    cells = [
        _cell("b8", "b", 8),
        _cell("a4", "a", 4),
        _cell("a1", "a", 1),
        _cell("aN", "a", None),  # no worker count: before any count
        _cell("a2", "a", 2),
        _cell("b8x", "b", 8),
    ]
    keys = [(o.eval_name, o.workers, o.cells) for o in deadline_outcomes(cells)]
    assert keys == [("a", None, 1), ("a", 1, 1), ("a", 2, 1), ("a", 4, 1), ("b", 8, 2)]
    assert deadline_outcomes([]) == []


def test_statuses_ceiling_hits_salvage_and_degraded_are_counted_per_group() -> None:
    cells = [
        _cell("ok", "e", 4),
        _cell("cut", "e", 4, status=CellStatus.DEADLINE, salvaged_findings=3),  # degraded
        _cell("cut-bare", "e", 4, status=CellStatus.DEADLINE),  # lost: kept no findings
        _cell("err", "e", 4, status=CellStatus.ERROR),
        _cell("cap", "e", 4, status=CellStatus.LENGTH_CAP, salvaged_findings=2),  # not degraded
        _cell("other", "e", 2, status=CellStatus.DEADLINE),
    ]
    two, four = deadline_outcomes(cells)
    assert four == DeadlineOutcome(
        eval_name="e",
        workers=4,
        cells=5,
        statuses={"ok": 1, "error": 1, "deadline": 2, "length_cap": 1},
        ceiling_hits=2,
        salvaged_findings=5,
        degraded=1,
        queued=0,
        longest_wait_s=None,
        waits_past_deadline=0,
        held_by=None,
    )
    assert (two.cells, two.statuses, two.ceiling_hits) == (
        1,
        {"ok": 0, "error": 0, "deadline": 1, "length_cap": 0},
        1,
    )


def test_queue_waits_count_only_cells_held_and_name_the_rule_that_held_most() -> None:
    cells = [
        _cell("none", "e", 2),  # ungoverned: no wait recorded
        _cell("zero", "e", 2, attributes=_waited(0.0, "box")),  # governed, admitted at once
        _cell("zero2", "e", 2, attributes=_waited(0, "box")),
        _cell("short", "e", 2, deadline_s=30.0, attributes=_waited(12.5, "lane q")),
        _cell("long", "e", 2, deadline_s=30.0, attributes=_waited(45.0, "box")),
        _cell("past", "e", 2, deadline_s=20.0, attributes=_waited(20.5, "lane q")),
        _cell("at", "e", 2, deadline_s=12.0, attributes=_waited(12.0)),  # exactly its ceiling: not past
        _cell("free", "e", 2, attributes=_waited(99.0)),  # no ceiling of its own: never past it
        _cell("half", "e", 2, attributes=_waited(0.5)),  # under a second is still held
    ]
    [outcome] = deadline_outcomes(cells)
    assert (outcome.queued, outcome.longest_wait_s, outcome.waits_past_deadline, outcome.held_by) == (
        6,
        99.0,
        2,
        "lane q",
    )


def test_a_wait_without_a_rule_still_counts_and_names_none() -> None:
    [outcome] = deadline_outcomes([_cell("w", "e", 1, attributes=_waited(3))])
    assert (outcome.queued, outcome.longest_wait_s, outcome.held_by) == (1, 3.0, None)
    assert type(outcome.longest_wait_s) is float


def _outcomes_figure_by_figure(cells: list[Cell]) -> list[DeadlineOutcome]:
    """The reference: each figure a pass of its own over each group's cells, as `deadline_outcomes`
    counted before it took one pass over the cells."""
    groups: dict[tuple[str, int | None], list[Cell]] = defaultdict(list)
    for c in cells:
        groups[(c.eval_name, c.workers)].append(c)
    out = []
    for (eval_name, workers), members in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1] or 0)):
        statuses = Counter(c.status.value for c in members)
        waits = [(c, w) for c in members if (w := c.admission_s or 0.0) > 0]
        rules = Counter(
            str(c.attributes[sc.CELL_QUEUE_RULE]) for c, _ in waits if sc.CELL_QUEUE_RULE in c.attributes
        )
        out.append(
            DeadlineOutcome(
                eval_name=eval_name, workers=workers, cells=len(members),
                statuses={s.value: statuses.get(s.value, 0) for s in CellStatus},
                ceiling_hits=sum(c.deadline_hit for c in members),
                salvaged_findings=sum(c.salvaged_findings for c in members),
                degraded=sum(c.degraded for c in members), queued=len(waits),
                longest_wait_s=max((w for _, w in waits), default=None),
                waits_past_deadline=sum(1 for c, w in waits if c.deadline_s is not None and w > c.deadline_s),
                held_by=rules.most_common(1)[0][0] if rules else None,
            )
        )  # fmt: skip
    return out


_CELLS = st.lists(
    st.tuples(
        st.sampled_from(["a", "b"]),
        st.sampled_from([None, 1, 4]),
        st.sampled_from(list(CellStatus)),
        st.integers(0, 2),
        st.sampled_from([None, 0, 0.5, 5, 20.0, True]),
        st.sampled_from([None, "batch", "lane"]),
        st.sampled_from([None, 1.0, 10.0]),
    ),
    max_size=30,
)


@settings(max_examples=200, deadline=None)
@given(_CELLS)
def test_one_pass_gives_every_figure_a_pass_per_figure_gives(rows: list[tuple[Any, ...]]) -> None:
    """Generated cells (ties among the rules included, a boolean wait that is no wait): the same
    outcomes, field for field, as the reference."""
    cells = []
    for k, (name, workers, status, salvaged, wait, rule, ceiling) in enumerate(rows):
        attributes: dict[str, Any] = {} if wait is None else {sc.CELL_QUEUE_WAIT_S: wait}
        if rule is not None:
            attributes[sc.CELL_QUEUE_RULE] = rule
        cells.append(
            _cell(f"c{k}", name, workers, status=status, salvaged_findings=salvaged, deadline_s=ceiling,
                  attributes=attributes)
        )  # fmt: skip
    assert deadline_outcomes(cells) == _outcomes_figure_by_figure(cells)
