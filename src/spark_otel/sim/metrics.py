"""One simulated engine's ``/metrics``: vLLM V1 names, labels and buckets, values in model time.

Each engine owns its `CollectorRegistry`, so two engines in one process expose separate scrapes,
as two vLLM servers would. Counters are incremented by the engine's step loop as tokens are
produced, so ``vllm:generation_tokens_total`` equals the tokens served exactly.
"""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from .. import _semconv as sc
from .._clock import NS_PER_S

__all__ = ["EngineMetrics"]

ENGINE_INDEX = "0"  # vLLM labels its single engine core "0"
FINISHED_REASONS = ("stop", "length", "abort")
# vLLM's 1-2-5 series for per-request token counts, up to the longest context the profiles allow.
_TOKEN_BUCKETS = tuple(float(m * 10**e) for e in range(6) for m in (1, 2, 5) if m * 10**e <= 200_000)


class EngineMetrics:
    """The instruments an engine's step loop updates; gauges read the engine when scraped."""

    def __init__(
        self,
        model_name: str,
        running: Callable[[], float],
        waiting: Callable[[], float],
        kv_cache_usage: Callable[[], float],
    ) -> None:
        self.registry = CollectorRegistry()
        names = [sc.VLLM_LABEL_ENGINE, sc.VLLM_LABEL_MODEL_NAME]
        values = (ENGINE_INDEX, model_name)
        reg = self.registry
        self.prompt_tokens = Counter(
            sc.VLLM_PROMPT_TOKENS_TOTAL, "Number of prefill tokens processed.", names, registry=reg
        ).labels(*values)
        self.generation_tokens = Counter(
            sc.VLLM_GENERATION_TOKENS_TOTAL, "Number of generation tokens processed.", names, registry=reg
        ).labels(*values)
        success = Counter(
            sc.VLLM_REQUEST_SUCCESS_TOTAL,
            "Count of successfully processed requests.",
            [sc.VLLM_LABEL_ENGINE, sc.VLLM_LABEL_FINISHED_REASON, sc.VLLM_LABEL_MODEL_NAME],
            registry=reg,
        )
        self.request_success = {r: success.labels(ENGINE_INDEX, r, model_name) for r in FINISHED_REASONS}
        for name, doc, read in (
            (sc.VLLM_NUM_REQUESTS_RUNNING, "Number of requests in model execution batches.", running),
            (sc.VLLM_NUM_REQUESTS_WAITING, "Number of requests waiting to be processed.", waiting),
            (sc.VLLM_KV_CACHE_USAGE_PERC, "KV-cache usage. 1 means 100 percent usage.", kv_cache_usage),
        ):
            Gauge(name, doc, names, registry=reg).labels(*values).set_function(read)

        def histogram(name: str, doc: str, buckets: tuple[float, ...]) -> Histogram:
            return Histogram(name, doc, names, registry=reg, buckets=buckets).labels(*values)

        self.time_to_first_token = histogram(
            sc.VLLM_TIME_TO_FIRST_TOKEN,
            "Histogram of time to first token in seconds.",
            sc.VLLM_TTFT_BUCKETS_S,
        )
        self.inter_token_latency = histogram(
            sc.VLLM_INTER_TOKEN_LATENCY, "Histogram of inter-token latency in seconds.", sc.VLLM_ITL_BUCKETS_S
        )
        self.e2e_request_latency = histogram(
            sc.VLLM_E2E_REQUEST_LATENCY, "Histogram of e2e request latency in seconds.", sc.VLLM_E2E_BUCKETS_S
        )
        # vLLM's split of each finished request (its RequestStateStats): waiting, then running
        # (prefill to the first token, decode from it to the last), on the e2e buckets.
        (
            self.request_queue_time,
            self.request_prefill_time,
            self.request_decode_time,
            self.request_inference_time,
        ) = (
            histogram(name, doc, sc.VLLM_E2E_BUCKETS_S)
            for name, doc in (
                (sc.VLLM_REQUEST_QUEUE_TIME, "Histogram of time spent in WAITING phase for request."),
                (sc.VLLM_REQUEST_PREFILL_TIME, "Histogram of time spent in PREFILL phase for request."),
                (sc.VLLM_REQUEST_DECODE_TIME, "Histogram of time spent in DECODE phase for request."),
                (sc.VLLM_REQUEST_INFERENCE_TIME, "Histogram of time spent in RUNNING phase for request."),
            )
        )
        self.request_prompt_tokens = histogram(
            sc.VLLM_REQUEST_PROMPT_TOKENS, "Number of prefill tokens processed.", _TOKEN_BUCKETS
        )
        self.request_generation_tokens = histogram(
            sc.VLLM_REQUEST_GENERATION_TOKENS, "Number of generation tokens processed.", _TOKEN_BUCKETS
        )

    def observe_phases(
        self, arrival_ns: int, scheduled_ns: int | None, first_ns: int | None, last_ns: int, finished_ns: int
    ) -> None:
        """A finished request's queue, prefill, decode and inference times (model ns stamps), as
        vLLM observes them: a phase the request never reached is not observed."""
        self.request_queue_time.observe(
            max(0, (scheduled_ns if scheduled_ns is not None else finished_ns) - arrival_ns) / NS_PER_S
        )
        if scheduled_ns is None:
            return
        self.request_inference_time.observe(max(0, finished_ns - scheduled_ns) / NS_PER_S)
        if first_ns is not None:
            self.request_prefill_time.observe(max(0, first_ns - scheduled_ns) / NS_PER_S)
            self.request_decode_time.observe(max(0, last_ns - first_ns) / NS_PER_S)

    def exposition(self) -> bytes:
        """The scrape body, in the Prometheus text format vLLM serves."""
        return generate_latest(self.registry)
