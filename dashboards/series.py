"""Every Prometheus series and label the dashboards query, derived from ``_semconv.py``.

Units and kinds are the ones the emitters declare (``spark_otel.telemetry.instruments`` for cells, the
receivers for engines and GPUs); `prometheus_name` turns them into the stored names.
"""

from __future__ import annotations

from spark_otel import _semconv as sc

from .prometheus_names import Kind, prometheus_name


def label(attribute: str) -> str:
    """The Prometheus label an OpenTelemetry attribute becomes."""
    return attribute.replace(".", "_")


# Labels
ENGINE = label(sc.ENGINE)
EVAL = label(sc.EVAL_NAME)
WORKERS = label(sc.CELL_WORKERS)
STATUS = label(sc.CELL_STATUS)
PHASE = label(sc.CELL_PHASE)
DEGRADED = label(sc.CELL_DEGRADED)
TOKEN_TYPE = label(sc.GEN_AI_TOKEN_TYPE)
NSIGHT_NAME = label(sc.NSIGHT_METRIC_NAME)
OPERATION = label(sc.GEN_AI_OPERATION_NAME)
MODEL = label(sc.GEN_AI_REQUEST_MODEL)
SPAN_KIND_LABEL = label(sc.SPAN_KIND_ATTR)
GPU_ID = label(sc.GPU_ID)
NSIGHT_CAPTURE = label(sc.NSIGHT_CAPTURE)
# Prometheus' remote write turns the resource's service.instance.id into `instance` (and
# service.name into `job`): the process that sent a series, e.g. one box's `spark-otel receive`.
INSTANCE = "instance"
JOB = "job"
# The box a series came from: each box's collector copies its resource's host.name (the
# collector's SPARK_OTEL_BOX unless the SDK set one) onto every data point (transform/box in
# collector/otelcol.yaml), so every series carries it; the dashboards' `box` variable filters by it.
BOX = label("host.name")
# The span_metrics connector labels each series with the span's name (and service_name,
# span_kind, status_code) beside the configured dimensions (collector/otelcol.yaml).
SPAN_NAME = "span_name"
# The probe names each level's load-window span "probe N streams" (spark_otel.probe.prober,
# `_Prober.record`); span metrics carry that name, so this regex picks out probe levels.
PROBE_LEVEL_SPAN_NAMES = "probe [0-9]+ streams"

# Cells (spark_otel.telemetry.instruments)
CELL_DECODE_RATE = prometheus_name(sc.CELL_DECODE_RATE_METRIC, "{token}/s", Kind.HISTOGRAM)
CELL_DURATION = prometheus_name(sc.CELL_DURATION, "s", Kind.HISTOGRAM)
CELL_PHASE_DURATION = prometheus_name(sc.CELL_PHASE_DURATION, "s", Kind.HISTOGRAM)
CELL_TOKENS = prometheus_name(sc.CELL_TOKENS, "{token}", Kind.HISTOGRAM)
CELLS = prometheus_name(sc.CELL_COUNT, "{cell}", Kind.COUNTER)
CELL_DEADLINE_HITS = prometheus_name(sc.CELL_DEADLINE_HITS, "{cell}", Kind.COUNTER)
CELL_SALVAGED = prometheus_name(sc.CELL_SALVAGED_FINDINGS_METRIC, "{finding}", Kind.COUNTER)
CELLS_IN_FLIGHT = prometheus_name(sc.CELLS_IN_FLIGHT, "{cell}", Kind.UP_DOWN)

# The queue governor (spark_otel.governor): per engine, summed over each box's processes
GOVERNOR_QUEUE_WAIT = prometheus_name(sc.GOVERNOR_QUEUE_WAIT, "s", Kind.HISTOGRAM)
GOVERNOR_SLOTS = prometheus_name(sc.GOVERNOR_SLOTS, "{cell}", Kind.UP_DOWN)
GOVERNOR_QUEUE = prometheus_name(sc.GOVERNOR_QUEUE, "{cell}", Kind.UP_DOWN)

# Requests (GenAI semconv)
REQUEST_DURATION = prometheus_name(sc.GEN_AI_CLIENT_OPERATION_DURATION, "s", Kind.HISTOGRAM)

# Engines (spark_otel.receivers, or Prometheus scraping /metrics with collector/prometheus.yml)
ENGINE_GENERATION_TOKENS = prometheus_name(sc.ENGINE_GENERATION_TOKENS, "{token}", Kind.COUNTER)
ENGINE_REQUESTS_RUNNING = prometheus_name(sc.ENGINE_REQUESTS_RUNNING, "{request}", Kind.GAUGE)
ENGINE_REQUESTS_WAITING = prometheus_name(sc.ENGINE_REQUESTS_WAITING, "{request}", Kind.GAUGE)

# GPU and Nsight
GPU_UTILIZATION = prometheus_name(sc.GPU_UTILIZATION, "1", Kind.GAUGE)
GPU_POWER = prometheus_name(sc.GPU_POWER, "W", Kind.GAUGE)
NSIGHT_METRIC = prometheus_name(sc.NSIGHT_METRIC, "", Kind.GAUGE)  # unit is an attribute

# Span metrics (the collector's span_metrics connector)
SPAN_CALLS = prometheus_name(sc.SPAN_METRICS_CALLS, "1", Kind.COUNTER)
SPAN_DURATION = prometheus_name(sc.SPAN_METRICS_DURATION, "s", Kind.HISTOGRAM)

# Recording rules (collector/rules.yml): name -> expression
# Each keeps the box, so a dashboard's box filter applies to it and no rule sums two boxes.
RULES: dict[str, str] = {
    "spark_otel:engine_generation_tokens:rate1m": (
        f"sum by ({BOX}, {ENGINE}) (rate({ENGINE_GENERATION_TOKENS}[1m]))"
    ),
    "spark_otel:engine_per_stream_rate:rate1m": (
        f"spark_otel:engine_generation_tokens:rate1m"
        f" / on ({BOX}, {ENGINE}) (sum by ({BOX}, {ENGINE}) ({ENGINE_REQUESTS_RUNNING}) > 0)"
    ),
    "spark_otel:cell_decode_rate:mean_rate1m": (
        f"sum by ({BOX}, {EVAL}, {ENGINE}, {WORKERS}) (rate({CELL_DECODE_RATE}_sum[1m]))"
        f" / sum by ({BOX}, {EVAL}, {ENGINE}, {WORKERS}) (rate({CELL_DECODE_RATE}_count[1m]))"
    ),
    "spark_otel:cell_duration_seconds:p95_rate5m": (
        f"histogram_quantile(0.95, sum by (le, {BOX}, {EVAL}, {ENGINE}, {WORKERS})"
        f" (rate({CELL_DURATION}_bucket[5m])))"
    ),
}
