"""The probe client against a plain asyncio + httpx2 client, same run, same simulated engine.

The simulated engine runs in its own process, pinned to one core where the machine has two or
more; this process is pinned to another. At speed infinity (the default) the engine never sleeps
and writes many events per read; a finite ``--speed`` paces one event per stream per decode step,
so every event costs the client an event-loop wake-up (the harder case). Each round sends N
concurrent streamed /v1/completions of T pinned tokens, first with the probe's client (raw
bytes, a ``data:`` count per chunk, one JSON parse of the usage chunk at the end), then with a
plain client (``aiter_lines`` and ``json.loads`` of every event, tokens counted from chunks).

Figures per client: streamed tokens per second of real time (capped by how fast the simulated
server can write), and client CPU per token (the event loop thread's CPU time), whose inverse is
the client's capacity on one core. Target: the probe client sustains >= 30,000 tok/s on one core.

    .venv/bin/python benchmarks/bench_probe.py [--streams 32] [--tokens 2048] [--rounds 3] [--speed inf]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time

import httpx2

from spark_otel.probe import ProbeSettings, arun_probe

TARGET_TOK_S = 30_000


def _pin(pid: int, cpu: int) -> bool:
    try:
        if len(os.sched_getaffinity(0)) > 1 or pid != 0:
            os.sched_setaffinity(pid, {cpu})
        return True
    except (AttributeError, OSError):
        return False


def _start_engine(speed: float) -> tuple[subprocess.Popen[str], str]:
    code = (
        "import sys\n"
        "from spark_otel.sim import run_box\n"
        f"with run_box({{'qwen': 'dense'}}, speed=float({str(speed)!r})) as box:\n"
        "    print(box.url('qwen'), flush=True)\n"
        "    sys.stdin.read()\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    url = proc.stdout.readline().strip()
    if not url:
        raise SystemExit("the simulated engine did not start")
    return proc, url


async def _probe_client(url: str, streams: int, tokens: int) -> tuple[int, float, float]:
    """(tokens, real seconds, client CPU seconds) of one level measured by the probe itself."""
    settings = ProbeSettings(streams=[streams], tokens=tokens, warmup=False, gpu="none", time_scale=1.0)
    report = await arun_probe(url, settings)
    [level] = report.levels
    return level.probe_tokens, level.wall_s, level.client_cpu_s


async def _plain_client(url: str, streams: int, tokens: int) -> tuple[int, float, float]:
    """The same level with a plain client: every SSE line decoded and parsed."""
    body = {
        "model": "qwen3.8-27b",
        "prompt": "x" * 200,
        "max_tokens": tokens,
        "min_tokens": tokens,
        "ignore_eos": True,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    limits = httpx2.Limits(max_connections=streams, max_keepalive_connections=streams)

    async def one(client: httpx2.AsyncClient) -> int:
        count = 0
        async with client.stream("POST", "/v1/completions", json=body) as response:
            async for line in response.aiter_lines():
                if line.startswith("data:") and line != "data: [DONE]":
                    event = json.loads(line[5:])
                    if event.get("choices"):
                        count += 1
        return count

    async with httpx2.AsyncClient(base_url=url, limits=limits, timeout=120, trust_env=False) as client:
        cpu0, t0 = time.thread_time(), time.perf_counter()
        counts = await asyncio.gather(*(one(client) for _ in range(streams)))
        return sum(counts), time.perf_counter() - t0, time.thread_time() - cpu0


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--streams", type=int, default=32)
    parser.add_argument("--tokens", type=int, default=2048)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--speed", type=float, default=float("inf"), help="engine speed; finite values pace the tokens"
    )
    args = parser.parse_args()

    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else [0]
    engine, url = _start_engine(args.speed)
    pinned = len(cpus) > 1 and _pin(engine.pid, cpus[1]) and _pin(0, cpus[0])
    print(f"engine {url} (speed {args.speed:g}); {len(cpus)} cores; client and engine apart: {pinned}")
    results: dict[str, list[tuple[int, float, float]]] = {"probe client": [], "plain asyncio+httpx2": []}
    try:
        for _ in range(args.rounds):
            results["probe client"].append(asyncio.run(_probe_client(url, args.streams, args.tokens)))
            results["plain asyncio+httpx2"].append(asyncio.run(_plain_client(url, args.streams, args.tokens)))
    finally:
        assert engine.stdin is not None
        engine.stdin.close()
        engine.wait(10)

    print(f"{args.streams} streams x {args.tokens} tokens, {args.rounds} rounds each (medians):")
    print(f"{'client':24} {'tok/s achieved':>15} {'CPU us/token':>13} {'tok/s per core':>15}")
    capacity: dict[str, float] = {}
    for name, runs in results.items():
        rate = statistics.median(tok / wall for tok, wall, _ in runs)
        us = statistics.median(cpu * 1e6 / tok for tok, _, cpu in runs)
        capacity[name] = 1e6 / us
        print(f"{name:24} {rate:15,.0f} {us:13.2f} {capacity[name]:15,.0f}")
    ratio = capacity["probe client"] / capacity["plain asyncio+httpx2"]  # same run, same engine
    verdict = "meets" if capacity["probe client"] >= TARGET_TOK_S else "MISSES"
    print(
        f"probe client capacity: {ratio:.1f}x the plain client's; {verdict} the {TARGET_TOK_S:,} tok/s target"
    )


if __name__ == "__main__":
    main()
