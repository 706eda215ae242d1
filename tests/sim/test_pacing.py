"""When the process falls behind the wall clock, the box says so: one WARNING per engine, and the
dropped model time in `EngineStats` and `/sim/info`."""

from __future__ import annotations

import asyncio
import logging
import re
import time

import httpx
import pytest
from tests.support.loopback import in_flight, pinned, until

from spark_otel.sim import Box, run_box

SPEED = 20.0
STALL_S = 0.6  # longer than the 0.25 s the step loop may lag before it drops model time


async def _stall_twice_while_decoding(box: Box) -> None:
    loop = box._runner.loop  # the box's own event loop: blocking it is the process falling behind
    assert loop is not None
    async with in_flight(box.port("e"), [pinned(box.model_id("e"), 20_000)]):
        await until(lambda: box.stats("e").decoding == 1)
        for _ in range(2):
            before = box.stats("e").dropped_model_s
            loop.call_soon_threadsafe(time.sleep, STALL_S)
            await until(lambda: box.stats("e").dropped_model_s > before)  # noqa: B023


def test_falling_behind_warns_once_and_shows_in_sim_info(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="spark_otel.sim")
    with run_box({"e": "moe", "idle": "dense"}, speed=SPEED) as box:
        asyncio.run(_stall_twice_while_decoding(box))
        info = httpx.get(box.url("e") + "/sim/info", timeout=10).json()
        stats = box.stats("e")
        idle_info = httpx.get(box.url("idle") + "/sim/info", timeout=10).json()
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING and r.name == "spark_otel.sim.box"]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]
    lag = re.fullmatch(
        r"sim engine e fell (\d+\.\d{3}) s behind the wall clock and dropped model time: its rates now read "
        r"slower than its profile \(lower the speed or the load; dropped_model_s in /sim/info counts it\)",
        warnings[0].getMessage(),
    )
    assert lag is not None, warnings[0].getMessage()
    assert float(lag[1]) >= STALL_S * 0.8  # the wall-clock lag it dropped, a positive figure
    # Each stall drops the whole lag, about STALL_S x SPEED of model time, a part of the engine's.
    assert 2 * 0.8 * STALL_S * SPEED <= stats.dropped_model_s < stats.model_time_s
    assert info["dropped_model_s"] == pytest.approx(stats.dropped_model_s, abs=0.5)
    assert info["dropped_model_s"] > 0
    assert idle_info["dropped_model_s"] == 0  # an idle engine has no step to fall behind on


def test_a_short_stall_is_replayed_and_the_served_stamps_stay_exact() -> None:
    # A loaded machine's scheduling stall: the loop catches up on the overdue steps rather than
    # dropping them, so the request's model-time stamps still read the profile's rate.
    tokens = 120

    async def stalled_stream(box: Box) -> None:
        loop = box._runner.loop
        assert loop is not None
        body = pinned(box.model_id("e"), tokens)
        async with in_flight(box.port("e"), [body]) as task:
            await until(lambda: box.stats("e").generation_tokens >= 10)
            loop.call_soon_threadsafe(time.sleep, 0.15)
            [result] = await task
        assert result.tokens == tokens

    with run_box({"e": "dense"}, speed=SPEED) as box:
        asyncio.run(stalled_stream(box))
        stats = box.stats("e")
        [timing] = box.timings("e")
    assert stats.dropped_model_s == 0
    assert timing.decode_rate == pytest.approx(box.predicted_rate("e", 1), rel=0.01)
