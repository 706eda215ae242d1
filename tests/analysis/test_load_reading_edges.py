"""Load intervals and series readings at their edges: a counter read between the samples inside
an interval, slow and per-engine throughput, eval runs with cells that carry no tokens, engine,
time scale or duration, probe levels past an unmeasured one, and labels in UTC wherever the box is."""

from __future__ import annotations

from functools import partial

import pytest
from tests.support.cells import cell
from tests.support.probe_documents import probe_document, probe_level

from spark_otel import _semconv as sc
from spark_otel.analysis.gauges import (
    LoadInterval,
    cell_rate_samples,
    eval_intervals,
    probe_intervals,
    receiver_intervals,
)
from spark_otel.analysis.gauges.catalog import CELL_RATE_METRIC
from spark_otel.analysis.gauges.series import _counter_rate, group, read_series
from spark_otel.model import AttributeValue, Cell, CellStatus, MetricSample

S = 1_000_000_000
T0 = 1_700_000_000 * S  # 2023-11-14 22:13:20 UTC
_cell = partial(cell, workers=1, t0_ns=T0)


def _sample(name: str, t_s: float, value: float, attributes: dict[str, AttributeValue]) -> MetricSample:
    return MetricSample(name=name, unix_ns=int(t_s * S), value=value, attributes=attributes)


def _interval(label: str, start_s: float, end_s: float, throughput: float, **engines: float) -> LoadInterval:
    return LoadInterval(
        label=label,
        source="probe",
        start_unix_ns=int(start_s * S),
        end_unix_ns=int(end_s * S),
        throughput=throughput,
        engines=engines,
    )


# -- series ------------------------------------------------------------------------------------------
def test_a_counter_that_stops_inside_an_interval_reads_between_its_samples_there() -> None:
    """Totals 0, 100, 300 at 0, 10, 20 s; over 5 to 25 s the end is past the samples, so the
    rate is that of the samples inside: 100 to 300 from 10 to 20 s, 20 per second."""
    assert _counter_rate([0, 10 * S, 20 * S], [0.0, 100.0, 300.0], 5 * S, 25 * S) == 20.0


def test_two_counter_samples_at_one_instant_give_no_rate() -> None:
    """A scrape stored twice: no time between them to divide by."""
    assert _counter_rate([5 * S, 5 * S], [0.0, 10.0], 0, 10 * S) is None


def test_the_cells_rate_pairs_with_its_own_engines_throughput_not_the_boxs() -> None:
    samples = [_sample(CELL_RATE_METRIC, t, 12.0, {sc.ENGINE: "q"}) for t in (1, 6)]
    (series,) = group(samples).values()
    readings, _ = read_series(
        series, [_interval("a", 0, 2, 100.0, q=30.0, n=70.0), _interval("b", 5, 7, 60.0)]
    )
    assert [(r.interval.label, r.throughput, r.value) for r in readings] == [
        ("a", 30.0, 12.0),
        ("b", 60.0, 12.0),
    ]


def test_an_interval_under_one_token_per_second_is_still_load() -> None:
    """Any throughput above zero is read: 0.5 tok/s (a slow model, or time-scaled) included."""
    samples = [_sample(sc.GPU_POWER, 1, 40.0, {sc.GPU_ID: "0"})]
    (series,) = group(samples).values()
    readings, inside = read_series(series, [_interval("slow", 0, 2, 0.5)])
    assert [(r.interval.label, r.throughput, r.value, r.samples) for r in readings] == [
        ("slow", 0.5, 40.0, 1)
    ]
    assert inside == {0}


# -- probe levels ------------------------------------------------------------------------------------
def test_a_level_without_a_rate_is_skipped_and_the_levels_after_it_kept() -> None:
    doc = probe_document("p", [probe_level(1, 0, 11.0), probe_level(2, 1, None), probe_level(4, 2, 40.0)])
    intervals, notes = probe_intervals([doc])
    assert notes == []
    assert [(i.label, i.throughput) for i in intervals] == [("qwen 1 stream", 11.0), ("qwen 4 streams", 40.0)]


# -- labels ------------------------------------------------------------------------------------------
@pytest.mark.usefixtures("india_local_time")
def test_interval_labels_read_utc_whatever_the_local_zone() -> None:
    """22:13:20 UTC is 03:43:20 in India: the labels keep UTC, as the store's timestamps do."""
    scrapes = [
        MetricSample(name=sc.ENGINE_GENERATION_TOKENS, unix_ns=T0 + t * S, value=10.0 * t, attributes={})
        for t in (0, 10)
    ]
    assert [b.label for b in receiver_intervals(scrapes, 10)] == ["22:13:20 +10 s"]
    assert [i.label for i in eval_intervals([_cell("a", 0, 100, 1_000)])] == ["g eval, 1 worker on q 22:13"]


# -- eval runs ---------------------------------------------------------------------------------------
def test_an_eval_run_without_a_time_scale_is_real_time() -> None:
    (run,) = eval_intervals([_cell("a", 0, 100, 1_000), _cell("b", 100, 200, 1_000)])
    assert (run.time_scale, run.throughput) == (1.0, 10.0)


def test_an_eval_run_splits_at_the_merge_gap_it_is_given() -> None:
    """30 s between the cells: within the default 60 s one run, under a 10 s gap two."""
    cells = [_cell("a", 0, 100, 1_000), _cell("b", 130, 230, 2_000)]
    assert [(i.start_unix_ns - T0, i.end_unix_ns - T0) for i in eval_intervals(cells)] == [(0, 230 * S)]
    split = eval_intervals(cells, merge_gap_s=10)
    assert [(i.start_unix_ns - T0, i.end_unix_ns - T0, i.throughput) for i in split] == [
        (0, 100 * S, 10.0),
        (130 * S, 230 * S, 20.0),
    ]


def test_a_cell_without_duration_adds_neither_tokens_nor_its_time_scale_to_a_run() -> None:
    cells = [_cell("a", 0, 100, 1_000), _cell("z", 50, 50, 99, attributes={sc.TIME_SCALE: "4"})]
    (run,) = eval_intervals(cells)
    assert (run.time_scale, run.engines) == (1.0, {"q": 10.0})


def test_a_cell_without_tokens_adds_none_to_its_runs_throughput() -> None:
    """A timed-out cell beside one of 1,000 tokens over the same 100 s: 10 tok/s, not 10.01."""
    cells = [_cell("a", 0, 100, 1_000), _cell("t", 0, 100, None, status=CellStatus.DEADLINE)]
    (run,) = eval_intervals(cells)
    assert (run.engines, run.throughput) == ({"q": 10.0}, 10.0)


def test_a_cell_on_no_named_engine_counts_for_the_unknown_engine() -> None:
    (run,) = eval_intervals([_cell("a", 0, 100, 1_000, engine=None)])
    assert (run.label, run.engines, run.throughput) == ("g eval, 1 worker 22:13", {"unknown": 10.0}, 10.0)


def test_a_run_of_one_second_has_its_throughput() -> None:
    (run,) = eval_intervals([_cell("a", 0, 1, 20)])
    assert (run.end_unix_ns - run.start_unix_ns, run.engines, run.throughput) == (S, {"q": 20.0}, 20.0)


# -- the cells' gauge --------------------------------------------------------------------------------
def test_a_cells_rate_sample_lies_at_its_midpoint_to_the_nanosecond() -> None:
    """T0 + 1 ns to T0 + 10 s + 2 ns: the midpoint, rounded down, is T0 + 5 s + 1 ns. At today's
    timestamps a float is 256 ns coarse, so only integer arithmetic gets it."""
    one = Cell(
        uid="a",
        eval_name="g",
        cell_id="a",
        engine="q",
        start_unix_ns=T0 + 1,
        end_unix_ns=T0 + 10 * S + 2,
        completion_tokens=100,
    )
    assert [s.unix_ns for s in cell_rate_samples([one])] == [T0 + 5 * S + 1]
