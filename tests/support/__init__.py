"""Builders and servers the tests share: one home for each, so no test module imports another
(tests/test_layout.py keeps it so). One module per concept:

adaptive_cells     finished cells the adaptive governor decided on, attributes by the governor's own code
advise_store       the advise tests' small store: engine q's curve, a prompt-heavy and a generating eval
article            the article's own rows (Appendices A, C, D) as cells, windows and curves
backfill_checks    the checks every `backfill_files` result must pass, for the fuzz suites
backfill_files     two backfill CSV files worked out by hand, the command's arguments and what it prints
backfill_records   the recorded eval records under tests/data/receivers/backfill; an ISO time as Unix ns
box_workload       the end-to-end tests' instrumented eval on a simulated box: lanes, a ceiling cell, a pair
boxes              the speeds of the simulated box in the box fixtures several directories share
cells              cells built from plain figures; a recent cell on an engine
chunk_runs         one instrumented stream into fresh providers, read back as span attributes and points
collector_stack    the real collector, Jaeger and Prometheus on 127.0.0.1, alone or as a fleet
data_files         where the tests' data files are
deadline_clients   the clients the deadline tests drive, sync and async, and the leak checks
deadline_server    an OpenAI-compatible server that misbehaves on request, and its findings document
demo_phases        the demo's phases as reported, a recorder that can stop the run, the box clock check
demo_result        a demo's result built by hand, its --json document and its acts as printed
energy_samples     a steady GPU draw as energy-counter or power samples, its cells, a store of them
engine_server      the instrumentation tests' OpenAI-compatible server (real HTTP) and its request log
finished_spans     finished request and cell spans read back from an in-memory exporter
fleet_boxes        a fleet box's runner process: started with its OTLP settings, driven a command a line
fuzzing            the fuzz suites' profile, per-call time bound and hostile values
gauge_series       load levels and gauge samples for grading gauges; verdicts by name, their sentences
gauges             a gauge's verdict built by hand, with every figure not given left empty
gpu_fakes          fake nvidia-ml-py modules and nvidia-smi executables; the simulated /sim/gpu readings
hostile_files      a FIFO, a link to /dev/zero and a directory where a file belongs; a real full filesystem
locales            the C locale (ASCII) for a test
loopback           a probe-style client over raw loopback sockets, to time the simulated server
metric_points      OpenTelemetry metric points read back, and a push exporter that keeps every export
metrics_pages      engine /metrics pages: the recorded ones by name, one whose counters grow
metrics_server     a real HTTP server serving whatever /metrics text or /sim/gpu JSON a test sets
neighbour_reports  a load window's cost and an eval's neighbour report, from plain figures
nsight             synthetic Nsight Systems exports, a damaged copy of one, the recorded exports
otlp               a real OTLP/HTTP endpoint that keeps the bodies it receives
otlp_json_export   small hand-made OTLP/JSON export requests, as the collector's file exporter writes
plain_engine       a vLLM-like engine without /sim/info that misbehaves on request
printed            readers of printed output: rich tables, unpadded lines, spinner phases, a fake terminal
probe_documents    probe levels at given rates and the stored probe document that holds them
probe_figures      a probe level with every figure the tables show, and a report of such levels
report_content     the HTML report's content built by hand: curves, speedups, engines, instruments
report_records     the cells and windows the HTML report tests build their report from
scripted_engine    a vLLM-like engine whose answers a test scripts, recording what its clients sent
series_checks      the Prometheus series one box produces: count, label cardinality, per-cell labels
sse_bodies         SSE bodies by hand: a chat chunk event, a transport that raises mid-stream
store_versions     store files of a given schema version, built as real SQLite files
stored_energy      a store's cell energy as kept against as derived on read
trace_checks       what Jaeger must hold of an embedded store's cells, read through its query API
waiting            polling for a condition, failing with what never happened
"""
