"""`spark-otel ingest-nsight`: good and bad captures into the store, historical points over OTLP."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.support.nsight import REAL_2026, SESSION_START_UNIX_NS, SM_ISSUE, metric_index, small_capture
from tests.support.otlp import OtlpSink

from spark_otel import _semconv as sc
from spark_otel.cli import main
from spark_otel.store import Store


def test_cli_ingests_good_files_reports_bad_ones_and_does_not_duplicate(
    realistic, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store_path = tmp_path / "s.sqlite"
    args = ["ingest-nsight", str(realistic[0]), str(REAL_2026), "--store", str(store_path)]
    assert main(args) == 1
    captured = capsys.readouterr()
    [issue_line] = [line for line in captured.out.splitlines() if "SM Issue" in line]
    assert [c.strip() for c in issue_line.split("│")[3:6]] == ["3.1", "2.0", "5.0"]  # Appendix B
    assert "100,000 samples per metric" in captured.out
    assert captured.err.startswith(f"spark-otel: error: {REAL_2026}: this Nsight Systems export")
    assert main(args) == 1  # again: the summary is replaced, the samples not duplicated
    with Store(store_path) as store:
        docs = store.documents("nsight_summary")
        samples = store.samples(sc.NSIGHT_METRIC)
    assert len(docs) == 1
    assert len(samples) == 19 * 101
    assert docs[0]["body"]["capture"] == "capture-0716.sqlite"
    assert docs[0]["body"]["metrics"][2]["name"] == "SM Issue"


def test_cli_exports_historical_points_over_otlp(
    tmp_path: Path, otlp_sink: OtlpSink, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest

    port = otlp_sink.server.server_address[1]
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", f"http://127.0.0.1:{port}/v1/metrics")
    path, _, values = small_capture(tmp_path, "raw")
    assert main(["ingest-nsight", str(path), "--no-store", "--interval-ms", "500", "--json"]) == 0
    assert '"capture": "raw.sqlite"' in capsys.readouterr().out
    request = ExportMetricsServiceRequest()
    request.ParseFromString(otlp_sink.bodies[0])
    [metric] = request.resource_metrics[0].scope_metrics[0].metrics
    assert metric.name == sc.NSIGHT_METRIC
    points = metric.gauge.data_points
    assert len(points) == 19 * 3  # samples at 1 ms .. 1000 ms: buckets 0, 500 and 1000 ms
    issue = [p for p in points if any(a.value.string_value == SM_ISSUE for a in p.attributes)]
    assert sorted(p.time_unix_nano for p in issue) == [
        SESSION_START_UNIX_NS + k * 500_000_000 for k in range(3)
    ]
    first_half = values[metric_index(SM_ISSUE)][:499]  # samples at 1..499 ms fall in the first bucket
    assert min(issue, key=lambda p: p.time_unix_nano).as_double == pytest.approx(first_half.mean())
