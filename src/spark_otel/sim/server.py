"""`run_box`: serve a simulated box's engines on 127.0.0.1 from a background thread.

One thread runs one event loop holding the box model and one uvicorn server per engine, so the
engines share state without locks, as engines on one GPU share memory bandwidth. The sockets are
bound before the thread starts (a busy port fails at once, naming the engine), and leaving the
context always stops everything, also with streams in flight: their requests are aborted, their
streams end, and the servers close.

While a box with a finite speed runs, it holds this process's model clock at that speed
(`clock.model_time`), so every timestamp spark-otel records in the process reads in
the same model time as the box; real time returns when the last hold ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import socket
import threading
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .. import _clock
from .._exceptions import ConfigError
from .box import BoxModel, EngineStats, RequestTiming, check_speed
from .clock import model_time
from .profiles import Profile, get_profile

if TYPE_CHECKING:
    from opentelemetry.trace import TracerProvider

__all__ = ["Box", "EngineSpec", "parse_engine_spec", "run_box"]

_logger = logging.getLogger(__name__)
_START_TIMEOUT_S = 30.0
_STOP_TIMEOUT_S = 10.0
_BACKLOG = 2048  # uvicorn's default


@dataclass(frozen=True)
class EngineSpec:
    """One engine of a box: its name, timing profile and port (0 picks a free one)."""

    name: str
    profile: Profile
    port: int = 0


def parse_engine_spec(text: str) -> EngineSpec:
    """``NAME=PORT:PROFILE`` (or ``NAME=PROFILE`` for a free port), as the CLI's ``--engine`` takes."""
    name, sep, rest = text.partition("=")
    if not sep or not name or not rest:
        raise ConfigError(f"--engine {text!r}: expected NAME=PORT:PROFILE, e.g. qwen=8011:dense")
    port_text, colon, profile_name = rest.rpartition(":")
    if not colon:
        port_text, profile_name = "0", rest
    try:
        port = int(port_text)
    except ValueError:
        raise ConfigError(f"--engine {text!r}: port {port_text!r} is not a number") from None
    if not 0 <= port <= 65535:
        raise ConfigError(f"--engine {text!r}: port {port} is out of range 0..65535")
    return EngineSpec(name, get_profile(profile_name), port)


def _specs(
    engines: Mapping[str, str | Profile] | Iterable[str | EngineSpec], ports: Mapping[str, int] | None
) -> list[EngineSpec]:
    if isinstance(engines, Mapping):
        specs = [EngineSpec(name, get_profile(profile)) for name, profile in engines.items()]
    else:
        specs = [e if isinstance(e, EngineSpec) else parse_engine_spec(e) for e in engines]
    if not specs:
        raise ConfigError("a simulated box needs at least one engine")
    names = [s.name for s in specs]
    if len(set(names)) != len(names):
        raise ConfigError(f"engine names must be unique, got {names}")
    for name in ports or {}:
        if name not in names:
            raise ConfigError(f"ports names engine {name!r}, which is not in the box ({', '.join(names)})")
    return [EngineSpec(s.name, s.profile, (ports or {}).get(s.name, s.port)) for s in specs]


def _bind(host: str, spec: EngineSpec) -> socket.socket:
    """A socket listening on ``host:port``: the port is this box's alone once this returns.

    SO_REUSEADDR lets a restarted sim take its port back while old connections sit in TIME_WAIT,
    but it also lets two sockets that both set it bind one port as long as neither listens. So
    listen at once: a port another socket listens on fails here, naming the engine, and a socket
    that had only bound it fails at its own listen instead of sharing the port with this box.

    The protocol is named (IPPROTO_TCP, not 0): asyncio turns Nagle's algorithm off
    (TCP_NODELAY) only on accepted sockets whose ``proto`` says TCP. Left on, a stream's first
    chunk waited for the ACK of the response head, which a client on a reused keep-alive
    connection delays by 40 ms: time to first token that no engine has.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, spec.port))
        sock.listen(_BACKLOG)
    except OSError as exc:
        sock.close()
        raise ConfigError(
            f"engine {spec.name!r}: cannot listen on {host}:{spec.port}: {exc.strerror or exc}"
        ) from None
    return sock


class _Runner(threading.Thread):
    """The box's thread: one event loop, the box model and one uvicorn server per engine."""

    def __init__(
        self,
        specs: list[EngineSpec],
        sockets: list[socket.socket],
        speed: float,
        seed: int,
        contention: float,
        *,
        tracer_provider: TracerProvider | None = None,
    ):
        super().__init__(name="spark-otel-sim", daemon=True)
        self.tracer_provider = tracer_provider
        self.specs = specs
        self.sockets = sockets
        self.speed = speed
        self.seed = seed
        self.contention = contention
        self.ready = threading.Event()
        self.error: BaseException | None = None
        self.model: BoxModel | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self._stop_event: asyncio.Event | None = None

    def run(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as exc:
            self.error = exc
        finally:
            self.ready.set()

    async def _main(self) -> None:
        import uvicorn

        from .app import build_app

        self.loop = asyncio.get_running_loop()
        self._stop_event = asyncio.Event()
        model = BoxModel(
            {s.name: s.profile for s in self.specs},
            self.speed,
            self.seed,
            self.contention,
            tracer_provider=self.tracer_provider,
        )
        self.model = model
        model.start()
        servers = []
        for spec in self.specs:
            config = uvicorn.Config(
                build_app(model, spec.name),
                lifespan="off",
                log_config=None,
                log_level="warning",
                access_log=False,
                timeout_graceful_shutdown=1,
                http="h11",
            )
            servers.append(uvicorn.Server(config))
        tasks = [
            asyncio.create_task(s.serve(sockets=[sock]))
            for s, sock in zip(servers, self.sockets, strict=True)
        ]
        try:
            while not all(s.started for s in servers):
                for task in tasks:
                    if task.done():
                        task.result()
                        raise RuntimeError("a simulated engine's server stopped while starting")
                await asyncio.sleep(0.005)
            self.ready.set()
            await self._stop_event.wait()
        finally:
            await model.stop()
            for server in servers:
                server.should_exit = True
            await asyncio.gather(*tasks, return_exceptions=True)

    def stop(self) -> None:
        loop, event = self.loop, self._stop_event
        if loop is not None and event is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop already ended
                loop.call_soon_threadsafe(event.set)
        self.join(_STOP_TIMEOUT_S)
        if self.is_alive():
            _logger.warning("the simulated box did not stop within %.0f s", _STOP_TIMEOUT_S)


class Box:
    """A running simulated box: engine URLs plus the ground truth the simulation runs on."""

    def __init__(self, host: str, specs: list[EngineSpec], ports: list[int], runner: _Runner) -> None:
        self.host = host
        self._specs = {s.name: s for s in specs}
        self._ports = dict(zip(self._specs, ports, strict=True))
        self._runner = runner
        assert runner.model is not None
        self.model: BoxModel = runner.model

    @property
    def engines(self) -> tuple[str, ...]:
        return tuple(self._specs)

    @property
    def speed(self) -> float:
        return self.model.speed

    @property
    def seed(self) -> int:
        return self.model.seed

    def _spec(self, name: str) -> EngineSpec:
        try:
            return self._specs[name]
        except KeyError:
            raise ConfigError(f"no engine {name!r} in this box ({', '.join(self._specs)})") from None

    def port(self, name: str) -> int:
        self._spec(name)
        return self._ports[name]

    def url(self, name: str) -> str:
        """``http://127.0.0.1:PORT``; the OpenAI base URL is this plus ``/v1``."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port(name)}"

    def profile(self, name: str) -> Profile:
        return self._spec(name).profile

    def model_id(self, name: str) -> str:
        return self._spec(name).profile.model_id

    def predicted_rate(self, name: str, n_streams: int, neighbours: Mapping[str, int] | None = None) -> float:
        """Ground truth: per-stream decode tok/s on ``name`` while ``neighbours`` decode that many streams."""
        self._spec(name)
        for other in neighbours or {}:
            self._spec(other)
        return self.model.predicted_rate(name, n_streams, neighbours)

    def stats(self, name: str) -> EngineStats:
        self._spec(name)
        return self.model.engines[name].stats()

    def timings(self, name: str) -> list[RequestTiming]:
        """Model-time stamps of ``name``'s last 4,096 finished requests, oldest first."""
        self._spec(name)
        return list(self.model.engines[name].timings)  # one C call: atomic against the box's thread

    def unix_ns(self, model_ns: int) -> int:
        """The model Unix time of one of the box's model-clock stamps (a `RequestTiming`'s)."""
        return self.model.clock.unix_ns(model_ns)

    def now_unix_s(self) -> float:
        """The box's model Unix time now, in seconds: what a runner's own records should stamp
        (its wall clock would place them apart from the cells spark-otel records)."""
        return self.unix_ns(self.model.clock.now_ns()) / _clock.NS_PER_S

    def gpu(self) -> dict[str, Any]:
        """The same readout ``GET /sim/gpu`` serves."""
        return self.model.gpu().as_dict()


@contextmanager
def run_box(
    engines: Mapping[str, str | Profile] | Iterable[str | EngineSpec],
    speed: float = 100.0,
    seed: int = 0,
    host: str = "127.0.0.1",
    ports: Mapping[str, int] | None = None,
    *,
    contention: float = 1.0,
    tracer_provider: TracerProvider | None = None,
) -> Iterator[Box]:
    """Serve simulated engines until the block ends.

    ``engines`` maps names to profiles (``{"qwen": "dense", "nemotron": "moe"}``) or lists
    `EngineSpec` objects or ``"NAME=PORT:PROFILE"`` strings. ``speed`` is how many times faster than
    real time the box runs (``float("inf")``: as fast as possible); ``seed`` makes unpinned output
    lengths reproducible; ``contention`` scales the cross-engine memory contention (0 turns it off).
    ``tracer_provider``: end vLLM's ``llm_request`` server span for every finished request into it,
    as ``vllm serve --otlp-traces-endpoint`` does (`tracing`).
    """
    try:
        import starlette  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as exc:
        raise ConfigError(f"the simulated engine needs {exc.name}: pip install 'spark-otel[sim]'") from None
    check_speed(speed)
    if not (contention >= 0 and math.isfinite(contention)):
        raise ConfigError(f"contention must be a finite number >= 0, got {contention!r}")
    specs = _specs(engines, ports)
    with contextlib.ExitStack() as held:
        # Take the clock before binding: a box at another speed fails here with no socket to leak.
        if math.isfinite(speed):  # an infinite box keeps a virtual clock of its own
            try:
                held.enter_context(model_time(speed))
            except ConfigError as exc:
                raise ConfigError(f"a simulated box at speed {speed:g} cannot start: {exc}") from None
        sockets: list[socket.socket] = []
        runner: _Runner | None = None
        try:
            for spec in specs:
                sockets.append(_bind(host, spec))
            bound_ports = [int(sock.getsockname()[1]) for sock in sockets]
            runner = _Runner(specs, sockets, float(speed), seed, contention, tracer_provider=tracer_provider)
            runner.start()
            if not runner.ready.wait(_START_TIMEOUT_S) or runner.error is not None or runner.model is None:
                raise ConfigError(f"the simulated box did not start: {runner.error!r}")
            yield Box(host, specs, bound_ports, runner)
        finally:
            if runner is not None:
                runner.stop()
            for sock in sockets:
                sock.close()
