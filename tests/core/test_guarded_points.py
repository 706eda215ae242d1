"""The eval-safety promise, at every guarded point (issue 18): a fault injected into a step
spark-otel records leaves the user's call exactly as it is bare, the span still ends, and the
fault is reported once, however often the step fails.

The guarded sites are read from the source (`source_sites`: every ``guard("...")`` and
``report_failure("...", ...)``); `FAULTS` names, for each site, the steps made to raise and the
scenarios they run in, and `test_every_guarded_site_in_the_source_has_a_fault_test` fails for a
site that has none. The fault is the one mock: the real step (a histogram's ``record``,
``Span.set_attributes``, ``opentelemetry.context.attach``, the governor's state file...) is
monkeypatched to raise, since no real peer fails on demand. Everything else is real: the openai
client and httpx2 over HTTP to a server on 127.0.0.1, the SDK's providers, the embedded store,
the governor's SQLite state, the receiver scraping a real /metrics endpoint.

Each case runs its scenario bare (nothing instrumented, no fault) once, then twice with the
fault in place, and checks: both calls return what the bare one returned (or raise the same
exception type with the same message); no span was left open and every span the fault does not
prevent was finished; the fault fired on every call and is in the logs exactly once.
"""

from __future__ import annotations

import ast
import asyncio
import contextvars
import inspect
import logging
import re
import sqlite3
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

import aiohttp
import httpcore2._backends.sync as httpcore_sync
import httpx2
import openai
import pytest
import requests
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import Span as SdkSpan
from opentelemetry.sdk.trace import SpanProcessor, Tracer, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from requests.structures import CaseInsensitiveDict
from tests.support.engine_server import MODEL, LocalServer
from tests.support.finished_spans import request_spans
from tests.support.metrics_server import MetricsServer
from tests.support.ports import free_ports

import spark_otel
from spark_otel import ConfigError, SparkOtelError, cells
from spark_otel import _semconv as sc
from spark_otel.cells import CellState
from spark_otel.deadline import astream_with_deadline, stream_with_deadline
from spark_otel.governor import Governor, govern, ungovern
from spark_otel.governor import state as governor_state
from spark_otel.governor.state import SharedState
from spark_otel.instrumentation import SparkOtelInstrumentor, _openai_patch, _raw_http, _request, _stream
from spark_otel.instrumentation._sse_scanner import SseScanner
from spark_otel.probe.prober import _Prober
from spark_otel.receivers import receiver as receiver_module
from spark_otel.receivers.receiver import Receiver
from spark_otel.records.probe_report import ProbeLevel, ProbeSettings
from spark_otel.store import Store
from spark_otel.store.exporters import StoreMetricExporter, StoreSpanExporter
from spark_otel.telemetry import Telemetry, pipeline
from spark_otel.telemetry.instruments import instruments
from spark_otel.telemetry.providers import build_providers

SRC = Path(spark_otel.__file__).parent
MESSAGES = [{"role": "user", "content": "one two three"}]
USAGE = {"include_usage": True}
ENGINE = "e"
RULES = f"[[lane]]\nengine = '{ENGINE}'\ncells = 4\n"
VLLM_METRICS = (
    "# TYPE vllm:generation_tokens_total counter\n"
    'vllm:generation_tokens_total{engine="0",model_name="m"} 100.0\n'
    "# TYPE vllm:num_requests_running gauge\n"
    'vllm:num_requests_running{engine="0",model_name="m"} 3\n'
)


# -- the guarded sites, from the source ---------------------------------------------------------------


def _site_name(node: ast.expr) -> str | None:
    """A site's name as written: a literal, or an f-string with ``{}`` for each placeholder."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
    return None


def source_sites() -> dict[str, list[str]]:
    """Every guarded site in ``src/spark_otel``, with where it is (``<path>:<line>``)."""
    sites: dict[str, list[str]] = {}
    for path in sorted(SRC.rglob("*.py")):
        if path.name == "_guard.py":  # the boundary itself: its calls pass the caller's name on
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if not isinstance(node, ast.Call) or not node.args:
                continue
            func = node.func
            called = (
                func.id
                if isinstance(func, ast.Name)
                else func.attr
                if isinstance(func, ast.Attribute)
                else ""
            )
            if called not in ("guard", "report_failure"):
                continue
            where = f"{path.relative_to(SRC)}:{node.lineno}"
            name = _site_name(node.args[0])
            sites.setdefault(name if name is not None else f"<not a literal: {where}>", []).append(where)
    return sites


def _site_pattern(site: str) -> str:
    """The WARNING `report_failure` logs first for ``site`` (``{}``: what the f-string filled in)."""
    name = re.escape(site).replace(r"\{\}", ".+")
    return f"spark_otel: {name} failed; the call goes on untouched(: .+)?"


# -- what a test sees: open spans, the fault's firings ------------------------------------------------


class OpenSpans(SpanProcessor):
    """The spans started and not yet ended."""

    def __init__(self) -> None:
        self.names: dict[int, str] = {}

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        self.names[span.context.span_id] = span.name

    def on_end(self, span: Any) -> None:
        self.names.pop(span.context.span_id, None)


class InjectedFault(RuntimeError):
    """What a step made to fail raises."""


class InjectedDatabaseFault(InjectedFault, sqlite3.OperationalError):
    """The governor's state file failing, as SQLite says it (a locked or vanished file)."""


When = Callable[[FrameType, tuple[Any, ...], dict[str, Any]], bool]


# A function as mutmut's copy names it (`x_<name>_orig`, `xǁ<Class>ǁ<name>__mutmut_<n>`), and the
# module of the trampoline it adds between a function and its caller.
_MUTMUT_NAME = re.compile(r"^x(?:_|ǁ[^ǁ]+ǁ)(?P<name>.+?)(?:_orig|__mutmut_\d+)$")
_MUTMUT_MODULE = "mutmut."


def _callers(frame: FrameType | None) -> Iterator[tuple[str, str]]:
    """``(module, function)`` of ``frame`` and each frame above it, as the source names them: under
    mutmut, its trampolines are skipped and its copies' names read as the originals', so a fault
    finds the same step whether the code runs as written or as mutmut's copy."""
    while frame is not None:
        module = frame.f_globals.get("__name__", "")
        if not module.startswith(_MUTMUT_MODULE):
            name = frame.f_code.co_name
            mangled = _MUTMUT_NAME.match(name)
            yield module, mangled["name"] if mangled else name
        frame = frame.f_back


def called_from(prefix: str, function: str | None = None, *, depth: int = 1) -> When:
    """Fail only when the step is called from code in module ``prefix``(.*) (and ``function``),
    ``depth`` frames up (1: the step's direct caller): the same library step called by the SDK,
    the client or another layer of spark-otel goes on working."""

    def when(frame: FrameType, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
        for level, (module, name) in enumerate(_callers(frame), start=1):
            if level == depth:
                return (module == prefix or module.startswith(prefix + ".")) and (
                    function is None or name == function
                )
        return False

    return when


class Injector:
    """Makes one step raise on every call, and counts the calls that raised."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, harness: Harness) -> None:
        self.monkeypatch = monkeypatch
        self.harness = harness
        self.fired = 0

    def fail(
        self, owner: Any, name: str, *, when: When | None = None, exc: type[Exception] = InjectedFault
    ) -> None:
        original = getattr(owner, name)
        injector = self

        def failing(*args: Any, **kwargs: Any) -> Any:
            if when is None or when(sys._getframe(1), args, kwargs):
                injector.fired += 1
                raise exc(f"injected into {name} (#{injector.fired})")
            return original(*args, **kwargs)

        self.monkeypatch.setattr(owner, name, failing)

    def fail_instrument(self, field_name: str, method: str, *, when: When | None = None) -> None:
        """One of spark-otel's SDK instruments (those `instruments(meter_provider)` made)."""
        self.fail(getattr(instruments(self.harness.meter_provider), field_name), method, when=when)

    def fail_bulk(self, field_name: str, method: str) -> None:
        """One of the bulk histograms requests record into on a provider spark-otel built."""
        runtime = SparkOtelInstrumentor._runtime
        assert runtime is not None
        assert runtime.bulk is not None, "the bulk path needs providers spark-otel built"
        self.fail(getattr(runtime.bulk, field_name), method)


def _positive(frame: FrameType, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    return bool(args[0] > 0)


def _negative(frame: FrameType, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    return bool(args[0] < 0)


class _FailingReset:
    """`cells._current_cell` whose ``reset`` fails (what leaving from another context does)."""

    def __init__(self, var: contextvars.ContextVar[Any], injector: Injector) -> None:
        self.var = var
        self.injector = injector

    def get(self, *default: Any) -> Any:
        return self.var.get(*default)

    def set(self, value: Any) -> contextvars.Token[Any]:
        return self.var.set(value)

    def reset(self, token: contextvars.Token[Any]) -> None:
        self.injector.fired += 1
        raise InjectedFault("injected into ContextVar.reset")


class _TestGpu:
    """A GPU source (there is no GPU here); its ``close`` is the step a fault breaks."""

    kind = "test"

    def read(self) -> list[Any]:
        return []

    def close(self) -> None:
        pass


# -- the user's calls -----------------------------------------------------------------------------------


class _NoCell:
    """What a bare run has instead of `spark_otel.cell`: nothing (``as state`` gives None)."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None

    async def __aenter__(self) -> None:
        return None

    async def __aexit__(self, *exc: object) -> None:
        return None

    def __call__(self, func: Any) -> Any:
        return func


@dataclass
class World:
    """What a scenario runs against; ``cell_kwargs`` None is the bare run (no cell at all)."""

    base_url: str
    metrics_url: str
    tmp: Path
    cell_kwargs: dict[str, Any] | None = None
    renewals: int = 0
    """The governor's lease thread's tries to renew so far."""
    _renewal: threading.Condition = field(default_factory=threading.Condition)
    _made: int = 0

    def cell(self, *args: Any, **kwargs: Any) -> Any:
        if self.cell_kwargs is None:
            return _NoCell()
        return spark_otel.cell(*args, **kwargs, **self.cell_kwargs)

    def renewed(self) -> None:
        with self._renewal:
            self.renewals += 1
            self._renewal.notify_all()

    def await_renewal(self) -> None:
        """Until the lease thread tries to renew once more (a bare run has no governor: at once)."""
        if self.cell_kwargs is None:
            return
        with self._renewal:
            start = self.renewals
            self._renewal.wait_for(lambda: self.renewals > start, timeout=10)

    def path(self, name: str) -> Path:
        self._made += 1
        return self.tmp / f"{self._made}-{name}"


@dataclass(frozen=True)
class Scenario:
    run: Callable[[World, list[Any]], Any]
    requests: int
    """GenAI request spans one run makes when instrumented."""
    cells: int


SCENARIOS: dict[str, Scenario] = {}


def scenario(name: str, *, requests: int = 1, cells: int = 0) -> Callable[[Any], Any]:
    def register(run: Any) -> Any:
        SCENARIOS[name] = Scenario(run, requests, cells)
        return run

    return register


def outcome(name: str, world: World) -> tuple[Any, ...]:
    """What the user's call gave: its value, or its exception's type and message; and what it saw
    before (chunks, lines)."""
    run = SCENARIOS[name].run
    seen: list[Any] = []
    try:
        if inspect.iscoroutinefunction(run):
            value = asyncio.run(run(world, seen))
        else:  # in a copy of the context, so a fault that leaks a context var leaks it there only
            value = contextvars.copy_context().run(run, world, seen)
    except Exception as exc:
        return ("raised", type(exc), str(exc), seen)
    return ("returned", value, seen)


def _client(w: World) -> openai.OpenAI:
    return openai.OpenAI(base_url=w.base_url, api_key="sk", max_retries=0)


def _aclient(w: World) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=w.base_url, api_key="sk", max_retries=0)


def _create(model: str = MODEL, **more: Any) -> dict[str, Any]:
    return {"model": model, "messages": MESSAGES, "max_tokens": 4, **more}


@scenario("chat")
def _chat(w: World, seen: list[Any]) -> Any:
    with _client(w) as client:
        return client.chat.completions.create(**_create()).model_dump()


@scenario("chat-404")
def _chat_404(w: World, seen: list[Any]) -> Any:
    with _client(w) as client:
        return client.chat.completions.create(**_create("no-such-model")).model_dump()


@scenario("chat-stream")
def _chat_stream(w: World, seen: list[Any]) -> Any:
    with _client(w) as client:
        for chunk in client.chat.completions.create(**_create(stream=True, stream_options=USAGE)):
            seen.append(chunk.model_dump())
    return len(seen)


@scenario("chat-stream-break")
def _chat_stream_break(w: World, seen: list[Any]) -> Any:
    with _client(w) as client:
        stream = client.chat.completions.create(**_create(stream=True, stream_options=USAGE))
        for chunk in stream:
            seen.append(chunk.model_dump())
            if len(seen) == 2:
                break
        stream.close()
    return len(seen)


@scenario("chat-stream-error")
def _chat_stream_error(w: World, seen: list[Any]) -> Any:
    with _client(w) as client:
        stream = client.chat.completions.create(**_create(stream=True, extra_body={"fail_after": 2}))
        for chunk in stream:
            seen.append(chunk.model_dump())
    return len(seen)


@scenario("chat-raw-response-stream")
def _chat_raw_response_stream(w: World, seen: list[Any]) -> Any:
    with _client(w) as client:
        raw = client.chat.completions.with_raw_response.create(**_create(stream=True))
        for chunk in raw.parse():
            seen.append(chunk.model_dump())
    return raw.status_code


@scenario("achat")
async def _achat(w: World, seen: list[Any]) -> Any:
    async with _aclient(w) as client:
        return (await client.chat.completions.create(**_create())).model_dump()


@scenario("achat-404")
async def _achat_404(w: World, seen: list[Any]) -> Any:
    async with _aclient(w) as client:
        return (await client.chat.completions.create(**_create("no-such-model"))).model_dump()


@scenario("achat-stream")
async def _achat_stream(w: World, seen: list[Any]) -> Any:
    async with _aclient(w) as client:
        async for chunk in await client.chat.completions.create(**_create(stream=True, stream_options=USAGE)):
            seen.append(chunk.model_dump())
    return len(seen)


@scenario("achat-stream-break")
async def _achat_stream_break(w: World, seen: list[Any]) -> Any:
    async with _aclient(w) as client:
        stream = await client.chat.completions.create(**_create(stream=True, stream_options=USAGE))
        async with stream:
            async for chunk in stream:
                seen.append(chunk.model_dump())
                if len(seen) == 2:
                    break
    return len(seen)


@scenario("achat-stream-error")
async def _achat_stream_error(w: World, seen: list[Any]) -> Any:
    async with _aclient(w) as client:
        async for chunk in await client.chat.completions.create(
            **_create(stream=True, extra_body={"fail_after": 2})
        ):
            seen.append(chunk.model_dump())
    return len(seen)


@scenario("achat-raw-response-stream")
async def _achat_raw_response_stream(w: World, seen: list[Any]) -> Any:
    async with _aclient(w) as client:
        raw = await client.chat.completions.with_raw_response.create(**_create(stream=True))
        async for chunk in raw.parse():
            seen.append(chunk.model_dump())
    return raw.status_code


@scenario("raw")
def _raw(w: World, seen: list[Any]) -> Any:
    with httpx2.Client() as client:
        response = client.post(f"{w.base_url}/chat/completions", json=_create())
        return response.status_code, response.json()


@scenario("raw-404")
def _raw_404(w: World, seen: list[Any]) -> Any:
    with httpx2.Client() as client:
        response = client.post(f"{w.base_url}/chat/completions", json=_create("no-such-model"))
        seen.append(response.json())
        response.raise_for_status()
        return response.status_code


@scenario("raw-stream")
def _raw_stream(w: World, seen: list[Any]) -> Any:
    body = _create(stream=True, stream_options=USAGE)
    with httpx2.Client() as client, client.stream("POST", f"{w.base_url}/chat/completions", json=body) as r:
        seen.extend(line for line in r.iter_lines() if line)
    return len(seen)


@scenario("raw-stream-break")
def _raw_stream_break(w: World, seen: list[Any]) -> Any:
    body = _create(stream=True, stream_options=USAGE)
    with httpx2.Client() as client, client.stream("POST", f"{w.base_url}/chat/completions", json=body) as r:
        for line in r.iter_lines():
            if line:
                seen.append(line)
            if len(seen) == 2:
                break
    return len(seen)


@scenario("araw")
async def _araw(w: World, seen: list[Any]) -> Any:
    async with httpx2.AsyncClient() as client:
        response = await client.post(f"{w.base_url}/chat/completions", json=_create())
        return response.status_code, response.json()


@scenario("araw-stream")
async def _araw_stream(w: World, seen: list[Any]) -> Any:
    body = _create(stream=True, stream_options=USAGE)
    async with (
        httpx2.AsyncClient() as client,
        client.stream("POST", f"{w.base_url}/chat/completions", json=body) as r,
    ):
        seen.extend([line async for line in r.aiter_lines() if line])
    return len(seen)


@scenario("rq")
def _rq(w: World, seen: list[Any]) -> Any:
    response = requests.post(f"{w.base_url}/chat/completions", json=_create(), timeout=30)
    return response.status_code, response.json()


@scenario("rq-stream")
def _rq_stream(w: World, seen: list[Any]) -> Any:
    body = _create(stream=True, stream_options=USAGE)
    with requests.post(f"{w.base_url}/chat/completions", json=body, stream=True, timeout=30) as r:
        seen.extend(line for line in r.iter_lines() if line)
    return len(seen)


@scenario("aio")
async def _aio(w: World, seen: list[Any]) -> Any:
    async with (
        aiohttp.ClientSession() as session,
        session.post(f"{w.base_url}/chat/completions", json=_create()) as response,
    ):
        return response.status, await response.json()


@scenario("aio-stream")
async def _aio_stream(w: World, seen: list[Any]) -> Any:
    body = _create(stream=True, stream_options=USAGE)
    async with (
        aiohttp.ClientSession() as session,
        session.post(f"{w.base_url}/chat/completions", json=body) as response,
    ):
        seen.extend([line async for line in response.content if line.strip()])
    return len(seen)


@scenario("cell-returns", cells=1)
def _cell_returns(w: World, seen: list[Any]) -> Any:
    with w.cell("ev", "c1", engine=ENGINE), _client(w) as client:
        return client.chat.completions.create(**_create()).model_dump()


@scenario("cell-raises", cells=1)
def _cell_raises(w: World, seen: list[Any]) -> Any:
    with w.cell("ev", "c2", engine=ENGINE), _client(w) as client:
        seen.append(client.chat.completions.create(**_create()).model_dump())
        raise ValueError("the eval's own failure")


@scenario("cell-decorated", cells=1)
def _cell_decorated(w: World, seen: list[Any]) -> Any:
    @w.cell("ev", engine=ENGINE)
    def judge(prompt: str, cell_id: str) -> Any:
        with _client(w) as client:
            return client.chat.completions.create(**_create()).model_dump()

    return judge("x", cell_id="c3")


@scenario("cell-deadline", cells=1)
def _cell_deadline(w: World, seen: list[Any]) -> Any:
    """A cell judged cut off at its deadline, with findings kept: every end-of-cell record runs."""
    with w.cell("ev", "c4", engine=ENGINE, deadline_s=600) as state, _client(w) as client:
        answer = client.chat.completions.create(**_create()).model_dump()
        if state is not None:
            state.add_findings(2)
            state.set_status("deadline")
        return answer


@scenario("acell-returns", cells=1)
async def _acell_returns(w: World, seen: list[Any]) -> Any:
    async with w.cell("ev", "c5", engine=ENGINE), _aclient(w) as client:
        return (await client.chat.completions.create(**_create())).model_dump()


@scenario("acell-raises", cells=1)
async def _acell_raises(w: World, seen: list[Any]) -> Any:
    async with w.cell("ev", "c6", engine=ENGINE), _aclient(w) as client:
        seen.append((await client.chat.completions.create(**_create())).model_dump())
        raise ValueError("the eval's own failure")


@scenario("cell-plain-returns", requests=0, cells=1)
def _cell_plain_returns(w: World, seen: list[Any]) -> Any:
    with w.cell("ev", "c7", engine=ENGINE):
        return "answer"


@scenario("cell-plain-raises", requests=0, cells=1)
def _cell_plain_raises(w: World, seen: list[Any]) -> Any:
    with w.cell("ev", "c8", engine=ENGINE):
        raise ValueError("the eval's own failure")


@scenario("cell-slow", requests=0, cells=1)
def _cell_slow(w: World, seen: list[Any]) -> Any:
    """A cell that holds its governor slot until its lease has been renewed."""
    with w.cell("ev", "c9", engine=ENGINE):
        w.await_renewal()
        return "answer"


def _kept(result: Any) -> Any:
    return result.model_dump(exclude={"timings"})


@scenario("deadline-openai")
def _deadline_openai(w: World, seen: list[Any]) -> Any:
    with _client(w) as client:
        return _kept(stream_with_deadline(client, deadline_s=120, **_create()))


@scenario("deadline-raw")
def _deadline_raw(w: World, seen: list[Any]) -> Any:
    with httpx2.Client(base_url=w.base_url) as client:
        return _kept(stream_with_deadline(client, deadline_s=120, **_create()))


@scenario("adeadline-openai")
async def _adeadline_openai(w: World, seen: list[Any]) -> Any:
    async with _aclient(w) as client:
        return _kept(await astream_with_deadline(client, deadline_s=120, **_create()))


@scenario("adeadline-raw")
async def _adeadline_raw(w: World, seen: list[Any]) -> Any:
    async with httpx2.AsyncClient(base_url=w.base_url) as client:
        return _kept(await astream_with_deadline(client, deadline_s=120, **_create()))


@scenario("deadline-cell", cells=1)
def _deadline_cell(w: World, seen: list[Any]) -> Any:
    with w.cell("ev", "c10", engine=ENGINE), _client(w) as client:
        return _kept(stream_with_deadline(client, deadline_s=120, **_create()))


@scenario("adeadline-cell", cells=1)
async def _adeadline_cell(w: World, seen: list[Any]) -> Any:
    async with w.cell("ev", "c11", engine=ENGINE), _aclient(w) as client:
        return _kept(await astream_with_deadline(client, deadline_s=120, **_create()))


@scenario("probe-label-check", requests=0)
def _probe_label_check(w: World, seen: list[Any]) -> Any:
    with Store(w.path("store.sqlite")) as store:
        prober = _Prober(w.base_url, ProbeSettings(engine="qwen", model=MODEL), store)
        try:
            return prober.check_label()
        finally:
            asyncio.run(prober.control.aclose())


@scenario("probe-record", requests=0)
def _probe_record(w: World, seen: list[Any]) -> Any:
    with Store(w.path("store.sqlite")) as store:
        prober = _Prober(w.base_url, ProbeSettings(engine="qwen", model=MODEL), store)
        try:
            level = ProbeLevel(
                streams=2, start_unix_ns=1, end_unix_ns=2, wall_s=1.0, tokens_expected=8, probe_tokens=16
            )
            return prober.record(level), [window.streams for window in store.windows()]
        finally:
            asyncio.run(prober.control.aclose())


@scenario("receiver-scrape", requests=0)
def _receiver_scrape(w: World, seen: list[Any]) -> Any:
    with Store(w.path("store.sqlite")) as store:
        receiver = Receiver({"e": w.metrics_url}, meter_provider=MeterProvider(), store=store)
        try:
            return {name: type(result).__name__ for name, result in receiver.scrape_once().items()}
        finally:
            receiver.stop()


@scenario("receiver-collect", requests=0)
def _receiver_collect(w: World, seen: list[Any]) -> Any:
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    receiver = Receiver({"e": w.metrics_url}, meter_provider=provider)
    try:
        receiver.scrape_once()
        for _ in range(2):  # every collection calls every callback
            data = reader.get_metrics_data()
        up = [
            point.value
            for rm in data.resource_metrics
            for sm in rm.scope_metrics
            for metric in sm.metrics
            if metric.name == sc.ENGINE_UP
            for point in metric.data.data_points
        ]
        return up
    finally:
        receiver.stop()
        provider.shutdown()


@scenario("receiver-stop", requests=0)
def _receiver_stop(w: World, seen: list[Any]) -> Any:
    receiver = Receiver([], gpu=_TestGpu(), close_gpu=True, meter_provider=MeterProvider())
    return receiver.stop()


# -- the faults -----------------------------------------------------------------------------------------

OPENAI_PLAIN = ("chat", "achat")
OPENAI_ERRORS = ("chat-404", "achat-404", "chat-stream-error", "achat-stream-error")
OPENAI_STREAMS = (
    "chat-stream",
    "chat-stream-break",
    "chat-stream-error",
    "achat-stream",
    "achat-stream-break",
    "achat-stream-error",
)
OPENAI_ALL = (*OPENAI_PLAIN, *OPENAI_STREAMS, "chat-404", "achat-404")
RAW_PLAIN = ("raw", "araw")
RAW_STREAMS = ("raw-stream", "raw-stream-break", "araw-stream")
RAW_ALL = (*RAW_PLAIN, *RAW_STREAMS, "raw-404")
OTHER_CLIENTS_STREAMS = ("rq-stream", "aio-stream")
OTHER_CLIENTS = ("rq", "aio", *OTHER_CLIENTS_STREAMS)
REQUESTS_SOME = ("chat", "chat-404", "achat-stream", "chat-stream-break", "raw-stream", "araw")
CELLS = ("cell-returns", "cell-raises", "cell-decorated", "acell-returns", "acell-raises")
CELLS_SOME = ("cell-returns", "acell-raises")
CELL_ERRORS = ("cell-raises", "acell-raises", "cell-deadline")
DEADLINE_SYNC = ("deadline-openai", "deadline-raw")


@dataclass(frozen=True)
class Fault:
    site: str | None
    """The guarded site that must report it; None for a step outside spark-otel's guards."""
    step: str
    inject: Callable[[Injector], None]
    scenarios: tuple[str, ...]
    env: frozenset[str] = frozenset()
    """``own``: providers spark-otel built (bulk histograms, the store exporter); ``governed``: a
    governor in force; ``contrib``: the contrib GenAI instrumentation wraps outside spark-otel;
    ``default-setup``: no telemetry in force, cells set it up; ``otlp``: telemetry that exports
    over OTLP in force."""
    instrument: tuple[tuple[str, bool], ...] = ()
    lost: frozenset[str] = frozenset()
    """Spans the fault keeps from starting at all (``request``, ``cell``): the call goes on bare."""
    exc: type[BaseException] = InjectedFault
    counted: bool = True
    """Whether the injector counts the firings (False: a real fault, a broken rules file)."""
    deferred: bool = False
    """The step runs after the calls, on the SDK's export worker (at the flush), not in them."""


def _f(
    site: str | None,
    step: str,
    inject: Callable[[Injector], None],
    scenarios: tuple[str, ...],
    *,
    env: tuple[str, ...] = (),
    instrument: tuple[tuple[str, bool], ...] = (),
    lost: tuple[str, ...] = (),
    exc: type[BaseException] = InjectedFault,
    counted: bool = True,
    deferred: bool = False,
) -> Fault:
    return Fault(
        site, step, inject, scenarios, frozenset(env), instrument, frozenset(lost), exc, counted, deferred
    )


def _broken_rules(inj: Injector) -> None:
    inj.harness.rules_path.write_text("[[lane]]\nengine = \n")  # not TOML: a hand edit gone wrong


def _failing_reset(inj: Injector) -> None:
    inj.monkeypatch.setattr(cells, "_current_cell", _FailingReset(cells._current_cell, inj))


def _failing_lease(inj: Injector) -> None:
    inj.monkeypatch.setattr(governor_state, "_RENEW_S", 0.01)
    inj.fail(SharedState, "renew", exc=InjectedDatabaseFault)
    failing, world = SharedState.renew, inj.harness.world

    def renew(state: SharedState, *args: Any) -> None:
        try:
            failing(state, *args)
        finally:
            world.renewed()

    inj.monkeypatch.setattr(SharedState, "renew", renew)


def _failing_progress(inj: Injector) -> None:
    """A cell's live progress raises at every renewal that would publish it; the renewal goes on."""
    inj.monkeypatch.setattr(governor_state, "_RENEW_S", 0.01)
    inj.fail(cells.CellState, "live_progress")
    renew, world = SharedState.renew, inj.harness.world

    def renewing(state: SharedState, *args: Any) -> None:
        try:
            renew(state, *args)
        finally:
            world.renewed()

    inj.monkeypatch.setattr(SharedState, "renew", renewing)


def _processor_raising_on_end(module: str) -> Callable[[Injector], None]:
    """A span processor (the user's own, say) whose ``on_end`` raises after doing its work, for
    spans ended by ``module``: the span is ended, and the exception reaches whoever ended it."""

    def inject(inj: Injector) -> None:
        original = OpenSpans.on_end
        ended_here = called_from(module, depth=3)  # on_end <- the SDK's processors <- Span.end <- module

        def on_end(self: OpenSpans, span: Any) -> None:
            original(self, span)
            if ended_here(sys._getframe(1), (), {}):
                inj.fired += 1
                raise InjectedFault(f"injected into on_end (#{inj.fired})")

        inj.monkeypatch.setattr(OpenSpans, "on_end", on_end)

    return inject


FROM_REQUEST = called_from("spark_otel.instrumentation._request")
# A request's span starts in `RequestTelemetry`, made by the openai layer or by the raw layer.
OPENAI_SPAN_START = called_from("spark_otel.instrumentation._openai_patch", depth=2)
RAW_SPAN_START = called_from("spark_otel.instrumentation._raw_http", depth=2)
FROM_CELLS = called_from("spark_otel.cells")
FROM_OPENAI_PATCH = called_from("spark_otel.instrumentation._openai_patch")
FROM_SPARK_OTEL = called_from("spark_otel")
FROM_RECEIVER_CALLBACK = called_from("spark_otel.receivers.receiver", "observe")

FAULTS: tuple[Fault, ...] = (
    # -- a request, through the openai SDK ----------------------------------------------------------
    # The openai layer failing to start leaves the call to the raw layer below: its span, not none.
    _f("openai request start", "span start", lambda i: i.fail(Tracer, "start_span", when=OPENAI_SPAN_START),
       OPENAI_ALL),
    _f("openai request start", "server address", lambda i: i.fail(_openai_patch, "_server"),
       ("chat", "achat-stream-break")),
    _f("openai request start", "traceparent",
       lambda i: i.fail(_request.RequestTelemetry, "traceparent_headers"),
       ("chat", "achat-stream"), instrument=(("inject_traceparent", True),)),
    _f("openai request start", "include_usage", lambda i: i.fail(_openai_patch, "_include_usage"),
       ("chat-stream", "achat-stream-break"), instrument=(("include_usage", True),)),
    _f("openai include_usage", "include_usage", lambda i: i.fail(_openai_patch, "_include_usage"),
       ("chat-raw-response-stream", "achat-raw-response-stream"), instrument=(("include_usage", True),)),
    _f("openai span context", "attach", lambda i: i.fail(otel_context, "attach", when=FROM_OPENAI_PATCH),
       OPENAI_ALL),
    _f("openai span context", "detach", lambda i: i.fail(otel_context, "detach", when=FROM_OPENAI_PATCH),
       OPENAI_ALL),
    _f("openai stream wrap", "stream state", lambda i: i.fail(_stream.StreamState, "__init__"),
       OPENAI_STREAMS),
    _f("openai response", "response fields", lambda i: i.fail(_request, "get_field"), OPENAI_PLAIN),
    _f("stream chunk bookkeeping", "chunk", lambda i: i.fail(_stream.StreamState, "on_chunk"),
       OPENAI_STREAMS),
    _f("request span end", "span processor on_end",
       _processor_raising_on_end("spark_otel.instrumentation._request"), REQUESTS_SOME),
    # -- a request, over raw httpx2 -----------------------------------------------------------------
    _f("httpx request start", "span start", lambda i: i.fail(Tracer, "start_span", when=RAW_SPAN_START),
       RAW_ALL, lost=("request",)),
    _f("{} traceparent removal", "header removal",
       lambda i: i.fail(httpx2.Headers, "pop", when=lambda f, a, k: a[1] == "traceparent"),
       RAW_ALL, instrument=(("inject_traceparent", True),)),
    _f("httpx response", "response fields", lambda i: i.fail(_request, "get_field"), RAW_PLAIN),
    _f("httpx stream wrap", "observer", lambda i: i.fail(_raw_http.BodyObserver, "__init__"), RAW_STREAMS),
    _f("raw stream bookkeeping", "sse scanner", lambda i: i.fail(SseScanner, "feed"),
       (*RAW_STREAMS, *OTHER_CLIENTS_STREAMS)),
    _f("{} response finalize", "sse summary", lambda i: i.fail(SseScanner, "summary"),
       (*RAW_STREAMS, *OTHER_CLIENTS_STREAMS)),
    # -- a request, over requests and aiohttp -------------------------------------------------------
    _f("requests request start", "span start", lambda i: i.fail(Tracer, "start_span", when=RAW_SPAN_START),
       ("rq", "rq-stream"), lost=("request",)),
    _f("aiohttp request start", "span start", lambda i: i.fail(Tracer, "start_span", when=RAW_SPAN_START),
       ("aio", "aio-stream"), lost=("request",)),
    _f("aiohttp request start", "traceparent",
       lambda i: i.fail(_request.RequestTelemetry, "traceparent_headers"),
       ("aio",), instrument=(("inject_traceparent", True),)),
    _f("{} traceparent removal", "header removal",
       lambda i: i.fail(CaseInsensitiveDict, "pop", when=lambda f, a, k: a[1] == "traceparent"),
       ("rq", "rq-stream"), instrument=(("inject_traceparent", True),)),
    _f("requests stream wrap", "observer", lambda i: i.fail(_raw_http.BodyObserver, "__init__"),
       ("rq", "rq-stream")),
    _f("aiohttp stream wrap", "observer", lambda i: i.fail(_raw_http.BodyObserver, "__init__"),
       ("aio", "aio-stream")),
    # -- a request's end: span attributes, each histogram, the cell's share -------------------------
    _f("request finalize", "span attributes", lambda i: i.fail(SdkSpan, "set_attributes", when=FROM_REQUEST),
       (*OPENAI_ALL, *RAW_ALL, *OTHER_CLIENTS)),
    _f("request finalize", "span status", lambda i: i.fail(SdkSpan, "set_status", when=FROM_REQUEST),
       (*OPENAI_ERRORS, "raw-404")),
    _f("request finalize", "duration histogram", lambda i: i.fail_instrument("operation_duration", "record"),
       (*OPENAI_ALL, *RAW_ALL)),
    _f("request finalize", "token histogram", lambda i: i.fail_instrument("token_usage", "record"),
       ("chat", "achat", "chat-stream", "achat-stream", "raw", "araw-stream")),
    _f("request finalize", "first-chunk histogram",
       lambda i: i.fail_instrument("time_to_first_chunk", "record"), (*OPENAI_STREAMS, *RAW_STREAMS)),
    _f("request finalize", "bulk duration histogram", lambda i: i.fail_bulk("duration", "record"),
       REQUESTS_SOME, env=("own",)),
    _f("request finalize", "bulk token histogram", lambda i: i.fail_bulk("tokens", "record"),
       ("chat", "achat-stream", "raw-stream", "araw"), env=("own",)),
    _f("request finalize", "bulk first-chunk histogram", lambda i: i.fail_bulk("first_chunk", "record"),
       ("chat-stream", "achat-stream-break", "raw-stream", "araw-stream"), env=("own",)),
    _f("request finalize", "cell accounting", lambda i: i.fail(CellState, "add_request"), CELLS),
    _f("chunk metrics", "per-chunk histogram", lambda i: i.fail_instrument("time_per_output_chunk", "record"),
       (*OPENAI_STREAMS, *RAW_STREAMS)),
    _f("chunk metrics", "bulk per-chunk histogram", lambda i: i.fail_bulk("chunks", "record_many"),
       ("chat-stream", "achat-stream-error", "raw-stream-break", "araw-stream"), env=("own",)),
    _f("request finalize beside another instrumentation", "cell accounting",
       lambda i: i.fail(CellState, "add_request"), CELLS, env=("contrib",)),
    # -- a cell ---------------------------------------------------------------------------------------
    _f("telemetry setup for a cell", "configure", lambda i: i.fail(spark_otel.telemetry, "ensure_telemetry"),
       ("cell-plain-returns", "cell-plain-raises"), env=("default-setup",)),
    _f("cell span start", "span start", lambda i: i.fail(Tracer, "start_span", when=FROM_CELLS),
       CELLS, lost=("cell",)),
    _f("cell span context attach", "attach", lambda i: i.fail(otel_context, "attach", when=FROM_CELLS),
       CELLS),
    _f("cell span context detach", "detach", lambda i: i.fail(otel_context, "detach", when=FROM_CELLS),
       CELLS),
    _f("cell context reset", "contextvar reset", _failing_reset, CELLS),
    _f("cell start metrics", "in-flight +1",
       lambda i: i.fail_instrument("cells_in_flight", "add", when=_positive), CELLS),
    _f("cell in-flight metric", "in-flight -1",
       lambda i: i.fail_instrument("cells_in_flight", "add", when=_negative), CELLS),
    _f("cell finish", "span attributes", lambda i: i.fail(SdkSpan, "set_attributes", when=FROM_CELLS), CELLS),
    _f("cell finish", "error.type", lambda i: i.fail(SdkSpan, "set_attribute", when=FROM_CELLS), CELL_ERRORS),
    _f("cell finish", "span status", lambda i: i.fail(SdkSpan, "set_status", when=FROM_CELLS), CELL_ERRORS),
    _f("cell finish", "cell counter", lambda i: i.fail_instrument("cells", "add"), CELLS),
    _f("cell finish", "duration histogram", lambda i: i.fail_instrument("cell_duration", "record"), CELLS),
    _f("cell finish", "token histogram", lambda i: i.fail_instrument("cell_tokens", "record"), CELLS_SOME),
    _f("cell finish", "decode-rate histogram", lambda i: i.fail_instrument("cell_decode_rate", "record"),
       CELLS_SOME),
    _f("cell finish", "deadline-hit counter", lambda i: i.fail_instrument("cell_deadline_hits", "add"),
       ("cell-deadline",)),
    _f("cell finish", "findings counter", lambda i: i.fail_instrument("cell_salvaged_findings", "add"),
       ("cell-deadline",)),
    # -- a governed cell ------------------------------------------------------------------------------
    _f("governor admission", "rules", lambda i: i.fail(Governor, "rules"), CELLS_SOME, env=("governed",)),
    _f("governor admission", "admit",
       lambda i: (i.fail(Governor, "admit"), i.fail(Governor, "aadmit")), CELLS, env=("governed",)),
    _f("governor release", "release", lambda i: i.fail(Governor, "release"), CELLS, env=("governed",)),
    _f("governor wait report", "wait report", lambda i: i.fail(Governor, "waited_past_deadline"),
       CELLS_SOME, env=("governed",)),
    _f("cell span end", "span processor on_end", _processor_raising_on_end("spark_otel.cells"), CELLS_SOME),
    _f("governor rules {}", "broken rules file", _broken_rules, CELLS_SOME, env=("governed",),
       exc=ConfigError, counted=False),
    _f("governor state {}", "state attempt",
       lambda i: i.fail(SharedState, "attempt", exc=InjectedDatabaseFault), CELLS_SOME, env=("governed",)),
    _f("governor state {}", "state release",
       lambda i: i.fail(SharedState, "release", exc=InjectedDatabaseFault), CELLS_SOME, env=("governed",)),
    _f("governor metrics", "slot gauge", lambda i: i.fail_instrument("governor_slots", "add"),
       CELLS_SOME, env=("governed",)),
    _f("governor metrics", "wait histogram", lambda i: i.fail_instrument("governor_wait", "record"),
       CELLS_SOME, env=("governed",)),
    _f("governor lease renewal", "lease renewal", _failing_lease, ("cell-slow",), env=("governed",),
       exc=InjectedDatabaseFault),
    _f("governor live progress", "progress registered", lambda i: i.fail(Governor, "running"), CELLS_SOME,
       env=("governed",)),
    _f("governor live progress", "progress", _failing_progress, ("cell-slow",), env=("governed",)),
    # -- a stream under a deadline --------------------------------------------------------------------
    _f("deadline stream close", "sdk stream close",
       lambda i: i.fail(openai.Stream, "close", when=FROM_SPARK_OTEL), ("deadline-openai",)),
    _f("deadline stream close", "raw response close",
       lambda i: i.fail(httpx2.Response, "close", when=FROM_SPARK_OTEL), ("deadline-raw",)),
    _f("deadline stream close", "async sdk stream close",
       lambda i: i.fail(openai.AsyncStream, "close", when=FROM_SPARK_OTEL), ("adeadline-openai",)),
    _f("deadline stream close", "async raw response close",
       lambda i: i.fail(httpx2.Response, "aclose", when=FROM_SPARK_OTEL), ("adeadline-raw",)),
    _f("deadline socket lookup", "socket",
       lambda i: i.fail(httpcore_sync.SyncStream, "get_extra_info",
                        when=lambda f, a, k: a[1] == "socket" and FROM_SPARK_OTEL(f, a, k)),
       DEADLINE_SYNC),
    _f("deadline release hook", "hook the stream's close",
       lambda i: i.fail(httpx2.SyncByteStream, "__setattr__", when=lambda f, a, k: a[1] == "close"),
       DEADLINE_SYNC),
    _f("deadline cell accounting", "cell accounting", lambda i: i.fail(CellState, "record_deadline_result"),
       ("deadline-cell", "adeadline-cell")),
    # -- the probe and the receiver (a daemon's loop, not an eval's call) -----------------------------
    _f("probe engine-label check", "store read",
       lambda i: i.fail(Store, "cells", when=called_from("spark_otel.probe")), ("probe-label-check",)),
    _f("probe load-window span", "span start",
       lambda i: i.fail(Tracer, "start_span", when=called_from("spark_otel.probe")), ("probe-record",),
       env=("otlp",)),
    _f("receiver store write", "store write",
       lambda i: i.fail(Store, "write_samples", when=called_from("spark_otel.receivers")),
       ("receiver-scrape",)),
    _f("engine metric callback", "metric value",
       lambda i: i.fail(receiver_module, "_metric_value", when=FROM_RECEIVER_CALLBACK),
       ("receiver-collect",)),
    _f("GPU source close", "gpu close", lambda i: i.fail(_TestGpu, "close"), ("receiver-stop",)),
    # -- the store exporter: the SDK's batch worker runs it, never the user's call --------------------
    _f(None, "store span exporter", lambda i: i.fail(StoreSpanExporter, "export"),
       ("chat", "acell-raises", "raw-stream"), env=("own",), deferred=True),
    _f(None, "store request write", lambda i: i.fail(Store, "write_requests"), ("chat", "achat-stream"),
       env=("own",), deferred=True),
    _f(None, "store cell write", lambda i: i.fail(Store, "write_cells"), ("cell-returns",), env=("own",),
       deferred=True),
    _f(None, "store metric exporter", lambda i: i.fail(StoreMetricExporter, "export"),
       ("achat-stream", "cell-raises"), env=("own",), deferred=True),
)  # fmt: skip

EXCLUDED: dict[str, str] = {
    "telemetry setup for instrument()": "runs once, inside instrument() itself, before any scenario's "
    "call; tests/fuzz/test_fuzz_library_boundary.py::test_instrument_with_an_unusable_store_goes_on "
    "makes it fail for real (four kinds of unusable store) and checks the eval goes on",
    "instrument() patch of {}": "runs once, inside the program's own import of requests or aiohttp, "
    "before any call; tests/instrumentation/test_raw_clients_on_import.py makes it fail there and "
    "checks the import goes on and the failure is reported once",
    **dict.fromkeys(
        (
            "inspect run start",
            "inspect task start",
            "inspect sample start",
            "inspect sample retry",
            "inspect sample scoring",
            "inspect sample outcome",
            "inspect sample end",
        ),
        "the Inspect hook's steps run inside a real Inspect eval, not these scenarios: "
        "tests/integrations/test_inspect_faults.py makes each fail and checks the eval is as it is bare "
        "and the fault reported once",
    ),
}
"""Guarded sites no per-call fault test covers, each with the reason why and where it is tested."""


def _case_id(fault: Fault, name: str) -> str:
    return "|".join([(fault.site or "outside guards").replace(" ", "-"), fault.step.replace(" ", "-"), name])


CASES = [pytest.param(fault, name, id=_case_id(fault, name)) for fault in FAULTS for name in fault.scenarios]


# -- the registry -------------------------------------------------------------------------------------


def test_every_guarded_site_in_the_source_has_a_fault_test() -> None:
    sites = source_sites()
    assert len(sites) > 30, sorted(sites)  # the scan itself works
    unnamed = sorted(s for s in sites if s.startswith("<"))
    assert unnamed == [], "name each guarded site with a literal (or an f-string), so it can be tested"
    covered = {fault.site for fault in FAULTS if fault.site is not None}
    missing = {site: sites[site] for site in sorted(set(sites) - covered - set(EXCLUDED))}
    assert missing == {}, (
        "guarded sites without a fault test: add them to FAULTS (or, with a reason, EXCLUDED)"
    )
    assert sorted(covered - set(sites)) == [], "FAULTS names sites the source no longer has"
    assert sorted(set(EXCLUDED) - set(sites)) == []
    assert sorted(set(EXCLUDED) & covered) == []


def test_every_scenario_is_used_and_every_fault_names_known_scenarios() -> None:
    used = {name for fault in FAULTS for name in fault.scenarios}
    assert used <= set(SCENARIOS)
    assert set(SCENARIOS) - used == set()


# -- the harness --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def engine() -> Iterator[LocalServer]:
    with LocalServer(free_ports(1)[0]) as server:
        yield server


@pytest.fixture(scope="module")
def metrics() -> Iterator[MetricsServer]:
    with MetricsServer() as server:
        server.set_text(VLLM_METRICS)
        yield server


@pytest.fixture(scope="module")
def bare_outcomes(engine: LocalServer) -> dict[str, tuple[Any, ...]]:
    """Each scenario's bare outcome, taken once per engine: its errors name the engine's URL, so an
    outcome kept from another engine (a test session run twice in one process, as mutmut does)
    would differ from the same call's."""
    return {}


@dataclass
class Harness:
    world: World
    tracer_provider: TracerProvider
    meter_provider: MeterProvider
    spans: InMemorySpanExporter
    open_spans: OpenSpans
    rules_path: Path
    injector: Injector | None = None
    cleanups: list[Callable[[], None]] = field(default_factory=list)

    def flush(self) -> None:
        self.tracer_provider.force_flush()
        self.meter_provider.force_flush()


@pytest.fixture
def harness_for(
    engine: LocalServer,
    metrics: MetricsServer,
    bare_outcomes: dict[str, tuple[Any, ...]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Callable[[Fault, str], Harness]]:
    """Sets up what a fault's environment asks for; the fault itself is undone first, at the end."""
    made: list[Harness] = []
    faults = pytest.MonkeyPatch()
    base_url = f"http://127.0.0.1:{engine.port}/v1"

    def setup(fault: Fault, name: str) -> Harness:
        if name not in bare_outcomes:  # the bare call: nothing instrumented, no fault, no cell
            assert not SparkOtelInstrumentor().is_instrumented
            bare_dir = tmp_path / "bare"
            bare_dir.mkdir(exist_ok=True)
            bare_outcomes[name] = outcome(name, World(base_url, metrics.url, bare_dir))
        spans, open_spans = InMemorySpanExporter(), OpenSpans()
        processors: list[SpanProcessor] = [SimpleSpanProcessor(spans), open_spans]
        store: Store | None = None
        if "own" in fault.env or "default-setup" in fault.env:
            metric_exporters = []
            if "own" in fault.env:
                store = Store(tmp_path / "store.sqlite")
                processors.append(BatchSpanProcessor(StoreSpanExporter(store), schedule_delay_millis=60_000))
                metric_exporters.append((StoreMetricExporter(store), 60_000.0))
            tracer_provider, meter_provider = build_providers(processors, metric_exporters)
        else:
            tracer_provider = TracerProvider()
            for processor in processors:
                tracer_provider.add_span_processor(processor)
            meter_provider = MeterProvider(metric_readers=[InMemoryMetricReader()])
        world = World(
            base_url,
            metrics.url,
            tmp_path,
            {"tracer_provider": tracer_provider, "meter_provider": meter_provider},
        )
        harness = Harness(world, tracer_provider, meter_provider, spans, open_spans, tmp_path / "rules.toml")
        made.append(harness)
        if store is not None:  # closed last, after the providers' final exports
            harness.cleanups.append(store.close)
        harness.cleanups.append(tracer_provider.shutdown)
        harness.cleanups.append(meter_provider.shutdown)
        if "default-setup" in fault.env:  # no telemetry in force; spark-otel's own global provider
            monkeypatch.setattr(pipeline, "_current", None)
            monkeypatch.setattr(trace, "_TRACER_PROVIDER", tracer_provider)
            world.cell_kwargs = {}
        else:
            spark_otel.instrument(
                tracer_provider=tracer_provider, meter_provider=meter_provider, **dict(fault.instrument)
            )
            harness.cleanups.append(spark_otel.uninstrument)
        if "contrib" in fault.env:  # instrumented last: its wrapper is outside spark-otel's
            from opentelemetry.instrumentation.genai.openai import OpenAIInstrumentor

            contrib = OpenAIInstrumentor()
            contrib.instrument(tracer_provider=tracer_provider, meter_provider=meter_provider)
            harness.cleanups.append(contrib.uninstrument)
        if "governed" in fault.env:
            harness.rules_path.write_text(RULES)
            govern(harness.rules_path, state=tmp_path / "governor" / "state.sqlite")
            harness.cleanups.append(ungovern)
        if "otlp" in fault.env:
            monkeypatch.setattr(pipeline, "_current", Telemetry(tracer_provider, meter_provider, otlp=True))
        for log_filter in logging.getLogger("opentelemetry.sdk._shared_internal").filters:
            # The SDK's batch worker drops a log repeated within 20 s; each test counts its own.
            if hasattr(log_filter, "last_log"):
                monkeypatch.setattr(log_filter, "last_log", None)
        harness.injector = Injector(faults, harness)
        fault.inject(harness.injector)
        return harness

    try:
        yield setup
    finally:
        faults.undo()
        for harness in made:
            for cleanup in reversed(harness.cleanups):
                cleanup()


# -- the promise, at every guarded point --------------------------------------------------------------


@pytest.mark.parametrize(("fault", "name"), CASES)
def test_a_fault_leaves_the_call_as_it_is_bare_ends_the_span_and_is_reported_once(
    fault: Fault,
    name: str,
    harness_for: Callable[[Fault, str], Harness],
    bare_outcomes: dict[str, tuple[Any, ...]],
    caplog: pytest.LogCaptureFixture,
) -> None:
    harness = harness_for(fault, name)
    injector = harness.injector
    assert injector is not None
    bare = bare_outcomes[name]
    caplog.clear()
    with caplog.at_level(logging.WARNING), caplog.at_level(logging.WARNING, logger="spark_otel"):
        first = outcome(name, harness.world)
        fired_first = injector.fired
        second = outcome(name, harness.world)  # the step fails again: reported no more
        harness.flush()  # the store exporter runs on the SDK's worker: one batch, after both calls

    assert first == bare
    assert second == bare
    if fault.deferred:
        assert injector.fired >= 1, "the fault never fired: the export does not reach the step"
    elif fault.counted:
        assert fired_first >= 1, "the fault never fired: the scenario does not reach the step"
        assert injector.fired > fired_first, "the fault fired on the first call only"

    assert harness.open_spans.names == {}, "spans left open"
    meta = SCENARIOS[name]
    requests = 0 if "request" in fault.lost or "default-setup" in fault.env else meta.requests
    cell_spans = [
        s for s in harness.spans.get_finished_spans() if (s.attributes or {}).get(sc.SPAN_KIND_ATTR) == "cell"
    ]
    assert len(request_spans(harness.spans)) == 2 * requests
    assert len(cell_spans) == 2 * (0 if "cell" in fault.lost else meta.cells)

    records = caplog.records
    reports = [r for r in records if _reports(r, fault)]
    assert len(reports) == 1, [(r.name, r.getMessage()) for r in reports]
    others = [r for r in records if r.name.startswith("spark_otel") and r.levelno >= logging.WARNING]
    others = [r for r in others if r is not reports[0]]
    assert others == [], [r.getMessage() for r in others]
    if fault.site is not None:
        (report,) = reports
        assert report.name == "spark_otel"
        assert report.levelno == logging.WARNING
        assert re.fullmatch(_site_pattern(fault.site), report.getMessage()), report.getMessage()


def _reports(record: logging.LogRecord, fault: Fault) -> bool:
    """The record reports the fault: with its traceback, or, for spark-otel's own errors (which
    name their input), as one line carrying the error's message."""
    if record.exc_info:
        return isinstance(record.exc_info[1], fault.exc)
    own = isinstance(fault.exc, type) and issubclass(fault.exc, SparkOtelError)
    return own and record.name == "spark_otel" and "the call goes on untouched: " in record.getMessage()


RAISES: dict[str, type[Exception]] = {
    "chat-404": openai.NotFoundError,
    "achat-404": openai.NotFoundError,
    "chat-stream-error": openai.APIError,
    "achat-stream-error": openai.APIError,
    "raw-404": httpx2.HTTPStatusError,
    "cell-raises": ValueError,
    "acell-raises": ValueError,
    "cell-plain-raises": ValueError,
}
"""The scenarios whose bare call raises, and what; every other one returns."""


def test_bare_calls_return_or_raise_as_each_scenario_means(
    engine: LocalServer, metrics: MetricsServer, bare_outcomes: dict[str, tuple[Any, ...]], tmp_path: Path
) -> None:
    """The comparisons above are only as good as the bare calls: each returns, or raises what it
    should (a scenario broken on its own would compare equal to itself)."""
    world = World(f"http://127.0.0.1:{engine.port}/v1", metrics.url, tmp_path)
    got = {name: bare_outcomes.get(name) or outcome(name, world) for name in SCENARIOS}
    for name, result in got.items():
        if name in RAISES:
            assert result[0] == "raised", (name, result)
            assert issubclass(result[1], RAISES[name]), (name, result)
        else:
            assert result[0] == "returned", (name, result)
    assert got["chat-stream"][1] == 6  # the role, four words, the usage
    assert got["chat-stream"][2][-1]["usage"]["completion_tokens"] == 4
    assert got["chat-stream-break"][1] == 2
    assert len(got["chat-stream-error"][3]) == 3
    assert got["achat-raw-response-stream"][2][-1]["choices"][0]["finish_reason"] == "length"
    assert got["deadline-raw"][1]["text"] == "w0 w1 w2 w3 "
    assert got["probe-record"][1] == (None, [2])
    assert got["receiver-scrape"][1] == {"e": "EngineSnapshot"}
    assert got["receiver-collect"][1] == [1]
