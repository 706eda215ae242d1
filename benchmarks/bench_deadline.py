"""What streaming against a deadline costs, and how promptly the deadline closes a stall.

    .venv/bin/python benchmarks/bench_deadline.py [--tokens 19000] [--cutoffs 20]

Three measurements, each side by side in one run:

* salvage: a finder's answer of ``--tokens`` chunks (about 4 characters each, Appendix E's
  ~19K tokens) fed to the incremental `JsonFindings`, against the naive way (re-parsing the
  whole text so far after every chunk), on the same first ``--naive-tokens`` chunks;
* client cost per chunk: a 2,048-chunk stream over `httpx2.MockTransport` (the server costs
  nothing) read bare with the openai SDK, against `stream_with_deadline` on the same client;
  and the same for raw httpx2 (bare ``iter_lines`` + ``json.loads``);
* cut-off latency: a local uvicorn server that sends headers and then nothing; how long after
  the deadline the call returns, sync and async, over ``--cutoffs`` runs.

Targets: salvage at most 5 µs per chunk and linear (the naive way is quadratic); at most
15 µs per chunk over the bare SDK loop; every cut-off back within 100 ms of its deadline.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import statistics
import threading
import time
from typing import Any

import httpx2
import openai

from spark_otel.deadline import astream_with_deadline, stream_with_deadline
from spark_otel.deadline.salvage import JsonFindings, json_findings

CHUNK_CHARS = 4


def findings_answer(tokens: int) -> list[str]:
    """A thinking finder's answer, split into ``tokens`` chunks."""
    finding = {
        "file": "src/app/handlers.py",
        "line": 0,
        "title": "unchecked {key} in [items]",
        "severity": "high",
    }
    parts = ['<think>Let me read the diff {carefully} [twice].</think>\n```json\n{"findings": [']
    size, i = len(parts[0]), 0
    while size < tokens * CHUNK_CHARS:
        item = json.dumps({**finding, "line": i}) + ", "
        parts.append(item)
        size += len(item)
        i += 1
    text = "".join(parts)[: tokens * CHUNK_CHARS]
    return [text[j : j + CHUNK_CHARS] for j in range(0, len(text), CHUNK_CHARS)]


def bench_salvage(tokens: int, naive_tokens: int) -> None:
    chunks = findings_answer(tokens)
    started = time.perf_counter()
    extractor = JsonFindings()
    for chunk in chunks:
        extractor.feed(chunk)
    whole = time.perf_counter() - started

    head = chunks[:naive_tokens]
    started = time.perf_counter()
    extractor = JsonFindings()
    for chunk in head:
        extractor.feed(chunk)
    incremental = time.perf_counter() - started
    started = time.perf_counter()
    text = ""
    for chunk in head:
        text += chunk
        naive_findings = json_findings(text)
    naive = time.perf_counter() - started
    assert naive_findings == extractor.findings
    print(
        f"salvage, {len(chunks)} chunks incremental: {whole * 1e3:.1f} ms, "
        f"{whole / len(chunks) * 1e6:.2f} µs/chunk, {len(JsonFindings().feed(''.join(chunks)))} findings"
    )
    print(
        f"salvage, first {len(head)} chunks: incremental {incremental * 1e3:.1f} ms, "
        f"naive re-parse {naive * 1e3:.0f} ms, ratio {naive / incremental:.0f}x"
    )


def _sse_body(chunks: int) -> bytes:
    head = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m"}
    blocks = [
        b"data: "
        + json.dumps(
            {**head, "choices": [{"index": 0, "delta": {"content": "tok "}, "finish_reason": None}]}
        ).encode()
        + b"\n\n"
        for _ in range(chunks)
    ]
    blocks.append(
        b"data: "
        + json.dumps({**head, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}).encode()
        + b"\n\n"
    )
    usage = {"prompt_tokens": 8, "completion_tokens": chunks, "total_tokens": chunks + 8}
    blocks.append(b"data: " + json.dumps({**head, "choices": [], "usage": usage}).encode() + b"\n\n")
    blocks.append(b"data: [DONE]\n\n")
    return b"".join(blocks)


def bench_client(chunks: int, rounds: int) -> None:
    body = _sse_body(chunks)
    transport = httpx2.MockTransport(
        lambda request: httpx2.Response(200, content=body, headers={"content-type": "text/event-stream"})
    )
    http = httpx2.Client(transport=transport, base_url="http://bench")
    client = openai.OpenAI(base_url="http://bench/v1", api_key="k", http_client=http, max_retries=0)
    kwargs: dict[str, Any] = {"model": "m", "messages": [{"role": "user", "content": "x"}]}

    def bare_sdk() -> None:
        for _ in client.chat.completions.create(
            stream=True, stream_options={"include_usage": True}, **kwargs
        ):
            pass

    def helper_sdk() -> None:
        assert (
            stream_with_deadline(client, deadline_s=60, extractor=None, **kwargs).usage.completion_tokens
            == chunks
        )

    def bare_raw() -> None:
        with http.stream("POST", "/v1/chat/completions", json={**kwargs, "stream": True}) as response:
            for line in response.iter_lines():
                if line.startswith("data: ") and line != "data: [DONE]":
                    json.loads(line[6:])

    def helper_raw() -> None:
        assert (
            stream_with_deadline(http, deadline_s=60, extractor=None, **kwargs).usage.completion_tokens
            == chunks
        )

    times: dict[str, list[float]] = {
        name: [] for name in ("bare_sdk", "helper_sdk", "bare_raw", "helper_raw")
    }
    funcs = {"bare_sdk": bare_sdk, "helper_sdk": helper_sdk, "bare_raw": bare_raw, "helper_raw": helper_raw}
    for _ in range(rounds):
        for name, func in funcs.items():
            started = time.perf_counter()
            func()
            times[name].append((time.perf_counter() - started) / chunks * 1e6)
    med = {name: statistics.median(values) for name, values in times.items()}
    print(f"client, {chunks}-chunk stream, median of {rounds} rounds, µs per chunk:")
    print(
        f"  openai SDK: bare {med['bare_sdk']:.2f}, stream_with_deadline {med['helper_sdk']:.2f} "
        f"(+{med['helper_sdk'] - med['bare_sdk']:.2f}, {med['helper_sdk'] / med['bare_sdk']:.2f}x)"
    )
    print(
        f"  raw httpx2: bare {med['bare_raw']:.2f}, stream_with_deadline {med['helper_raw']:.2f} "
        f"(+{med['helper_raw'] - med['bare_raw']:.2f}, {med['helper_raw'] / med['bare_raw']:.2f}x)"
    )


def _stalling_server() -> tuple[Any, threading.Thread, str]:
    import uvicorn
    from starlette.applications import Starlette
    from starlette.responses import StreamingResponse
    from starlette.routing import Route

    async def stall(request: Any) -> StreamingResponse:
        async def events() -> Any:
            yield b'data: {"choices": [{"index": 0, "delta": {"content": "[{\\"a\\": 1}, "}}]}\n\n'
            await asyncio.sleep(3600)

        return StreamingResponse(events(), media_type="text/event-stream")

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    app = Starlette(routes=[Route("/v1/chat/completions", stall, methods=["POST"])])
    server = uvicorn.Server(uvicorn.Config(app, log_level="error", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.01)
    return server, thread, url


def bench_cutoff(runs: int, deadline_s: float) -> None:
    server, thread, url = _stalling_server()
    kwargs: dict[str, Any] = {"model": "m", "messages": [{"role": "user", "content": "x"}]}
    late: dict[str, list[float]] = {
        "sync openai": [],
        "sync httpx2": [],
        "async openai": [],
        "async httpx2": [],
    }
    with openai.OpenAI(base_url=url + "/v1", api_key="k") as sdk, httpx2.Client(base_url=url) as raw:
        for _ in range(runs):
            for name, client in (("sync openai", sdk), ("sync httpx2", raw)):
                started = time.perf_counter()
                stream_with_deadline(client, deadline_s=deadline_s, **kwargs)
                late[name].append((time.perf_counter() - started - deadline_s) * 1e3)

    async def run_async() -> None:
        async with (
            openai.AsyncOpenAI(base_url=url + "/v1", api_key="k") as sdk,
            httpx2.AsyncClient(base_url=url) as raw,
        ):
            for _ in range(runs):
                for name, client in (("async openai", sdk), ("async httpx2", raw)):
                    started = time.perf_counter()
                    await astream_with_deadline(client, deadline_s=deadline_s, **kwargs)
                    late[name].append((time.perf_counter() - started - deadline_s) * 1e3)

    asyncio.run(run_async())
    server.should_exit = True
    thread.join(timeout=5)
    print(f"cut-off after the deadline ({deadline_s:g} s, stalled server, {runs} runs), ms: median / max")
    for name, values in late.items():
        print(f"  {name:<13} {statistics.median(values):6.1f} / {max(values):6.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tokens", type=int, default=19000)
    parser.add_argument("--naive-tokens", type=int, default=3000)
    parser.add_argument("--chunks", type=int, default=2048)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--cutoffs", type=int, default=20)
    parser.add_argument("--deadline-s", type=float, default=0.2)
    args = parser.parse_args()
    bench_salvage(args.tokens, args.naive_tokens)
    bench_client(args.chunks, args.rounds)
    bench_cutoff(args.cutoffs, args.deadline_s)


if __name__ == "__main__":
    main()
