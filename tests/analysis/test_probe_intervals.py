"""Probe levels as the instrument verdicts' load intervals, from stored probe documents."""

from __future__ import annotations

from tests.support.probe_documents import T0, S, probe_document, probe_level

from spark_otel.analysis.gauges import LoadInterval, probe_intervals


def test_each_measured_level_is_one_interval_at_the_probes_own_rate() -> None:
    doc = probe_document(
        "p1",
        [
            probe_level(1, 0, 11.0),
            probe_level(4, 1, 40.0),
            probe_level(8, 2, None),  # every stream failed: no rate
            probe_level(16, 3, 90.0, wall_s=0.0),  # no wall: no interval
        ],
        time_scale=0.5,
    )
    intervals, notes = probe_intervals([doc])
    assert notes == []
    assert intervals == [
        LoadInterval(
            label="qwen 1 stream",
            source="probe",
            start_unix_ns=T0,
            end_unix_ns=T0 + 10 * S,
            throughput=11.0,
            engines={"qwen": 11.0},
            time_scale=0.5,
        ),
        LoadInterval(
            label="qwen 4 streams",
            source="probe",
            start_unix_ns=T0 + 100 * S,
            end_unix_ns=T0 + 110 * S,
            throughput=40.0,
            engines={"qwen": 40.0},
            time_scale=0.5,
        ),
    ]


def test_repeated_levels_are_numbered_from_one() -> None:
    doc = probe_document("p", [probe_level(2, 0, 20.0), probe_level(2, 1, 21.0, repeat=1)])
    intervals, _ = probe_intervals([doc])
    assert [(i.label, i.time_scale) for i in intervals] == [
        ("qwen 2 streams #1", 1.0),
        ("qwen 2 streams #2", 1.0),
    ]


def test_a_document_that_is_no_probe_report_is_named_and_skipped() -> None:
    good = probe_document("good", [probe_level(1, 0, 11.0)])
    old = {"name": "old", "body": {"metadata": {"version": 0}}}
    broken = {"name": "broken", "body": good["body"] | {"levels": "many"}}
    intervals, notes = probe_intervals([old, good, broken])
    assert [i.label for i in intervals] == ["qwen 1 stream"]
    assert notes == [
        "probe document 'old': probe report version 0; this spark-otel reads version 1; skipped",
        "probe document 'broken': not a probe report: levels: Input should be a valid list; skipped",
    ]
