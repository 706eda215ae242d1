"""A cold process whose first cells start together on many workers: run by test_one_setup.py.

``python cold_start_runner.py sync|async WORKERS CELLS [PORT]``: nothing spark-otel is set up
before the workers start (the store comes from ``SPARK_OTEL_STORE``). With PORT, each cell makes
one real request to the test server there, and each worker calls `spark_otel.instrument()` as it
starts (a thread pool's initializer, or each task's first line), as runners that set up per
worker do. The first WORKERS cells wait at a barrier, so setup is raced by all of them at once.
"""

from __future__ import annotations

import asyncio
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

import httpx2

import spark_otel

MODEL = "test-model-7b"


def _body(i: int) -> dict[str, object]:
    return {"model": MODEL, "prompt": f"cell {i}", "max_tokens": 3}


def run_sync(workers: int, cells: int, url: str | None) -> None:
    barrier = threading.Barrier(workers)

    def start_worker() -> None:
        if url is not None:
            spark_otel.instrument()
        barrier.wait()

    def one(i: int) -> None:
        with spark_otel.cell("cold-start", f"c{i}", engine="test", workers=workers):
            if url is not None:
                httpx2.post(f"{url}/v1/completions", json=_body(i), timeout=30).raise_for_status()

    with ThreadPoolExecutor(workers, initializer=start_worker) as pool:
        list(pool.map(one, range(cells)))


async def run_async(workers: int, cells: int, url: str | None) -> None:
    gate = asyncio.Semaphore(workers)
    client = httpx2.AsyncClient(timeout=30) if url is not None else None

    async def one(i: int) -> None:
        async with gate:
            if url is not None:
                spark_otel.instrument()
            async with spark_otel.cell("cold-start", f"c{i}", engine="test", workers=workers):
                if client is not None:
                    (await client.post(f"{url}/v1/completions", json=_body(i))).raise_for_status()

    await asyncio.gather(*(one(i) for i in range(cells)))
    if client is not None:
        await client.aclose()


if __name__ == "__main__":
    mode, workers, cells = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    url = f"http://127.0.0.1:{sys.argv[4]}" if len(sys.argv) > 4 else None
    if mode == "sync":
        run_sync(workers, cells, url)
    else:
        asyncio.run(run_async(workers, cells, url))
