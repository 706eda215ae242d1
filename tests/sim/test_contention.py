"""Several engines on one box: the neighbour's bill (Act 4) and prompt-heavy batching (Act 3)."""

from __future__ import annotations

import asyncio
import contextlib

import pytest
from tests.support.loopback import StreamResult, in_flight, pinned, stream_many, until

from spark_otel.sim import DENSE, MOE, run_box

SPEED = 20.0
SERIAL_TOKENS = 96


async def _serial_rate_while(box, load: dict[str, int]) -> float:
    """One pinned serial stream on qwen while ``load`` streams decode (long, pinned) on the named engines.

    The rate is the server's own, first token to last in model time: the loaded figures are a
    ratio of two such streams, and no client or handler delay on a busy machine reaches it.
    """
    async with contextlib.AsyncExitStack() as stack:
        for engine, n in load.items():
            bodies = [pinned(box.model_id(engine), 20_000) for _ in range(n)]
            await stack.enter_async_context(in_flight(box.port(engine), bodies))
        await until(lambda: all(box.stats(e).decoding >= n for e, n in load.items()))
        [serial] = await stream_many(box.port("qwen"), [pinned(box.model_id("qwen"), SERIAL_TOKENS)])
        # Still inside the block: the load decoded through the whole serial stream.
        assert all(box.stats(e).decoding >= n for e, n in load.items())
    assert serial.tokens == SERIAL_TOKENS
    [timing] = [t for t in box.timings("qwen") if t.finish_reason == "length"]
    assert timing.completion_tokens == SERIAL_TOKENS
    assert timing.decode_rate is not None
    return timing.decode_rate


def _measure(load: dict[str, int]) -> tuple[float, float]:
    with run_box({"qwen": "dense", "nemotron": "moe"}, speed=SPEED) as box:
        rate = asyncio.run(_serial_rate_while(box, load))
        truth = box.predicted_rate(
            "qwen", 1 + load.get("qwen", 0), {k: v for k, v in load.items() if k != "qwen"}
        )
        assert box.stats("qwen").dropped_model_s == 0
    return rate, truth


def test_the_other_engine_at_4_streams_takes_about_half_from_a_serial_stream() -> None:
    alone, _ = _measure({})
    loaded, truth = _measure({"nemotron": 4})
    assert loaded == pytest.approx(truth, rel=0.05)
    assert 1 - loaded / alone == pytest.approx(0.54, abs=0.05)  # the article: 11.51 -> 5.25


def test_one_more_same_engine_stream_costs_about_5_percent() -> None:
    alone, _ = _measure({})
    loaded, truth = _measure({"qwen": 1})
    assert loaded == pytest.approx(truth, rel=0.05)
    assert 0.0 < 1 - loaded / alone < 0.10  # the article: 5% (11.51 -> 10.97)


def test_contention_zero_leaves_engines_independent() -> None:
    with run_box({"qwen": "dense", "nemotron": "moe"}, speed=SPEED, contention=0) as box:
        assert box.predicted_rate("qwen", 1, {"nemotron": 4}) == pytest.approx(DENSE.per_stream_rate(1))


# Nemotron card reviewer cells (Appendix C): 3.8K-16K prompt tokens, 80-353 output tokens, run with
# the serial Qwen3.8 eval's one request in the background, as the article ran them.
CARD_CELLS = [
    (3769, 80),
    (5200, 150),
    (7400, 220),
    (9000, 353),
    (10300, 120),
    (12100, 300),
    (14000, 200),
    (16262, 90),
]


async def _card_cells(box, workers: int) -> list[StreamResult]:
    model = box.model_id("nemotron")
    bodies = [pinned(model, out, prompt="y" * (4 * prompt)) for prompt, out in CARD_CELLS]
    if workers == 1:
        return [(await stream_many(box.port("nemotron"), [b]))[0] for b in bodies]
    return await stream_many(box.port("nemotron"), bodies)


def test_prompt_heavy_cells_gain_only_about_2x_from_8_workers() -> None:
    # Every span comes from the server's model-time stamps. The serial eval's time is the sum of its
    # cells, so the client's pause between one cell and the next is not in it; the parallel batch
    # spans first arrival to last finish, so a late handler counts only by how late the last of
    # the eight arrived, a small part of a batch that lasts a second and a half of wall time.
    speed = 30.0
    with run_box({"qwen": "dense", "nemotron": "moe"}, speed=speed) as box:

        async def both() -> tuple[list[StreamResult], list[StreamResult]]:
            async with in_flight(box.port("qwen"), [pinned(box.model_id("qwen"), 20_000)]):
                await until(lambda: box.stats("qwen").decoding == 1)
                serial, parallel = await _card_cells(box, 1), await _card_cells(box, 8)
                assert box.stats("qwen").decoding == 1  # the background stream ran throughout
                return serial, parallel

        serial_cells, parallel_cells = asyncio.run(both())
        assert box.stats("nemotron").dropped_model_s == 0
        timings = [t for t in box.timings("nemotron") if t.finish_reason == "length"]
    assert [r.tokens for r in serial_cells] == [out for _, out in CARD_CELLS]
    assert sorted(r.tokens for r in parallel_cells) == sorted(out for _, out in CARD_CELLS)
    assert len(timings) == 2 * len(CARD_CELLS)
    serial, parallel = timings[: len(CARD_CELLS)], timings[len(CARD_CELLS) :]
    assert [t.completion_tokens for t in serial] == [out for _, out in CARD_CELLS]
    serial_s = sum(t.e2e_s for t in serial)
    parallel_s = (max(t.finished_ns for t in parallel) - min(t.arrival_ns for t in parallel)) / 1e9
    speedup = serial_s / parallel_s
    assert 1.6 <= speedup <= 2.3, speedup  # the article: 1.9x
    per_cell = sum(t.e2e_s for t in parallel) / serial_s
    assert 2.5 <= per_cell <= 4.5, per_cell  # the article: each cell took 3.5x as long


def test_prefill_cost_grows_with_the_prompt() -> None:
    assert MOE.prefill_s(16_000) == pytest.approx(4 * MOE.prefill_s(4_000))
    assert DENSE.prefill_s(10_000) > MOE.prefill_s(10_000)
