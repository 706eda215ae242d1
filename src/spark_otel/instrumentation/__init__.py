"""`spark_otel.instrument()`: one line makes every call an eval runner makes to an engine observable.

    import spark_otel
    spark_otel.instrument()          # openai; raw httpx2/httpx, requests and aiohttp (streamed or not)
    ...
    spark_otel.uninstrument()        # every wrapper becomes a pass-through

What is patched (with `wrapt`): the openai SDK's ``chat.completions.create`` and
``completions.create`` on the sync and async clients (``with_raw_response`` and
``with_streaming_response`` included), and the raw HTTP clients' sends for POSTs to
``/v1/chat/completions`` and ``/v1/completions``: ``Client.send`` / ``AsyncClient.send`` of
``httpx2`` and ``httpx``, ``requests``' ``HTTPAdapter.send`` and ``aiohttp``'s
``ClientSession._request`` (each only where installed; `instrument()` imports them, importing
spark_otel does not). A call the SDK makes through httpx2 gets one span, from the SDK layer.

Each call gets a CLIENT span ``{operation} {model}`` and the GenAI client metrics (semconv
v1.41); a stream's span and duration end when the stream ends, however it ends. Inside a
`spark_otel.cell`, the span carries the cell's attributes and the server-reported tokens add
up in the cell. Settings are read once, here: content capture
(``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``), usage on streams
(``SPARK_OTEL_INCLUDE_USAGE``), W3C ``traceparent`` injection (``SPARK_OTEL_TRACEPARENT``) and
the per-chunk ``time_per_output_chunk`` histogram (``SPARK_OTEL_CHUNK_METRICS``, on by default).
See docs/instrumentation.md.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import logging
import threading
from collections.abc import Callable, Collection
from typing import Any

import wrapt
from opentelemetry.instrumentation.dependencies import DependencyConflict, get_dependency_conflicts
from opentelemetry.instrumentation.instrumentor import BaseInstrumentor  # type: ignore[attr-defined]  # untyped
from opentelemetry.metrics import MeterProvider
from opentelemetry.trace import TracerProvider

from .._exceptions import ConfigError
from .._guard import guard, report_failure
from .._semconv import PROVIDER_VLLM
from ._config import InstrumentationConfig
from ._httpx_patch import async_httpx_send, httpx_send
from ._openai_patch import (
    async_chat_completions_create,
    async_completions_create,
    chat_completions_create,
    completions_create,
)
from ._runtime import Runtime

__all__ = ["InstrumentationConfig", "SparkOtelInstrumentor", "instrument", "uninstrument"]

_logger = logging.getLogger(__name__)

_OPENAI_TARGETS = (
    ("openai.resources.chat.completions.completions", "Completions", chat_completions_create),
    ("openai.resources.chat.completions.completions", "AsyncCompletions", async_chat_completions_create),
    ("openai.resources.completions", "Completions", completions_create),
    ("openai.resources.completions", "AsyncCompletions", async_completions_create),
)
_HTTPX_MODULES = ("httpx2", "httpx")
_ON_IMPORT = (("requests", "requests.adapters"), ("aiohttp", "aiohttp.client"))
"""Raw clients patched when their module is imported (at once if it already is): `instrument()`
never imports them: one installed and unused costs nothing (importing aiohttp takes 0.1 to 0.4 s
here)."""
INSTRUMENTS_ANY = (
    "openai >= 1.26, < 4",
    "httpx2 >= 2.16, < 3",
    "httpx >= 0.27, < 1",
    "requests >= 2.31, < 3",
    "aiohttp >= 3.9, < 4",
)
"""The clients instrumented, as ``pyproject.toml``'s ``instruments-any`` extra lists them."""
_OWN_KWARGS = frozenset(
    {
        "tracer_provider",
        "meter_provider",
        "capture_content",
        "include_usage",
        "inject_traceparent",
        "provider_name",
        "chunk_metrics",
    }
)
# What `opentelemetry-instrument` and `BaseInstrumentor` callers pass to every instrumentor
# (`BaseInstrumentor.instrument` takes these two off before `_instrument` sees the rest).
_BASE_INSTRUMENTOR_KWARGS = frozenset({"skip_dep_check", "raise_exception_on_conflict"})


def _check_kwargs(call: str, kwargs: dict[str, Any], *, known: frozenset[str]) -> None:
    unknown = sorted(set(kwargs) - known - _BASE_INSTRUMENTOR_KWARGS)
    if unknown:
        raise ConfigError(f"{call}: unknown argument(s) {', '.join(unknown)}")


def _config_of(kwargs: dict[str, Any]) -> InstrumentationConfig:
    """The switches an `instrument` call's arguments ask for, the environment filling the rest."""
    return InstrumentationConfig.resolve(
        capture_content=kwargs.get("capture_content"),
        include_usage=kwargs.get("include_usage"),
        inject_traceparent=kwargs.get("inject_traceparent"),
        provider_name=kwargs.get("provider_name", PROVIDER_VLLM),
        chunk_metrics=kwargs.get("chunk_metrics"),
    )


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


class SparkOtelInstrumentor(BaseInstrumentor):
    """Patches the openai SDK and the raw HTTP clients once; `uninstrument` undoes it.

    An OpenTelemetry contrib instrumentor (`BaseInstrumentor`): a singleton, registered as an
    ``opentelemetry_instrumentor`` entry point for ``opentelemetry-instrument``, with its
    supported client ranges in `instrumentation_dependencies` (any one of them suffices: the
    ``instruments-any`` extra). Both calls are idempotent: a second `instrument` (or an
    `uninstrument` with nothing instrumented) logs a warning and does nothing.
    """

    _calls = threading.Lock()
    """Held across a whole `instrument` or `uninstrument` call (the check and the patching)."""
    _lock = threading.RLock()
    """Held while patching: by `instrument`, `uninstrument` and a client's import (which may happen
    inside `instrument`, on the same thread)."""
    _runtime: Runtime | None = None
    _patches: list[tuple[type, str, Any, Any]] = []  # noqa: RUF012 - class-wide on purpose

    def instrumentation_dependencies(self) -> Collection[str]:
        return INSTRUMENTS_ANY

    def _check_dependency_conflicts(self) -> DependencyConflict | None:
        """Any one supported client will do (httpx2, a core dependency, always is)."""
        conflicts = [get_dependency_conflicts([dependency]) for dependency in INSTRUMENTS_ANY]
        return None if any(c is None for c in conflicts) else conflicts[0]

    @property
    def is_instrumented(self) -> bool:
        return bool(self.is_instrumented_by_opentelemetry)

    @property
    def config(self) -> InstrumentationConfig | None:
        runtime = SparkOtelInstrumentor._runtime
        return None if runtime is None else runtime.config

    def instrument(self, **kwargs: Any) -> None:
        """Patch; see `instrument` for the arguments and where a provider not given comes from.

        Besides its own arguments it takes the ones `opentelemetry-instrument` passes every
        instrumentor; any other raises `ConfigError`, so a misspelt switch is not silently off.
        """
        with SparkOtelInstrumentor._calls:  # many workers calling at once patch once
            if not self.is_instrumented_by_opentelemetry:
                super().instrument(**kwargs)
            elif self._changes_something(kwargs):
                _logger.warning("spark_otel.instrument() called twice; the first call's settings stay")
            else:
                _logger.debug("spark_otel.instrument() called again with the same settings")

    def uninstrument(self, **kwargs: Any) -> None:
        """Restore the originals; wrappers still held elsewhere become pass-throughs."""
        _check_kwargs("uninstrument()", kwargs, known=frozenset())
        with SparkOtelInstrumentor._calls:
            if not self.is_instrumented_by_opentelemetry:
                _logger.warning("spark_otel.uninstrument() called while not instrumented")
                return
            super().uninstrument(**kwargs)

    def _changes_something(self, kwargs: dict[str, Any]) -> bool:
        """Whether a further `instrument` call asks for anything the first did not: providers of
        its own, or other switches. A runner that instruments in every worker asks for nothing new."""
        if kwargs.get("tracer_provider") is not None or kwargs.get("meter_provider") is not None:
            return True
        try:
            asked = _config_of(kwargs)
        except ConfigError:
            return True
        return asked != self.config

    def _instrument(self, **kwargs: Any) -> None:
        _check_kwargs("instrument()", kwargs, known=_OWN_KWARGS)
        tracer_provider = kwargs.get("tracer_provider")
        meter_provider = kwargs.get("meter_provider")
        for name, provider, kind in (
            ("tracer_provider", tracer_provider, TracerProvider),
            ("meter_provider", meter_provider, MeterProvider),
        ):
            if provider is not None and not isinstance(provider, kind):
                raise ConfigError(
                    f"instrument({name}={provider!r}): expected an OpenTelemetry {kind.__name__}"
                )
        config = _config_of(kwargs)
        with SparkOtelInstrumentor._lock:
            if tracer_provider is None and meter_provider is None:
                from ..telemetry import ensure_telemetry

                with guard("telemetry setup for instrument()"):  # an unusable store: calls go on
                    ensure_telemetry()
            runtime = Runtime(config, tracer_provider, meter_provider)
            self._patch_all(runtime)
            SparkOtelInstrumentor._runtime = runtime

    def _uninstrument(self, **kwargs: Any) -> None:
        with SparkOtelInstrumentor._lock:
            runtime = SparkOtelInstrumentor._runtime
            if runtime is not None:
                runtime.active = False
            for owner, name, original, wrapper in reversed(SparkOtelInstrumentor._patches):
                if owner.__dict__.get(name) is wrapper:
                    setattr(owner, name, original)
                else:
                    _logger.debug("%s.%s was re-patched by someone else; left in place", owner, name)
            SparkOtelInstrumentor._patches = []
            SparkOtelInstrumentor._runtime = None

    def _patch_all(self, runtime: Runtime) -> None:
        if _installed("openai"):
            for module_name, class_name, factory in _OPENAI_TARGETS:
                owner = getattr(importlib.import_module(module_name), class_name, None)
                if owner is not None:
                    self._patch(owner, "create", factory(runtime))
        for module_name in _HTTPX_MODULES:
            if not _installed(module_name):
                continue
            module = importlib.import_module(module_name)
            self._patch(module.Client, "send", httpx_send(module, runtime))
            self._patch(module.AsyncClient, "send", async_httpx_send(module, runtime))
        for package, module_name in _ON_IMPORT:
            if _installed(package):  # patched now if imported, else when it is: never imported here
                hook = functools.partial(self._client_imported, runtime, package)
                wrapt.register_post_import_hook(hook, module_name)

    @classmethod
    def _client_imported(cls, runtime: Runtime, package: str, module: Any) -> None:
        """Patch ``requests`` or ``aiohttp`` in ``module``, unless `uninstrument` came first. Runs
        inside the user's import, so it never raises (an exception would fail that import)."""
        try:
            with cls._lock:
                if not runtime.active:
                    return
                if package == "requests":
                    from ._requests_patch import requests_send

                    cls._patch(module.HTTPAdapter, "send", requests_send(runtime))
                else:
                    from ._aiohttp_patch import aiohttp_request

                    cls._patch(module.ClientSession, "_request", aiohttp_request(runtime))
        except Exception as exc:
            report_failure(f"instrument() patch of {package}", exc)

    @staticmethod
    def _patch(owner: type, name: str, wrapper: Callable[..., Any]) -> None:
        original = owner.__dict__.get(name)
        if original is None:
            _logger.debug("%s has no %s to patch", owner, name)
            return
        patched = wrapt.FunctionWrapper(original, wrapper)
        setattr(owner, name, patched)
        SparkOtelInstrumentor._patches.append((owner, name, original, patched))


def instrument(
    *,
    tracer_provider: TracerProvider | None = None,
    meter_provider: MeterProvider | None = None,
    capture_content: bool | None = None,
    include_usage: bool | None = None,
    inject_traceparent: bool | None = None,
    provider_name: str = PROVIDER_VLLM,
    chunk_metrics: bool | None = None,
) -> None:
    """Make every openai / raw-HTTP call to an engine produce a span and GenAI metrics.

    Where spans and metrics go, first match wins: the providers passed here (fixed for good);
    else spark-otel's telemetry in force (`spark_otel.configure()`), followed across later
    ``configure()`` calls; else tracer and meter providers the user installed globally; else a
    default `spark_otel.configure()` (the embedded store, or OTLP from ``OTEL_*``). A provider
    passed alone is paired with the other from spark-otel's telemetry in force, or the global
    one (a no-op until one is installed); it never triggers ``configure()``.

    ``capture_content`` records prompts and completions (off unless set here or by
    ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``); ``include_usage`` asks streaming
    openai calls for a usage chunk (``SPARK_OTEL_INCLUDE_USAGE``; a call that passes its own
    ``stream_options`` keeps them); ``inject_traceparent`` sends W3C ``traceparent`` so vLLM's
    server spans join the trace (``SPARK_OTEL_TRACEPARENT``); ``provider_name`` is the
    ``gen_ai.provider.name`` reported (``vllm``: semconv has no value for local engines);
    ``chunk_metrics=False`` (or ``SPARK_OTEL_CHUNK_METRICS=0``) drops the one per-chunk metric,
    ``gen_ai.client.operation.time_per_output_chunk`` (on by default, as semconv recommends;
    on the user's own providers its SDK record per streamed chunk is most of a stream's overhead,
    on providers spark-otel builds it is one bulk record per stream).
    """
    SparkOtelInstrumentor().instrument(
        tracer_provider=tracer_provider,
        meter_provider=meter_provider,
        capture_content=capture_content,
        include_usage=include_usage,
        inject_traceparent=inject_traceparent,
        provider_name=provider_name,
        chunk_metrics=chunk_metrics,
    )


def uninstrument() -> None:
    """Undo `instrument()`; calls made afterwards produce no spans."""
    SparkOtelInstrumentor().uninstrument()
