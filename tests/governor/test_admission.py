"""Admission in one process, with real cells, spans and metrics: FIFO under contention, threads
and asyncio, a slot freed however a cell ends, rules edited while cells wait, fail-open and
fail-closed."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from tests.support.metric_points import metric_points
from tests.support.waiting import wait_for

from spark_otel import _semconv as sc
from spark_otel import cell
from spark_otel.governor import GovernorError, govern, ungovern
from spark_otel.governor.state import SharedState

LANE_1 = "[[lane]]\nengine = 'q'\ncells = 1\n"


def _lanes(state_path: Path) -> dict[str, tuple[int, int]]:
    state = SharedState(state_path)
    try:
        return {lane.engine: (len(lane.in_use), len(lane.waiting)) for lane in state.lanes()}
    finally:
        state.close()


def test_waiting_cells_start_in_the_order_they_queued(
    rules_file: Callable[[str], Path], state_path: Path, tracer_provider, meter_provider
) -> None:
    govern(rules_file(LANE_1), state=state_path)
    started: list[int] = []
    gate = threading.Event()

    def run(i: int) -> None:
        with cell("ev", f"c{i}", engine="q", tracer_provider=tracer_provider, meter_provider=meter_provider):
            started.append(i)
            if i == 0:
                gate.wait(10)

    first = threading.Thread(target=run, args=(0,))
    first.start()
    wait_for(lambda: started == [0], "the first cell to start", 5)
    others = []
    for i in range(1, 6):  # each joins the queue only after the one before it has
        t = threading.Thread(target=run, args=(i,))
        t.start()
        others.append(t)
        wait_for(lambda i=i: _lanes(state_path)["q"] == (1, i), f"cell {i} to queue", 5)
    gate.set()
    for t in [first, *others]:
        t.join(10)
    assert started == [0, 1, 2, 3, 4, 5]
    assert _lanes(state_path)["q"] == (0, 0)


def test_the_wait_is_on_the_span_and_in_the_metrics_and_the_decode_rate_excludes_it(
    rules_file: Callable[[str], Path],
    state_path: Path,
    tracer_provider,
    meter_provider,
    span_exporter: InMemorySpanExporter,
    metric_reader,
) -> None:
    govern(rules_file(LANE_1), state=state_path)
    holding = threading.Event()
    release = threading.Event()

    def hold() -> None:
        with cell("ev", "holder", engine="q", tracer_provider=tracer_provider, meter_provider=meter_provider):
            holding.set()
            release.wait(10)

    t = threading.Thread(target=hold)
    t.start()
    holding.wait(5)
    threading.Timer(0.4, release.set).start()
    entered = time.monotonic()
    with cell("ev", "waiter", engine="q", tracer_provider=tracer_provider, meter_provider=meter_provider):
        waited = time.monotonic() - entered
    t.join(5)
    spans = {s.attributes[sc.CELL_ID]: s for s in span_exporter.get_finished_spans()}
    waiter = spans["waiter"]
    assert waiter.attributes[sc.CELL_QUEUE_WAIT_S] == pytest.approx(waited, abs=0.1)
    assert waiter.attributes[sc.CELL_QUEUE_WAIT_S] >= 0.3
    assert waiter.attributes[sc.CELL_QUEUE_RULE] == "q lane at most 1 cell"
    assert spans["holder"].attributes[sc.CELL_QUEUE_WAIT_S] == 0.0
    assert sc.CELL_QUEUE_RULE not in spans["holder"].attributes
    # The span (and so the cell's elapsed time and decode rate) starts once admitted.
    assert (waiter.end_time - waiter.start_time) / 1e9 < 0.1
    [wait_point] = [
        p for p in metric_points(metric_reader, sc.GOVERNOR_QUEUE_WAIT) if p.attributes[sc.ENGINE] == "q"
    ]
    assert wait_point.count == 2
    assert wait_point.sum == pytest.approx(waiter.attributes[sc.CELL_QUEUE_WAIT_S], abs=1e-6)
    [slots] = metric_points(metric_reader, sc.GOVERNOR_SLOTS)
    [queue] = metric_points(metric_reader, sc.GOVERNOR_QUEUE)
    assert (slots.value, queue.value) == (0, 0)  # all released, none waiting


def test_a_wait_past_the_cells_own_ceiling_is_allowed_marked_and_warned_once_per_eval(
    rules_file: Callable[[str], Path],
    state_path: Path,
    tracer_provider,
    meter_provider,
    span_exporter: InMemorySpanExporter,
    caplog: pytest.LogCaptureFixture,
) -> None:
    govern(rules_file(LANE_1), state=state_path)
    holding, release = threading.Event(), threading.Event()

    def hold() -> None:
        with cell("ev", "holder", engine="q", tracer_provider=tracer_provider, meter_provider=meter_provider):
            holding.set()
            release.wait(10)

    def waiter(cell_id: str, deadline_s: float) -> None:
        with cell(
            "ev",
            cell_id,
            engine="q",
            deadline_s=deadline_s,
            tracer_provider=tracer_provider,
            meter_provider=meter_provider,
        ):
            pass

    for cell_id, deadline_s in (("short-1", 0.05), ("short-2", 0.05), ("long", 60.0)):
        holding.clear()
        release.clear()
        t = threading.Thread(target=hold)
        t.start()
        holding.wait(5)
        threading.Timer(0.3, release.set).start()
        with caplog.at_level(logging.WARNING, logger="spark_otel.governor.admission"):
            waiter(cell_id, deadline_s)
        t.join(5)
    spans = {s.attributes[sc.CELL_ID]: s for s in span_exporter.get_finished_spans()}
    assert spans["short-1"].attributes[sc.CELL_QUEUE_PAST_DEADLINE] is True
    assert spans["short-2"].attributes[sc.CELL_QUEUE_PAST_DEADLINE] is True
    assert sc.CELL_QUEUE_PAST_DEADLINE not in spans["long"].attributes
    assert spans["long"].attributes[sc.CELL_QUEUE_WAIT_S] >= 0.2  # it waited, within its ceiling
    warnings = [r.getMessage() for r in caplog.records if "longer than its own" in r.getMessage()]
    assert len(warnings) == 1
    waited = spans["short-1"].attributes[sc.CELL_QUEUE_WAIT_S]
    assert warnings[0].startswith(
        f"spark-otel governor: cell short-1 of ev waited {waited:.1f} s for its lane "
        "(q lane at most 1 cell), longer than its own 0.1 s ceiling"
    )


def test_a_slot_is_freed_when_the_cell_raises_and_the_error_passes_through(
    rules_file: Callable[[str], Path], state_path: Path, tracer_provider, meter_provider
) -> None:
    govern(rules_file(LANE_1), state=state_path)
    seen = []

    def boom() -> None:
        with cell("ev", "boom", engine="q", tracer_provider=tracer_provider, meter_provider=meter_provider):
            seen.append(_lanes(state_path)["q"])
            raise KeyError("user's own")

    with pytest.raises(KeyError, match="user's own"):
        boom()
    assert seen == [(1, 0)]
    assert _lanes(state_path)["q"] == (0, 0)


def test_cells_the_rules_do_not_name_never_touch_the_state(
    rules_file: Callable[[str], Path], state_path: Path, tracer_provider, meter_provider
) -> None:
    govern(rules_file(LANE_1), state=state_path)
    with cell(
        "ev", "other", engine="elsewhere", tracer_provider=tracer_provider, meter_provider=meter_provider
    ):
        pass
    with cell("ev", "no-engine", tracer_provider=tracer_provider, meter_provider=meter_provider):
        pass
    assert not state_path.exists()


def test_rules_edited_on_disk_take_effect_for_the_next_admission(
    rules_file: Callable[[str], Path], state_path: Path, tracer_provider, meter_provider
) -> None:
    path = rules_file(LANE_1)
    govern(path, state=state_path)
    release = threading.Event()
    inside = []

    def run(i: int) -> None:
        with cell("ev", f"c{i}", engine="q", tracer_provider=tracer_provider, meter_provider=meter_provider):
            inside.append(i)
            release.wait(10)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    # Generous bounds: returned as soon as true; a loaded 2-core CI machine took over 5 s.
    wait_for(lambda: _lanes(state_path).get("q") == (1, 2), "one in, two waiting", 30)
    rules_file("[[lane]]\nengine = 'q'\ncells = 3\n")  # widen the lane while they wait
    wait_for(lambda: len(inside) == 3, "the waiting cells to start under the new rule", 30)
    release.set()
    for t in threads:
        t.join(5)


async def _until(predicate: Callable[[], bool], timeout_s: float = 5.0) -> None:
    for _ in range(int(timeout_s / 0.02)):
        if predicate():
            return
        await asyncio.sleep(0.02)
    raise AssertionError("timed out waiting")


def test_asyncio_cells_wait_without_blocking_the_loop_and_a_cancelled_wait_leaves_the_queue(
    rules_file: Callable[[str], Path], state_path: Path, tracer_provider, meter_provider
) -> None:
    govern(rules_file(LANE_1), state=state_path)

    async def main() -> tuple[int, list[str]]:
        order: list[str] = []
        release = asyncio.Event()

        async def run(name: str) -> None:
            async with cell(
                "ev", name, engine="q", tracer_provider=tracer_provider, meter_provider=meter_provider
            ):
                order.append(name)
                if name == "a":
                    await release.wait()

        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0.01)

        tick = asyncio.create_task(ticker())
        a = asyncio.create_task(run("a"))
        await _until(lambda: order == ["a"])
        b = asyncio.create_task(run("b"))
        c = asyncio.create_task(run("c"))
        await _until(lambda: _lanes(state_path)["q"] == (1, 2))
        before = ticks
        await asyncio.sleep(0.3)
        assert ticks - before >= 10  # the loop kept running while b and c waited
        b.cancel()
        with pytest.raises(asyncio.CancelledError):
            await b
        await _until(lambda: _lanes(state_path)["q"] == (1, 1))
        release.set()
        await asyncio.gather(a, c)
        tick.cancel()
        return ticks, order

    _, order = asyncio.run(main())
    assert order == ["a", "c"]
    assert _lanes(state_path)["q"] == (0, 0)


def test_fail_open_runs_the_cell_and_warns_once_when_the_state_cannot_be_written(
    rules_file: Callable[[str], Path], tmp_path: Path, tracer_provider, meter_provider, caplog
) -> None:
    blocked = tmp_path / "not-a-dir"
    blocked.write_text("a file where the state's directory should be")
    govern(rules_file(LANE_1), state=blocked / "governor.sqlite")
    with caplog.at_level(logging.WARNING, logger="spark_otel"):
        for i in range(3):
            with cell(
                "ev", f"c{i}", engine="q", tracer_provider=tracer_provider, meter_provider=meter_provider
            ):
                pass
    warnings = [r for r in caplog.records if "governor state" in r.getMessage()]
    assert len(warnings) == 1
    assert str(blocked / "governor.sqlite") in warnings[0].getMessage()


def test_fail_closed_raises_before_the_cell_starts(
    rules_file: Callable[[str], Path], tmp_path: Path, tracer_provider, meter_provider, span_exporter
) -> None:
    blocked = tmp_path / "not-a-dir"
    blocked.write_text("x")
    govern(rules_file(LANE_1), state=blocked / "governor.sqlite", fail_closed=True)
    ran = False
    with (
        pytest.raises(
            GovernorError,
            match=r"governor \(fail-closed\): the state file .*not-a-dir/governor.sqlite failed",
        ),
        cell("ev", "c", engine="q", tracer_provider=tracer_provider, meter_provider=meter_provider),
    ):
        ran = True
    assert not ran
    assert span_exporter.get_finished_spans() == ()


def test_an_invalid_rules_file_fails_open_with_one_warning_or_closed_with_the_key_named(
    rules_file: Callable[[str], Path], state_path: Path, tracer_provider, meter_provider, caplog
) -> None:
    path = rules_file(LANE_1)
    govern(path, state=state_path)
    rules_file("[[lane]]\nengine = 'q'\ncells = 1\nbogus = 1\n")
    with caplog.at_level(logging.WARNING, logger="spark_otel"):
        for i in range(2):
            with cell(
                "ev", f"c{i}", engine="q", tracer_provider=tracer_provider, meter_provider=meter_provider
            ):
                pass  # unthrottled: ran
    messages = [r.getMessage() for r in caplog.records if "governor rules" in r.getMessage()]
    assert len(messages) == 1
    ungovern()
    with pytest.raises(GovernorError, match=r"rules.toml: lane\[0\].bogus: unknown key"):
        govern(path, state=state_path, fail_closed=True)
    with (
        pytest.raises(GovernorError, match="unknown key"),
        cell("ev", "c", engine="q", tracer_provider=tracer_provider, meter_provider=meter_provider),
    ):
        pass


def test_a_governor_bug_never_reaches_the_users_cell(
    rules_file: Callable[[str], Path], state_path: Path, tracer_provider, meter_provider, monkeypatch, caplog
) -> None:
    """Injected: no real input makes the state raise a non-SQLite error, but if it did, the cell
    still runs and the failure is logged once."""
    govern(rules_file(LANE_1), state=state_path)

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("injected")

    monkeypatch.setattr(SharedState, "attempt", broken)
    with (
        caplog.at_level(logging.WARNING, logger="spark_otel"),
        cell("ev", "c", engine="q", tracer_provider=tracer_provider, meter_provider=meter_provider) as state,
    ):
        assert state.cell_id == "c"
    assert sum("governor state" in r.getMessage() for r in caplog.records) == 1


def test_the_state_file_is_sqlite_in_wal_mode_beside_the_store_by_default(
    rules_file: Callable[[str], Path], tmp_path: Path, monkeypatch, tracer_provider, meter_provider
) -> None:
    monkeypatch.setenv("SPARK_OTEL_STORE", str(tmp_path / "data" / "store.sqlite"))
    monkeypatch.delenv("SPARK_OTEL_GOVERNOR_STATE", raising=False)
    g = govern(rules_file(LANE_1))
    assert g.state.path == tmp_path / "data" / "governor.sqlite"
    with cell("ev", "c", engine="q", tracer_provider=tracer_provider, meter_provider=meter_provider):
        pass
    with sqlite3.connect(g.state.path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
