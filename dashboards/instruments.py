"""Instruments: which gauges measure load (the article's Act 1 and Appendix F).

The GPU's utilization and power against the engines' tokens/s, and Nsight's SM Issue: the
busy gauge pins at 96% and power barely moves while throughput rises many times over.

GPUs are told apart by box and GPU id: every box has a GPU 0. A box is the ``host_name`` label
every series carries (the box's collector stamps its SPARK_OTEL_BOX on every point), whichever
process sampled it.
"""

from __future__ import annotations

from grafana_foundation_sdk.builders import dashboard as gd

from spark_otel import _semconv as sc

from . import series as s
from ._grafana import (
    BOX_SEL,
    ENGINE_SEL,
    TOKENS_PER_S,
    Query,
    legend,
    neutral,
    new_dashboard,
    stat,
    timeseries,
)
from .prometheus_names import Kind, prometheus_name

UID = "spark-otel-instruments"

_GPU = f"{s.BOX}, {s.GPU_ID}"

GPU_UTILIZATION = Query(
    f"max by ({_GPU}) ({s.GPU_UTILIZATION}{{{BOX_SEL}}})",
    legend("utilization.gpu, {0} GPU {1}", s.BOX, s.GPU_ID),
)
# The busy gauge over the time range, per box and GPU: a number that reads high whatever the load.
GPU_UTILIZATION_MEAN = Query(
    f"avg by ({_GPU}) (avg_over_time({s.GPU_UTILIZATION}{{{BOX_SEL}}}[$__range]))",
    legend("utilization.gpu, {0} GPU {1}", s.BOX, s.GPU_ID),
)
GPU_POWER = Query(
    f"max by ({_GPU}) ({s.GPU_POWER}{{{BOX_SEL}}})", legend("power.draw, {0} GPU {1}", s.BOX, s.GPU_ID)
)
_TOKENS_BY_BOX = (
    f"sum by ({s.BOX}) (rate({s.ENGINE_GENERATION_TOKENS}{{{ENGINE_SEL}, {BOX_SEL}}}[$__rate_interval]))"
)
TOKENS_RATE = Query(_TOKENS_BY_BOX, legend("{0}: tokens/s, selected engines", s.BOX))
# Each box's tokens over that box's own GPUs' power, never over every box's.
TOKENS_PER_WATT = Query(
    f"{_TOKENS_BY_BOX} / on ({s.BOX}) sum by ({s.BOX}) ({s.GPU_POWER}{{{BOX_SEL}}})",
    legend("{0}: tokens per joule", s.BOX),
)
# The energy counter (NVML's, in J) as the GPU sampler exports it; a counter, so rate() is watts.
GPU_ENERGY = prometheus_name(sc.GPU_ENERGY, "J", Kind.COUNTER)
# Each box's joules per generated token: its GPUs' energy-counter rate over its engines' token
# rate, both over the same window, so the ratio is J/token (W over tok/s) with no unit guessing.
JOULES_PER_TOKEN = Query(
    f"sum by ({s.BOX}) (rate({GPU_ENERGY}{{{BOX_SEL}}}[$__rate_interval])) / on ({s.BOX}) "
    f"({_TOKENS_BY_BOX} > 0)",
    legend("{0}: J per token (energy counter)", s.BOX),
)
# Where the GPU has no energy counter (nvidia-smi), the same from mean power: an estimate.
JOULES_PER_TOKEN_FROM_POWER = Query(
    f"sum by ({s.BOX}) (avg_over_time({s.GPU_POWER}{{{BOX_SEL}}}[$__rate_interval])) / on ({s.BOX}) "
    f"({_TOKENS_BY_BOX} > 0)",
    legend("{0}: J per token (mean power, estimated)", s.BOX),
)
NSIGHT_SM_ISSUE = Query(
    f'{s.NSIGHT_METRIC}{{{s.NSIGHT_NAME}="SM Issue", {BOX_SEL}}}',
    legend("SM Issue, {0}: {1}", s.BOX, s.NSIGHT_CAPTURE),
)
NSIGHT_GR_ACTIVE = Query(
    f'{s.NSIGHT_METRIC}{{{s.NSIGHT_NAME}="GR Active", {BOX_SEL}}}',
    legend("GR Active, {0}: {1}", s.BOX, s.NSIGHT_CAPTURE),
)


def build() -> gd.Dashboard:
    return (
        new_dashboard(
            UID,
            "spark-otel / Instruments",
            "Which gauge measures load: GPU utilization and power against tokens/s, and Nsight's "
            "SM Issue. utilization.gpu is a resident-kernel flag; it does not move with load.",
            eval_variable=False,
        )
        .with_panel(
            timeseries(
                "GPU utilization (the busy gauge)",
                "nvidia-smi's utilization.gpu: the fraction of sample periods with any kernel "
                "resident, per box and GPU. During decode it pins near 96% whatever the load.",
                "percentunit",
                [GPU_UTILIZATION],
            )
        )
        .with_panel(
            stat(
                "Busy gauge over the range",
                "Mean utilization.gpu over the time range, per box and GPU. Not coloured as a "
                "warning: high is neither bad nor load (the article: 96% busy while the SMs issued "
                "on 3.1% of cycles).",
                "percentunit",
                [GPU_UTILIZATION_MEAN],
                neutral(),
                width=12,
            )
        )
        .with_panel(
            timeseries(
                "Tokens per second",
                "What the engines actually produce: the generation counters' rate, per box. "
                "Compare its swing with the busy gauge's beside it.",
                TOKENS_PER_S,
                [TOKENS_RATE],
            )
        )
        .with_panel(
            timeseries(
                "GPU power",
                "power.draw per box and GPU: 34 to 40 W across a 17× throughput range in the "
                "article; no better a load gauge than utilization.",
                "watt",
                [GPU_POWER],
            )
        )
        .with_panel(
            timeseries(
                "Tokens per joule",
                "Each box's engine tokens per second over the same box's GPU watts: how much work "
                "each joule buys. Rises with batching while power stays flat. Needs the engine "
                "counters from the box's spark-otel receive (the scrape path labels them with "
                "the engine's address instead).",
                "suffix: tok/J",
                [TOKENS_PER_WATT],
            )
        )
        .with_panel(
            timeseries(
                "Joules per token",
                "Each box's GPU energy per generated token: the energy counter's rate (NVML, in J) "
                "over the engines' token rate on the same box; where the GPU has no counter, its mean "
                "power over the same rate, an estimate. Falls as batching spreads the same watts over "
                "more tokens (the article: 34 to 40 W across a 17x throughput range). Per-cell and "
                "per-eval figures: spark-otel concurrency.",
                "suffix: J/tok",
                [JOULES_PER_TOKEN, JOULES_PER_TOKEN_FROM_POWER],
            )
        )
        .with_panel(
            timeseries(
                "Nsight SM Issue and GR Active",
                "Nsight Systems GPU metrics at their capture times (spark-otel ingest-nsight): GR "
                "Active reads 99.9% like the busy gauge; SM Issue, the rate the SMs issue "
                "instructions, reads about 3% at 1, 8 and 32 streams alike.",
                "percent",
                [NSIGHT_SM_ISSUE, NSIGHT_GR_ACTIVE],
            )
        )
    )
