"""The simulated box's child process, `serve_box_main`, run in this process with the stdin and
stdout pipes `box_process` gives it: it answers one JSON line (the engines' URLs, or why it could
not start), flushed at once through a block-buffered pipe, serves at the speed and model epoch it
was given until its stdin closes, and never raises."""

from __future__ import annotations

import io
import json
import os
import re
import sys
import threading
from collections.abc import Iterator

import httpx2
import pytest
from tests.support.waiting import wait_for

from spark_otel import _clock
from spark_otel._clock import NS_PER_S
from spark_otel.demo import serve_box_main

EPOCH_NS = 1_700_000_000 * NS_PER_S  # far from now: a box on the wall clock would read decades off


class _BoxMain:
    """`serve_box_main` in a thread, its stdin and stdout OS pipes."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, *args: str) -> None:
        stdin_r, stdin_w = os.pipe()
        self._stdin_w: int | None = stdin_w
        stdout_r, stdout_w = os.pipe()
        monkeypatch.setattr(sys, "argv", ["-c", *args])
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.FileIO(stdin_r, "r")))
        monkeypatch.setattr(
            sys, "stdout", io.TextIOWrapper(io.BufferedWriter(io.FileIO(stdout_w, "w"), buffer_size=8192))
        )
        self.lines: list[str] = []
        self._out = io.TextIOWrapper(io.FileIO(stdout_r, "r"))
        threading.Thread(target=lambda: self.lines.extend(self._out), daemon=True).start()
        self.errors: list[BaseException] = []
        self.started_real_ns = _clock.real_wall_ns()
        self.thread = threading.Thread(target=self._main, daemon=True)
        self.thread.start()

    def _main(self) -> None:
        try:
            serve_box_main()
        except BaseException as exc:
            self.errors.append(exc)

    def answer(self) -> dict[str, str]:
        wait_for(lambda: self.lines, "the box's first line", timeout_s=15, interval_s=0.01)
        return dict(json.loads(self.lines[0]))

    def close_stdin(self) -> None:
        """What `box_process` does when its block ends; the box then stops serving."""
        if self._stdin_w is not None:
            os.close(self._stdin_w)
            self._stdin_w = None
        self.thread.join(15)
        assert not self.thread.is_alive()
        assert self.errors == []


@pytest.fixture
def box_main(monkeypatch: pytest.MonkeyPatch, restore_clock: None) -> Iterator[list[_BoxMain]]:
    """Each `_BoxMain` a test starts, its stdin closed at the end whatever happened."""
    started: list[_BoxMain] = []
    yield started
    for main in started:
        main.close_stdin()


def test_the_box_serves_both_engines_at_its_speed_from_its_epoch_until_stdin_closes(
    box_main: list[_BoxMain], monkeypatch: pytest.MonkeyPatch
) -> None:
    main = _BoxMain(monkeypatch, "500.0", str(EPOCH_NS))
    box_main.append(main)
    urls = main.answer()
    assert sorted(urls) == ["nemotron", "qwen"]
    assert all(re.fullmatch(r"http://127\.0\.0\.1:\d+", url) for url in urls.values()), urls
    for engine, model in (("qwen", "qwen3.8-27b"), ("nemotron", "nemotron-3.5-30b-a3b")):
        info = httpx2.get(urls[engine] + "/sim/info").json()
        elapsed_real_ns = _clock.real_wall_ns() - main.started_real_ns
        assert (info["engine"], info["model"], info["speed"], info["seed"]) == (engine, model, 500.0, 0)
        assert info["engines"] == {"qwen": "dense", "nemotron": "moe"}
        # Model time began at the epoch it was given and runs 500 times faster than real time.
        assert EPOCH_NS <= info["unix_ns"] <= EPOCH_NS + 500 * elapsed_real_ns
    main.close_stdin()
    with pytest.raises(httpx2.ConnectError):
        httpx2.get(urls["qwen"] + "/health")


def test_a_box_that_cannot_start_says_why_in_its_one_line(
    box_main: list[_BoxMain], monkeypatch: pytest.MonkeyPatch
) -> None:
    main = _BoxMain(monkeypatch, "fast", str(EPOCH_NS))
    box_main.append(main)
    assert main.answer() == {"error": "ValueError: could not convert string to float: 'fast'"}
    main.thread.join(15)
    assert not main.thread.is_alive()  # it does not wait for stdin: there is nothing to serve
