"""NVML's GPM counters in the instruments analysis: graded like every GPU gauge, and one the part
refused while it gave the others is unsupported, never read as zero."""

from __future__ import annotations

from tests.support.gauge_series import GPU, LOAD, by_name, gauge, levels

from spark_otel import _semconv as sc
from spark_otel.analysis.gauges import instrument_verdicts


def test_gpm_counters_are_graded_and_a_refused_one_is_unsupported() -> None:
    intervals = levels(LOAD)
    # DRAM bandwidth climbs with batching, SM occupancy sits at the article's 17.6% warps in
    # flight; tensor activity was refused by the part (no samples) while the others read.
    samples = (
        gauge(sc.GPU_DRAM_BANDWIDTH, intervals, [t / 400 for t in LOAD], GPU)
        + gauge(sc.GPU_SM_OCCUPANCY, intervals, [0.176, 0.177, 0.176, 0.177, 0.176, 0.177], GPU)
        + gauge(sc.GPU_UTILIZATION, intervals, [0.96] * 6, GPU)
    )
    verdicts = by_name(instrument_verdicts(intervals, samples))
    dram = verdicts["GPU 0 DRAM bandwidth (GPM)"]
    assert dram.verdict == "tracks load"
    assert (dram.gauge_min, dram.gauge_max, dram.unit) == (2.5, 80.0, "%")
    assert verdicts["GPU 0 SM occupancy (GPM)"].verdict == "not load"
    tensor = verdicts["GPU 0 tensor activity (GPM)"]
    assert tensor.verdict == "unsupported"
    assert tensor.n_samples == 0


def test_a_gpu_without_gpm_gets_no_gpm_rows() -> None:
    intervals = levels(LOAD)
    verdicts = by_name(instrument_verdicts(intervals, gauge(sc.GPU_UTILIZATION, intervals, [0.96] * 6, GPU)))
    assert not [name for name in verdicts if "GPM" in name]
