"""Neighbour cost: what other load on the box takes from an eval's cells (the article's Act 4).

The eval's per-cell decode rate against its own baseline band (p10, p50, p90 over the
intervals of the time range in which no other engine ran a request), the load on the same and
on the other engines beside it, and the cost in percent.

The engine variable is single-select without "All": "the other engines" are every engine but
the one picked, which a multi-value selection (sent as the regex ``.*`` for "All") cannot say.
So is the box: an eval's neighbours are the other engines of its own box, never another box's
(every selector carries ``host_name="$box"``).
The eval variable lists the evals whose cells finished on that engine; the band panel repeats
for each eval picked, so each copy's p90 fills down to its own p10.

The advisor's cost threshold (`spark_otel.analysis.advisor.AdvisorConfig.threshold`) colours
the cost panels and is drawn as a line on the cost over time.
"""

from __future__ import annotations

from grafana_foundation_sdk.builders import dashboard as gd
from grafana_foundation_sdk.models import dashboard as dm

from spark_otel.analysis.advisor import AdvisorConfig

from . import series as s
from ._grafana import (
    BAD,
    BOX_ONE,
    EVAL_SEL,
    GOOD,
    PROBE_LEVELS_TEXT,
    TOKENS_PER_S,
    Query,
    annotation,
    box_variable,
    engine_variable,
    legend,
    neutral,
    new_dashboard,
    stat,
    thresholds,
    timeseries,
    variable,
)

UID = "spark-otel-neighbour-cost"

# The neighbour cost at which the advisor flags a load (a fraction), in percent: its default,
# read from the advisor so the dashboards and `spark-otel advise` never disagree.
COST_THRESHOLD_PERCENT = round(100 * AdvisorConfig().threshold, 6)

# The engine picked, and every other engine of the same box (its neighbours).
ENGINE_ONE = f'{s.ENGINE}="$engine", {BOX_ONE}'
NEIGHBOURS = f'{s.ENGINE}!="$engine", {BOX_ONE}'

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
# The band's series are named without the eval: the panel repeats per eval (each copy holds one
# eval's series, its title names it), so the p90 can fill down to the p10 by name.
BAND_P10_NAME = "baseline p10"
BASELINE_P10 = Query(_band(0.1), BAND_P10_NAME)
BASELINE_P50 = Query(_band(0.5), "baseline median")
BASELINE_P90 = Query(_band(0.9), "baseline p90")
COST_PERCENT = Query(
    f"100 * (1 - ({EVAL_RATE_EXPR}) / {_band(0.5)})", legend("{0} on {1}: cost", s.EVAL, s.ENGINE)
)
# The eval's median rate over the intervals in which its neighbours ran, against the baseline
# median over the idle ones.
COST_UNDER_LOAD = Query(
    f"100 * (1 - quantile_over_time(0.5, (({EVAL_RATE_EXPR}) and on () "
    f"({_neighbours_busy('$__rate_interval')}))[$__range:$__interval]) / {_band(0.5)})",
    legend("{0} on {1}", s.EVAL, s.ENGINE),
)
SAME_ENGINE_CELLS = Query(
    f"sum by ({s.EVAL}, {s.ENGINE}) ({s.CELLS_IN_FLIGHT}{{{ENGINE_ONE}}})",
    legend("{0}: cells in flight on {1}", s.EVAL, s.ENGINE),
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
    legend("{0} on {1} at {2} workers", s.EVAL, s.ENGINE, s.WORKERS),
)

# Annotations. The intervals the baseline leaves out: another engine ran a request within the
# rate interval (one region per engine; their union is what the band and cost skip).
BASELINE_PAUSED = Query(
    f"sum by ({s.ENGINE}) (max_over_time({s.ENGINE_REQUESTS_RUNNING}{{{NEIGHBOURS}}}[$__rate_interval])) > 0",
    legend("{0} busy: baseline paused", s.ENGINE),
)
# Load windows: other evals' cells in flight, on any engine (the windows `spark-otel
# neighbour-cost` derives from other evals' cells); the evals picked on this engine are left out.
LOAD_WINDOWS = Query(
    f"sum by ({s.EVAL}, {s.ENGINE}) ({s.CELLS_IN_FLIGHT}{{{BOX_ONE}}}) > 0"
    f" unless on ({s.EVAL}) ({s.CELLS_IN_FLIGHT}{{{ENGINE_ONE}, {EVAL_SEL}}})",
    legend("{0} on {1}: cells in flight", s.EVAL, s.ENGINE),
)
# Probe levels on any engine, as the span metrics of their load-window spans report them.
PROBE_LEVELS = Query(
    f"sum by ({s.SPAN_NAME}, {s.ENGINE}) (increase({s.SPAN_CALLS}"
    f'{{{s.SPAN_NAME}=~"{s.PROBE_LEVEL_SPAN_NAMES}", {BOX_ONE}}}[$__rate_interval])) > 0',
    legend("{0} on {1}: level reported", s.SPAN_NAME, s.ENGINE),
)

EVAL = variable(
    "eval",
    "Eval",
    f"{s.CELL_DECODE_RATE}_count{{{ENGINE_ONE}}}",
    "The evals (spark_otel.eval) whose cells finished on the selected engine of the selected box; the "
    "band repeats for each one picked.",
    values_of=s.EVAL,
)


def _fixed(colour: str) -> dm.DynamicConfigValue:
    return dm.DynamicConfigValue(id_val="color", value={"mode": "fixed", "fixedColor": colour})


def _band_overrides() -> list[tuple[str, list[dm.DynamicConfigValue]]]:
    """p10 (B) and p90 (D) as the band's edges, the p90 filled down to the p10; the median (C)
    a dashed line. The eval's rate (A) stays the panel's only solid line."""
    edge = [dm.DynamicConfigValue(id_val="custom.lineWidth", value=0), _fixed("green")]
    return [
        ("B", [*edge, dm.DynamicConfigValue(id_val="custom.fillOpacity", value=0)]),
        (
            "C",
            [
                dm.DynamicConfigValue(id_val="custom.lineWidth", value=2),
                dm.DynamicConfigValue(id_val="custom.lineStyle", value={"fill": "dash", "dash": [10, 10]}),
                dm.DynamicConfigValue(id_val="custom.fillOpacity", value=0),
                _fixed("green"),
            ],
        ),
        (
            "D",
            [
                *edge,
                dm.DynamicConfigValue(id_val="custom.fillBelowTo", value=BAND_P10_NAME),
                dm.DynamicConfigValue(id_val="custom.fillOpacity", value=20),
            ],
        ),
    ]


def _cost_steps() -> gd.ThresholdsConfig:
    return thresholds(GOOD, (COST_THRESHOLD_PERCENT, BAD))


def build() -> gd.Dashboard:
    return (
        new_dashboard(
            UID,
            "spark-otel / Neighbour cost",
            "What other load on the box costs an eval, read from the eval's own cells: per-cell "
            "decode rate against its baseline band, with the load beside it. Pick one eval and "
            "its engine; the other engines' load is shown beside it.",
            box=box_variable(multi=False),
            engine=engine_variable(multi=False),
            eval_=EVAL,
            annotations=[
                annotation(
                    "Baseline paused (other engines busy)",
                    BASELINE_PAUSED,
                    "yellow",
                    text="Another engine ran a request within the rate interval: the baseline "
                    "band and the cost leave these intervals out.",
                ),
                annotation(
                    "Load windows (other evals)",
                    LOAD_WINDOWS,
                    "orange",
                    text="Another eval had cells in flight: a load window for spark-otel neighbour-cost.",
                ),
                annotation("Probe levels (span metrics)", PROBE_LEVELS, "red", text=PROBE_LEVELS_TEXT),
            ],
        )
        .with_panel(
            timeseries(
                "Decode rate of $eval against its baseline band",
                "Mean decode rate of the eval's cells finishing in each interval, with the p10 to "
                "p90 of that rate as the baseline band (filled) and its median (dashed), taken over "
                "the intervals of the time range in which no other engine ran a request. One "
                "panel per eval picked. The article's serial eval: baseline 11.51 tok/s (p10 "
                "10.51, p90 11.70).",
                TOKENS_PER_S,
                [EVAL_RATE, BASELINE_P10, BASELINE_P50, BASELINE_P90],
                width=24,
                fill_opacity=0,
                overrides=_band_overrides(),
                repeat="eval",
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
                neutral(),
            )
        )
        .with_panel(
            stat(
                "Cost under neighbour load",
                "100 × (1 − median rate while other engines ran / baseline median), over the time "
                f"range. Red from {COST_THRESHOLD_PERCENT:g}%, the advisor's threshold for flagging "
                "a load (spark-otel advise). The article: 54% for a four-worker eval on the other "
                "engine.",
                "percent",
                [COST_UNDER_LOAD],
                _cost_steps(),
            )
        )
        .with_panel(
            timeseries(
                "Cost against baseline",
                "100 × (1 − rate / baseline median): what the load beside the eval takes from its "
                f"cells. The line at {COST_THRESHOLD_PERCENT:g}% is the advisor's threshold for "
                "flagging a load. The article: 5% for one more same-engine stream, 54% for a "
                "four-worker eval on the other engine.",
                "percent",
                [COST_PERCENT],
                steps=_cost_steps(),
                threshold_line=True,
            )
        )
        .with_panel(
            timeseries(
                "Load on the same engine",
                "Eval cells in flight on the selected engine, by eval, and every request the "
                "engine is running (cells, probe streams and other jobs alike).",
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
