"""Concurrency: what concurrent streams buy on each engine (the article's Acts 2 and 3).

Per-stream and aggregate tok/s against the streams in flight, the cells' per-stream rate by
worker count, the engine's own generation rate, requests running and waiting, and the probe's
levels; annotated with the engine's request levels, the evals' runs and the probe levels that
span metrics report.
"""

from __future__ import annotations

from grafana_foundation_sdk.builders import dashboard as gd

from . import series as s
from ._grafana import (
    BOX_SEL,
    ENGINE_SEL,
    EVAL_SEL,
    PROBE_LEVELS_TEXT,
    TOKENS_PER_S,
    Query,
    annotation,
    bar_gauge,
    legend,
    neutral,
    new_dashboard,
    timeseries,
)

UID = "spark-otel-concurrency"

# Every selector filters by box (multi-select, "All" by default) and every result keeps the box,
# so no series mixes two boxes' engines or cells.
_ENGINE_SEL = f"{ENGINE_SEL}, {BOX_SEL}"
_CELLS_SEL = f"{ENGINE_SEL}, {EVAL_SEL}, {BOX_SEL}"
_BY_EVAL_ENGINE_WORKERS = f"{s.BOX}, {s.EVAL}, {s.ENGINE}, {s.WORKERS}"
_BY_ENGINE = f"{s.BOX}, {s.ENGINE}"
CELL_DECODE_RATE_BY_WORKERS = Query(
    f"sum by ({_BY_EVAL_ENGINE_WORKERS}) (rate({s.CELL_DECODE_RATE}_sum{{{_CELLS_SEL}}}[$__rate_interval]))"
    f" / sum by ({_BY_EVAL_ENGINE_WORKERS}) (rate({s.CELL_DECODE_RATE}_count{{{_CELLS_SEL}}}"
    "[$__rate_interval]))",
    legend("{0}: {1} on {2} at {3} workers", s.BOX, s.EVAL, s.ENGINE, s.WORKERS),
)
# What concurrency buys: the mean per-stream (per-cell) decode rate of the cells that finished
# in the time range, one series per worker count (of each eval on each engine of each box).
_BY_WORKERS = f"{s.WORKERS}, {s.BOX}, {s.EVAL}, {s.ENGINE}"
PER_STREAM_RATE_BY_WORKERS = Query(
    f"sum by ({_BY_WORKERS}) (increase({s.CELL_DECODE_RATE}_sum{{{_CELLS_SEL}}}[$__range]))"
    f" / sum by ({_BY_WORKERS}) (increase({s.CELL_DECODE_RATE}_count{{{_CELLS_SEL}}}[$__range]))",
    legend("{0} workers: {1} on {2}, {3}", s.WORKERS, s.EVAL, s.ENGINE, s.BOX),
)
CELLS_IN_FLIGHT = Query(
    f"sum by ({s.BOX}, {s.EVAL}, {s.ENGINE}) ({s.CELLS_IN_FLIGHT}{{{_CELLS_SEL}}})",
    legend("{0}: {1} on {2}", s.BOX, s.EVAL, s.ENGINE),
)
ENGINE_GENERATION_RATE = Query(
    f"sum by ({_BY_ENGINE}) (rate({s.ENGINE_GENERATION_TOKENS}{{{_ENGINE_SEL}}}[$__rate_interval]))",
    legend("{0}: {1} aggregate", s.BOX, s.ENGINE),
)
PER_STREAM_RATE = Query(
    f"spark_otel:engine_per_stream_rate:rate1m{{{_ENGINE_SEL}}}",
    legend("{0}: {1} per stream", s.BOX, s.ENGINE),
)
REQUESTS_RUNNING = Query(
    f"sum by ({_BY_ENGINE}) ({s.ENGINE_REQUESTS_RUNNING}{{{_ENGINE_SEL}}})",
    legend("{0}: {1} running", s.BOX, s.ENGINE),
)
REQUESTS_WAITING = Query(
    f"sum by ({_BY_ENGINE}) ({s.ENGINE_REQUESTS_WAITING}{{{_ENGINE_SEL}}})",
    legend("{0}: {1} waiting", s.BOX, s.ENGINE),
)
PER_STREAM_RATE_RAW = Query(
    f"sum by ({_BY_ENGINE}) (rate({s.ENGINE_GENERATION_TOKENS}{{{_ENGINE_SEL}}}[$__rate_interval]))"
    f" / on ({_BY_ENGINE}) (sum by ({_BY_ENGINE}) ({s.ENGINE_REQUESTS_RUNNING}{{{_ENGINE_SEL}}}) > 0)",
    legend("{0}: {1} per stream", s.BOX, s.ENGINE),
)

# Annotations. The engine's own request gauge marks each level it ran at (a probe level of N
# streams shows as N plus whatever else the engine ran); count_values gives each level its own
# series, so Grafana draws one region per level.
REQUEST_LEVELS = Query(
    f'count_values by ({_BY_ENGINE}) ("streams", '
    f"sum by ({_BY_ENGINE}) ({s.ENGINE_REQUESTS_RUNNING}{{{_ENGINE_SEL}}}) > 0)",
    legend("{0}: {1}: {2} requests running", s.BOX, s.ENGINE, "streams"),
)
# The evals' runs: while an eval has cells in flight (the load windows the CLI derives from
# other evals' cells).
EVAL_RUNS = Query(
    f"sum by ({s.BOX}, {s.EVAL}, {s.ENGINE}) ({s.CELLS_IN_FLIGHT}{{{_CELLS_SEL}}}) > 0",
    legend("{0}: {1} on {2}: cells in flight", s.BOX, s.EVAL, s.ENGINE),
)
# Probe levels by name: the probe's load-window spans, counted by the collector's span_metrics
# connector. A span is exported when its level ends, so this marks the rate interval in which
# the level was reported, not the level itself.
PROBE_LEVELS = Query(
    f"sum by ({s.SPAN_NAME}, {_BY_ENGINE}) (increase({s.SPAN_CALLS}"
    f'{{{s.SPAN_NAME}=~"{s.PROBE_LEVEL_SPAN_NAMES}", {_ENGINE_SEL}}}[$__rate_interval])) > 0',
    legend("{0}: {1} on {2}: level reported", s.BOX, s.SPAN_NAME, s.ENGINE),
)


def build() -> gd.Dashboard:
    return (
        new_dashboard(
            UID,
            "spark-otel / Concurrency",
            "What concurrent streams buy on each engine: per-stream and aggregate tok/s against "
            "the streams in flight. Read load from token counts, never from the GPU busy gauge.",
            annotations=[
                annotation(
                    "Requests running (levels)",
                    REQUEST_LEVELS,
                    "purple",
                    text="The engine ran this many requests (its own gauge): a probe level, the "
                    "evals' workers and anything else sharing the engine.",
                ),
                annotation(
                    "Eval runs",
                    EVAL_RUNS,
                    "orange",
                    text="The eval had cells in flight on this engine.",
                ),
                annotation("Probe levels (span metrics)", PROBE_LEVELS, "red", text=PROBE_LEVELS_TEXT),
            ],
        )
        .with_row(gd.Row("Cells"))
        .with_panel(
            timeseries(
                "Per-cell decode rate by workers",
                "Completion tokens over wall clock per finished cell, averaged over the cells that "
                "finished in each interval, by eval, engine and worker count. The article: 11.6 "
                "tok/s serially on the dense engine, 9.2 at eight workers.",
                TOKENS_PER_S,
                [CELL_DECODE_RATE_BY_WORKERS],
            )
        )
        .with_panel(
            bar_gauge(
                "What concurrency buys: per-stream rate by workers",
                "Mean per-stream decode rate of the cells that finished in the time range, one bar "
                "per worker count (of each eval on each engine): what each stream keeps as the "
                "workers rise. The article's generation-heavy review cells: 11.6 tok/s at one "
                "worker, 9.2 at eight (20% per cell) for 4.7 times less wall clock. The first "
                "cell of a series born inside the range does not count (see Reading them right).",
                TOKENS_PER_S,
                [PER_STREAM_RATE_BY_WORKERS],
                neutral(),
            )
        )
        .with_panel(
            timeseries(
                "Cells in flight",
                "Eval cells running now, by eval and engine (spark_otel.cells.in_flight): the "
                "streams the evals hold open.",
                "short",
                [CELLS_IN_FLIGHT],
                width=24,
                height=6,
            )
        )
        .with_row(gd.Row("Engine"))
        .with_panel(
            timeseries(
                "Engine generation rate",
                "Aggregate tokens per second from the engine's own generation counter, and the "
                "per-stream rate (aggregate over requests running, 1-minute recording rule). The "
                "article: 11.1 tok/s alone, 80.5 aggregate at 8 streams on the dense engine.",
                TOKENS_PER_S,
                [ENGINE_GENERATION_RATE, PER_STREAM_RATE],
            )
        )
        .with_panel(
            timeseries(
                "Requests running and waiting",
                "The engine's scheduler: requests decoding now and requests queued. Waiting above "
                "zero means the engine, not the client, limits concurrency.",
                "short",
                [REQUESTS_RUNNING, REQUESTS_WAITING],
            )
        )
        .with_row(gd.Row("Probe levels"))
        .with_panel(
            timeseries(
                "Per-stream tok/s at each level",
                "The engine's generation rate over the requests it is running: during a probe "
                "level (spark-otel probe) this is the per-stream rate at that many streams, read "
                "from the engine's own counter as in the article's Appendix A. Levels show as "
                "steps in requests running beside it.",
                TOKENS_PER_S,
                [PER_STREAM_RATE_RAW],
            )
        )
        .with_panel(
            timeseries(
                "Streams running",
                "Requests the engine is decoding now: the probe's level, the eval's workers and "
                "anything else sharing the engine.",
                "short",
                [REQUESTS_RUNNING],
            )
        )
    )
