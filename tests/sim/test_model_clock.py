"""Several runner processes started at different times record one model clock: the box's."""

from __future__ import annotations

import http.server
import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from spark_otel._clock import CLOCK_ENV
from spark_otel.sim import run_box
from spark_otel.sim.clock import READINGS, box_clock, follow, read_box_clock
from spark_otel.store import Store

SPEED = 50.0
RUNNER = """
import sys
import openai
import spark_otel

spark_otel.instrument()
name = sys.argv[1]
client = openai.OpenAI(base_url=sys.argv[2] + "/v1", api_key="none", max_retries=0)
with spark_otel.cell("clock-check", cell_id=name, engine="qwen"):
    print("in the cell", flush=True)
    client.completions.create(model="qwen", prompt=name, max_tokens=200, extra_body={"min_tokens": 200})
spark_otel.shutdown()
"""


def _runner(name: str, url: str, store: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", RUNNER, name, url],
        env={**env, "SPARK_OTEL_STORE": str(store)},
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip


def _wait_until_in_the_cell(proc: subprocess.Popen[str]) -> None:
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.strip() == "in the cell":
            return
    raise AssertionError(f"the runner exited before its cell began (exit {proc.wait()})")


@pytest.mark.slow
def test_runners_started_apart_agree_with_the_box_and_each_other(tmp_path: Path) -> None:
    store_path = tmp_path / "store.sqlite"
    env = {"PATH": "", "PYTHONPATH": ":".join(sys.path)}
    with run_box({"qwen": "dense"}, speed=SPEED) as box:
        url = box.url("qwen")
        env[CLOCK_ENV] = follow(url).spec()  # read once, as a launcher does: each runner joins it
        first = _runner("first", url, store_path, env)
        _wait_until_in_the_cell(first)  # a loaded machine can take seconds to start a Python process
        time.sleep(1.0)  # 50 model seconds later: a process anchored at its own start would be off by that
        second = _runner("second", url, store_path, env)
        for proc in (first, second):
            out, _ = proc.communicate(timeout=120)
            assert proc.returncode == 0, out
        served = sorted(box.timings("qwen"), key=lambda t: t.arrival_ns)
        served_unix = [(box.unix_ns(t.arrival_ns), box.unix_ns(t.finished_ns)) for t in served]
    with Store(store_path) as store:
        cells = sorted(store.cells(eval_name="clock-check"), key=lambda c: c.start_unix_ns)
    assert [c.cell_id for c in cells] == ["first", "second"]
    # Each cell's span holds the engine's own service of its request, on the box's clock; the
    # slack covers the HTTP round trips (a few ms of real time each, times the speed).
    slack_ns = int(0.25 * SPEED * 1e9)
    for cell, (arrived, finished) in zip(cells, served_unix, strict=True):
        assert cell.start_unix_ns <= arrived + int(0.05 * SPEED * 1e9)
        assert finished <= cell.end_unix_ns + int(0.05 * SPEED * 1e9)
        assert arrived - cell.start_unix_ns < slack_ns
        assert cell.end_unix_ns - finished < slack_ns


def test_a_box_clock_reading_takes_the_middle_of_the_round_trip() -> None:
    info = {"speed": 100, "unix_ns": 5_000_000_000}
    clock = box_clock(info, sent_real_ns=1_000, received_real_ns=3_000)
    assert clock is not None
    assert (clock.speed, clock.box_unix_ns, clock.read_real_ns) == (100.0, 5_000_000_000, 2_000)
    assert box_clock({"speed": "inf", "unix_ns": 1}, sent_real_ns=0, received_real_ns=0) is None
    assert box_clock({"speed": 10}, sent_real_ns=0, received_real_ns=0) is None


class _LateFirstAnswer(http.server.BaseHTTPRequestHandler):
    """A box at speed 1 on the real clock that stamps its first answer, then waits before sending
    it: the asymmetric round trip a first request's set-up makes."""

    answered = 0

    def do_GET(self) -> None:
        body = json.dumps({"speed": 1, "unix_ns": time.time_ns()}).encode()
        if type(self).answered == 0:
            time.sleep(LATE_S)
        type(self).answered += 1
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


LATE_S = 0.4


def test_a_box_clock_keeps_the_shortest_of_its_readings() -> None:
    _LateFirstAnswer.answered = 0  # a second session in one process (mutmut's) starts from none
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _LateFirstAnswer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        clock = read_box_clock(f"http://127.0.0.1:{server.server_port}")
    finally:
        server.shutdown()
        server.server_close()
    assert _LateFirstAnswer.answered == READINGS
    # The late first reading alone would put the clock LATE_S / 2 ahead; the kept one is off by
    # at most half its own round trip, which did not wait.
    assert clock.round_trip_real_ns < LATE_S * 1e9 / 2
    before, now, after = clock.epoch_now(), time.time_ns(), clock.epoch_now()
    half = clock.round_trip_real_ns // 2 + 1_000_000  # and a millisecond for the reads themselves
    assert before - half <= now <= after + half


def test_a_box_clock_needs_a_reading() -> None:
    with pytest.raises(ValueError, match="readings=0: at least one reading is needed"):
        read_box_clock("http://127.0.0.1:9", readings=0)
