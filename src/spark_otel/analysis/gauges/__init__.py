"""Which gauges measure load: every recorded gauge against the measured token throughput.

The article's Appendix F in code ("a gauge that never moves under load is not measuring load"):
``utilization.gpu`` read 96% at every load, power moved 34 to 40 W across a 17x throughput range
and Nsight's SM Issue read 3.1, 2.8 and 3.6% from 22 to 190 tok/s, while the engine's generation
counter tracked load. `instrument_verdicts` pairs each gauge series (a metric and the attributes
that identify it: GPU id, engine, Nsight metric name) with load intervals of known throughput
and says how it moves. Pure: the builders in `intervals` turn probe documents, engine counter
samples and cells into intervals; the ``instruments`` command reads them from the store.

    grades     the settings and results: `Thresholds`, `LoadInterval`, `InstrumentVerdict`, the report
    catalog    the gauges graded: each one's family, unit, scale and series key; the hints when absent
    series     samples grouped into series, each read per interval (a median, or a counter's rate)
    verdicts   `instrument_verdicts`: each series' figures, verdict and the reason for it
    intervals  load intervals from probe documents, engine counter scrapes and eval runs; the cells' gauge

Per interval a gauge reads the median of its samples inside it (a reading at an edge, the box
idle between the last token and the interval's end stamp, does not drag a level), a counter
(energy, generation tokens) its increase over the interval per second. Intervals with no
throughput are left out (idle, every gauge reads its floor, and "busy versus idle" is the
resident-kernel flag, not load). Engine gauges are paired with their own engine's throughput.
Over the intervals where it has readings, each gauge gets:

* its range (min to max of the per-interval values) and relative range (range over their mean);
* elasticity at the means: the least-squares slope of gauge on throughput times mean throughput
  over mean gauge. 1: the gauge moves in proportion to throughput; 0: not at all. A slope, so
  every interval counts, and defined where a gauge reads zero at some level (a log-log slope is
  not);
* Spearman rank correlation with throughput (ties take their mean rank);
* how many samples read zero, and how many read its most common value.

Verdicts, with the thresholds of `Thresholds` (the defaults, and why):

* ``unsupported``: no readings at all while its source recorded other quantities (memory on a
  unified-memory part; for NVML's GPM counters, SM occupancy, DRAM bandwidth and tensor
  activity, while the GPU gave another of them), or every reading is zero (``nvidia-smi dmon``'s
  memory column);
* ``not enough load range``: readings in fewer than ``min_intervals`` (3) intervals, or
  throughput over them moving less than ``min_load_ratio`` (2x): too little load to tell a flat
  gauge from a moving one. The verdict names the probe that would measure it;
* ``saturates``: it tracks load (as below) up to a knee and is flat above it (elasticity under
  ``flat_elasticity``, 0.1), both parts spanning at least ``saturation_span`` (1.5x) of
  throughput: a KV cache full, running requests capped at ``max_num_seqs``, power at its limit;
* ``tracks load``: |rank correlation| at least ``tracks_rank_correlation`` (0.8) and
  |elasticity| at least ``tracks_elasticity`` (0.5): it moves in step with throughput and at
  least half as fast, in relative terms. Falling gauges (per-stream rate, the cells' decode
  rate) count too, and the evidence says which way;
* ``not load``: anything else: pinned (relative range under ``pinned_range``, 5%), flat or out
  of step with throughput.

The defaults sit in the wide gap the article's own numbers leave: power (elasticity 0.05 over
Appendix A, though it rises at every level: rank correlation 1) and SM Issue (0.11 over
Appendix B) are far under 0.5, the generation counter (0.87) and the running requests (1.15)
far above; utilization, GR Active and SMs Active are pinned (under 2%). Every verdict's
evidence names the intervals, the throughput range in tok/s and the gauge's range in its unit:
no answer without evidence.
"""

from __future__ import annotations

from ..stats import elasticity, rank_correlation
from .catalog import GAUGE_METRICS, MEASURE_STREAMS, STORED_METRICS
from .grades import (
    InstrumentsReport,
    InstrumentVerdict,
    IntervalReading,
    IntervalSource,
    LoadInterval,
    Thresholds,
    Verdict,
    VerdictReason,
)
from .intervals import (
    MAX_RECEIVER_INTERVALS,
    cell_rate_samples,
    eval_intervals,
    fitting_bin_s,
    probe_intervals,
    receiver_intervals,
)
from .verdicts import instrument_verdicts

__all__ = [
    "GAUGE_METRICS",
    "MAX_RECEIVER_INTERVALS",
    "MEASURE_STREAMS",
    "STORED_METRICS",
    "InstrumentVerdict",
    "InstrumentsReport",
    "IntervalReading",
    "IntervalSource",
    "LoadInterval",
    "Thresholds",
    "Verdict",
    "VerdictReason",
    "cell_rate_samples",
    "elasticity",
    "eval_intervals",
    "fitting_bin_s",
    "instrument_verdicts",
    "probe_intervals",
    "rank_correlation",
    "receiver_intervals",
]
