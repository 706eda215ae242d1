"""A gauge that reads 0 in every sample but in no loaded interval (`views.gauges.evidence`): its
evidence is written over what load there was, without the throughput range no interval gave it."""

from __future__ import annotations

from tests.support.gauges import verdict

from spark_otel.analysis.gauges import InstrumentsReport, Thresholds, VerdictReason
from spark_otel.views.gauges import evidence


def test_a_gauge_reading_zero_outside_every_interval_has_its_evidence() -> None:
    v = verdict("gpu.power", "unsupported", reason=VerdictReason.READS_ZERO, n_samples=30, zero_samples=30)
    assert (v.n_intervals, v.throughput_min, v.throughput_max) == (0, None, None)
    report = InstrumentsReport(
        interval_source=None, intervals=[], throughput_min=None, throughput_max=None, thresholds=Thresholds(),
        instruments=[v], notes=[],
    )  # fmt: skip
    assert evidence(v, report) != ""
