"""Concurrency: what concurrent streams buy on each engine (the article's Acts 2 and 3).

Per-stream and aggregate tok/s against the streams in flight, the engine's own generation
rate, requests running and waiting, and the probe's levels.
"""

from __future__ import annotations

from grafana_foundation_sdk.builders import dashboard as gd

from . import series as s
from ._grafana import ENGINE_SEL, EVAL_SEL, TOKENS_PER_S, Query, legend, new_dashboard, timeseries

UID = "spark-otel-concurrency"

_BY_ENGINE_WORKERS = f"{s.ENGINE}, {s.WORKERS}"
CELL_DECODE_RATE_BY_WORKERS = Query(
    f"sum by ({_BY_ENGINE_WORKERS}) (rate({s.CELL_DECODE_RATE}_sum{{{ENGINE_SEL}, {EVAL_SEL}}}"
    "[$__rate_interval]))"
    f" / sum by ({_BY_ENGINE_WORKERS}) (rate({s.CELL_DECODE_RATE}_count{{{ENGINE_SEL}, {EVAL_SEL}}}"
    "[$__rate_interval]))",
    legend("{0} at {1} workers", s.ENGINE, s.WORKERS),
)
CELLS_IN_FLIGHT = Query(
    f"sum by ({s.ENGINE}) ({s.CELLS_IN_FLIGHT}{{{ENGINE_SEL}, {EVAL_SEL}}})", legend("{0}", s.ENGINE)
)
ENGINE_GENERATION_RATE = Query(
    f"sum by ({s.ENGINE}) (rate({s.ENGINE_GENERATION_TOKENS}{{{ENGINE_SEL}}}[$__rate_interval]))",
    legend("{0} aggregate", s.ENGINE),
)
PER_STREAM_RATE = Query(
    f"spark_otel:engine_per_stream_rate:rate1m{{{ENGINE_SEL}}}", legend("{0} per stream", s.ENGINE)
)
REQUESTS_RUNNING = Query(
    f"sum by ({s.ENGINE}) ({s.ENGINE_REQUESTS_RUNNING}{{{ENGINE_SEL}}})", legend("{0} running", s.ENGINE)
)
REQUESTS_WAITING = Query(
    f"sum by ({s.ENGINE}) ({s.ENGINE_REQUESTS_WAITING}{{{ENGINE_SEL}}})", legend("{0} waiting", s.ENGINE)
)
PER_STREAM_RATE_RAW = Query(
    f"sum by ({s.ENGINE}) (rate({s.ENGINE_GENERATION_TOKENS}{{{ENGINE_SEL}}}[$__rate_interval]))"
    f" / on ({s.ENGINE}) (sum by ({s.ENGINE}) ({s.ENGINE_REQUESTS_RUNNING}{{{ENGINE_SEL}}}) > 0)",
    legend("{0} per stream", s.ENGINE),
)


def build() -> gd.Dashboard:
    return (
        new_dashboard(
            UID,
            "spark-otel / Concurrency",
            "What concurrent streams buy on each engine: per-stream and aggregate tok/s against "
            "the streams in flight. Read load from token counts, never from the GPU busy gauge.",
        )
        .with_row(gd.Row("Cells"))
        .with_panel(
            timeseries(
                "Per-cell decode rate by workers",
                "Completion tokens over wall clock per finished cell, averaged over the cells that "
                "finished in each interval, by engine and worker count. The article: 11.6 tok/s "
                "serially on the dense engine, 9.2 at eight workers.",
                TOKENS_PER_S,
                [CELL_DECODE_RATE_BY_WORKERS],
            )
        )
        .with_panel(
            timeseries(
                "Cells in flight",
                "Eval cells running now on each engine (spark_otel.cells.in_flight): the streams "
                "the evals hold open.",
                "short",
                [CELLS_IN_FLIGHT],
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
