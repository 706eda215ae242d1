"""Deadlines: what the per-cell ceiling does at each concurrency (the article's Appendix E).

Ceiling hits, salvaged findings and degraded cells (cut off but kept findings), by eval and
worker count; cell durations against the ceiling; and the time the queue governor held cells
before they started, with each lane's cells running and waiting (a wait is not part of a cell's
time, so it never moves the ceiling panels).
"""

from __future__ import annotations

from grafana_foundation_sdk.builders import dashboard as gd

from . import series as s
from ._grafana import (
    BAD,
    BOX_SEL,
    ENGINE_SEL,
    EVAL_SEL,
    GOOD,
    NEUTRAL,
    WARN,
    Query,
    legend,
    neutral,
    new_dashboard,
    stat,
    thresholds,
    timeseries,
)

UID = "spark-otel-deadlines"

# Every selector filters by box and every result keeps it: one box's cells never count another's.
_BY = f"{s.BOX}, {s.EVAL}, {s.WORKERS}"
_SEL = f"{EVAL_SEL}, {ENGINE_SEL}, {BOX_SEL}"
DEADLINE_HITS = Query(
    f"sum by ({_BY}) (increase({s.CELL_DEADLINE_HITS}{{{_SEL}}}[$__range]))",
    legend("{0}: {1} at {2} workers", s.BOX, s.EVAL, s.WORKERS),
)
CELLS_BY_STATUS = Query(
    f"sum by ({_BY}, {s.STATUS}) (increase({s.CELLS}{{{_SEL}}}[$__range]))",
    legend("{0}: {1} at {2} workers: {3}", s.BOX, s.EVAL, s.WORKERS, s.STATUS),
)
SALVAGED = Query(
    f"sum by ({_BY}) (increase({s.CELL_SALVAGED}{{{_SEL}}}[$__range]))",
    legend("{0}: {1} at {2} workers", s.BOX, s.EVAL, s.WORKERS),
)
DEGRADED = Query(
    f'sum by ({s.BOX}, {s.EVAL}) (increase({s.SPAN_CALLS}{{{s.DEGRADED}="true", {_SEL}}}[$__range]))',
    legend("{0}: {1} degraded", s.BOX, s.EVAL),
)
DEADLINE_HIT_RATE = Query(
    f"sum by ({_BY}) (rate({s.CELL_DEADLINE_HITS}{{{_SEL}}}[$__rate_interval]))"
    f" / sum by ({_BY}) (rate({s.CELLS}{{{_SEL}}}[$__rate_interval]))",
    legend("{0}: {1} at {2} workers", s.BOX, s.EVAL, s.WORKERS),
)
DURATION_P95 = Query(
    f"spark_otel:cell_duration_seconds:p95_rate5m{{{_SEL}}}",
    legend("{0}: {1} on {2} at {3} workers, p95", s.BOX, s.EVAL, s.ENGINE, s.WORKERS),
)

_PHASE_SUM = f"increase({s.CELL_PHASE_DURATION}_sum{{{_SEL}}}[$__range])"
TIME_BY_PHASE = Query(
    f"sum by ({s.BOX}, {s.EVAL}, {s.PHASE}) ({_PHASE_SUM})"
    f" / ignoring ({s.PHASE}) group_left sum by ({s.BOX}, {s.EVAL}) ({_PHASE_SUM})",
    legend("{0}: {1}: {2}", s.BOX, s.EVAL, s.PHASE),
)

_LANE_SEL = f"{ENGINE_SEL}, {BOX_SEL}"
QUEUE_WAIT_P95 = Query(
    f"histogram_quantile(0.95, sum by (le, {s.BOX}, {s.EVAL}, {s.ENGINE})"
    f" (increase({s.GOVERNOR_QUEUE_WAIT}_bucket{{{_SEL}}}[$__range])))",
    legend("{0}: {1} on {2}, p95", s.BOX, s.EVAL, s.ENGINE),
)
LANE_IN_USE = Query(
    f"sum by ({s.BOX}, {s.ENGINE}) ({s.GOVERNOR_SLOTS}{{{_LANE_SEL}}})",
    legend("{0}: {1} running", s.BOX, s.ENGINE),
)
LANE_WAITING = Query(
    f"sum by ({s.BOX}, {s.ENGINE}) ({s.GOVERNOR_QUEUE}{{{_LANE_SEL}}})",
    legend("{0}: {1} waiting", s.BOX, s.ENGINE),
)


def build() -> gd.Dashboard:
    return (
        new_dashboard(
            UID,
            "spark-otel / Deadlines",
            "What the per-cell wall-clock ceiling does at each concurrency: ceiling hits, "
            "salvaged findings and degraded cells by eval and worker count.",
        )
        .with_panel(
            stat(
                "Ceiling hits",
                "Cells cut off at their wall-clock ceiling over the time range, by eval and "
                "worker count (spark_otel.cell.deadline_hits). Red from one: a cell that hit "
                "its ceiling lost the time it ran (the article's rule: a stream 20% slower turns "
                "a cell that fit into one that does not).",
                "short",
                [DEADLINE_HITS],
                thresholds(GOOD, (1, BAD)),
            )
        )
        .with_panel(
            stat(
                "Salvaged findings",
                "Complete findings kept from cut-off streams over the time range: what "
                "streaming against a deadline saved. Neither good nor bad by itself.",
                "short",
                [SALVAGED],
                neutral(),
            )
        )
        .with_panel(
            stat(
                "Degraded cells",
                "Cells cut off at the ceiling that still kept findings: degraded, not lost "
                "(span metrics of cell spans with spark_otel.cell.degraded=true). Orange from one.",
                "short",
                [DEGRADED],
                thresholds(GOOD, (1, WARN)),
            )
        )
        .with_panel(
            stat(
                "Cells by status",
                "Finished cells over the time range by eval, worker count and status "
                "(ok, deadline, length_cap, error): ok green, deadline and error red, length_cap "
                "orange.",
                "short",
                [CELLS_BY_STATUS],
                thresholds(NEUTRAL),
                regex_colours=[
                    (".*: ok$", GOOD),
                    (".*: (deadline|error)$", BAD),
                    (".*: length_cap$", WARN),
                ],
            )
        )
        .with_panel(
            timeseries(
                "Share of cells hitting the ceiling",
                "Ceiling hits over cells finished, per interval, by eval and worker count: the "
                "article's cut-offs at 8 streams against 4.",
                "percentunit",
                [DEADLINE_HIT_RATE],
            )
        )
        .with_panel(
            timeseries(
                "Cell duration p95 against the ceiling",
                "95th percentile of cell wall clock (5-minute recording rule), by eval and worker "
                "count; a p95 at the ceiling means cells are being cut off.",
                "s",
                [DURATION_P95],
            )
        )
        .with_panel(
            stat(
                "Where cells' time went",
                "Each eval's cell time over the time range by phase, as a share of all of it "
                "(spark_otel.cell.phase.duration): admission (held by the governor), first_token "
                "(waiting for the engine's queue and prefill), decode, unsplit (requests not "
                "streamed) and other (the runner's own work). A first_token share that grows with "
                "workers is contended prefill; `spark-otel cells --budget` splits it into the "
                "engine's queue and prefill where its server spans are joined.",
                "percentunit",
                [TIME_BY_PHASE],
                neutral(),
            )
        )
        .with_panel(
            stat(
                "Queue wait p95",
                "95th percentile of how long the queue governor held an eval's cells before they "
                "started, over the time range (spark_otel.governor.queue_wait, model s), by eval "
                "and engine. Orange from a minute: the rules are holding that eval back, as meant "
                "while a ceiling-bound neighbour runs; `spark-otel lanes` says which rule.",
                "s",
                [QUEUE_WAIT_P95],
                thresholds(GOOD, (60, WARN)),
            )
        )
        .with_panel(
            timeseries(
                "Governed cells running and waiting per lane",
                "Cells the governor admitted and running, and cells waiting for their lane, per "
                "engine, summed over every governed runner of the box "
                "(spark_otel.governor.slots_in_use, spark_otel.governor.queue_length).",
                "short",
                [LANE_IN_USE, LANE_WAITING],
            )
        )
    )
