"""The metrics pipeline's delta_to_cumulative guard, proved both ways on the real collector and
Prometheus: an SDK set to delta temporality still lands its counters and histograms, and the
same run through a copy of the config without the guard loses them (the remote-write exporter
drops delta sums and histograms)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from tests.support.collector_stack import COLLECTOR_DIR, Stack

pytestmark = pytest.mark.e2e

# Monotonic counter, histogram, and an up-down counter (cumulative under every preference).
SERIES = ("spark_otel_cells_total", "spark_otel_cell_duration_seconds_count", "spark_otel_cells_in_flight")


def _run_delta_cells(stack: Stack, store: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, bool]:
    import spark_otel

    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", stack.otlp_http)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE", "delta")
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "service.instance.id=delta-1")
    telemetry = spark_otel.configure(otlp=True, store=store, metric_export_interval_ms=500, set_global=False)
    try:
        for i in range(3):
            with spark_otel.cell("delta-eval", f"c{i}", engine="qwen", workers=1) as state:
                state.add_tokens(prompt=10, completion=50)
        telemetry.force_flush(10_000)
        # The up-down counter arrives in every case, in the same writes as the others.
        present = stack.prometheus.wait_for('spark_otel_cells_in_flight{spark_otel_eval="delta-eval"}', 15)
        telemetry.force_flush(10_000)
        stack.prometheus.wait_for('spark_otel_cells_total{spark_otel_eval="delta-eval"}', 2)
        found = {
            name: bool(stack.prometheus.query(f'{name}{{spark_otel_eval="delta-eval"}}')) for name in SERIES
        }
        found["spark_otel_cells_in_flight"] = bool(present)
        return found
    finally:
        spark_otel.shutdown()  # flushes, stops and clears the current telemetry


def test_delta_sdk_lands_counters_and_histograms_through_the_guard(
    stack_factory: Callable[..., Stack], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stack = stack_factory()
    found = _run_delta_cells(stack, tmp_path / "store.sqlite", monkeypatch)
    assert found == dict.fromkeys(SERIES, True)
    # Accumulated, not the last delta; a periodic export may have split the cells over two
    # writes, so wait for the sum rather than read whichever write landed first.
    total = stack.prometheus.wait_for('sum(spark_otel_cells_total{spark_otel_eval="delta-eval"}) == 3', 15)
    assert total, "the three cells' deltas never summed to 3 in Prometheus"
    assert float(total[0]["value"][1]) == 3.0


def test_without_the_guard_delta_counters_and_histograms_are_lost(
    stack_factory: Callable[..., Stack], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = yaml.safe_load((COLLECTOR_DIR / "otelcol.yaml").read_text())
    pipeline = config["service"]["pipelines"]["metrics"]
    pipeline["processors"] = [p for p in pipeline["processors"] if p != "delta_to_cumulative"]
    unguarded = tmp_path / "unguarded.yaml"
    unguarded.write_text(yaml.safe_dump(config))
    stack = stack_factory(collector_config=unguarded)
    found = _run_delta_cells(stack, tmp_path / "store.sqlite", monkeypatch)
    assert found["spark_otel_cells_in_flight"]  # the pipeline itself works
    assert not found["spark_otel_cells_total"]
    assert not found["spark_otel_cell_duration_seconds_count"]
