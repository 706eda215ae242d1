# spark-otel developer targets. The CI entry point is .ci/run; these are the same steps by hand.
PYTHON ?= .venv/bin/python

.PHONY: collector jaeger dashboards dashboards-check test

# Build the OpenTelemetry Collector (otelcol-spark) with the official builder (OCB) from
# collector/builder-config.yaml; cached outside the repo, the binary's path is printed last.
collector:
	bash scripts/build-collector.sh

# Build Jaeger v2 (the tests' trace store) from its Go module github.com/jaegertracing/jaeger/cmd/jaeger;
# cached outside the repo, the binary's path is printed last.
jaeger:
	bash scripts/build-jaeger.sh

# Regenerate dashboards/json/*.json and collector/rules.yml from dashboards/*.py.
dashboards:
	$(PYTHON) -m dashboards.build

# Fail if the committed dashboards or rules are stale.
dashboards-check:
	$(PYTHON) -m dashboards.build --check

# CI's test command (`ruff check . && mypy && pytest -q`, see .ci/run) in the venv, with the
# built collector (Prometheus comes from PATH).
test:
	.venv/bin/ruff check . && .venv/bin/mypy && \
	SPARK_OTEL_OTELCOL="$$(bash scripts/build-collector.sh | tail -n 1)" .venv/bin/pytest -q
