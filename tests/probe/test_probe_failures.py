"""A probe that stops partway keeps what it measured, and says why; a probe whose engine label
matches no recorded cell says so, naming the engines the newest cells carry.

Against a real engine on 127.0.0.1 scripted per request and a real SQLite store: a level whose
every stream fails (`ProbeIncomplete`, with the partial report stored), streams that all report
no tokens (no curve, so no report at all), a caller's callback that gives up without a word,
a store that cannot keep the partial report, and a store whose cells cannot be read.
"""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path

import pytest
from tests.support.scripted_engine import (
    DONE_EVENT,
    TOKEN_EVENT,
    Answer,
    ScriptedEngine,
    default_answer,
    load_free,
    usage_event,
)

from spark_otel import EngineError
from spark_otel.model import Cell
from spark_otel.probe import ProbeIncomplete, ProbeLevel, ProbeSettings, load_probe_report, run_probe
from spark_otel.store import Store

TINY = ProbeSettings(streams=[1, 2], tokens=4, warmup=False, gpu="none")
LOGGER = "spark_otel.probe.prober"


def _stopped(message: str, levels: int = 1) -> str:
    return (
        f"the probe stopped before finishing ({message}); this report holds only the {levels} level(s) "
        "measured before that"
    )


def test_a_level_whose_every_stream_fails_stops_the_probe_with_the_report_so_far(store: Store) -> None:
    """The first level is answered, every stream of the second gets HTTP 503: the error names
    the level and the engine's answer, and carries (and has stored) the report of the first."""

    def answer(number: int, body: dict[str, object]) -> Answer:
        return (
            default_answer(number, body) if number == 1 else Answer(status=503, body=b'{"error":"draining"}')
        )

    gpu = {"power_w": 300.0, "energy_j": 1000.0}
    with (
        ScriptedEngine(answer=answer, gpu=lambda hit: gpu) as engine,
        pytest.raises(ProbeIncomplete) as caught,
    ):
        run_probe(engine.url, TINY.model_copy(update={"gpu": "sim"}), store=store)
    message = f'{engine.url}/v1/completions: every stream at level 2 failed: HTTP 503: {{"error":"draining"}}'
    assert str(caught.value) == message
    assert isinstance(caught.value.__cause__, EngineError)
    assert str(caught.value.__cause__) == message
    partial = caught.value.report
    assert [(lv.streams, lv.probe_tokens) for lv in partial.levels] == [(1, 4)]
    assert partial.metadata.gpu_source == "sim"
    assert load_free(partial.warnings) == [
        'level 2: 2 of 2 streams failed: HTTP 503: {"error":"draining"}',
        _stopped(message),
    ]
    [doc] = store.documents("probe")
    assert load_probe_report(doc["body"]) == partial
    assert [w.streams for w in store.windows(kind="probe")] == [1]


def test_streams_that_all_report_no_tokens_leave_no_curve_and_no_report(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    """Not `ProbeIncomplete`: no report can be made of the levels measured, so none is stored."""
    empty = Answer(events=[TOKEN_EVENT, usage_event(0), DONE_EVENT])
    with ScriptedEngine(answer=lambda number, body: empty) as engine, pytest.raises(EngineError) as caught:
        run_probe(engine.url, TINY.model_copy(update={"streams": [1]}), store=store)
    message = (
        f"{engine.url}: no level measured a positive per-stream rate (levels: 1), so there is no curve: "
        "did every stream report 0 completion tokens or fail?"
    )
    assert (type(caught.value), str(caught.value)) == (EngineError, message)
    assert (LOGGER, logging.WARNING, f"probe: {_stopped(message)}") in caplog.record_tuples
    assert (LOGGER, logging.WARNING, f"probe: no partial report: {message}") in caplog.record_tuples
    assert store.documents("probe") == []
    assert [w.streams for w in store.windows(kind="probe")] == [1]


class _GiveUp(Exception):
    """A caller's callback that gives up without a word (``str()`` of it is empty)."""


def _give_up(level: ProbeLevel) -> None:
    raise _GiveUp


def test_a_callback_that_gives_up_keeps_the_report_of_the_levels_before_it(store: Store) -> None:
    """Not the engine's failure, so it is raised as it is; the report says what stopped it by
    its name, and is stored with the level that was measured."""
    with ScriptedEngine() as engine, pytest.raises(_GiveUp):
        run_probe(engine.url, TINY, store=store, on_level=_give_up)
    [doc] = store.documents("probe")
    partial = load_probe_report(doc["body"])
    assert [lv.streams for lv in partial.levels] == [1]
    assert load_free(partial.warnings) == [_stopped("_GiveUp")]


def test_a_partial_report_the_store_cannot_keep_is_logged_with_its_cause(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "store.sqlite"
    store = Store(path)

    def close_and_give_up(level: ProbeLevel) -> None:
        store.close()
        raise _GiveUp

    with ScriptedEngine() as engine, pytest.raises(_GiveUp):
        run_probe(engine.url, TINY, store=store, on_level=close_and_give_up)
    records = [r for r in caplog.records if r.name == LOGGER and "CPU budget" not in r.getMessage()]
    assert [(r.levelno, r.getMessage()) for r in records] == [
        (logging.WARNING, f"probe: {_stopped('_GiveUp')}"),
        (logging.WARNING, "probe: could not keep the partial report"),
    ]
    assert records[1].exc_info is not None
    assert str(records[1].exc_info[1]) == f"{path}: cannot write: Cannot operate on a closed database."
    with Store(path) as reopened:
        assert [w.streams for w in reopened.windows(kind="probe")] == [1]
        assert reopened.documents("probe") == []


def _cell(uid: str, engine: str | None, start_s: int) -> Cell:
    start = 10**18 + start_s * 10**9
    return Cell(
        uid=uid,
        eval_name="golden",
        cell_id=uid,
        engine=engine,
        start_unix_ns=start,
        end_unix_ns=start + 10**9,
    )


def test_a_label_no_recorded_cell_carries_is_warned_naming_the_newest_cells_engines(store: Store) -> None:
    """The thousand newest cells are read: an engine only older cells carry is not named."""
    newest = [_cell(f"n{i}", ("qwen", "nemotron", None)[i % 3], 100 + i) for i in range(1000)]
    store.write_cells([_cell("old", "gemma", 0), *newest])
    with ScriptedEngine() as engine:
        other = run_probe(
            engine.url, TINY.model_copy(update={"streams": [1], "engine": "other"}), store=store
        )
        named = run_probe(engine.url, TINY.model_copy(update={"streams": [1], "engine": "qwen"}), store=store)
    assert load_free(other.warnings) == [
        "engine label 'other' matches no engine of the recorded cells (nemotron, qwen); neighbour-cost and "
        "advise will read this probe as another engine's load. Name it as the cells do: --engine NAME=URL "
        "or --engine-name"
    ]
    assert load_free(named.warnings) == []


def test_cells_that_cannot_be_read_are_a_warning_and_the_probe_goes_on(
    store: Store, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with sqlite3.connect(tmp_path / "store.sqlite") as other:  # the store's own file, from outside
        other.execute("DROP TABLE cells")
    with ScriptedEngine() as engine:
        report = run_probe(engine.url, TINY, store=store)
    assert [w.streams for w in store.windows(kind="probe")] == [1, 2]
    assert load_free(report.warnings) == []
    [record] = [r for r in caplog.records if r.name == "spark_otel"]
    assert (record.levelno, record.getMessage()) == (
        logging.WARNING,
        "spark_otel: probe engine-label check failed; the call goes on untouched",
    )
    assert record.exc_info is not None
    assert str(record.exc_info[1]) == "no such table: cells"
