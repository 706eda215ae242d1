"""When the step loop at infinite speed lets the rest of the event loop run.

At infinite speed an engine's step loop never sleeps, so it gives the loop's other tasks (the
HTTP handlers writing its streams) a turn after every 256 units of work: each step counts the
tokens it produced plus its prefill chunks. One request with a one-token prompt makes step 1
count 2 (its chunk and its first token) and every later step 1, so a task taking turns beside the
engine sees 255 tokens, then 256 more at each turn. The count starts from nothing whether the
loop starts busy or wakes from idle. Plain asyncio on a private loop: the turns are exact.
"""

from __future__ import annotations

import asyncio
import math

import pytest

from spark_otel.sim import DENSE, BoxModel


def _tokens_seen_at_each_turn(*, idle_first: bool) -> list[int]:
    async def main() -> list[int]:
        engine = BoxModel({"a": DENSE}, speed=math.inf).engines["a"]
        task = asyncio.create_task(engine.run())
        if idle_first:
            await asyncio.sleep(0)  # the loop finds nothing to do and waits for work
        req = engine.submit(prompt_tokens=1, max_tokens=10_000, ignore_eos=True)
        seen = []
        for _ in range(3):
            await asyncio.sleep(0)  # one turn: the engine runs until it yields
            seen.append(req.produced)
        engine.stop()
        await task
        return seen

    return asyncio.run(main())


@pytest.mark.parametrize("idle_first", [False, True], ids=["busy-from-the-start", "woken-from-idle"])
def test_the_loop_yields_after_every_256_units_of_work(idle_first: bool) -> None:
    assert _tokens_seen_at_each_turn(idle_first=idle_first) == [255, 511, 767]
