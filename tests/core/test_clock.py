"""The injectable clock: one context manager holds a `Clock`, holds nest when they agree on its
rate, real time returns after the last, monotonic throughout, anchorable to another process's
clock; and no module of spark-otel reads time except through it."""

from __future__ import annotations

import ast
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from spark_otel import ConfigError, _clock

pytestmark = pytest.mark.usefixtures("restore_clock")

SRC = Path(__file__).resolve().parents[2] / "src" / "spark_otel"


def test_a_clock_runs_rate_times_faster_and_never_goes_back() -> None:
    with _clock.hold(_clock.Clock(50)):
        wall0, perf0 = _clock.wall_ns(), _clock.perf_ns()
        time.sleep(0.05)
        assert (_clock.perf_ns() - perf0) / 1e9 >= 50 * 0.05
        assert (_clock.wall_ns() - wall0) / 1e9 >= 50 * 0.05
        assert _clock.to_real_s(10) == pytest.approx(0.2)
        perf_before = _clock.perf_ns()
    assert _clock.rate() == 1.0
    assert _clock.perf_ns() >= perf_before
    assert abs(_clock.wall_ns() - time.time_ns()) < 10**8
    assert _clock.to_real_s(10) == 10
    assert _clock.to_clock_s(2) == 2


def test_anchor_to_another_process_clock() -> None:
    anchor = time.time_ns() + 3_600 * 10**9
    with _clock.hold(_clock.Clock(100, anchor)):
        assert 0 <= _clock.wall_ns() - anchor < 10**9 * 100
        assert _clock.to_real_s(100) == pytest.approx(1.0)


def test_holds_nest_at_one_rate_and_the_last_one_out_restores_real_time() -> None:
    anchor = time.time_ns() - 10**12
    with _clock.hold(_clock.Clock(20, anchor)):
        with _clock.hold(_clock.Clock(20, time.time_ns())):  # joins: its epoch is not applied
            assert _clock.wall_ns() - anchor < 10**11
        assert _clock.rate() == 20  # still held by the outer block
        with pytest.raises(ConfigError, match=r"already runs at 20x.*cannot also run at 5x"):
            _clock.hold(_clock.Clock(5)).__enter__()
        assert _clock.rate() == 20
    assert _clock.rate() == 1.0


def test_holds_from_threads_that_overlap_keep_one_clock() -> None:
    inside = threading.Event()
    release = threading.Event()

    def hold() -> None:
        with _clock.hold(_clock.Clock(30)):
            inside.set()
            release.wait(5)

    thread = threading.Thread(target=hold)
    thread.start()
    assert inside.wait(5)
    with _clock.hold(_clock.Clock(30)):
        release.set()
        thread.join(5)
        assert _clock.rate() == 30  # the other thread's hold ended; this one still holds
    assert _clock.rate() == 1.0


@pytest.mark.parametrize("scale", [0, -1, float("inf"), float("nan"), True, "2"])
def test_non_positive_infinite_or_non_numeric_rate_is_rejected(scale: object) -> None:
    with pytest.raises(ConfigError, match="positive finite"), _clock.hold(_clock.Clock(scale)):  # type: ignore[arg-type]
        pass
    assert _clock.rate() == 1.0


# -- time is read only through the clock -------------------------------------------------------------

_CLOCK_READS = frozenset(
    {
        "time", "time_ns", "perf_counter", "perf_counter_ns", "monotonic", "monotonic_ns",
        "process_time", "process_time_ns", "thread_time", "thread_time_ns", "clock_gettime",
        "clock_gettime_ns", "localtime", "gmtime", "ctime", "asctime", "strftime",
    }
)  # fmt: skip
_DATETIME_NOW = frozenset({"now", "utcnow", "today"})


def clock_reads(source: str) -> list[str]:
    """Every place ``source`` reads the clock itself: ``time.*`` readers, ``from time import``
    of them, ``datetime.now()``-like calls, an event loop's ``time()``."""
    tree = ast.parse(source)
    time_aliases = {
        alias.asname or alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
        if alias.name == "time"
    }
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.ImportFrom) and node.module == "time":
            found += [(line, f"from time import {a.name}") for a in node.names if a.name in _CLOCK_READS]
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            owner, attr = node.value.id, node.attr
            time_read = owner in time_aliases and attr in _CLOCK_READS
            if time_read or (owner in ("datetime", "date") and attr in _DATETIME_NOW):
                found.append((line, f"{owner}.{attr}"))
        elif _is_loop_time(node):
            found.append((line, "event loop time()"))
    return [f"line {line}: {what}" for line, what in sorted(found)]


def _is_loop_time(node: ast.AST) -> bool:
    """``asyncio.get_running_loop().time()`` and the like."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
        return False
    loop = node.func.value
    return (
        node.func.attr == "time"
        and not node.args
        and isinstance(loop, ast.Call)
        and getattr(loop.func, "attr", None) in ("get_running_loop", "get_event_loop")
    )


def test_the_scan_finds_each_kind_of_clock_read() -> None:
    source = (
        "import time as t\nfrom time import perf_counter_ns\nfrom datetime import datetime\nimport asyncio\n"
        "t.monotonic()\ndatetime.now()\nasyncio.get_running_loop().time()\nt.sleep(1)\n"
    )
    assert clock_reads(source) == [
        "line 2: from time import perf_counter_ns",
        "line 5: t.monotonic",
        "line 6: datetime.now",
        "line 7: event loop time()",
    ]


def test_no_module_reads_time_except_through_the_clock() -> None:
    offenders = {
        str(path.relative_to(SRC)): reads
        for path in sorted(SRC.rglob("*.py"))
        if path.name != "_clock.py" and (reads := clock_reads(path.read_text(encoding="utf-8")))
    }
    assert offenders == {}


def _elapsed(read: Callable[[], int], real: Callable[[], int]) -> tuple[int, int, int]:
    """(shortest real time, model time, longest real time) across one 30 ms wait."""
    outer0 = real()
    model0 = read()
    inner0 = real()
    time.sleep(0.03)
    inner1 = real()
    model1 = read()
    outer1 = real()
    return inner1 - inner0, model1 - model0, outer1 - outer0


@pytest.mark.parametrize("scale", [2.0, 0.5])
def test_both_clocks_run_at_the_scale_held_faster_or_slower(scale: float) -> None:
    with _clock.hold(_clock.Clock(scale)):
        for read, real in ((_clock.wall_ns, time.time_ns), (_clock.perf_ns, time.perf_counter_ns)):
            shortest, model, longest = _elapsed(read, real)
            assert shortest * scale <= model <= longest * scale
        assert (_clock.to_clock_ns(2_000), _clock.to_clock_s(2.0), _clock.to_real_s(1.0)) == (
            int(2_000 * scale),
            2.0 * scale,
            1.0 / scale,
        )


def test_an_epoch_given_at_real_speed_moves_unix_time_to_it() -> None:
    anchor = time.time_ns() - 86_400 * 10**9
    with _clock.hold(_clock.Clock(1.0, anchor)):
        assert 0 <= _clock.wall_ns() - anchor < 10**9
    assert abs(_clock.wall_ns() - time.time_ns()) < 10**9


def test_the_monotonic_clock_is_continuous_into_and_out_of_a_held_clock() -> None:
    before = _clock.perf_ns()
    with _clock.hold(_clock.Clock(2.0)):
        inside = _clock.perf_ns()
    after = _clock.perf_ns()
    assert 0 <= inside - before < 10**8
    assert 0 <= after - inside < 10**8
