"""`print_verdicts`, which `spark-otel instruments` and the demo print, on reports built by hand:
the title (count, kind and throughput range of the intervals, their ratio, the model clock, the
demo's own title), every cell of the verdict table ("-" where a figure is missing, one figure
where a range is flat, the unit after it or "%" on it), the notes with the report's own
thresholds, the "why" lines and the report's notes, each as a whole text.

The figures are given, not computed, so each cell can be read off the report: the analysis that
computes them has its own tests (tests/analysis/), and tests/cli/test_instruments_store.py runs
the command on a store."""

from __future__ import annotations

import pytest
from tests.support.printed import stdout_unpadded
from tests.support.snapshots import Snapshot

from spark_otel.analysis.gauges import (
    InstrumentsReport,
    InstrumentVerdict,
    LoadInterval,
    Thresholds,
    instrument_verdicts,
)
from spark_otel.analysis.gauges.grades import IntervalSource, Verdict, VerdictReason
from spark_otel.cli import reset_notes
from spark_otel.cli.instruments import print_verdicts


@pytest.fixture(autouse=True)
def _a_new_command_run() -> None:
    """Each test a command run of its own: every term is explained under the first table again."""
    reset_notes()


def _interval(
    throughput: float, *, source: IntervalSource = "receiver", time_scale: float = 1.0
) -> LoadInterval:
    return LoadInterval(
        label=f"{throughput:g} tok/s",
        source=source,
        start_unix_ns=0,
        end_unix_ns=1,
        throughput=throughput,
        time_scale=time_scale,
    )


def _verdict(
    instrument: str,
    verdict: Verdict,
    unit: str,
    *,
    intervals: int,
    tok: tuple[float, float] | None,
    reads: tuple[float, float] | None,
    elasticity: float | None,
    rank: float | None,
    samples: tuple[int, int, int],
    reason: VerdictReason,
) -> InstrumentVerdict:
    zero, constant, n_samples = samples
    return InstrumentVerdict(
        instrument=instrument,
        metric="m",
        attributes={},
        unit=unit,
        verdict=verdict,
        reason=reason,
        engine=None,
        other_engines=[],
        n_readings=n_samples,
        n_intervals=intervals,
        n_samples=n_samples,
        zero_samples=zero,
        constant_samples=constant,
        constant_value=None,
        throughput_min=None if tok is None else tok[0],
        throughput_max=None if tok is None else tok[1],
        gauge_min=None if reads is None else reads[0],
        gauge_max=None if reads is None else reads[1],
        relative_range=None,
        elasticity=elasticity,
        rank_correlation=rank,
        knee_throughput=None,
        knee_value=None,
        flat_min=None,
        flat_max=None,
        measure=PROBE if verdict == "not enough load range" else None,
        readings=[],
    )


LOAD = (312.5, 1250.0)
PROBE = "spark-otel probe --engine qwen=URL --streams 1,2,4,8,16"


def test_receiver_bins_every_kind_of_cell(capsys: pytest.CaptureFixture[str], snapshot: Snapshot) -> None:
    """Three bins from 312.5 to 1,250 tok/s (4.0x): a flat percentage, a range in watts, a gauge
    with no readings ("-" in each figure), an Nsight metric (no unit: nothing after its figure)
    read in one interval (one throughput, one value), and a gauge that tracks."""
    report = InstrumentsReport(
        interval_source="receiver",
        intervals=[_interval(312.5), _interval(625.0), _interval(1250.0)],
        throughput_min=312.5,
        throughput_max=1250.0,
        thresholds=Thresholds(),
        instruments=[
            _verdict(
                "GPU 0 utilization",
                "not load",
                "%",
                intervals=3,
                tok=LOAD,
                reads=(96.0, 96.0),
                elasticity=0.0,
                rank=None,
                samples=(0, 30, 30),
                reason=VerdictReason.PINNED,
            ),
            _verdict(
                "GPU 0 power",
                "not load",
                "W",
                intervals=3,
                tok=LOAD,
                reads=(34.2, 39.8),
                elasticity=0.04,
                rank=1.0,
                samples=(0, 2, 30),
                reason=VerdictReason.MOVES_SLOWLY,
            ),
            _verdict(
                "GPU 0 memory used",
                "unsupported",
                "GiB",
                intervals=0,
                tok=None,
                reads=None,
                elasticity=None,
                rank=None,
                samples=(0, 0, 0),
                reason=VerdictReason.NO_READINGS,
            ),
            _verdict(
                "SM Issue",
                "not enough load range",
                "",
                intervals=1,
                tok=(1250.0, 1250.0),
                reads=(3.1, 3.1),
                elasticity=None,
                rank=None,
                samples=(0, 1, 1),
                reason=VerdictReason.FEW_INTERVALS,
            ),
            _verdict(
                "qwen requests running",
                "tracks load",
                "requests",
                intervals=3,
                tok=LOAD,
                reads=(2.0, 8.0),
                elasticity=0.98,
                rank=1.0,
                samples=(0, 10, 30),
                reason=VerdictReason.TRACKS,
            ),
        ],
        notes=["no Nsight captures here"],
    )
    print_verdicts(report)
    snapshot(stdout_unpadded(capsys))


def test_the_demos_eval_runs_under_a_model_clock_below_one_token_a_second(
    capsys: pytest.CaptureFixture[str], snapshot: Snapshot
) -> None:
    """The demo's title before the count; eval runs of 0.5 and 2 tok/s (a ratio although the
    slowest is under 1 tok/s) at 20x model time; the thresholds the report was graded with, in
    the notes."""
    report = InstrumentsReport(
        interval_source="evals",
        intervals=[
            _interval(0.5, source="evals", time_scale=20.0),
            _interval(2.0, source="evals", time_scale=20.0),
        ],
        throughput_min=0.5,
        throughput_max=2.0,
        thresholds=Thresholds(tracks_elasticity=0.75, tracks_rank_correlation=0.9),
        instruments=[
            _verdict(
                "qwen cells' decode rate",
                "not enough load range",
                "tok/s",
                intervals=2,
                tok=(0.5, 2.0),
                reads=(0.5, 2.0),
                elasticity=1.0,
                rank=1.0,
                samples=(0, 1, 8),
                reason=VerdictReason.FEW_INTERVALS,
            ),
        ],
        notes=[],
    )
    print_verdicts(report, title="Appendix F")
    snapshot(stdout_unpadded(capsys))


def test_nsight_metrics_read_as_bare_numbers(capsys: pytest.CaptureFixture[str], snapshot: Snapshot) -> None:
    """Nsight's metrics have no unit: a bare figure or range, right-aligned as the numbers they are
    (a space left after one would make it text, and the column left-aligned)."""
    report = InstrumentsReport(
        interval_source="probe",
        intervals=[_interval(22.0, source="probe"), _interval(190.0, source="probe")],
        throughput_min=22.0,
        throughput_max=190.0,
        thresholds=Thresholds(),
        instruments=[
            _verdict(
                "SM Issue",
                "not enough load range",
                "",
                intervals=1,
                tok=(22.0, 22.0),
                reads=(3.1, 3.1),
                elasticity=None,
                rank=None,
                samples=(0, 4, 4),
                reason=VerdictReason.FEW_INTERVALS,
            ),
            _verdict(
                "SM Active",
                "not enough load range",
                "",
                intervals=2,
                tok=(22.0, 190.0),
                reads=(28.0, 35.5),
                elasticity=0.1,
                rank=1.0,
                samples=(0, 1, 8),
                reason=VerdictReason.FEW_INTERVALS,
            ),
        ],
        notes=[],
    )
    print_verdicts(report)
    snapshot(stdout_unpadded(capsys))


def test_a_report_with_no_intervals_has_no_ratio_and_no_kind(
    capsys: pytest.CaptureFixture[str], snapshot: Snapshot
) -> None:
    """What the analysis gives for nothing at all: no interval source (no kind word), no
    throughput (0.0 to 0.0 and no ratio, never a division by zero), an empty table and the
    hints of what to record. The command refuses such a store before printing; this is the
    function's own floor."""
    print_verdicts(instrument_verdicts([], []))
    snapshot(stdout_unpadded(capsys))
