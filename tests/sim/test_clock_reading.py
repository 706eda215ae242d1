"""Reading a box's model clock: the arithmetic of one reading, what is refused, and each failure's words.

`box_clock` is pinned on plain data (the round trip's middle in whole nanoseconds, every answer
that is no finite positive speed refused); `read_box_clock` against a real box, and against a
plain static web server standing where a box should be (what a mistyped
``follow`` meets): a 404 page, a body that is not JSON, JSON that is not an
object, each an `EngineError` that says which. A proxy set in the environment must not carry the
reading: the clock is read straight from the box, on loopback.
"""

from __future__ import annotations

import functools
import http.server
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from spark_otel import EngineError, _clock
from spark_otel.sim import run_box
from spark_otel.sim.clock import BoxClock, box_clock, read_box_clock


def test_a_reading_keeps_the_middle_of_the_round_trip_in_whole_nanoseconds() -> None:
    clock = box_clock({"speed": 100, "unix_ns": 5_000_000_000}, sent_real_ns=1_001, received_real_ns=1_004)
    assert clock == BoxClock(100.0, 5_000_000_000, 1_002, 3)
    assert clock is not None
    assert type(clock.read_real_ns) is int


@pytest.mark.parametrize(
    "info",
    [
        {"speed": 0, "unix_ns": 1},
        {"speed": -5, "unix_ns": 1},
        {"speed": -0.5, "unix_ns": 1},
        {"speed": float("nan"), "unix_ns": 1},
        {"speed": float("inf"), "unix_ns": 1},
        {"speed": "inf", "unix_ns": 1},
        {"speed": True, "unix_ns": 1},
        {"speed": 10, "unix_ns": True},
        {"speed": 10, "unix_ns": 1.5},
        {"speed": 10, "unix_ns": "1"},
    ],
    ids=repr,
)
def test_a_reading_without_a_finite_positive_speed_and_whole_ns_is_refused(info: dict) -> None:
    assert box_clock(info, sent_real_ns=0, received_real_ns=2) is None


def test_the_epoch_runs_at_the_boxs_speed_from_the_reading() -> None:
    read_at = _clock.real_monotonic_ns() - 1_000_000_000  # read a real second ago
    clock = BoxClock(speed=100.0, box_unix_ns=7_000_000_000_000, read_real_ns=read_at)
    before = _clock.real_monotonic_ns()
    epoch = clock.epoch_now()
    after = _clock.real_monotonic_ns()
    # 100 model seconds per real second since the reading, and what the reads themselves took.
    assert (
        7_000_000_000_000 + (before - read_at) * 100 <= epoch <= 7_000_000_000_000 + (after - read_at) * 100
    )


def test_one_reading_of_a_real_box_is_its_speed_and_its_clock_when_it_answered() -> None:
    with run_box({"qwen": "dense"}, speed=250) as box:
        box_now = box.model.clock
        before = box.unix_ns(box_now.now_ns())
        clock = read_box_clock(box.url("qwen") + "/v1/", readings=1)
        after = box.unix_ns(box_now.now_ns())
    assert clock.speed == 250.0
    assert before <= clock.box_unix_ns <= after


@contextmanager
def _static_site(root: Path) -> Iterator[str]:
    """A plain web server serving ``root``'s files on 127.0.0.1: not a box."""
    handler = functools.partial(_QuietFiles, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()


class _QuietFiles(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


def _serve(root: Path, site: str, body: str) -> None:
    (root / site / "sim").mkdir(parents=True)
    (root / site / "sim" / "info").write_text(body)


def test_a_web_server_that_is_no_box_is_named_as_such(tmp_path: Path) -> None:
    with _static_site(tmp_path) as static_site, pytest.raises(EngineError) as refused:
        read_box_clock(static_site + "/nothing-here")
    assert str(refused.value) == (
        f"{static_site}/nothing-here/sim/info: not a simulated box with a finite speed (HTTP 404); "
        "a clock is followed from a box started by spark-otel sim"
    )


def test_an_answer_that_is_not_json_cannot_be_read(tmp_path: Path) -> None:
    _serve(tmp_path, "text", "the box is busy")
    with _static_site(tmp_path) as static_site, pytest.raises(EngineError) as refused:
        read_box_clock(static_site + "/text")
    assert str(refused.value) == (
        f"{static_site}/text/sim/info: cannot read the simulated box's clock: "
        "Expecting value: line 1 column 1 (char 0)"
    )


def test_json_that_is_not_an_object_is_no_box(tmp_path: Path) -> None:
    _serve(tmp_path, "list", "[1, 2]")
    with _static_site(tmp_path) as static_site, pytest.raises(EngineError) as refused:
        read_box_clock(static_site + "/list")
    assert str(refused.value) == (
        f"{static_site}/list/sim/info: not a simulated box with a finite speed (HTTP 200); "
        "a clock is followed from a box started by spark-otel sim"
    )


def test_the_clock_is_read_straight_from_the_box_whatever_proxy_the_environment_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _serve(tmp_path, "box", json.dumps({"speed": 2, "unix_ns": 7}))
    for name in ("no_proxy", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
    for name in ("http_proxy", "all_proxy"):
        monkeypatch.setenv(name, "http://127.0.0.1:9")  # nothing listens there
    with _static_site(tmp_path) as static_site:
        clock = read_box_clock(static_site + "/box", readings=1)
    assert (clock.speed, clock.box_unix_ns) == (2.0, 7)
