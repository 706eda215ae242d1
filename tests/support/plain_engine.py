"""A vLLM-like engine on 127.0.0.1 that, like a real vLLM, answers no /sim/info by default, and
misbehaves on request."""

from __future__ import annotations

import threading
import time


class PlainEngine:
    """A vLLM-like engine on 127.0.0.1 that, like a real vLLM, answers no ``/sim/info`` by default.

    ``/v1/completions`` streams ``max_tokens`` SSE events ``step_s`` apart, then the usage chunk;
    ``/metrics`` counts generated tokens and running requests in vLLM's names; ``/sim/gpu`` reads
    ``busy_w`` while any answer streams and ``idle_w`` otherwise, with the energy integrated.
    With ``sim_info`` it answers ``/sim/info`` with it; without ``gpu`` it has no ``/sim/gpu``.
    It misbehaves on request: completions after the first ``fail_after`` answer HTTP 503; the
    ``stall``-th completion (1-based) trickles SSE comments and never ends; a finished request
    stays counted as running for ``linger_s`` (a real engine's gauge lags its requests too).
    """

    def __init__(
        self,
        *,
        step_s: float = 0.0,
        fail_after: int | None = None,
        stall: int | None = None,
        linger_s: float = 0.0,
        busy_w: float = 300.0,
        idle_w: float = 100.0,
        sim_info: dict[str, object] | None = None,
        gpu: bool = True,
    ) -> None:
        import socket

        import uvicorn
        from starlette.applications import Starlette
        from starlette.routing import Route

        self.step_s, self.fail_after, self.stall, self.linger_s = step_s, fail_after, stall, linger_s
        self.busy_w, self.idle_w, self.sim_info = busy_w, idle_w, sim_info
        self.completions = self.generated = self.running = self.streaming = 0
        self.energy_j, self._since = 0.0, time.time_ns()
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._sock.getsockname()[1]}"
        app = Starlette(
            routes=[
                Route("/v1/completions", self._complete, methods=["POST"]),
                Route("/v1/models", self._models),
                Route("/metrics", self._metrics),
                *([Route("/sim/gpu", self._gpu)] if gpu else []),
                *([Route("/sim/info", self._info)] if sim_info is not None else []),
            ]
        )
        self._server = uvicorn.Server(uvicorn.Config(app, log_level="error", lifespan="off"))
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [self._sock]})

    def __enter__(self) -> PlainEngine:
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            assert time.monotonic() < deadline, "test engine did not start"
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.should_exit = True
        self._thread.join(10)
        self._sock.close()

    def _power(self) -> float:
        return self.busy_w if self.streaming else self.idle_w

    def _account(self) -> None:
        now = time.time_ns()
        self.energy_j += self._power() * (now - self._since) / 1e9
        self._since = now

    def _release(self) -> None:
        self.running -= 1

    async def _models(self, request):
        from starlette.responses import JSONResponse

        return JSONResponse({"object": "list", "data": [{"id": "plain-model", "object": "model"}]})

    async def _metrics(self, request):
        from starlette.responses import PlainTextResponse

        return PlainTextResponse(
            "# TYPE vllm:generation_tokens_total counter\n"
            f'vllm:generation_tokens_total{{model_name="plain-model"}} {self.generated}\n'
            "# TYPE vllm:num_requests_running gauge\n"
            f'vllm:num_requests_running{{model_name="plain-model"}} {self.running}\n'
        )

    async def _info(self, request):
        from starlette.responses import JSONResponse

        return JSONResponse(self.sim_info)

    async def _gpu(self, request):
        from starlette.responses import JSONResponse

        self._account()
        return JSONResponse({"power_w": self._power(), "energy_j": self.energy_j, "unix_ns": time.time_ns()})

    async def _complete(self, request):
        import asyncio
        import json

        from starlette.responses import JSONResponse, StreamingResponse

        body = await request.json()
        self.completions += 1
        number = self.completions
        if self.fail_after is not None and number > self.fail_after:
            return JSONResponse({"error": {"message": "engine is draining"}}, status_code=503)
        tokens = int(body["max_tokens"])

        async def events():
            self.running += 1
            self._account()
            self.streaming += 1
            try:
                if number == self.stall:
                    while True:
                        yield b": still thinking\n\n"
                        await asyncio.sleep(0.05)
                for _ in range(tokens):
                    self.generated += 1
                    yield b'data: {"choices":[{"index":0,"text":"x"}]}\n\n'
                    if self.step_s:
                        await asyncio.sleep(self.step_s)
                usage = {"prompt_tokens": 40, "completion_tokens": tokens, "total_tokens": 40 + tokens}
                yield b"data: " + json.dumps({"choices": [], "usage": usage}).encode() + b"\n\n"
                yield b"data: [DONE]\n\n"
            finally:
                self._account()
                self.streaming -= 1
                asyncio.get_running_loop().call_later(self.linger_s, self._release)

        return StreamingResponse(events(), media_type="text/event-stream")
