"""Neighbour cost: what other load on the box takes from an eval's cells (the article's Act 4).

The eval's per-cell decode rate against its own baseline band (p10, p50, p90 over the
intervals of the time range in which no other engine ran a request), the load on the same and
on the other engines beside it, and the cost in percent.

The engine variable is single-select without "All": "the other engines" are every engine but
the one picked, which a multi-value selection (sent as the regex ``.*`` for "All") cannot say.
"""

from __future__ import annotations

from grafana_foundation_sdk.builders import dashboard as gd

from . import series as s
from ._grafana import EVAL_SEL, TOKENS_PER_S, Query, engine_variable, legend, new_dashboard, stat, timeseries

UID = "spark-otel-neighbour-cost"

# The engine picked, and every other engine (its neighbours).
ENGINE_ONE = f'{s.ENGINE}="$engine"'
NEIGHBOURS = f'{s.ENGINE}!="$engine"'

_BY = f"{s.EVAL}, {s.ENGINE}"
# Mean decode rate of the eval's cells that finished in each interval.
EVAL_RATE_EXPR = (
    f"sum by ({_BY}) (rate({s.CELL_DECODE_RATE}_sum{{{EVAL_SEL}, {ENGINE_ONE}}}[$__rate_interval]))"
    f" / sum by ({_BY}) (rate({s.CELL_DECODE_RATE}_count{{{EVAL_SEL}, {ENGINE_ONE}}}[$__rate_interval]))"
)


def _neighbours_busy(window: str) -> str:
    """One series while any other engine ran a request within ``window``, none otherwise."""
    return f"sum(max_over_time({s.ENGINE_REQUESTS_RUNNING}{{{NEIGHBOURS}}}[{window}])) > 0"


# The eval's rate only where its neighbours were idle over the whole rate interval: the baseline
# must not count the loaded periods, however much of the range they cover.
IDLE_RATE_EXPR = f"({EVAL_RATE_EXPR}) unless on () ({_neighbours_busy('$__rate_interval')})"


def _band(q: float) -> str:
    return f"quantile_over_time({q}, ({IDLE_RATE_EXPR})[$__range:$__interval])"


EVAL_RATE = Query(EVAL_RATE_EXPR, legend("{0} on {1}", s.EVAL, s.ENGINE))
BASELINE_P10 = Query(_band(0.1), "baseline p10")
BASELINE_P50 = Query(_band(0.5), "baseline p50")
BASELINE_P90 = Query(_band(0.9), "baseline p90")
COST_PERCENT = Query(f"100 * (1 - ({EVAL_RATE_EXPR}) / {_band(0.5)})", legend("{0} cost", s.EVAL))
SAME_ENGINE_CELLS = Query(
    f"sum by ({s.ENGINE}) ({s.CELLS_IN_FLIGHT}{{{ENGINE_ONE}}})", legend("{0}: cells in flight", s.ENGINE)
)
SAME_ENGINE_RUNNING = Query(
    f"sum by ({s.ENGINE}) ({s.ENGINE_REQUESTS_RUNNING}{{{ENGINE_ONE}}})",
    legend("{0}: requests running", s.ENGINE),
)
OTHER_ENGINE_LOAD = Query(
    f"sum by ({s.ENGINE}) ({s.ENGINE_REQUESTS_RUNNING}{{{NEIGHBOURS}}})",
    legend("{0} running (other engines)", s.ENGINE),
)
BASELINE_MEDIAN = Query(
    "quantile_over_time(0.5, ("
    f"spark_otel:cell_decode_rate:mean_rate1m{{{EVAL_SEL}, {ENGINE_ONE}}}"
    f" unless on () ({_neighbours_busy('1m')}))[$__range:$__interval])",
    legend("{0} on {1}", s.EVAL, s.ENGINE),
)


def build() -> gd.Dashboard:
    return (
        new_dashboard(
            UID,
            "spark-otel / Neighbour cost",
            "What other load on the box costs an eval, read from the eval's own cells: per-cell "
            "decode rate against its baseline band, with the load beside it. Pick one eval and "
            "its engine; the other engines' load is shown beside it.",
            engine=engine_variable(multi=False),
        )
        .with_panel(
            timeseries(
                "Eval decode rate against its baseline band",
                "Mean decode rate of the eval's cells finishing in each interval, with the p10, "
                "p50 and p90 of that rate as the baseline band, taken over the intervals of the "
                "time range in which no other engine ran a request. The article's serial eval: "
                "baseline 11.51 tok/s (p10 10.51, p90 11.70).",
                TOKENS_PER_S,
                [EVAL_RATE, BASELINE_P10, BASELINE_P50, BASELINE_P90],
                width=16,
            )
        )
        .with_panel(
            stat(
                "Baseline (1-minute mean, median over range)",
                "Median of the eval's 1-minute mean decode rate (recording rule "
                "spark_otel:cell_decode_rate:mean_rate1m) over the minutes of the time range in "
                "which no other engine ran a request.",
                TOKENS_PER_S,
                [BASELINE_MEDIAN],
                width=8,
            )
        )
        .with_panel(
            timeseries(
                "Cost against baseline",
                "100 × (1 − rate / baseline p50): what the load beside the eval takes from its "
                "cells. The article: 5% for one more same-engine stream, 54% for a four-worker "
                "eval on the other engine.",
                "percent",
                [COST_PERCENT],
                width=24,
            )
        )
        .with_panel(
            timeseries(
                "Load on the same engine",
                "Eval cells in flight on the selected engine, and every request the engine is "
                "running (cells, probe streams and other jobs alike).",
                "short",
                [SAME_ENGINE_CELLS, SAME_ENGINE_RUNNING],
            )
        )
        .with_panel(
            timeseries(
                "Load on the other engines",
                "Requests running on every engine but the selected one: the neighbours that "
                "compete for the same memory system. While any runs, the baseline is not taken.",
                "short",
                [OTHER_ENGINE_LOAD],
            )
        )
    )
