"""Every attribute name, metric name, unit and bucket boundary spark-otel emits.

GenAI names follow the released OpenTelemetry semantic conventions v1.41 (Development status);
spark-otel's own names live under the ``spark_otel.`` prefix. Dashboards and the collector
config take their names from here, and a test fails if a panel queries a name not defined here.
"""

from __future__ import annotations

SEMCONV_VERSION = "1.41.0"
SCHEMA_URL = "https://opentelemetry.io/schemas/1.41.0"
SCOPE_NAME = "spark_otel"
"""The instrumentation scope of spark-otel's own spans and metrics; the store keeps this scope's metrics."""

# --- GenAI span and metric attributes (semconv v1.41) -------------------------------------------
GEN_AI_OPERATION_NAME = "gen_ai.operation.name"
GEN_AI_PROVIDER_NAME = "gen_ai.provider.name"
GEN_AI_REQUEST_MODEL = "gen_ai.request.model"
GEN_AI_REQUEST_MAX_TOKENS = "gen_ai.request.max_tokens"
GEN_AI_REQUEST_STREAM = "gen_ai.request.stream"
GEN_AI_REQUEST_TEMPERATURE = "gen_ai.request.temperature"
GEN_AI_REQUEST_TOP_P = "gen_ai.request.top_p"
GEN_AI_REQUEST_SEED = "gen_ai.request.seed"
GEN_AI_REQUEST_CHOICE_COUNT = "gen_ai.request.choice.count"
GEN_AI_REQUEST_STOP_SEQUENCES = "gen_ai.request.stop_sequences"
GEN_AI_RESPONSE_ID = "gen_ai.response.id"
GEN_AI_RESPONSE_MODEL = "gen_ai.response.model"
GEN_AI_RESPONSE_FINISH_REASONS = "gen_ai.response.finish_reasons"
GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK = "gen_ai.response.time_to_first_chunk"
GEN_AI_USAGE_INPUT_TOKENS = "gen_ai.usage.input_tokens"
GEN_AI_USAGE_OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
GEN_AI_TOKEN_TYPE = "gen_ai.token.type"
GEN_AI_INPUT_MESSAGES = "gen_ai.input.messages"
GEN_AI_OUTPUT_MESSAGES = "gen_ai.output.messages"
SERVER_ADDRESS = "server.address"
SERVER_PORT = "server.port"
ERROR_TYPE = "error.type"

OPERATION_CHAT = "chat"
OPERATION_TEXT_COMPLETION = "text_completion"
TOKEN_TYPE_INPUT = "input"
TOKEN_TYPE_OUTPUT = "output"
# No well-known provider value exists for vLLM (semconv allows custom values). spark-otel
# reports "vllm" for OpenAI-compatible local engines unless the user names another.
PROVIDER_VLLM = "vllm"
ERROR_TYPE_OTHER = "_OTHER"
# error.type values spark-otel itself sets (low cardinality).
ERROR_TYPE_DEADLINE = "deadline"
ERROR_TYPE_STREAM_ABANDONED = "stream_abandoned"
ERROR_TYPE_STREAM_CLOSED = "stream_closed"
ERROR_TYPE_CANCELLED = "cancelled"
FINISH_REASON_ERROR = "error"

# --- GenAI client metrics (semconv v1.41) -------------------------------------------------------
GEN_AI_CLIENT_OPERATION_DURATION = "gen_ai.client.operation.duration"
GEN_AI_CLIENT_TOKEN_USAGE = "gen_ai.client.token.usage"
GEN_AI_CLIENT_TIME_TO_FIRST_CHUNK = "gen_ai.client.operation.time_to_first_chunk"
GEN_AI_CLIENT_TIME_PER_OUTPUT_CHUNK = "gen_ai.client.operation.time_per_output_chunk"

DURATION_BUCKETS_S: tuple[float, ...] = (
    0.01,
    0.02,
    0.04,
    0.08,
    0.16,
    0.32,
    0.64,
    1.28,
    2.56,
    5.12,
    10.24,
    20.48,
    40.96,
    81.92,
)
TOKEN_BUCKETS: tuple[float, ...] = (
    1,
    4,
    16,
    64,
    256,
    1024,
    4096,
    16384,
    65536,
    262144,
    1048576,
    4194304,
    16777216,
    67108864,
)

# --- eval cells (spark-otel) --------------------------------------------------------------------
SPAN_KIND_ATTR = "spark_otel.span.kind"  # "cell" | "load_window" on spark-otel's own spans
SPAN_KIND_CELL = "cell"
SPAN_KIND_LOAD_WINDOW = "load_window"

EVAL_NAME = (
    "spark_otel.eval"  # on cell and request spans; on the resource: the runner's eval (SPARK_OTEL_EVAL)
)
SERVICE_NAME = "service.name"
DEFAULT_SERVICE_NAME = "spark-otel"  # the service name when the user sets none: names no eval
CELL_ID = "spark_otel.cell.id"
ENGINE = "spark_otel.engine"
CELL_DEADLINE_S = "spark_otel.cell.deadline_s"
CELL_WORKERS = "spark_otel.cell.workers"
CELL_STATUS = "spark_otel.cell.status"
CELL_DEADLINE_HIT = "spark_otel.cell.deadline_hit"
CELL_SALVAGED_FINDINGS = "spark_otel.cell.salvaged_findings"
CELL_DEGRADED = "spark_otel.cell.degraded"
CELL_PROMPT_TOKENS = "spark_otel.cell.prompt_tokens"
CELL_COMPLETION_TOKENS = "spark_otel.cell.completion_tokens"
CELL_ELAPSED_S = "spark_otel.cell.elapsed_s"
CELL_DECODE_RATE = "spark_otel.cell.decode_rate"
CELL_SOURCE = "spark_otel.cell.source"
CELL_UID = "spark_otel.cell.uid"  # on request spans: the span id of the cell they ran in
CELL_REQUESTS = "spark_otel.cell.requests"  # instrumented requests made inside the cell
CELL_FAILED_REQUESTS = "spark_otel.cell.failed_requests"
CELL_QUEUE_WAIT_S = "spark_otel.cell.queue_wait_s"  # model s the governor held the cell before it started
CELL_QUEUE_RULE = "spark_otel.cell.queue_rule"  # the rule that held it back last
CELL_QUEUE_PAST_DEADLINE = "spark_otel.cell.queue_wait_past_deadline"  # True: it waited past its own ceiling
CELL_CLASS = "spark_otel.cell.class"  # the cell class the governor admitted it as
CELL_LEASE_LAPSED = "spark_otel.cell.lease_lapsed"  # True: its governor lease lapsed while it ran
CELL_LEASE_LAPSED_S = "spark_otel.cell.lease_lapsed_s"  # real s past its lease when its runner noticed
CELL_SLOT_TAKEN = "spark_otel.cell.slot_taken"  # True: its slot went to another cell while it was lapsed
# The deadline-slack law (adaptive governing): what the cell was admitted on, and its last hold.
CELL_ADAPTIVE_REASON = "spark_otel.cell.adaptive.reason"  # why the law admitted it
CELL_ADAPTIVE_PROTECTED = "spark_otel.cell.adaptive.protected_cell"  # the tightest protected cell
CELL_ADAPTIVE_FINISH_S = "spark_otel.cell.adaptive.projected_finish_s"  # that cell's projected end, model s
CELL_ADAPTIVE_MARGIN = "spark_otel.cell.adaptive.margin"  # (ceiling - projected finish) / ceiling
CELL_ADAPTIVE_RATE = "spark_otel.cell.adaptive.rate_used"  # its rate projected after the admission, tok/s
CELL_ADAPTIVE_HELD_REASON = "spark_otel.cell.adaptive.held_reason"  # why the law held it last, if it did
CELL_ADAPTIVE_HELD_FOR = "spark_otel.cell.adaptive.held_for"  # the protected cell its last hold named
CELL_ADAPTIVE_HELD_S = "spark_otel.cell.adaptive.held_s"  # the law's own share of the queue wait, model s
CELL_ADAPTIVE_HOLDS = "spark_otel.cell.adaptive.holds"  # how many times the law began holding it
# The cell's time budget (issue 17), model s: its elapsed time split by what the cell waited on.
# first_token + decode + unsplit + other = elapsed; the governor's wait comes before elapsed.
CELL_BUDGET_FIRST_TOKEN_S = "spark_otel.cell.budget.first_token_s"  # waiting for first tokens
CELL_BUDGET_DECODE_S = "spark_otel.cell.budget.decode_s"  # streaming tokens after the first
CELL_BUDGET_UNSPLIT_S = "spark_otel.cell.budget.unsplit_s"  # inside non-streamed requests
CELL_BUDGET_OTHER_S = "spark_otel.cell.budget.other_s"  # in no request: the runner's own work
# Only on a cell whose runner marked where grading began (an Inspect sample): from there to its end,
# and what the grader's requests used; outside the columns above, so a cell's own figures hold
# its answer alone. first_token + decode + unsplit + other + scoring = elapsed.
CELL_BUDGET_SCORING_S = "spark_otel.cell.budget.scoring_s"  # grading and the runner's bookkeeping
CELL_SCORING_REQUESTS = "spark_otel.cell.scoring.requests"  # requests made while grading
CELL_SCORING_INPUT_TOKENS = "spark_otel.cell.scoring.input_tokens"
CELL_SCORING_OUTPUT_TOKENS = "spark_otel.cell.scoring.output_tokens"
CELL_RETRIES = "spark_otel.cell.retries"  # times the runner ran the cell again after an error
CELL_REQUEST_RETRIES = "spark_otel.cell.request_retries"  # model calls the runner retried
TIME_SCALE = "spark_otel.time_scale"  # on a cell recorded under a model clock: its speed (times real)
CELL_ATTRIBUTE_KEYS = frozenset(
    {
        SPAN_KIND_ATTR,
        EVAL_NAME,
        CELL_ID,
        ENGINE,
        CELL_DEADLINE_S,
        CELL_WORKERS,
        CELL_STATUS,
        CELL_DEADLINE_HIT,
        CELL_SALVAGED_FINDINGS,
        CELL_DEGRADED,
        CELL_PROMPT_TOKENS,
        CELL_COMPLETION_TOKENS,
        CELL_ELAPSED_S,
        CELL_DECODE_RATE,
        CELL_SOURCE,
        CELL_UID,
        CELL_REQUESTS,
        CELL_FAILED_REQUESTS,
        CELL_BUDGET_FIRST_TOKEN_S,
        CELL_BUDGET_DECODE_S,
        CELL_BUDGET_UNSPLIT_S,
        CELL_BUDGET_OTHER_S,
    }
)

# The deadline helper's cut-off, recorded on the request span.
REQUEST_DEADLINE_STATUS = "spark_otel.request.deadline_status"
REQUEST_SALVAGED_FINDINGS = "spark_otel.request.salvaged_findings"
REQUEST_TOKENS_SOURCE = "spark_otel.request.tokens_source"  # "usage" | "streamed"

CELL_DURATION = "spark_otel.cell.duration"
CELL_TOKENS = "spark_otel.cell.tokens"
CELL_DECODE_RATE_METRIC = "spark_otel.cell.decode_rate"
CELL_COUNT = "spark_otel.cells"
CELL_DEADLINE_HITS = "spark_otel.cell.deadline_hits"
CELL_SALVAGED_FINDINGS_METRIC = "spark_otel.cell.salvaged_findings"
CELLS_IN_FLIGHT = "spark_otel.cells.in_flight"
CELL_PHASE_DURATION = "spark_otel.cell.phase.duration"  # histogram, s: one per phase of each cell
CELL_PHASE = "spark_otel.cell.phase"  # admission | first_token | decode | unsplit | other | scoring
GOVERNOR_QUEUE_WAIT = "spark_otel.governor.queue_wait"  # histogram, s: a cell's wait for admission
GOVERNOR_SLOTS = "spark_otel.governor.slots_in_use"  # per engine: cells admitted and running
GOVERNOR_QUEUE = "spark_otel.governor.queue_length"  # per engine: cells waiting
GOVERNOR_LEASE_LAPSES = "spark_otel.governor.lease_lapses"  # counter: cells that ran past their lease
GOVERNOR_SLOT_TAKEN = "spark_otel.governor.slot_taken"  # on lease_lapses: the slot went to another cell
GOVERNOR_ADAPTIVE_HOLDS = "spark_otel.governor.adaptive_holds"  # counter: cells the deadline-slack law held
GOVERNOR_HOLD_REASON = "spark_otel.governor.hold_reason"  # on adaptive_holds: why (a `SlackReason`)

# Cells run for seconds to hours (the article's ceiling is 30 minutes).
CELL_DURATION_BUCKETS_S: tuple[float, ...] = (
    1,
    2,
    5,
    10,
    30,
    60,
    120,
    300,
    600,
    900,
    1200,
    1800,
    2700,
    3600,
    7200,
)
DECODE_RATE_BUCKETS: tuple[float, ...] = (
    1,
    2,
    4,
    6,
    8,
    9,
    10,
    11,
    12,
    14,
    16,
    20,
    30,
    40,
    60,
    80,
    100,
    150,
    200,
)

# --- load windows (probe levels, imposed loads) -------------------------------------------------
LOAD_WINDOW_NAME = "spark_otel.load.name"
LOAD_WINDOW_KIND = "spark_otel.load.kind"  # "probe" | "eval" | "load"
LOAD_WINDOW_STREAMS = "spark_otel.load.streams"
LOAD_STREAMS_METRIC = "spark_otel.load.streams"  # gauge: streams the probe holds open now

# --- probe results ------------------------------------------------------------------------------
PROBE_STREAM_RATE = "spark_otel.probe.stream_rate"  # gauge per level, {token}/s
PROBE_AGGREGATE_RATE = "spark_otel.probe.aggregate_rate"
PROBE_ENGINE_AGGREGATE_RATE = "spark_otel.probe.engine_aggregate_rate"

# --- engine receiver (re-exported /metrics) -----------------------------------------------------
ENGINE_GENERATION_TOKENS = "spark_otel.engine.generation_tokens"  # counter, {token}
ENGINE_PROMPT_TOKENS = "spark_otel.engine.prompt_tokens"  # counter, {token}
ENGINE_GENERATION_TOKEN_RATE = "spark_otel.engine.generation_token_rate"  # gauge, {token}/s
ENGINE_PROMPT_TOKEN_RATE = "spark_otel.engine.prompt_token_rate"  # gauge, {token}/s
ENGINE_REQUESTS_RUNNING = "spark_otel.engine.requests.running"  # gauge, {request}
ENGINE_REQUESTS_WAITING = "spark_otel.engine.requests.waiting"  # gauge, {request}
ENGINE_KV_CACHE_USAGE = "spark_otel.engine.kv_cache.usage"  # gauge, 1
ENGINE_TIME_TO_FIRST_TOKEN = "spark_otel.engine.time_to_first_token"  # gauge: mean over the scrape interval
ENGINE_INTER_TOKEN_LATENCY = "spark_otel.engine.inter_token_latency"  # gauge: mean over the scrape interval
ENGINE_E2E_LATENCY = "spark_otel.engine.e2e_request_latency"  # gauge: mean over the scrape interval
ENGINE_UP = "spark_otel.engine.up"  # gauge, 1 when the last scrape succeeded
ENGINE_KIND = "spark_otel.engine.kind"  # attribute: vllm | sglang | llamacpp
RECEIVER_ERRORS = "spark_otel.receiver.errors"  # counter

# --- GPU (NVML / nvidia-smi / simulated readout) ------------------------------------------------
GPU_UTILIZATION = "spark_otel.gpu.utilization"  # gauge, 1 (0..1), the resident-kernel flag
GPU_POWER = "spark_otel.gpu.power"  # gauge, W
GPU_ENERGY = "spark_otel.gpu.energy"  # counter, J
GPU_CLOCK_SM = "spark_otel.gpu.clock.sm"  # gauge, MHz
GPU_CLOCK_MEMORY = "spark_otel.gpu.clock.memory"  # gauge, MHz
GPU_MEMORY_USED = "spark_otel.gpu.memory.used"  # gauge, By
GPU_MEMORY_TOTAL = "spark_otel.gpu.memory.total"  # gauge, By
# NVML GPU performance monitoring (GPM, Hopper and later): each over the time since the last reading.
GPU_SM_OCCUPANCY = "spark_otel.gpu.sm.occupancy"  # gauge, 1 (0..1): active warps over the maximum
GPU_DRAM_BANDWIDTH = "spark_otel.gpu.dram.bandwidth.utilization"  # gauge, 1 (0..1) of peak DRAM bandwidth
GPU_TENSOR_ACTIVITY = "spark_otel.gpu.tensor.activity"  # gauge, 1 (0..1): time the SMs ran any tensor op
GPU_ID = "spark_otel.gpu.id"  # attribute: index or uuid
GPU_NAME = "spark_otel.gpu.name"

# --- Nsight Systems GPU metrics -----------------------------------------------------------------
NSIGHT_METRIC = "spark_otel.nsight.metric"  # gauge; the metric name is an attribute
NSIGHT_METRIC_NAME = "spark_otel.nsight.metric_name"  # attribute: e.g. "SM Issue"
NSIGHT_CAPTURE = "spark_otel.nsight.capture"  # attribute: capture file name

# --- embedded store / receiver identity -------------------------------------------------------
RECEIVER_NAME = "spark_otel.receiver"

# --- instrumentation (requests) ----------------------------------------------------------------
REQUEST_CHUNKS = "spark_otel.request.chunks"  # on stream spans: chunks received (cut-off streams too)
REQUEST_LAYER = "spark_otel.request.layer"  # which patch made the span: openai, httpx, requests or aiohttp

# --- collector span metrics (collector/otelcol.yaml, span_metrics connector; issue 7) -----------
SPAN_METRICS_NAMESPACE = "traces.span.metrics"
SPAN_METRICS_CALLS = "traces.span.metrics.calls"  # counter per span name and dimensions
SPAN_METRICS_DURATION = "traces.span.metrics.duration"  # histogram, s

# --- simulated engine (issue 3): the vLLM V1 /metrics names spark_otel.sim exposes ------------------
# Wire names as a scrape shows them (prometheus_client adds the counters' ``_total``).
VLLM_PROMPT_TOKENS_TOTAL = "vllm:prompt_tokens_total"  # counter, {token}
VLLM_GENERATION_TOKENS_TOTAL = "vllm:generation_tokens_total"  # counter, {token}
VLLM_REQUEST_SUCCESS_TOTAL = "vllm:request_success_total"  # counter, label finished_reason
VLLM_NUM_REQUESTS_RUNNING = "vllm:num_requests_running"  # gauge
VLLM_NUM_REQUESTS_WAITING = "vllm:num_requests_waiting"  # gauge
VLLM_KV_CACHE_USAGE_PERC = "vllm:kv_cache_usage_perc"  # gauge, 0..1
VLLM_TIME_TO_FIRST_TOKEN = "vllm:time_to_first_token_seconds"  # histogram, s
VLLM_INTER_TOKEN_LATENCY = "vllm:inter_token_latency_seconds"  # histogram, s
VLLM_E2E_REQUEST_LATENCY = "vllm:e2e_request_latency_seconds"  # histogram, s
VLLM_REQUEST_QUEUE_TIME = "vllm:request_queue_time_seconds"  # histogram, s (WAITING phase)
VLLM_REQUEST_PREFILL_TIME = "vllm:request_prefill_time_seconds"  # histogram, s
VLLM_REQUEST_DECODE_TIME = "vllm:request_decode_time_seconds"  # histogram, s
VLLM_REQUEST_INFERENCE_TIME = "vllm:request_inference_time_seconds"  # histogram, s (RUNNING phase)
VLLM_REQUEST_PROMPT_TOKENS = "vllm:request_prompt_tokens"  # histogram, {token}
VLLM_REQUEST_GENERATION_TOKENS = "vllm:request_generation_tokens"  # histogram, {token}
VLLM_LABEL_ENGINE = "engine"
VLLM_LABEL_MODEL_NAME = "model_name"
VLLM_LABEL_FINISHED_REASON = "finished_reason"
# vLLM's own bucket bounds (vllm/v1/metrics/loggers.py, 0.12 era).
VLLM_TTFT_BUCKETS_S: tuple[float, ...] = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
    20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
)  # fmt: skip
VLLM_ITL_BUCKETS_S: tuple[float, ...] = (
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
    40.0, 80.0,
)  # fmt: skip
VLLM_E2E_BUCKETS_S: tuple[float, ...] = (
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0,
    480.0, 960.0, 1920.0, 7680.0,
)  # fmt: skip

# --- receivers: Nsight attributes (issue 5) -----------------------------------------------------
NSIGHT_METRIC_UNIT = "spark_otel.nsight.unit"  # attribute: "%", "MHz", "{warp}", ... from the [bracket]
NSIGHT_METRIC_FULL_NAME = "spark_otel.nsight.metric_full_name"  # attribute: "SM Issue [Throughput %]"

# --- probe load windows (issue 6: probe) --------------------------------------------------------
PROBE_RUN = "spark_otel.probe.run"  # attribute on a probe level's load window: the run's name
PROBE_REPEAT = "spark_otel.probe.repeat"  # attribute: the round (0-based) of that level
PROBE_TOKENS = "spark_otel.probe.tokens"  # attribute: output tokens pinned per stream
PROBE_MODE = "spark_otel.probe.mode"  # attribute: "stream" | "plain"

# --- vLLM's server span (vllm/tracing.py; issue 17): one per finished request, kind SERVER ----------
# Parented to the client's request span through the injected traceparent; latencies in float s.
VLLM_SERVER_SPAN_NAME = "llm_request"
VLLM_LATENCY_TIME_IN_QUEUE = "gen_ai.latency.time_in_queue"
VLLM_LATENCY_TIME_TO_FIRST_TOKEN = "gen_ai.latency.time_to_first_token"
VLLM_LATENCY_E2E = "gen_ai.latency.e2e"
VLLM_LATENCY_TIME_IN_MODEL_PREFILL = "gen_ai.latency.time_in_model_prefill"
VLLM_LATENCY_TIME_IN_MODEL_DECODE = "gen_ai.latency.time_in_model_decode"
VLLM_LATENCY_TIME_IN_MODEL_INFERENCE = "gen_ai.latency.time_in_model_inference"
VLLM_USAGE_PROMPT_TOKENS = "gen_ai.usage.prompt_tokens"  # vLLM's pre-1.27 names
VLLM_USAGE_COMPLETION_TOKENS = "gen_ai.usage.completion_tokens"
VLLM_REQUEST_ID = "gen_ai.request.id"

# --- Inspect AI samples as cells (issue 36): records/inspect_sample, backfill's inspect reader ------
INSPECT_MODEL = "spark_otel.inspect.model"  # attribute on a cell: Inspect's model name ("vllm/qwen")
INSPECT_LIMIT = "spark_otel.inspect.limit"  # the limit that halted the sample ("time", "token", ...)
INSPECT_RETRIES = "spark_otel.inspect.retries"  # the sample's errors Inspect retried
INSPECT_WORKING_S = "spark_otel.inspect.working_s"  # Inspect's working time of the sample
INSPECT_WAITING_S = "spark_otel.inspect.waiting_s"  # its clock time minus working time (connections, retries)
INSPECT_SAMPLE_UUID = "spark_otel.inspect.sample_uuid"  # Inspect's EvalSample.uuid: live and log meet on it
