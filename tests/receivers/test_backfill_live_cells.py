"""`adopt_live_cells` on a real store: which stored cell a backfilled Inspect sample replaces, and
what of the stored cell it keeps (the end-to-end run is tests/integrations/test_inspect_backfill)."""

from __future__ import annotations

from pathlib import Path

from tests.support.cells import cell

from spark_otel import _semconv as sc
from spark_otel.model import Cell
from spark_otel.receivers.backfill import adopt_live_cells
from spark_otel.store import Store

T0 = 1_800_000_000 * 1_000_000_000
UUID = sc.INSPECT_SAMPLE_UUID


def _live(uid: str, uuid: str, **attributes: str | int | float) -> Cell:
    return cell(
        uid,
        0.0,
        2.0,
        6,
        t0_ns=T0,
        eval_name="named-in-metadata",
        engine="vllm@box:8000",
        workers=3,
        trace_id="ab" * 16,
        attributes={UUID: uuid, sc.CELL_RETRIES: 1, sc.CELL_BUDGET_SCORING_S: 0.5, **attributes},
    )


def _logged(uid: str, uuid: str) -> Cell:
    return cell(
        uid,
        0.1,
        2.1,
        7,
        t0_ns=T0,
        eval_name="task",
        engine="vllm",
        workers=4,
        source="backfill",
        unsplit_s=1.5,
        other_s=0.5,
        attributes={UUID: uuid, sc.INSPECT_WORKING_S: 1.5},
    )


def test_a_sample_takes_the_live_cells_uid_names_and_what_only_it_knew(tmp_path: Path) -> None:
    with Store(tmp_path / "s.sqlite") as store:
        store.write_cells([_live("a" * 16, "u1"), _live("b" * 16, "u9")])
        other = _logged("c" * 16, "u2")
        adoption = adopt_live_cells([_logged("d" * 16, "u1"), other], store)
    assert (adoption.replaced_live, adoption.kept_live) == (1, 0)
    replaced, unmatched = adoption.cells
    assert unmatched == other
    assert (replaced.uid, replaced.trace_id) == ("a" * 16, "ab" * 16)
    assert (replaced.eval_name, replaced.engine, replaced.workers) == (
        "named-in-metadata",
        "vllm@box:8000",
        3,
    )
    # The log's measurements and budget; the live scoring phase is not added to it.
    assert (replaced.start_unix_ns, replaced.completion_tokens, replaced.source) == (
        T0 + 10**8,
        7,
        "backfill",
    )
    assert replaced.attributes == {UUID: "u1", sc.INSPECT_WORKING_S: 1.5, sc.CELL_RETRIES: 1}


def test_names_the_backfill_gives_win(tmp_path: Path) -> None:
    with Store(tmp_path / "s.sqlite") as store:
        store.write_cells([_live("a" * 16, "u1")])
        adoption = adopt_live_cells(
            [_logged("d" * 16, "u1")],
            store,
            eval_named=True,
            engine_named=True,
        )
    (replaced,) = adoption.cells
    assert (replaced.uid, replaced.eval_name, replaced.engine) == ("a" * 16, "task", "vllm")


def test_a_store_that_holds_a_sample_twice_keeps_the_live_one_once(tmp_path: Path) -> None:
    """A store where the log was backfilled before live cells were marked holds the sample twice:
    the live cell, and the log's under a uid of its own. Read again, the live one is replaced and
    the other goes; read once more, nothing changes and nothing is counted again."""
    legacy = _logged("d" * 16, "u1")
    legacy = legacy.model_copy(update={"attributes": {sc.INSPECT_WORKING_S: 1.5}})
    with Store(tmp_path / "s.sqlite") as store:
        store.write_cells([legacy, _live("a" * 16, "u1")])
        first = adopt_live_cells([_logged("d" * 16, "u1")], store)
        assert ([c.uid for c in first.cells], first.superseded, first.replaced_live) == (
            ["a" * 16],
            ["d" * 16],
            1,
        )
        store.write_cells(first.cells, replacing=first.superseded)
        assert store.cells() == first.cells
        again = adopt_live_cells([_logged("d" * 16, "u1")], store)
        assert (again.cells, again.replaced_live) == (first.cells, 0)
        store.write_cells(again.cells, replacing=again.superseded)
        assert store.cells() == first.cells


def test_a_live_cell_on_a_model_clock_is_kept(tmp_path: Path) -> None:
    with Store(tmp_path / "s.sqlite") as store:
        store.write_cells([_live("a" * 16, "u1", **{sc.TIME_SCALE: 50.0})])
        adoption = adopt_live_cells([_logged("d" * 16, "u1")], store)
    assert (adoption.cells, adoption.replaced_live, adoption.kept_live) == ([], 0, 1)
