"""The demo's load against a real simulated box (one, shared, at 1000x): the prompts, what each
request asks the engine for, the cells an eval's lane records (ids, lengths, attributes, worker
count, plain or streamed), imposed streams and their load window, the client's settings, the
request bodies on the wire and the named threads that send them (seen nowhere else), and Act 5's
nemotron runner, run in this process so its records can be read back (its process and pipes are
those `_LoadRunner` gives it), and as `_LoadRunner`'s child when it misses its time limits.

Answer lengths are exact because the simulated engine draws an unpinned answer's length from a
lognormal around 256 tokens, clipped to [min_tokens, max_tokens]: asking for 3 tokens at most 12
gives 12 ("length"), asking for at least ~3,000 gives exactly that ("stop"), each but for odds
of about 1 in 1,000 that these fixed prompts were checked against."""

from __future__ import annotations

import io
import itertools
import json
import logging
import math
import os
import random
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from tests.support.waiting import wait_for

import spark_otel
from spark_otel import EngineError, _clock
from spark_otel._clock import NS_PER_S
from spark_otel.demo import governed
from spark_otel.demo.governed import DEMO_ACT, _LoadRunner, load_eval_main
from spark_otel.demo.load import (
    LOAD_ANSWER_TOKENS,
    Lane,
    _generate,
    _prompt,
    openai_client,
    same_engine_load,
)
from spark_otel.demo.schedule import DEMO_RUN
from spark_otel.governor import ungovern
from spark_otel.model import Cell, CellStatus, LoadWindow
from spark_otel.sim import Box, RequestTiming, run_box
from spark_otel.store import Store
from spark_otel.telemetry import configure

SPEED = 1000.0
LONG = (2900, 3100)  # answers the engine would end sooner: exactly min_tokens


@pytest.fixture(scope="module")
def box() -> Iterator[Box]:
    with run_box({"qwen": "dense", "nemotron": "moe"}, speed=SPEED, seed=0) as b:
        yield b


@pytest.fixture
def recorded(tmp_path: Path) -> Iterator[Callable[[], Store]]:
    """This process instrumented into a store of its own, as the demo runs; call to read it."""
    telemetry = configure(service_name="demo-lanes-test", store=tmp_path / "store.sqlite")
    spark_otel.instrument()
    opened: list[Store] = []

    def read() -> Store:
        assert telemetry.force_flush()
        opened.append(Store(tmp_path / "store.sqlite", read_only=True))
        return opened[-1]

    try:
        yield read
    finally:
        spark_otel.uninstrument()
        telemetry.shutdown()
        for store in opened:
            store.close()


def _served_after(box: Box, engine: str, before: int) -> list[RequestTiming]:
    return box.timings(engine)[before:]


def _lane(box: Box, **overrides: Any) -> Lane:
    settings: dict[str, Any] = {
        "client": openai_client(box.url("nemotron")),
        "model": box.model_id("nemotron"),
        "eval_name": "demo-lane",
        "engine": "nemotron",
        "workers": 1,
        "tokens": LONG,
        "prompt_chars": 120,
        "stream": False,
    }
    return Lane(**{**settings, **overrides})


def _length(seed: int, tokens: tuple[int, int] = LONG) -> int:
    """The answer length a lane asks for in the cell of ``seed``: drawn from the seed alone."""
    return random.Random(seed).randint(*tokens)


def _prompt_tokens(chars: int) -> int:
    return 4 + math.ceil(chars / 4)  # the simulated chat template: 4 per message, 1 per 4 characters


def test_a_prompt_is_the_seeds_words_cut_to_its_length() -> None:
    # Every one of the ten words, drawn by Python's own generator from the seed.
    assert (
        _prompt(80, 216) == "branch function lock lock diff buffer review index diff return pointer retry loc"
    )
    assert _prompt(10, 7) == "pointer fu"  # two words drawn for 10 characters, then cut
    assert _prompt(80, 216) != _prompt(80, 217)


def test_a_plain_request_asks_for_at_least_its_length_and_at_most_four_times_it(box: Box) -> None:
    client, model = openai_client(box.url("nemotron")), box.model_id("nemotron")
    before = len(box.timings("nemotron"))
    _generate(client, model, _prompt(100, 11), 3, stream=False)
    _generate(client, model, _prompt(100, 12), 3000, stream=False)
    served = [
        (t.prompt_tokens, t.completion_tokens, t.finish_reason)
        for t in _served_after(box, "nemotron", before)
    ]
    assert served == [(_prompt_tokens(100), 12, "length"), (_prompt_tokens(100), 3000, "stop")]


def test_a_streamed_request_is_the_same_request_under_the_ceiling(
    box: Box, recorded: Callable[[], Store]
) -> None:
    client, model = openai_client(box.url("nemotron")), box.model_id("nemotron")
    before = len(box.timings("nemotron"))
    _generate(client, model, _prompt(100, 13), 3, stream=True)
    _generate(client, model, _prompt(100, 14), 3000, stream=True)
    served = [
        (t.prompt_tokens, t.completion_tokens, t.finish_reason)
        for t in _served_after(box, "nemotron", before)
    ]
    assert served == [(_prompt_tokens(100), 12, "length"), (_prompt_tokens(100), 3000, "stop")]
    store = recorded()
    assert [(r.streaming, r.output_tokens) for r in store.requests()] == [(True, 12), (True, 3000)]


def test_a_cell_records_its_eval_and_the_demos_attributes(box: Box, recorded: Callable[[], Store]) -> None:
    _lane(box, workers=3).cell("c-1", 21, **{"spark_otel.demo.act": "5-open"})
    store = recorded()
    [cell] = store.cells()
    assert (cell.eval_name, cell.cell_id, cell.engine, cell.workers, cell.deadline_s, cell.source) == (
        "demo-lane",
        "c-1",
        "nemotron",
        3,
        1800.0,
        "demo",
    )
    assert cell.attributes == {"spark_otel.demo.act": "5-open", "spark_otel.time_scale": SPEED}
    assert (cell.status, cell.prompt_tokens, cell.completion_tokens) == (
        CellStatus.OK,
        _prompt_tokens(120),
        _length(21),
    )
    [request] = store.requests()
    assert (request.cell_uid, request.streaming, request.request_model) == (
        cell.uid,
        False,
        "nemotron-3.5-30b-a3b",
    )


def test_a_streamed_cell_streams(box: Box, recorded: Callable[[], Store]) -> None:
    _lane(box, stream=True, prompt_chars=60).cell("c-2", 22)
    store = recorded()
    [cell] = store.cells()
    assert (cell.cell_id, cell.prompt_tokens, cell.completion_tokens) == (
        "c-2",
        _prompt_tokens(60),
        _length(22),
    )
    assert [r.streaming for r in store.requests()] == [True]


def test_a_failed_cell_is_recorded_and_logged_and_the_eval_goes_on(
    box: Box, recorded: Callable[[], Store], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="spark_otel.demo.load")
    _lane(box, model="no-such-model").cell("c-3", 23)  # the engine answers 404: nothing raised here
    [record] = [r for r in caplog.records if r.name == "spark_otel.demo.load"]
    assert record.msg == "demo: cell %s of %s ended with %s"
    assert record.args is not None
    cell_id, eval_name, error = record.args
    assert (cell_id, eval_name, type(error)) == ("c-3", "demo-lane", openai.NotFoundError)
    [cell] = recorded().cells()
    assert (cell.cell_id, cell.status) == ("c-3", CellStatus.ERROR)


def test_a_lane_runs_cells_back_to_back_until_stopped(box: Box, recorded: Callable[[], Store]) -> None:
    lane = _lane(box)
    stop = threading.Event()
    counted: list[int] = []
    runner = threading.Thread(target=lambda: counted.append(lane.run(stop, 7)))
    before = len(box.timings("nemotron"))
    runner.start()
    wait_for(lambda: len(box.timings("nemotron")) - before >= 2, "two cells served", timeout_s=10)
    stop.set()
    runner.join(10)
    [count] = counted
    cells = sorted(recorded().cells(), key=lambda c: c.cell_id)
    assert count >= 2
    assert [c.cell_id for c in cells] == [f"nemotron-7-{i:03d}" for i in range(count)]
    assert [c.completion_tokens for c in cells] == [_length(7000 + i) for i in range(count)]
    assert all(a.end_unix_ns <= b.start_unix_ns for a, b in itertools.pairwise(cells))


def test_a_stopped_lane_runs_nothing(box: Box, recorded: Callable[[], Store]) -> None:
    stop = threading.Event()
    stop.set()
    assert _lane(box).run(stop, 8) == 0
    assert recorded().cells() == []


@pytest.mark.parametrize("workers", [1, 3])
def test_a_set_of_cells_runs_at_the_lanes_worker_count(
    box: Box, recorded: Callable[[], Store], workers: int
) -> None:
    _lane(box, workers=workers, prompt_chars=40 + workers).run_set(3, **{"spark_otel.demo.act": "5-governed"})
    cells = sorted(recorded().cells(), key=lambda c: c.cell_id)
    assert [(c.cell_id, c.workers, c.completion_tokens) for c in cells] == [
        ("pr-00", workers, _length(500)),
        ("pr-01", workers, _length(501)),
        ("pr-02", workers, _length(502)),
    ]
    assert {c.attributes["spark_otel.demo.act"] for c in cells} == {"5-governed"}
    in_flight = max(
        sum(1 for c in cells if c.start_unix_ns <= s.start_unix_ns < c.end_unix_ns) for s in cells
    )
    assert in_flight == workers


@pytest.mark.parametrize(("streams", "name"), [(1, "1 more qwen stream"), (2, "2 more qwen streams")])
def test_imposed_streams_load_the_serial_engine_for_their_window(
    box: Box, recorded: Callable[[], Store], streams: int, name: str
) -> None:
    client, model = openai_client(box.url("qwen")), box.model_id("qwen")
    before = len(box.timings("qwen"))
    window = same_engine_load(client, model, streams, 60.0, "ab12")
    served = _served_after(box, "qwen", before)
    assert window == LoadWindow(
        uid=f"demo-ab12-load-{streams}",
        name=name,
        kind="load",
        engine="qwen",
        start_unix_ns=window.start_unix_ns,
        end_unix_ns=window.end_unix_ns,
        streams=streams,
        attributes={DEMO_RUN: "ab12"},
    )
    assert window.elapsed_s >= 60.0
    # Long pinned answers back to back, each stream at least one, all inside the window.
    assert len(served) >= streams
    assert {(t.prompt_tokens, t.completion_tokens, t.finish_reason) for t in served} == {
        (_prompt_tokens(200), LOAD_ANSWER_TOKENS, "length")
    }
    assert window.start_unix_ns <= min(box.unix_ns(t.arrival_ns) for t in served)
    assert max(box.unix_ns(t.finished_ns) for t in served) <= window.end_unix_ns
    assert all(r.cell_uid is None for r in recorded().requests())  # no eval's cells


def test_imposed_streams_go_on_after_a_failed_request(box: Box, recorded: Callable[[], Store]) -> None:
    client = openai_client(box.url("qwen"))
    window = same_engine_load(client, "no-such-model", 1, 30.0, "cd34")
    assert window.elapsed_s >= 30.0
    failed = [r for r in recorded().requests() if r.error_type]
    assert len(failed) > 1, "the stream stopped at its first failed request"


def test_imposed_streams_stop_when_their_window_cannot_be_waited_out(box: Box) -> None:
    # The wait fails (as Ctrl-C would end it): the streams must stop too, or the pool waits forever.
    client, model = openai_client(box.url("qwen")), box.model_id("qwen")
    with pytest.raises(ValueError, match="sleep length must be non-negative"):
        same_engine_load(client, model, 2, -1.0, "ef56")
    assert not [t for t in threading.enumerate() if t.name.startswith("demo-load")]


def test_the_client_waits_out_the_ceiling_and_never_retries(box: Box) -> None:
    client = openai_client(box.url("qwen"))
    assert (str(client.base_url), client.api_key, client.timeout, client.max_retries) == (
        box.url("qwen") + "/v1/",
        "sim",
        1800.0 / SPEED,  # the ceiling, in real seconds at the box's speed
        0,
    )
    assert [m.id for m in client.models.list().data] == ["qwen3.8-27b", "qwen"]


# -- What goes on the wire: each request's body and the thread that sends it ----------------------


def _noting_client(box: Box, engine: str) -> tuple[openai.OpenAI, list[tuple[str, dict[str, Any]]]]:
    """A real client of ``engine`` noting each request body it sends and the sending thread's name
    (an httpx request hook): the prompts and thread names are seen nowhere else."""
    sent: list[tuple[str, dict[str, Any]]] = []

    def note(request: httpx.Request) -> None:
        sent.append((threading.current_thread().name, json.loads(request.content)))

    http = httpx.Client(event_hooks={"request": [note]})
    return openai.OpenAI(
        base_url=box.url(engine) + "/v1", api_key="sim", max_retries=0, http_client=http
    ), sent


def _asked(prompt: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": prompt}]


@pytest.mark.usefixtures("recorded")  # its cells go to a store of the test's own
def test_a_set_of_cells_sends_each_seeds_prompt_as_the_user_from_the_demos_cell_threads(box: Box) -> None:
    client, sent = _noting_client(box, "nemotron")
    _lane(box, client=client, workers=2, tokens=(3, 3), prompt_chars=50).run_set(2)
    # Each from one of the pool's two threads: which ones is the pool's choice (a three-token
    # cell can end before the second thread starts, and the first thread then takes both).
    assert len(sent) == 2
    assert {name for name, _ in sent} <= {"demo-cells_0", "demo-cells_1"}
    assert sorted((body for _, body in sent), key=str) == sorted(
        (
            {
                "model": "nemotron-3.5-30b-a3b",
                "messages": _asked(_prompt(50, seed)),
                "max_tokens": 12,
                "min_tokens": 3,
            }
            for seed in (500, 501)
        ),
        key=str,
    )


def test_imposed_streams_each_send_their_own_prompts_in_turn_from_the_demos_load_threads(box: Box) -> None:
    client, sent = _noting_client(box, "qwen")
    same_engine_load(client, box.model_id("qwen"), 2, 400.0, "ab12")
    by_thread: dict[str, list[dict[str, Any]]] = {}
    for name, body in sent:
        by_thread.setdefault(name, []).append(body)
    assert sorted(by_thread) == ["demo-load_0", "demo-load_1"]

    def turns(first_seed: int, n: int) -> list[dict[str, Any]]:
        """A stream's requests: prompt seeds counting up from the stream's own first one."""
        return [
            {
                "model": "qwen3.8-27b",
                "messages": _asked(_prompt(200, first_seed + i)),
                "max_tokens": LOAD_ANSWER_TOKENS,
                "ignore_eos": True,
            }
            for i in range(n)
        ]

    # Stream i's seeds start at 9000 + 1000 i; which pool thread runs which stream is the pool's choice.
    firsts = sorted(bodies[0]["messages"][0]["content"] for bodies in by_thread.values())
    assert firsts == sorted([_prompt(200, 9000), _prompt(200, 10000)])
    for bodies in by_thread.values():
        assert len(bodies) >= 2, "each stream sends requests back to back"
        first_seed = 9000 if bodies[0]["messages"][0]["content"] == _prompt(200, 9000) else 10000
        assert bodies == turns(first_seed, len(bodies))


# -- Act 5's nemotron runner ------------------------------------------------------------------------


class _Pipes:
    """The runner's stdin and stdout as `_LoadRunner` gives them: OS pipes, stdout block-buffered,
    so a line not flushed never arrives."""

    def __init__(self) -> None:
        stdin_r, self._stdin_w = os.pipe()
        self._stdout_r, stdout_w = os.pipe()
        self.stdin = io.TextIOWrapper(io.FileIO(stdin_r, "r"))
        self.stdout = io.TextIOWrapper(io.BufferedWriter(io.FileIO(stdout_w, "w"), buffer_size=8192))
        self._lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        with io.TextIOWrapper(io.FileIO(self._stdout_r, "r")) as out:
            self._lines.extend(out)

    def said(self, line: str) -> bool:
        return line in self._lines

    def send(self, line: str) -> None:
        with io.FileIO(self._stdin_w, "w", closefd=True) as stdin:
            stdin.write(line.encode())


def _run_load_eval(
    config: dict[str, Any], monkeypatch: pytest.MonkeyPatch, start_in_s: float = 5.0
) -> tuple[int, threading.Thread]:
    """`load_eval_main` in a thread: waits for its "ready", sends the model time to start at."""
    pipes = _Pipes()
    monkeypatch.setattr(sys, "argv", ["-c", json.dumps(config)])
    monkeypatch.setattr(sys, "stdin", pipes.stdin)
    monkeypatch.setattr(sys, "stdout", pipes.stdout)
    errors: list[BaseException] = []

    def main() -> None:
        try:
            load_eval_main()
        except BaseException as exc:
            errors.append(exc)

    runner = threading.Thread(target=main, daemon=True)
    runner.start()
    try:
        wait_for(lambda: pipes.said("ready\n") or errors, "the runner's ready", timeout_s=15, interval_s=0.01)
    finally:
        start_at = _clock.wall_ns() + int(start_in_s * NS_PER_S)
        pipes.send(f"{start_at}\n")
    runner.join(30)
    assert not runner.is_alive()
    assert errors == []
    return start_at, runner


def _load_config(box: Box, tmp_path: Path, rules: str) -> dict[str, Any]:
    return {
        "url": box.url("nemotron"),
        "clock_url": box.url("qwen"),
        "store": str(tmp_path / "store.sqlite"),
        "rules": rules,
        "state": str(tmp_path / "governor.sqlite"),
        "eval": "demo-nemotron-ab12",
        "cells": 4,
        "tokens": list(LONG),
        "prompt_chars": 80,
        "act": "5-open",
    }


def _runner_cells(tmp_path: Path) -> list[Cell]:
    with Store(tmp_path / "store.sqlite", read_only=True) as store:
        return sorted(store.cells(), key=lambda c: c.cell_id)


def test_the_nemotron_runner_runs_its_cells_four_at_a_time_from_the_time_it_is_given(
    box: Box, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    start_at, _ = _run_load_eval(_load_config(box, tmp_path, rules=""), monkeypatch)
    cells = _runner_cells(tmp_path)
    assert [(c.eval_name, c.cell_id, c.engine, c.workers, c.source) for c in cells] == [
        ("demo-nemotron-ab12", f"pr-{i:02d}", "nemotron", 4, "demo") for i in range(4)
    ]
    assert [(c.prompt_tokens, c.completion_tokens) for c in cells] == [
        (_prompt_tokens(80), _length(500 + i)) for i in range(4)
    ]
    assert {(c.attributes[DEMO_ACT], c.admission_s) for c in cells} == {("5-open", None)}  # ungoverned
    assert min(c.start_unix_ns for c in cells) >= start_at
    assert max(c.start_unix_ns for c in cells) < min(c.end_unix_ns for c in cells)  # all four at once
    with Store(tmp_path / "store.sqlite", read_only=True) as store:
        assert [(r.streaming, r.request_model) for r in store.requests()] == [
            (False, "nemotron-3.5-30b-a3b")
        ] * 4
    assert not (tmp_path / "governor.sqlite").exists()


def test_the_nemotron_runner_obeys_the_rules_it_is_given(
    box: Box, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rules = tmp_path / "rules.toml"
    rules.write_text('version = 1\n\n[[lane]]\nengine = "nemotron"\ncells = 1\n', encoding="utf-8")
    try:
        _run_load_eval(_load_config(box, tmp_path, rules=str(rules)), monkeypatch, start_in_s=0.0)
    finally:
        ungovern()
    cells = sorted(_runner_cells(tmp_path), key=lambda c: c.start_unix_ns)
    assert len(cells) == 4
    assert all(a.end_unix_ns <= b.start_unix_ns for a, b in itertools.pairwise(cells))  # one at a time
    assert all(c.admission_s is not None for c in cells)
    assert (tmp_path / "governor.sqlite").exists()


def test_the_runner_process_ignores_the_users_governor_environment(
    box: Box, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The user governs their real box from the environment: the demo's runner must not join in.
    user_rules = tmp_path / "user-rules.toml"
    user_rules.write_text('version = 1\n\n[[lane]]\nengine = "nemotron"\ncells = 1\n', encoding="utf-8")
    monkeypatch.setenv("SPARK_OTEL_RULES", str(user_rules))
    monkeypatch.setenv("SPARK_OTEL_GOVERNOR_STATE", str(tmp_path / "user-governor.sqlite"))
    runner = _LoadRunner(_load_config(box, tmp_path, rules=""))
    start_at = _clock.wall_ns() + 2 * NS_PER_S
    runner.start_at(start_at)
    runner.wait()
    cells = _runner_cells(tmp_path)
    assert [(c.cell_id, c.admission_s) for c in cells] == [(f"pr-{i:02d}", None) for i in range(4)]
    assert min(c.start_unix_ns for c in cells) >= start_at
    assert max(c.start_unix_ns for c in cells) < min(c.end_unix_ns for c in cells)  # all four at once
    assert not (tmp_path / "user-governor.sqlite").exists()


def test_a_runner_that_cannot_start_says_so(tmp_path: Path) -> None:
    with pytest.raises(EngineError) as failed:
        _LoadRunner({"store": str(tmp_path / "store.sqlite")})  # no engine to run against: it exits
    assert str(failed.value) == "the demo's nemotron runner did not start within 60 s"


def test_a_runner_that_dies_says_how(box: Box, tmp_path: Path) -> None:
    runner = _LoadRunner(_load_config(box, tmp_path, rules=""))
    runner.proc.kill()
    with pytest.raises(EngineError) as failed:
        runner.wait()
    assert str(failed.value) == "the demo's nemotron runner exited with -9"


def test_a_runner_that_does_not_finish_in_time_is_killed_and_says_so(
    box: Box, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Its cells start a million model seconds from now: it waits past its limit (cut to 0.5 s).
    monkeypatch.setattr(governed, "_DONE_S", 0.5)
    runner = _LoadRunner(_load_config(box, tmp_path, rules=""))
    runner.start_at(_clock.wall_ns() + 1_000_000 * NS_PER_S)
    with pytest.raises(EngineError) as failed:
        runner.wait()
    assert str(failed.value) == "the demo's nemotron runner did not finish"
    assert runner.proc.wait(10) == -9


def test_a_runner_that_is_not_ready_in_time_is_given_up(
    box: Box, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A limit (cut to 10 ms) no runner meets: its interpreter and imports alone take longer.
    monkeypatch.setattr(governed, "_READY_S", 0.01)
    with pytest.raises(EngineError) as failed:
        _LoadRunner(_load_config(box, tmp_path, rules=""))
    assert str(failed.value) == "the demo's nemotron runner did not start within 0 s"
