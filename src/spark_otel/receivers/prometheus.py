"""Read an inference engine's own counters from its Prometheus ``/metrics`` endpoint.

The article's throughput truths came from ``vllm:generation_tokens_total`` read before and
after a window, not from the GPU's busy gauge. `scrape_engine` reads one snapshot of the
counters and gauges that matter (generation and prompt tokens, running and waiting requests,
KV-cache fill, and the ``_sum``/``_count`` of the latency histograms) from vLLM (V1 names, and
the V0 names that were renamed), SGLang or llama.cpp; `counter_delta` turns two snapshots into
token counts and rates over the window between them, and the mean time to first token,
inter-token latency and end-to-end latency of the requests observed in it.

Parsing is `prometheus_client`'s exposition parser, keyed on ``# TYPE`` (never on a name's
suffix: ``vllm:iteration_tokens_total`` is a histogram). ``*_created`` families are dropped
except to notice a counter restart. Data-parallel vLLM reports one series per ``engine``
label; the snapshot sums them (the KV-cache fraction is averaged), and keeps only the series
of ``model_name`` when one is given.

    >>> before = scrape_engine("http://127.0.0.1:8011")
    >>> ...                                           # run the load
    >>> counter_delta(before, scrape_engine("http://127.0.0.1:8011")).generation_rate
    80.5
"""

from __future__ import annotations

import contextlib
import io
import logging
import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal, TextIO, cast, get_args

import httpx2
from prometheus_client.parser import text_fd_to_metric_families
from pydantic import BaseModel, ConfigDict

from .. import _clock
from .._clock import NS_PER_S
from .._exceptions import ConfigError, EngineError
from .._guard import warn_once
from .._urls import engine_base_url

__all__ = [
    "CONCEPTS",
    "HISTOGRAMS",
    "CounterDelta",
    "EngineKind",
    "EngineSnapshot",
    "ascrape_engine",
    "counter_delta",
    "metrics_url",
    "parse_metrics",
    "scrape_engine",
]

_logger = logging.getLogger(__name__)

EngineKind = Literal["vllm", "sglang", "llamacpp"]
METRICS_MAX_BYTES = 32 * 1024 * 1024
"""The largest /metrics answer read (vLLM's is tens of kB per model); a larger one stops the scrape."""


@dataclass(frozen=True)
class _Concept:
    """One quantity the snapshot reports, and the exposed sample names that carry it per engine.

    Names are listed newest first: when a scrape exposes both (vLLM 0.10 still printed the
    deprecated ``gpu_cache_usage_perc`` beside ``kv_cache_usage_perc``), only the first present
    is read, so nothing is counted twice.
    """

    field: str
    kind: Literal["counter", "gauge"]
    combine: Literal["sum", "mean"]
    names: Mapping[str, tuple[str, ...]]


CONCEPTS: tuple[_Concept, ...] = (
    _Concept(
        "generation_tokens",
        "counter",
        "sum",
        {
            "vllm": ("vllm:generation_tokens_total",),
            "sglang": ("sglang:generation_tokens_total",),
            "llamacpp": ("llamacpp:tokens_predicted_total",),
        },
    ),
    _Concept(
        "prompt_tokens",
        "counter",
        "sum",
        {
            "vllm": ("vllm:prompt_tokens_total",),
            "sglang": ("sglang:prompt_tokens_total",),
            "llamacpp": ("llamacpp:prompt_tokens_total",),
        },
    ),
    _Concept(
        "requests_running",
        "gauge",
        "sum",
        {
            "vllm": ("vllm:num_requests_running",),
            "sglang": ("sglang:num_running_reqs",),
            "llamacpp": ("llamacpp:requests_processing",),
        },
    ),
    _Concept(
        "requests_waiting",
        "gauge",
        "sum",
        {
            "vllm": ("vllm:num_requests_waiting",),
            "sglang": ("sglang:num_queue_reqs",),
            "llamacpp": ("llamacpp:requests_deferred",),
        },
    ),
    _Concept(
        "kv_cache_usage",
        "gauge",
        "mean",
        {
            "vllm": ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
            "sglang": ("sglang:token_usage",),
            "llamacpp": ("llamacpp:kv_cache_usage_ratio",),
        },
    ),
)


@dataclass(frozen=True)
class _Histogram:
    """A latency histogram whose ``_sum`` and ``_count`` the snapshot keeps, newest name first.

    The snapshot fields are ``<field>_sum`` (seconds) and ``<field>_count``; both come from the
    same histogram name, so a renamed histogram is never mixed with its old self.
    """

    field: str
    names: Mapping[str, tuple[str, ...]]


HISTOGRAMS: tuple[_Histogram, ...] = (
    _Histogram(
        "time_to_first_token",
        {
            "vllm": ("vllm:time_to_first_token_seconds",),
            "sglang": ("sglang:time_to_first_token_seconds",),
            "llamacpp": (),
        },
    ),
    _Histogram(
        "inter_token_latency",
        {
            "vllm": ("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"),
            "sglang": ("sglang:inter_token_latency_seconds", "sglang:time_per_output_token_seconds"),
            "llamacpp": (),
        },
    ),
    _Histogram(
        "e2e_request_latency",
        {
            "vllm": ("vllm:e2e_request_latency_seconds",),
            "sglang": ("sglang:e2e_request_latency_seconds",),
            "llamacpp": (),
        },
    ),
)
_PREFIXES: tuple[tuple[str, EngineKind], ...] = (
    ("vllm:", "vllm"),
    ("sglang:", "sglang"),
    ("llamacpp:", "llamacpp"),
)


class EngineSnapshot(BaseModel):
    """One scrape of one engine: cumulative token counters, latency histograms' sums and counts,
    and the gauges at ``unix_ns``.

    A field is None when this engine (or this build of it) does not expose that quantity,
    e.g. ``kv_cache_usage`` on current llama.cpp builds.
    """

    model_config = ConfigDict(frozen=True)

    url: str
    kind: EngineKind
    unix_ns: int
    model_name: str | None = None
    generation_tokens: float | None = None
    prompt_tokens: float | None = None
    requests_running: float | None = None
    requests_waiting: float | None = None
    kv_cache_usage: float | None = None
    time_to_first_token_sum: float | None = None
    time_to_first_token_count: float | None = None
    inter_token_latency_sum: float | None = None
    inter_token_latency_count: float | None = None
    e2e_request_latency_sum: float | None = None
    e2e_request_latency_count: float | None = None
    counters_created_unix_s: float | None = None
    model_names: tuple[str, ...] = ()


class CounterDelta(BaseModel):
    """What an engine produced between two snapshots; elapsed, rates and latencies in model time.

    The ``mean_*_s`` latencies average the requests (or, for inter-token latency, the tokens)
    the engine's histograms observed in the window; None when none did, when the engine does
    not expose that histogram, or when its counters were reset in between.
    """

    model_config = ConfigDict(frozen=True)

    url: str
    start_unix_ns: int
    end_unix_ns: int
    elapsed_s: float
    generation_tokens: float | None
    prompt_tokens: float | None
    generation_rate: float | None
    prompt_rate: float | None
    mean_time_to_first_token_s: float | None = None
    mean_inter_token_latency_s: float | None = None
    mean_e2e_request_latency_s: float | None = None
    reset: bool = False


def metrics_url(url: str) -> str:
    """The ``/metrics`` address for an engine given as a base URL, an OpenAI ``/v1`` URL or itself."""
    base = url.strip().rstrip("/")
    return base if base.endswith("/metrics") else engine_base_url(base) + "/metrics"


class _NumberedLines:
    """Exposition text read line by line (at ``\\n``, as the parser's own `io.StringIO` would),
    counting: the parser is lazy, so when it raises, the line it was reading is the one at fault
    (a bad ``# TYPE`` is noticed where its family ends)."""

    def __init__(self, text: str) -> None:
        self._text = text
        self.number = 0
        self.line = ""

    def __iter__(self) -> Iterator[str]:
        for number, line in enumerate(io.StringIO(self._text), start=1):
            self.number, self.line = number, line
            yield line


def _listing(names: list[str], most: int = 5) -> str:
    """Label values for a one-line message: plain when printable, else quoted; the first few."""
    shown = [n if n.isprintable() and n.strip() == n and n else repr(n) for n in names[:most]]
    more = f" and {len(names) - most} more" if len(names) > most else ""
    return _clip(", ".join(shown)) + more


def _clip(text: str, most: int = 120) -> str:
    return text if len(text) <= most else text[: most - 3] + "..."


def _families(text: str, url: str) -> list[Any]:
    text = text.lstrip("\ufeff")
    if not text.endswith("\n"):
        text += "\n"
    lines = _NumberedLines(text)
    try:
        return list(text_fd_to_metric_families(cast(TextIO, lines)))  # it only iterates over lines
    except (ValueError, TypeError, LookupError, ArithmeticError) as exc:
        # prometheus_client's messages are often empty (a bare ValueError) or quote a whole line.
        why = _clip(str(exc).strip()) or f"cannot parse {_clip(lines.line.strip())!r}"
        raise EngineError(
            f"{url}: /metrics is not valid Prometheus text: line {lines.number}: {why}"
        ) from exc


def parse_metrics(
    text: str, *, url: str, unix_ns: int, model_name: str | None = None, kind: EngineKind | None = None
) -> EngineSnapshot:
    """Build a snapshot from exposition text (pure; `scrape_engine` does the HTTP).

    Raises `EngineError` when the text does not parse (naming the line), carries no metrics of a
    known engine, or has no series for ``model_name``; `ConfigError` for a ``kind`` that is not
    an engine's. A value that is NaN, infinite or past a float's range counts as not exposed: no
    rate or mean is made from it; so does one outside its range (a negative count, a KV-cache
    fill outside 0 to 1), with one warning naming it.
    """
    if kind is not None and kind not in get_args(EngineKind):
        raise ConfigError(f"engine kind {kind!r}: expected one of {', '.join(get_args(EngineKind))}")
    families = _families(text, url)
    typed = _samples_by_name(families)
    engine_kind = kind or _detect_kind(typed)
    if engine_kind is None:
        raise EngineError(f"{url}: /metrics has no vLLM, SGLang or llama.cpp metrics (is this an engine?)")
    served = _served_models(typed, engine_kind)
    if model_name is not None and served and model_name not in served:
        raise EngineError(f"{url}: no series for model {model_name!r}; the engine serves {_listing(served)}")
    created = _model_values(_created_samples(families, engine_kind), model_name)
    return EngineSnapshot(
        url=url,
        kind=engine_kind,
        unix_ns=unix_ns,
        model_name=model_name,
        counters_created_unix_s=max(created) if created else None,
        model_names=tuple(served),
        **_snapshot_values(typed, engine_kind, model_name, url),
    )


_Typed = Mapping[str, tuple[str, list[Any]]]
"""Sample name -> (its family's ``# TYPE``, its samples)."""


def _samples_by_name(families: Iterable[Any]) -> dict[str, tuple[str, list[Any]]]:
    """Every sample by name with its family's type (a value is read by its ``# TYPE``, never by
    its name's suffix); ``*_created`` families only tell of restarts, so they are left out."""
    typed: dict[str, tuple[str, list[Any]]] = {}
    for family in families:
        if family.name.endswith("_created"):
            continue
        for sample in family.samples:
            typed.setdefault(sample.name, (family.type, []))[1].append(sample)
    return typed


def _created_samples(families: Iterable[Any], engine_kind: EngineKind) -> list[Any]:
    """The ``_created`` samples of the engine's generation-token counter: when it last started
    counting from zero."""
    created_names = {n.removesuffix("_total") + "_created" for n in CONCEPTS[0].names[engine_kind]}
    return [
        s
        for family in families
        if family.name in created_names
        for s in family.samples
        if s.name in created_names
    ]


def _served_models(typed: _Typed, engine_kind: EngineKind) -> list[str]:
    """The ``model_name`` labels on the engine's own series, sorted: the models it serves."""
    return sorted(
        {
            s.labels["model_name"]
            for name, (_, samples) in typed.items()
            if name.startswith(f"{engine_kind}:")
            for s in samples
            if "model_name" in s.labels
        }
    )


def _model_values(samples: Iterable[Any], model_name: str | None) -> list[float]:
    """The finite values of ``model_name``'s series (all series when None; a series without the
    label serves every model)."""
    numbers = (
        _finite(s.value)
        for s in samples
        if model_name is None or s.labels.get("model_name", model_name) == model_name
    )
    return [n for n in numbers if n is not None]


def _snapshot_values(
    typed: _Typed, engine_kind: EngineKind, model_name: str | None, url: str
) -> dict[str, float | None]:
    """The snapshot's quantities by field: each concept's value, and each histogram's ``_sum``
    and ``_count``; None for what the engine does not expose."""
    values = {c.field: _in_range(c, _concept_value(c, typed, engine_kind, model_name), url) for c in CONCEPTS}
    for histogram in HISTOGRAMS:
        totals = _histogram_totals(histogram, typed, engine_kind, model_name)
        values[f"{histogram.field}_sum"], values[f"{histogram.field}_count"] = totals or (None, None)
    return values


def _concept_value(
    concept: _Concept, typed: _Typed, engine_kind: EngineKind, model_name: str | None
) -> float | None:
    """The concept from the first of its names exposed with its type (or untyped) and a finite
    total: the sum of the series, or their mean for a fraction."""
    for name in concept.names[engine_kind]:
        entry = typed.get(name)
        if entry is None or entry[0] not in (concept.kind, "unknown", "untyped"):
            continue
        numbers = _model_values(entry[1], model_name)
        total = sum(numbers)
        if numbers and math.isfinite(total):
            return total / len(numbers) if concept.combine == "mean" else total
    return None


def _in_range(concept: _Concept, value: float | None, url: str) -> float | None:
    """``value`` where it lies in the concept's documented range (a count or a gauge of requests
    is never negative; a KV-cache fill is a fraction, 0 to 1); else None, as not exposed, and one
    warning naming the engine, the quantity and the value (a share of 7.5 is a unit mix-up)."""
    high = 1.0 if concept.combine == "mean" else math.inf
    if value is None or 0 <= value <= high:
        return value
    warn_once(
        f"out of range {url} {concept.field}",
        f"{url}: {concept.field} is {value:g}, outside its range "
        f"({'0 to 1' if high == 1 else '0 or more'}); left out as not exposed",
    )
    return None


def _histogram_totals(
    histogram: _Histogram, typed: _Typed, engine_kind: EngineKind, model_name: str | None
) -> tuple[float, float] | None:
    """(sum, count) of the first of the histogram's names whose ``_sum`` and ``_count`` are both
    exposed with finite totals: both from one name, so a renamed histogram never mixes with its
    old self."""
    for name in histogram.names[engine_kind]:
        parts = [typed.get(name + suffix) for suffix in ("_sum", "_count")]
        if any(p is None or p[0] not in ("histogram", "unknown", "untyped") for p in parts):
            continue
        sums, counts = (_model_values(p[1], model_name) for p in parts if p is not None)
        total_sum, total_count = sum(sums), sum(counts)
        if sums and counts and math.isfinite(total_sum) and math.isfinite(total_count):
            return total_sum, total_count
    return None


def _finite(value: Any) -> float | None:
    """A sample's value as a finite float, or None: NaN, infinities and integers past a float's
    range (the parser keeps integer text as an int) are not counts."""
    try:
        number = float(value)
    except (OverflowError, ValueError, TypeError):
        return None
    return number if math.isfinite(number) else None


def _detect_kind(typed: Mapping[str, Any]) -> EngineKind | None:
    counts = {kind: 0 for _, kind in _PREFIXES}
    for name in typed:
        for prefix, kind in _PREFIXES:
            if name.startswith(prefix):
                counts[kind] += 1
    best = max(counts, key=lambda k: counts[k])
    return best if counts[best] else None


class _Body:
    """A /metrics answer read chunk by chunk, within the cap (`METRICS_MAX_BYTES`) and the scrape's
    timeout as a whole: an engine that streams without end (or trickles) is stopped and named,
    instead of filling memory or holding the scrape forever (httpx's timeout is per read)."""

    def __init__(self, url: str, timeout_s: float) -> None:
        self.url = url
        self.timeout_s = timeout_s
        self.until_ns = _clock.real_monotonic_ns() + int(timeout_s * NS_PER_S)
        self.chunks: list[bytes] = []
        self.size = 0

    def status(self, code: int) -> None:
        if code != 200:
            raise EngineError(f"{self.url}: /metrics answered HTTP {code}")

    def add(self, chunk: bytes) -> None:
        self.size += len(chunk)
        if self.size > METRICS_MAX_BYTES:
            raise EngineError(
                f"{self.url}: /metrics answer is larger than the cap of {METRICS_MAX_BYTES:,} bytes; "
                "the scrape was stopped"
            )
        if _clock.real_monotonic_ns() > self.until_ns:
            raise EngineError(
                f"{self.url}: /metrics answer still coming after the scrape's timeout of {self.timeout_s:g} s"
            )
        self.chunks.append(chunk)

    def text(self) -> str:
        try:
            return b"".join(self.chunks).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise EngineError(f"{self.url}: /metrics answer is not UTF-8 text: {exc}") from exc


def scrape_engine(
    url: str,
    *,
    client: Any | None = None,
    timeout_s: float = 5.0,
    model_name: str | None = None,
    kind: EngineKind | None = None,
) -> EngineSnapshot:
    """Scrape ``url``'s ``/metrics`` once; ``client`` may be an httpx2 or httpx ``Client``.

    Raises `EngineError` naming the URL when it is unreachable, answers non-200, or answers
    something that is not an engine's metrics.
    """
    target = metrics_url(url)
    body = _Body(target, timeout_s)
    try:
        with contextlib.ExitStack() as held:
            http = client if client is not None else held.enter_context(httpx2.Client(timeout=timeout_s))
            response = held.enter_context(http.stream("GET", target, timeout=timeout_s))
            body.status(response.status_code)
            for chunk in response.iter_bytes():
                body.add(chunk)
    except EngineError:
        raise
    except Exception as exc:  # httpx2 and httpx raise unrelated exception trees
        raise EngineError(f"{target}: cannot read engine metrics: {type(exc).__name__}: {exc}") from exc
    return parse_metrics(body.text(), url=url, unix_ns=_clock.wall_ns(), model_name=model_name, kind=kind)


async def ascrape_engine(
    url: str,
    *,
    client: Any | None = None,
    timeout_s: float = 5.0,
    model_name: str | None = None,
    kind: EngineKind | None = None,
) -> EngineSnapshot:
    """Async twin of `scrape_engine`; ``client`` may be an httpx2 or httpx ``AsyncClient``."""
    target = metrics_url(url)
    body = _Body(target, timeout_s)
    try:
        async with contextlib.AsyncExitStack() as held:
            http = (
                client
                if client is not None
                else await held.enter_async_context(httpx2.AsyncClient(timeout=timeout_s))
            )
            response = await held.enter_async_context(http.stream("GET", target, timeout=timeout_s))
            body.status(response.status_code)
            async for chunk in response.aiter_bytes():
                body.add(chunk)
    except EngineError:
        raise
    except Exception as exc:
        raise EngineError(f"{target}: cannot read engine metrics: {type(exc).__name__}: {exc}") from exc
    return parse_metrics(body.text(), url=url, unix_ns=_clock.wall_ns(), model_name=model_name, kind=kind)


def _counter_step(before: float | None, after: float | None, restarted: bool) -> tuple[float | None, bool]:
    """Increase of a cumulative counter; after a restart the counter began again at zero."""
    if before is None or after is None:
        return None, False
    if restarted or after < before:
        return after, True
    return after - before, False


def _interval_mean(
    before: tuple[float | None, float | None], after: tuple[float | None, float | None], restarted: bool
) -> tuple[float | None, bool]:
    """Mean of the observations a histogram gained between two scrapes, and whether it was reset.

    After a reset the observations since the restart are not the window's, so there is no
    mean; with no new observation there is none either (zero would read as instant requests).
    """
    (sum_before, count_before), (sum_after, count_after) = before, after
    if sum_before is None or count_before is None or sum_after is None or count_after is None:
        return None, False
    if restarted or count_after < count_before or sum_after < sum_before:
        return None, True
    observed = count_after - count_before
    if observed <= 0:
        return None, False
    return (sum_after - sum_before) / observed, False


def counter_delta(before: EngineSnapshot, after: EngineSnapshot) -> CounterDelta:
    """Tokens an engine produced between two snapshots, and the rates over the window.

    A counter that went down, or whose ``_created`` time moved, was reset (the engine
    restarted): the delta is then the new value, counted from zero, and ``reset`` is True.
    """
    if after.unix_ns < before.unix_ns:
        before, after = after, before
    restarted = (
        before.counters_created_unix_s is not None
        and after.counters_created_unix_s is not None
        and after.counters_created_unix_s > before.counters_created_unix_s + 1e-6
    )
    generation, gen_reset = _counter_step(before.generation_tokens, after.generation_tokens, restarted)
    prompt, prompt_reset = _counter_step(before.prompt_tokens, after.prompt_tokens, restarted)
    elapsed_s = (after.unix_ns - before.unix_ns) / NS_PER_S

    def rate(tokens: float | None) -> float | None:
        return tokens / elapsed_s if tokens is not None and elapsed_s > 0 else None

    means: dict[str, float | None] = {}
    hist_reset = False
    for histogram in HISTOGRAMS:
        mean, went_down = _interval_mean(
            (getattr(before, f"{histogram.field}_sum"), getattr(before, f"{histogram.field}_count")),
            (getattr(after, f"{histogram.field}_sum"), getattr(after, f"{histogram.field}_count")),
            restarted,
        )
        means[f"mean_{histogram.field}_s"] = mean
        hist_reset = hist_reset or went_down
    if gen_reset or prompt_reset or hist_reset:
        _logger.info("engine %s counters were reset between scrapes (engine restart)", after.url)
    return CounterDelta(
        url=after.url,
        start_unix_ns=before.unix_ns,
        end_unix_ns=after.unix_ns,
        elapsed_s=elapsed_s,
        generation_tokens=generation,
        prompt_tokens=prompt,
        generation_rate=rate(generation),
        prompt_rate=rate(prompt),
        reset=gen_reset or prompt_reset or hist_reset,
        **means,
    )
