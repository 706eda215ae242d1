"""What a report and the instruments analysis read, from a real store file and real OTLP JSON exports.

One hand-built box is written to a SQLite store: a probe of qwen at 1, 2 and 4 streams (10, 20
and 40 tok/s), four rated cells around it, the engines' generation counter, GPU gauges at
known instants (some just inside and some just outside the margins the readers add), requests
naming the engines' addresses, one server timing, and probe documents that are not whole probe
reports. Each reader's whole result is compared with the records it should pick out, so a
filter that reads too much or too little, a field dropped or a margin on the wrong side shows.
"""

from __future__ import annotations

import base64
import dataclasses
import itertools
import json
import logging
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from google.protobuf.json_format import MessageToDict
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from spark_otel import InputError, _clock
from spark_otel import _semconv as sc
from spark_otel.analysis.gauges import LoadInterval
from spark_otel.cells import cell
from spark_otel.model import Cell, CellStatus, LoadWindow, MetricSample, Request, ServerTiming
from spark_otel.records.cell_columns import CellColumns
from spark_otel.records.probe_report import ProbeLevel, ProbeMetadata, ProbeReport, ProbeSettings
from spark_otel.records.rate_curve import CurvePoint, RateCurve
from spark_otel.records.span_codec import (
    cell_from_span,
    request_from_span,
    server_timing_from_span,
    window_from_span,
)
from spark_otel.report import overview_from_inputs
from spark_otel.report.inputs import (
    InstrumentInputs,
    ReportInputs,
    energy_samples,
    inputs_from_otlp_json,
    inputs_from_store,
    instruments_from_store,
    read_inputs,
    verdicts_of,
)
from spark_otel.store import Store

S = 1_000_000_000
T0 = 1_790_000_000 * S  # 14:13:20 UTC
GEN = sc.ENGINE_GENERATION_TOKENS


def _at(seconds: float) -> int:
    return T0 + int(seconds * S)


def _hhmm(seconds: float) -> str:
    return datetime.fromtimestamp(_at(seconds) / S, UTC).strftime("%H:%M:%S")


# -- the box ----------------------------------------------------------------------------------------

_SAMPLES: dict[tuple[str, int], MetricSample] = {}


def _sample(name: str, at_s: int, value: float) -> MetricSample:
    attrs: dict[str, str | int] = (
        {sc.ENGINE: "qwen"} if name.startswith("spark_otel.engine") else {sc.GPU_ID: 0}
    )
    sample = MetricSample(
        name=name, unix_ns=_at(at_s), value=value, unit="u", attributes=attrs, source="test"
    )
    _SAMPLES[(name, at_s)] = sample
    return sample


ALL_SAMPLES = [
    *(
        _sample(sc.GPU_UTILIZATION, t, v)
        for t, v in ((39, 0.1), (40, 0.2), (105, 0.5), (205, 0.6), (305, 0.7), (370, 0.3), (371, 0.05))
    ),
    *(_sample(GEN, t, v) for t, v in ((100, 0.0), (130, 300.0), (160, 900.0))),
    *(_sample(sc.ENGINE_GENERATION_TOKEN_RATE, t, v) for t, v in ((105, 10.0), (205, 20.0))),
    *(_sample(sc.GPU_ENERGY, t, v) for t, v in ((-22, 1.0), (-21, 2.0), (200, 3.0), (441, 4.0), (442, 5.0))),
    *(_sample(sc.GPU_POWER, t, v) for t, v in ((-21, 30.0), (105, 60.0), (442, 31.0))),
    _sample(sc.GPU_MEMORY_USED, 105, 2.0**30),
]


def _s(name: str, *times: int) -> list[MetricSample]:
    """The box's samples of ``name`` at these instants (seconds after T0), in that order."""
    return [_SAMPLES[(name, t)] for t in times]


def _cell(i: int, start_s: int, tokens: int) -> Cell:
    return Cell(
        uid=f"c{i}",
        eval_name="serial",
        cell_id=f"c{i}",
        engine="qwen",
        start_unix_ns=_at(start_s),
        end_unix_ns=_at(start_s + (8 if i == 0 else 10)),
        completion_tokens=tokens,
        workers=1,
    )


# c0 starts a second before the probe's 60 s margin, c1 on it; c2 on the far margin, c3 a second past.
CELLS = [_cell(0, 39, 80), _cell(1, 40, 100), _cell(2, 370, 100), _cell(3, 371, 200)]
WINDOWS = [
    LoadWindow(uid="w1", name="nemotron eval", kind="eval", engine="nemotron", start_unix_ns=_at(60),
               end_unix_ns=_at(90), streams=4)
]  # fmt: skip
REQUESTS = [
    Request(uid="r1", cell_uid="c1", eval_name="serial", engine="qwen", operation="text_completion",
            server_address="127.0.0.1", server_port=9000, start_unix_ns=_at(41), end_unix_ns=_at(49)),
    Request(uid="r2", engine="nemotron", operation="chat", server_address="10.0.0.5", start_unix_ns=_at(60),
            end_unix_ns=_at(61)),
]  # fmt: skip
R2_AS_CELL = Cell(uid="r2", eval_name="requests to nemotron", cell_id="r2", engine="nemotron",
                  start_unix_ns=_at(60), end_unix_ns=_at(61), source="request",
                  attributes={sc.GEN_AI_OPERATION_NAME: "chat"})  # fmt: skip
"""r2, which no cell holds, read as a cell of its own (analysis.request_cells)."""
STORED_CELLS = [*CELLS[:2], R2_AS_CELL, *CELLS[2:]]
TIMING = ServerTiming(request_uid="r1", trace_id="ab" * 16, span_uid="cd" * 8, engine="qwen",
                      arrival_unix_ns=_at(41), queue_s=0.5, prefill_s=0.25, decode_s=7.0,
                      e2e_s=7.75)  # fmt: skip


def _level(streams: int, start_s: int) -> ProbeLevel:
    rate = 10.0 * streams
    return ProbeLevel(
        streams=streams, start_unix_ns=_at(start_s), end_unix_ns=_at(start_s + 10), wall_s=10.0,
        tokens_expected=100 * streams, probe_tokens=100 * streams, stream_rates=[10.0] * streams,
        per_stream_median=10.0, probe_aggregate_rate=rate,
    )  # fmt: skip


PROBE = ProbeReport(
    metadata=ProbeMetadata(created_unix_ns=T0, engine_url="http://127.0.0.1:8011", engine="qwen", model="q3"),
    settings=ProbeSettings(streams=[1, 2, 4]),
    levels=[_level(1, 100), _level(2, 200), _level(4, 300)],
    curve=RateCurve(
        engine="qwen",
        points=[CurvePoint(streams=n, per_stream_rate=10.0, aggregate_rate=10.0 * n) for n in (1, 2, 4)],
        model="q3",
        measured_unix_ns=_at(310),
    ),
)
PROBE_INTERVALS = [
    LoadInterval(label=f"qwen {n} stream{'s' if n > 1 else ''}", source="probe", start_unix_ns=_at(t),
                 end_unix_ns=_at(t + 10), throughput=10.0 * n, engines={"qwen": 10.0 * n})
    for n, t in ((1, 100), (2, 200), (4, 300))
]  # fmt: skip
VERSION = "probe report version None; this spark-otel reads version 1"
NOT_A_REPORT = "not a probe report: : Input should be a valid dictionary or instance of ProbeReport"


def _rate(cell_: Cell) -> MetricSample:
    """The cell's decode rate as `read_inputs` reads it: a sample at the cell's midpoint."""
    assert cell_.completion_tokens is not None
    return MetricSample(
        name=sc.CELL_DECODE_RATE_METRIC,
        unix_ns=(cell_.start_unix_ns + cell_.end_unix_ns) // 2,
        value=cell_.completion_tokens / cell_.elapsed_s,
        unit="{token}/s",
        attributes={sc.ENGINE: "qwen"},
        source="cells",
    )


@pytest.fixture
def ticking_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """Documents are kept oldest first by their creation time: a clock that ticks 1 us per read
    orders them as they were put, whatever the machine's clock resolution."""
    ticks = itertools.count(T0, 1000)
    monkeypatch.setattr(_clock, "wall_ns", lambda: next(ticks))


def _box(path: Path, *, probe: bool = True, bad_documents: bool = True) -> Path:
    with Store(path) as store:
        store.write_cells(CELLS)
        store.write_windows(WINDOWS)
        store.write_requests(REQUESTS)
        store.write_server_timings([TIMING])
        store.write_samples(ALL_SAMPLES)
        if probe:
            store.put_document("probe", "qwen sweep", PROBE.model_dump(mode="json"))
        if bad_documents:
            store.put_document(
                "probe", "bare", {"metadata": {"engine": "llama", "engine_url": "http://10.0.0.2:8000"}}
            )
            store.put_document("probe", "listed", [])  # type: ignore[arg-type]  # as another writer could
            store.put_document("probe", "no-url", {"metadata": {"engine": "mistral"}})
            store.put_document(
                "nsight", "capture", {"metadata": {"engine": "other", "engine_url": "http://other:1"}}
            )
    return path


@pytest.fixture
def box(tmp_path: Path, ticking_clock: None) -> Iterator[Store]:
    with Store(_box(tmp_path / "box.sqlite")) as store:
        yield store


BAD_NOTES = [
    f"probe document 'bare': {VERSION}; skipped",
    f"probe document 'listed': {NOT_A_REPORT}; skipped",
    f"probe document 'no-url': {VERSION}; skipped",
]
NO_GPU = (
    "no GPU samples: record them beside the load with `spark-otel gpu-sample` "
    "(or `spark-otel receive --gpu auto`)"
)
NO_NSIGHT = "no Nsight captures: ingest one taken under load with `spark-otel ingest-nsight`"
INSTRUMENT_URLS = {
    "qwen": "http://127.0.0.1:9000",
    "llama": "http://10.0.0.2:8000",
    "nemotron": "http://10.0.0.5",
}
"""The requests' addresses first, a probe document's where no request reached the engine."""


# -- read_inputs ------------------------------------------------------------------------------------


def test_read_inputs_takes_the_probe_levels_first_and_every_gauge_sample_within_a_minute_of_them(
    box: Store,
) -> None:
    """Auto picks the probe levels over the counter bins and the eval runs; the samples are every
    stored gauge from 60 s before the first level (T0+40) to 60 s after the last (T0+370), both
    edges in, the second either side out; the cells' rates are those that start inside too. No
    metric is the throughput, the documents that are not probe reports are noted, and the
    engines' addresses are the requests', else a probe document's."""
    found = read_inputs(box)
    assert found == InstrumentInputs(
        source="probe",
        intervals=PROBE_INTERVALS,
        samples=[
            *_s(sc.GPU_UTILIZATION, 40, 105, 205, 305, 370),
            *_s(sc.GPU_POWER, 105),
            *_s(sc.GPU_ENERGY, 200),
            *_s(sc.GPU_MEMORY_USED, 105),
            *_s(GEN, 100, 130, 160),
            _rate(CELLS[1]),
            _rate(CELLS[2]),
        ],
        throughput_metric=None,
        engine_urls=INSTRUMENT_URLS,
        notes=BAD_NOTES,
    )
    assert read_inputs(box, source="probe") == found


@pytest.mark.parametrize("source", ["probe", "receiver", "evals"])
def test_read_inputs_over_cells_already_read_is_read_inputs_over_the_store(box: Store, source: str) -> None:
    """A report reads the store's cells once and hands them over: the same intervals and the same
    cells' rates around them (those starting inside the margins, both edges in) as reading them."""
    assert read_inputs(box, source=source, cells=box.cells()) == read_inputs(box, source=source)


def test_read_inputs_from_receiver_bins_leaves_the_counter_out_of_the_gauges(box: Store) -> None:
    """Asked for receiver bins, the generation counter's scrapes (0, 300, 900 tokens at T0+100,
    +130, +160) make two 30 s bins of 10 and 20 tok/s whatever the store's probes; the counter is
    the throughput, so it is not among the samples, read from T0+40 to T0+220."""
    found = read_inputs(box, source="receiver")
    assert found == InstrumentInputs(
        source="receiver",
        intervals=[
            LoadInterval(
                label=f"{_hhmm(t)} +30 s",
                source="receiver",
                start_unix_ns=_at(t),
                end_unix_ns=_at(t + 30),
                throughput=tp,
                engines={"qwen": tp},
            )
            for t, tp in ((100, 10.0), (130, 20.0))
        ],
        samples=[
            *_s(sc.GPU_UTILIZATION, 40, 105, 205),
            *_s(sc.GPU_POWER, 105),
            *_s(sc.GPU_ENERGY, 200),
            *_s(sc.GPU_MEMORY_USED, 105),
            _rate(CELLS[1]),
        ],
        throughput_metric=GEN,
        engine_urls=INSTRUMENT_URLS,
        notes=[],
    )
    assert _hhmm(100) == "14:15:00"


def test_read_inputs_bins_the_counter_by_bin_s(box: Store) -> None:
    """One 60 s bin over the same scrapes: 900 tokens in 60 s, 15 tok/s."""
    found = read_inputs(box, source="receiver", bin_s=60.0)
    assert found.intervals == [
        LoadInterval(label="14:15:00 +60 s", source="receiver", start_unix_ns=_at(100), end_unix_ns=_at(160),
                     throughput=15.0, engines={"qwen": 15.0})
    ]  # fmt: skip
    assert (found.source, found.throughput_metric) == ("receiver", GEN)


def test_read_inputs_refuses_a_bin_that_is_not_positive(box: Store) -> None:
    """A zero-second bin would never end: refused with the value named."""
    with pytest.raises(ValueError, match=r"^bin must be positive seconds, got 0$"):
        read_inputs(box, source="receiver", bin_s=0)


def test_read_inputs_from_eval_runs_takes_every_cell_on_the_box(box: Store) -> None:
    """Asked for eval runs, the four cells make two runs (the 320 s between them is past the
    60 s merge gap): 180 tokens in 11 s and 300 in 11 s. Read from T0-21 to T0+441: every gauge
    but the energy and power samples a second outside, the counter too (it is no interval's
    throughput), and every cell's rate."""
    found = read_inputs(box, source="evals")
    name = "serial eval, 1 worker on qwen"
    assert found == InstrumentInputs(
        source="evals",
        intervals=[
            LoadInterval(
                label=f"{name} 14:13",
                source="evals",
                start_unix_ns=_at(39),
                end_unix_ns=_at(50),
                throughput=180 / 11,
                engines={"qwen": 180 / 11},
            ),
            LoadInterval(
                label=f"{name} 14:19",
                source="evals",
                start_unix_ns=_at(370),
                end_unix_ns=_at(381),
                throughput=300 / 11,
                engines={"qwen": 300 / 11},
            ),
        ],
        samples=[
            *_s(sc.GPU_UTILIZATION, 39, 40, 105, 205, 305, 370, 371),
            *_s(sc.GPU_POWER, -21, 105),
            *_s(sc.GPU_ENERGY, -21, 200, 441),
            *_s(sc.GPU_MEMORY_USED, 105),
            *_s(GEN, 100, 130, 160),
            *(_rate(c) for c in CELLS),
        ],
        throughput_metric=None,
        engine_urls=INSTRUMENT_URLS,
        notes=[],
    )


def test_read_inputs_falls_back_to_the_eval_runs_without_a_probe_or_a_counter(
    tmp_path: Path, ticking_clock: None
) -> None:
    """With no probe level and no counter scrape, auto reads the eval runs, and no metric is the
    throughput (the counter bins it tried first found nothing)."""
    with Store(tmp_path / "cells.sqlite") as store:
        store.write_cells(CELLS[:2])
        found = read_inputs(store)
    assert found == InstrumentInputs(
        source="evals",
        intervals=[
            LoadInterval(
                label="serial eval, 1 worker on qwen 14:13",
                source="evals",
                start_unix_ns=_at(39),
                end_unix_ns=_at(50),
                throughput=180 / 11,
                engines={"qwen": 180 / 11},
            )
        ],
        samples=[_rate(CELLS[0]), _rate(CELLS[1])],
        throughput_metric=None,
        engine_urls={},
        notes=[],
    )


@pytest.mark.parametrize("source", ["auto", "probe", "receiver", "evals"])
def test_read_inputs_of_an_empty_store_finds_no_interval(tmp_path: Path, source: str) -> None:
    """Nothing to read: no source chosen, no interval, no sample, no note (lists, never None)."""
    with Store(tmp_path / "empty.sqlite") as store:
        found = read_inputs(store, source=source)
    assert found == InstrumentInputs(None, [], [], None, {}, [])


def test_read_inputs_keeps_the_notes_when_no_document_is_a_probe_report(
    tmp_path: Path, ticking_clock: None
) -> None:
    """A store of documents that are not probe reports, no counter and no cell: no interval, but
    the notes still say why each document was skipped."""
    with Store(tmp_path / "docs.sqlite") as store:
        store.put_document(
            "probe", "bare", {"metadata": {"engine": "llama", "engine_url": "http://10.0.0.2:8000"}}
        )
        store.put_document("probe", "listed", [])  # type: ignore[arg-type]
        found = read_inputs(store)
    assert found == InstrumentInputs(None, [], [], None, {}, BAD_NOTES[:2])


# -- instruments_from_store and verdicts_of --------------------------------------------------------


def test_instruments_from_store_grades_the_gauges_against_the_probe_levels(box: Store) -> None:
    """The probe levels are the load; the GPU's utilization and power, the engine counter and
    the cells' rate are graded, in Appendix F's order, after the reading's notes; qwen's requests
    running, expected beside its counter, is unsupported."""
    report = instruments_from_store(box)
    assert report is not None
    assert report.interval_source == "probe"
    assert report.intervals == PROBE_INTERVALS
    assert [(v.instrument, v.verdict, v.n_samples) for v in report.instruments] == [
        ("GPU 0 utilization", "not load", 3),
        ("GPU 0 power", "not enough load range", 1),
        ("GPU 0 energy counter", "not enough load range", 1),
        ("GPU 0 memory used", "not enough load range", 1),
        ("qwen generation counter", "unsupported", 1),
        ("qwen requests running", "unsupported", 0),
        ("qwen cells' decode rate", "not enough load range", 0),
    ]
    # the command to measure with names qwen as its requests reached it
    assert (
        report.instruments[1].measure
        == "spark-otel probe --engine qwen=http://127.0.0.1:9000 --streams 1,2,4,8,16"
    )
    assert report.notes == [*BAD_NOTES, NO_NSIGHT]


def test_instruments_from_store_is_none_without_load_or_without_a_gauge(
    tmp_path: Path, ticking_clock: None
) -> None:
    """No interval (gauges alone) or no gauge (a probe alone): nothing to grade, so None."""
    with Store(tmp_path / "gauges.sqlite") as store:
        store.write_samples(s for s in ALL_SAMPLES if s.name != GEN)
        assert instruments_from_store(store) is None
    with Store(tmp_path / "probe.sqlite") as store:
        store.put_document("probe", "qwen sweep", PROBE.model_dump(mode="json"))
        assert read_inputs(store).intervals == PROBE_INTERVALS
        assert instruments_from_store(store) is None


def test_verdicts_of_passes_the_source_urls_and_throughput_metric_and_puts_the_notes_first() -> None:
    """One receiver bin and qwen's running requests in it: too little load range, so the verdict
    names the probe to run, at the engine's recorded address. The generation counter is the
    throughput, so it is noted and not graded; the reading's own note comes first."""
    found = InstrumentInputs(
        source="receiver",
        intervals=[
            LoadInterval(
                label="bin",
                source="receiver",
                start_unix_ns=_at(0),
                end_unix_ns=_at(30),
                throughput=10.0,
                engines={"qwen": 10.0},
            )
        ],
        samples=[
            MetricSample(
                name=sc.ENGINE_REQUESTS_RUNNING, unix_ns=_at(10), value=2.0, attributes={sc.ENGINE: "qwen"}
            ),
            MetricSample(name=GEN, unix_ns=_at(10), value=5.0, attributes={sc.ENGINE: "qwen"}),
            MetricSample(name=GEN, unix_ns=_at(20), value=9.0, attributes={sc.ENGINE: "qwen"}),
        ],
        throughput_metric=GEN,
        engine_urls={"qwen": "http://10.1.1.1:8000"},
        notes=["the reading's note"],
    )
    report = verdicts_of(found)
    assert report.interval_source == "receiver"
    assert report.notes == [
        "the reading's note",
        f"{GEN} is these intervals' throughput: not graded against itself",
        NO_GPU,
        NO_NSIGHT,
    ]
    [verdict] = report.instruments
    assert (verdict.instrument, verdict.verdict) == ("qwen requests running", "not enough load range")
    assert verdict.measure == "spark-otel probe --engine qwen=http://10.1.1.1:8000 --streams 1,2,4,8,16"


# -- energy_samples ---------------------------------------------------------------------------------


def _energy(at_s: int, value: float) -> MetricSample:
    return MetricSample(
        name=sc.GPU_ENERGY, unix_ns=_at(at_s), value=value, unit="J", attributes={sc.GPU_ID: 0}
    )


def test_energy_samples_are_the_energy_then_power_readings_within_a_minute_of_the_spans(box: Store) -> None:
    """Spans T0+200..250 and T0+100..110 read T0+40 to T0+310, both edges in; the energy counter's
    samples, then the power's; no other gauge. No span, no reading."""
    edges = {t: _energy(t, v) for t, v in ((39, 6.0), (40, 7.0), (310, 8.0), (311, 9.0))}
    box.write_samples(edges.values())
    spans = [(_at(200), _at(250)), (_at(100), _at(110))]
    assert energy_samples(box, spans) == [
        edges[40],
        *_s(sc.GPU_ENERGY, 200),
        edges[310],
        *_s(sc.GPU_POWER, 105),
    ]
    assert energy_samples(box, []) == []


# -- inputs_from_store ------------------------------------------------------------------------------

CURVE_PROBLEMS = [
    "skipping probe document 'bare' has no valid curve: 'curve'",
    "skipping probe document 'listed' has no valid curve: list indices must be integers or slices, not str",
    "skipping probe document 'no-url' has no valid curve: 'curve'",
]
REPORT_URLS = {
    "qwen": "http://127.0.0.1:8011",
    "nemotron": "http://10.0.0.5",
    "llama": "http://10.0.0.2:8000",
}
"""A probe document's address over the requests' (the probe names the engine's base URL)."""


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "spark_otel.report.inputs"]


def test_inputs_from_store_reads_every_record_and_warns_of_each_document_it_skips(
    box: Store, caplog: pytest.LogCaptureFixture
) -> None:
    """Every record kind read back whole: the cells, windows, requests and server timings; the
    one whole probe report and its curve; GPU utilization and token rates (those metrics only);
    the energy and power samples from a minute before the first cell (T0-21) to a minute after
    the last (T0+441) and around the probe's levels; the instrument verdicts. Each probe document
    without a curve, then each that is not a probe report, is warned of by name."""
    with caplog.at_level(logging.WARNING):
        inputs = inputs_from_store(box)
    assert inputs == ReportInputs(
        source=str(box.path),
        cells=STORED_CELLS,
        windows=WINDOWS,
        probes=[PROBE],
        curves=[PROBE.curve],
        gpu_utilization=[0.1, 0.2, 0.5, 0.6, 0.7, 0.3, 0.05],
        token_rates=[10.0, 20.0],
        engine_urls=REPORT_URLS,
        gpu_energy=[*_s(sc.GPU_ENERGY, -21, 200, 441), *_s(sc.GPU_POWER, -21, 105)],
        instruments=instruments_from_store(box),
        requests=REQUESTS,
        server_timings={"r1": TIMING},
        holdings=box.row_counts(),
    )
    assert inputs.holdings["requests"] == len(REQUESTS)
    assert inputs.instruments is not None
    assert inputs.instruments.interval_source == "probe"
    assert str(box.path).endswith("box.sqlite")
    assert _warnings(caplog) == [
        *CURVE_PROBLEMS,
        f"report: skipping probe document 'bare': {VERSION}",
        f"report: skipping probe document 'listed': {NOT_A_REPORT}",
        f"report: skipping probe document 'no-url': {VERSION}",
    ]


def test_inputs_from_store_takes_the_energy_around_the_probe_levels_as_well_as_the_cells(
    tmp_path: Path, ticking_clock: None
) -> None:
    """The probe's levels (T0+100..310) widen the energy span past two cells' (T0+39..50) to
    T0+370; with no cell at all, the levels alone set it."""
    with Store(tmp_path / "probe.sqlite") as store:
        store.write_samples(ALL_SAMPLES)
        store.put_document("probe", "qwen sweep", PROBE.model_dump(mode="json"))
        assert inputs_from_store(store).gpu_energy == [*_s(sc.GPU_ENERGY, 200), *_s(sc.GPU_POWER, 105)]
        store.write_cells(CELLS[:2])
        assert inputs_from_store(store).gpu_energy == [
            *_s(sc.GPU_ENERGY, -21, 200),
            *_s(sc.GPU_POWER, -21, 105),
        ]


def test_inputs_from_store_without_probe_tables_reads_the_curves_only(
    box: Store, caplog: pytest.LogCaptureFixture
) -> None:
    """For `advise`: the curves and addresses still, but no probe report, no instruments, no
    warning about documents that are not probe reports; the source is the one given."""
    with caplog.at_level(logging.WARNING):
        inputs = inputs_from_store(box, source="the box", probe_tables=False)
    assert inputs == ReportInputs(
        source="the box",
        cells=STORED_CELLS,
        windows=WINDOWS,
        probes=[],
        curves=[PROBE.curve],
        gpu_utilization=[0.1, 0.2, 0.5, 0.6, 0.7, 0.3, 0.05],
        token_rates=[10.0, 20.0],
        engine_urls=REPORT_URLS,
        gpu_energy=[*_s(sc.GPU_ENERGY, -21, 200, 441), *_s(sc.GPU_POWER, -21, 105)],
        instruments=None,
        requests=REQUESTS,
        server_timings={"r1": TIMING},
        holdings=box.row_counts(),
    )
    assert _warnings(caplog) == CURVE_PROBLEMS


def _columns_as_lists(columns: CellColumns) -> dict[str, list[object]]:
    """Each column's values, NaN (no ceiling) as None so that equal columns compare equal."""
    return {
        name: [None if v != v else v for v in (value.tolist() if hasattr(value, "tolist") else value)]
        for name, value in vars(columns).items()
    }


def test_inputs_from_store_as_columns_reads_the_same_cells_as_columns(box: Store) -> None:
    """For `advise --json`: the cells (requests standing in included) as columns in the same
    order, no `Cell` record, every other input the same, the energy samples over the same span."""
    records = inputs_from_store(box, source="the box", probe_tables=False)
    inputs = inputs_from_store(box, source="the box", probe_tables=False, cells_as_columns=True)
    assert inputs.cells == []
    assert inputs.cell_columns is not None
    assert _columns_as_lists(inputs.cell_columns) == _columns_as_lists(CellColumns.from_cells(records.cells))
    assert len(inputs.cell_columns) == len(records.cells) > 0
    assert inputs == dataclasses.replace(records, cells=[], cell_columns=inputs.cell_columns)
    assert overview_from_inputs(inputs) == overview_from_inputs(records)


# -- inputs_from_otlp_json --------------------------------------------------------------------------


def _record_spans(tracer_provider: TracerProvider) -> None:
    """A cell with one streamed request and vLLM's server span for it, a timed-out cell, a load
    window and an unrelated span."""
    tracer = tracer_provider.get_tracer("test")
    with (
        cell("golden-review", "B#265", engine="qwen", workers=4, tracer_provider=tracer_provider) as state,
        tracer.start_as_current_span(
            "text_completion qwen3.8-27b",
            attributes={
                sc.GEN_AI_OPERATION_NAME: sc.OPERATION_TEXT_COMPLETION,
                sc.GEN_AI_REQUEST_MODEL: "qwen3.8-27b",
                sc.GEN_AI_USAGE_OUTPUT_TOKENS: 5885,
                sc.SERVER_PORT: 8011,
                **state.request_attributes,
            },
        ),
    ):
        state.add_request(input_tokens=9857, output_tokens=5885, error_type=None)
        with tracer.start_as_current_span(
            sc.VLLM_SERVER_SPAN_NAME,
            kind=SpanKind.SERVER,
            attributes={sc.VLLM_LATENCY_TIME_IN_QUEUE: 0.05, sc.VLLM_LATENCY_E2E: 511.2},
        ):
            pass
    with cell("golden-review", "E#84", engine="qwen", tracer_provider=tracer_provider) as state:
        state.set_status(CellStatus.DEADLINE)
    with tracer.start_as_current_span(
        "load nemotron eval",
        attributes={
            sc.SPAN_KIND_ATTR: sc.SPAN_KIND_LOAD_WINDOW,
            sc.LOAD_WINDOW_NAME: "nemotron eval, 4 workers",
            sc.LOAD_WINDOW_KIND: "eval",
            sc.ENGINE: "nemotron",
        },
    ):
        pass
    with tracer.start_as_current_span("unrelated"):
        pass


def _export_line(span_exporter: InMemorySpanExporter) -> str:
    """One ExportTraceServiceRequest, ids in hex, as the collector's file exporter writes it."""
    body = MessageToDict(encode_spans(span_exporter.get_finished_spans()))
    for rs in body["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            for span in ss["spans"]:
                for key in ("traceId", "spanId", "parentSpanId"):
                    if key in span:
                        span[key] = base64.b64decode(span[key]).hex()
    return json.dumps(body)


def test_inputs_from_otlp_json_rebuilds_the_records_and_names_every_file(
    tmp_path: Path, span_exporter: InMemorySpanExporter, tracer_provider: TracerProvider
) -> None:
    """The cells, request, window and server timing (keyed by the request it answered) as the
    store's exporter would convert the same spans; the source names both files, comma-separated;
    nothing a store alone holds (probes, samples, addresses)."""
    _record_spans(tracer_provider)
    spans = span_exporter.get_finished_spans()
    traces, metrics = tmp_path / "traces.jsonl", tmp_path / "metrics.jsonl"
    traces.write_text(_export_line(span_exporter) + "\n")
    metrics.write_text(json.dumps({"resourceMetrics": []}) + "\n")

    inputs = inputs_from_otlp_json([traces, str(metrics)])

    kind = {s.name: s for s in spans}
    cells = [
        cell_from_span(s) for s in spans if (s.attributes or {}).get(sc.SPAN_KIND_ATTR) == sc.SPAN_KIND_CELL
    ]
    request = request_from_span(kind["text_completion qwen3.8-27b"])
    timing = server_timing_from_span(kind[sc.VLLM_SERVER_SPAN_NAME])
    assert timing.request_uid == request.uid
    assert inputs == ReportInputs(
        source=f"{traces}, {metrics}",
        cells=cells,
        windows=[window_from_span(kind["load nemotron eval"])],
        requests=[request],
        server_timings={request.uid: timing},
        holdings={"cells": 2, "requests": 1, "load_windows": 1},
    )
    assert [(c.cell_id, c.status) for c in inputs.cells] == [
        ("B#265", CellStatus.OK),
        ("E#84", CellStatus.DEADLINE),
    ]
    assert (inputs.windows[0].name, inputs.server_timings[request.uid].queue_s) == (
        "nemotron eval, 4 workers",
        0.05,
    )


def test_inputs_from_otlp_json_names_the_file_it_cannot_read(tmp_path: Path) -> None:
    """A missing file and a file whose only line is cut short: each an InputError naming the file
    (and the line) and what is wrong."""
    missing = tmp_path / "gone.jsonl"
    with pytest.raises(InputError) as raised:
        inputs_from_otlp_json([missing])
    assert str(raised.value) == f"OTLP JSON export {missing}: no such file"
    cut = tmp_path / "cut.jsonl"
    cut.write_text('{"resourceSpans": [')
    with pytest.raises(InputError) as raised:
        inputs_from_otlp_json([cut])
    assert str(raised.value) == (
        f"{cut}:1: not an OTLP JSON trace export: Expecting value: line 1 column 20 (char 19)"
    )


def test_an_otlp_export_of_requests_outside_cells_reads_them_as_cells(tmp_path: Path) -> None:
    """As from a store: a request no cell holds is a cell of its own, on the engine the cell's
    requests to the same address named, under the eval its runner named on the resource."""
    from tests.support.otlp_json_export import CELL, REQUEST, export, span

    address = {sc.SERVER_ADDRESS: {"stringValue": "127.0.0.1"}, sc.SERVER_PORT: {"intValue": "8000"}}
    cell_span = span("cell golden-review", CELL, spanId="00000000000000c1")
    inside = span(
        "text_completion m",
        {
            **REQUEST,
            **address,
            sc.CELL_UID: {"stringValue": "00000000000000c1"},
            sc.EVAL_NAME: {"stringValue": "golden-review"},
            sc.ENGINE: {"stringValue": "qwen"},
        },
        spanId="00000000000000a1",
    )
    outside = span(
        "text_completion m",
        {**REQUEST, **address, sc.GEN_AI_USAGE_OUTPUT_TOKENS: {"intValue": "7"}},
        spanId="00000000000000b1",
    )
    request = export(cell_span, inside, outside)
    request["resourceSpans"][0]["resource"] = {
        "attributes": [{"key": sc.SERVICE_NAME, "value": {"stringValue": "lm-eval"}}]
    }
    path = tmp_path / "traces.json"
    path.write_text(json.dumps(request))
    inputs = inputs_from_otlp_json([path])
    assert [(c.uid, c.eval_name, c.engine, c.source, c.completion_tokens) for c in inputs.cells] == [
        ("00000000000000c1", "golden-review", None, "live", None),
        ("00000000000000b1", "lm-eval", "qwen", "request", 7),
    ]
