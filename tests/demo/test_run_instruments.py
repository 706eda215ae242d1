"""The demo's Appendix F verdicts (`_instruments`) from a real store and hand-made probe reports:
the probe levels are the intervals, the store is read 60 s either side of them (a counter's
reading beside each level) and no further, every stored gauge is read once, and the probed
engine's URL is what a verdict's probe command names. The verdict logic itself is
tests/analysis' concern; this pins what the demo hands it."""

from __future__ import annotations

from pathlib import Path

from spark_otel import _semconv as sc
from spark_otel.analysis.gauges import LoadInterval, VerdictReason, instrument_verdicts
from spark_otel.analysis.probe_levels import curve_of
from spark_otel.demo.run import _instruments
from spark_otel.model import MetricSample
from spark_otel.records.probe_report import ProbeLevel, ProbeMetadata, ProbeReport, ProbeSettings
from spark_otel.store import Store

S = 1_000_000_000
T0 = 1_790_000_000 * S
URL = "http://127.0.0.1:8011"
RATES = (10.0, 20.0, 40.0)  # qwen at 1, 2 and 4 streams, levels 100 s apart, 10 s each
LAST_END = T0 + 210 * S


def _probe() -> ProbeReport:
    levels = [
        ProbeLevel(
            streams=2**k,
            start_unix_ns=T0 + k * 100 * S,
            end_unix_ns=T0 + k * 100 * S + 10 * S,
            wall_s=10.0,
            tokens_expected=100,
            probe_tokens=int(rate * 10),
            probe_aggregate_rate=rate,
            per_stream_median=rate / 2**k,
            stream_rates=[rate / 2**k] * 2**k,
        )
        for k, rate in enumerate(RATES)
    ]
    return ProbeReport(
        metadata=ProbeMetadata(created_unix_ns=T0, engine_url=URL, engine="qwen", model="m", time_scale=2.0),
        settings=ProbeSettings(),
        levels=levels,
        curve=curve_of("qwen", levels),
    )


def _power(at_ns: int, watts: float) -> MetricSample:
    return MetricSample(name=sc.GPU_POWER, unix_ns=at_ns, value=watts, unit="W", attributes={sc.GPU_ID: "0"})


def _kv(at_ns: int) -> MetricSample:
    return MetricSample(
        name=sc.ENGINE_KV_CACHE_USAGE, unix_ns=at_ns, value=0.5, attributes={sc.ENGINE: "qwen"}
    )


# Power inside each level, rising with its rate; KV-cache usage read only around the levels.
POWER = [_power(T0 + k * 100 * S + s * S, 100.0 + 10 * rate) for k, rate in enumerate(RATES) for s in (2, 8)]
KV_KEPT = [_kv(T0 - 60 * S), _kv(T0 - 59 * S), _kv(LAST_END + 59 * S), _kv(LAST_END + 60 * S)]
KV_LEFT_OUT = [_kv(T0 - 60 * S - 1), _kv(LAST_END + 60 * S + 1)]


def test_the_verdicts_read_the_probe_levels_and_the_gauges_a_minute_either_side(tmp_path: Path) -> None:
    with Store(tmp_path / "store.sqlite") as store:
        store.write_samples(POWER + KV_KEPT + KV_LEFT_OUT)
        # A cell-rate sample is not a stored gauge: the verdicts compute that one from the cells.
        store.write_samples([MetricSample(name=sc.CELL_DECODE_RATE_METRIC, unix_ns=T0 + 5 * S, value=9.0)])
        report = _instruments(store, [_probe()])

    intervals = [
        LoadInterval(
            label=label,
            source="probe",
            start_unix_ns=T0 + k * 100 * S,
            end_unix_ns=T0 + k * 100 * S + 10 * S,
            throughput=rate,
            engines={"qwen": rate},
            time_scale=2.0,
        )
        for k, (label, rate) in enumerate(
            zip(("qwen 1 stream", "qwen 2 streams", "qwen 4 streams"), RATES, strict=True)
        )
    ]
    assert report == instrument_verdicts(
        intervals, POWER + KV_KEPT, interval_source="probe", engine_urls={"qwen": URL}
    )
    assert report is not None
    assert [(v.metric, v.verdict, v.n_samples) for v in report.instruments] == [
        (sc.GPU_UTILIZATION, "unsupported", 0),
        (sc.GPU_POWER, "tracks load", 6),
        (sc.GPU_MEMORY_USED, "unsupported", 0),
        (sc.ENGINE_GENERATION_TOKENS, "unsupported", 0),
        (sc.ENGINE_REQUESTS_RUNNING, "unsupported", 0),
        (sc.ENGINE_KV_CACHE_USAGE, "not enough load range", 0),
    ]
    power, kv = report.instruments[1], report.instruments[-1]
    assert [(r.interval, r.value) for r in power.readings] == [
        ("qwen 1 stream", 200.0),
        ("qwen 2 streams", 300.0),
        ("qwen 4 streams", 500.0),
    ]
    # The four readings kept, none of them inside a level; the probe command names the probed URL.
    assert (kv.reason, kv.n_readings, kv.measure) == (
        VerdictReason.OUTSIDE_INTERVALS,
        4,
        f"spark-otel probe --engine qwen={URL} --streams 1,2,4,8,16",
    )
    assert report.notes == ["no Nsight captures: ingest one taken under load with `spark-otel ingest-nsight`"]


def test_no_measured_level_gives_no_verdicts(tmp_path: Path) -> None:
    probe = _probe()
    for level in probe.levels:
        level.probe_aggregate_rate = None
    with Store(tmp_path / "store.sqlite") as store:
        store.write_samples(POWER)
        assert _instruments(store, [probe]) is None
