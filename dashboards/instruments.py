"""Instruments: which gauges measure load (the article's Act 1 and Appendix F).

The GPU's utilization and power against the engines' tokens/s, and Nsight's SM Issue: the
busy gauge pins at 96% and power barely moves while throughput rises many times over.
"""

from __future__ import annotations

from grafana_foundation_sdk.builders import dashboard as gd

from . import series as s
from ._grafana import ENGINE_SEL, TOKENS_PER_S, Query, legend, new_dashboard, timeseries

UID = "spark-otel-instruments"

GPU_UTILIZATION = Query(
    f"max by ({s.GPU_ID}) ({s.GPU_UTILIZATION})", legend("utilization.gpu, GPU {0}", s.GPU_ID)
)
GPU_POWER = Query(f"max by ({s.GPU_ID}) ({s.GPU_POWER})", legend("power.draw, GPU {0}", s.GPU_ID))
TOKENS_RATE = Query(
    f"sum(rate({s.ENGINE_GENERATION_TOKENS}{{{ENGINE_SEL}}}[$__rate_interval]))", "tokens/s, selected engines"
)
TOKENS_PER_WATT = Query(
    f"sum(rate({s.ENGINE_GENERATION_TOKENS}{{{ENGINE_SEL}}}[$__rate_interval])) / sum({s.GPU_POWER})",
    "tokens per joule",
)
NSIGHT_SM_ISSUE = Query(
    f'{s.NSIGHT_METRIC}{{{s.NSIGHT_NAME}="SM Issue"}}', legend("SM Issue, {0}", s.NSIGHT_CAPTURE)
)
NSIGHT_GR_ACTIVE = Query(
    f'{s.NSIGHT_METRIC}{{{s.NSIGHT_NAME}="GR Active"}}', legend("GR Active, {0}", s.NSIGHT_CAPTURE)
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
                "resident. During decode it pins near 96% whatever the load.",
                "percentunit",
                [GPU_UTILIZATION],
            )
        )
        .with_panel(
            timeseries(
                "Tokens per second",
                "What the engines actually produce: the generation counters' rate. Compare its "
                "swing with the busy gauge's beside it.",
                TOKENS_PER_S,
                [TOKENS_RATE],
            )
        )
        .with_panel(
            timeseries(
                "GPU power",
                "power.draw: 34 to 40 W across a 17× throughput range in the article; no better "
                "a load gauge than utilization.",
                "watt",
                [GPU_POWER],
            )
        )
        .with_panel(
            timeseries(
                "Tokens per joule",
                "Engine tokens per second over GPU watts: how much work each joule buys. Rises "
                "with batching while power stays flat.",
                "suffix: tok/J",
                [TOKENS_PER_WATT],
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
                width=24,
            )
        )
    )
