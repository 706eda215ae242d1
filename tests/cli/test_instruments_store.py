"""`spark-otel instruments` on a small store of receiver scrapes, every figure worked out by hand:
the whole verdict table with its notes and "why" lines, the whole --readings table, the whole
--json document; each refusal word for word (an interval source the store does not hold, load
with no token throughput, load with no gauge); and the options as --help lists them.

Three minutes of qwen's generation counter, scraped every 10 s, climbing at 10, 20 and then 40
tok/s: 60 s bins give three intervals of 10, 20 and 40 tok/s. Beside it, six samples per bin of
GPU 0's utilization (96% throughout), power (31, 32, 34 W) and qwen's running requests (1, 2, 4:
in proportion to the load)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.support.printed import stdout_unpadded

from spark_otel import _semconv as sc
from spark_otel.cli import main
from spark_otel.model import MetricSample
from spark_otel.store import Store, default_store_path

S = 1_000_000_000
T0 = 1_700_000_000 * S  # 2023-11-14 22:13:20 UTC
RATES = (10.0, 20.0, 40.0)  # tok/s in each minute
POWER = (31.0, 32.0, 34.0)  # W in each minute
BINS = ("22:13:20 +60 s", "22:14:20 +60 s", "22:15:20 +60 s")
MEASURE = "measure: spark-otel probe --engine NAME=URL --streams 1,2,4,8,16"


def _scrapes(path: Path, *, rates: tuple[float, ...] = RATES, gauges: bool = True) -> str:
    """The counter every 10 s from T0 to T0 + 180 s; with ``gauges``, the gauges at 5 s past each
    scrape (inside a bin, never on its edge)."""
    samples, total = [], 0.0
    for k in range(19):
        samples.append(
            MetricSample(
                name=sc.ENGINE_GENERATION_TOKENS,
                unix_ns=T0 + k * 10 * S,
                value=total,
                attributes={sc.ENGINE: "qwen"},
            )
        )
        total += rates[min(k // 6, 2)] * 10
    for k in range(18) if gauges else ():
        t, minute = T0 + (k * 10 + 5) * S, k // 6
        samples += [
            MetricSample(name=sc.GPU_UTILIZATION, unix_ns=t, value=0.96, attributes={sc.GPU_ID: "0"}),
            MetricSample(name=sc.GPU_POWER, unix_ns=t, value=POWER[minute], attributes={sc.GPU_ID: "0"}),
            MetricSample(
                name=sc.ENGINE_REQUESTS_RUNNING,
                unix_ns=t,
                value=RATES[minute] / 10,
                attributes={sc.ENGINE: "qwen"},
            ),
        ]
    with Store(path) as store:
        store.write_samples(samples)
    return str(path)


@pytest.fixture
def scrapes(tmp_path: Path) -> str:
    return _scrapes(tmp_path / "scrapes.sqlite")


VERDICTS_AND_READINGS_PRINTED = """\
                              3 receiver intervals, 10.0 to 40.0 tok/s (4.0x): does each gauge move with load?
┏━━━━━━━━━━━━━━━━━━━━━━━┳━━━━━━━━━━━━━┳━━━━━━━━━━━┳━━━━━━━━━━━━━━┳━━━━━━━━━━━━━━━━━━━━━━━┳━━━━━━━━━━━━┳━━━━━━━━━━━┳━━━━━━━━━━━━━━━━━━━━━━━━━┓
┃ instrument            ┃ verdict     ┃ intervals ┃        tok/s ┃                 reads ┃ elasticity ┃ rank corr ┃ zero / constant samples ┃
┡━━━━━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━━━━╇━━━━━━━━━━━╇━━━━━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━━━╇━━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━━━━━━━━┩
│ GPU 0 utilization     │ not load    │         3 │ 10.0 to 40.0 │                 96.0% │       0.00 │         - │ 0 / 18 of 18            │
│ GPU 0 power           │ not load    │         3 │ 10.0 to 40.0 │        31.0 to 34.0 W │       0.07 │      1.00 │ 0 / 6 of 18             │
│ GPU 0 memory used     │ unsupported │         0 │            - │                     - │          - │         - │ 0 / 0 of 0              │
│ qwen requests running │ tracks load │         3 │ 10.0 to 40.0 │ 1.00 to 4.00 requests │       1.00 │      1.00 │ 0 / 6 of 18             │
└───────────────────────┴─────────────┴───────────┴──────────────┴───────────────────────┴────────────┴───────────┴─────────────────────────┘
elasticity: least-squares slope of the gauge on throughput, times mean throughput over mean gauge: 1 moves in proportion, 0 not at all; tracks load from 0.5
rank corr: Spearman rank correlation with throughput; tracks load from 0.8
zero / constant samples: samples inside the intervals reading 0, and reading the gauge's most common value
why:
  GPU 0 utilization: not load: 3 intervals, 10.0 to 40.0 tok/s (4.0x): pinned at 96.0% (moves 0.0%) while throughput moved 4.0x (elasticity 0.00, rank correlation -)
  GPU 0 power: not load: 3 intervals, 10.0 to 40.0 tok/s (4.0x): reads 31.0 to 34.0 W, moves 0.07x as fast as throughput (elasticity 0.07 < 0.5; rank correlation 1.00)
  GPU 0 memory used: unsupported: no readings in 3 loaded intervals (10.0 to 40.0 tok/s): its source recorded other quantities but not this one
  qwen requests running: tracks load: 3 intervals, 10.0 to 40.0 tok/s (4.0x): reads 1.00 to 4.00 requests, rises with throughput (elasticity 1.00, rank correlation 1.00)
note: spark_otel.engine.generation_tokens is these intervals' throughput: not graded against itself
note: no Nsight captures: ingest one taken under load with `spark-otel ingest-nsight`
                          each gauge per interval
┏━━━━━━━━━━━━━━━━━━━━━━━┳━━━━━━━━━━━━━━━━┳━━━━━━━┳━━━━━━━━━━━━━━━┳━━━━━━━━━┓
┃ instrument            ┃ interval       ┃ tok/s ┃         reads ┃ samples ┃
┡━━━━━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━━━━━━━╇━━━━━━━╇━━━━━━━━━━━━━━━╇━━━━━━━━━┩
│ GPU 0 utilization     │ 22:13:20 +60 s │  10.0 │         96.0% │       6 │
│ GPU 0 utilization     │ 22:14:20 +60 s │  20.0 │         96.0% │       6 │
│ GPU 0 utilization     │ 22:15:20 +60 s │  40.0 │         96.0% │       6 │
│ GPU 0 power           │ 22:13:20 +60 s │  10.0 │        31.0 W │       6 │
│ GPU 0 power           │ 22:14:20 +60 s │  20.0 │        32.0 W │       6 │
│ GPU 0 power           │ 22:15:20 +60 s │  40.0 │        34.0 W │       6 │
│ qwen requests running │ 22:13:20 +60 s │  10.0 │ 1.00 requests │       6 │
│ qwen requests running │ 22:14:20 +60 s │  20.0 │ 2.00 requests │       6 │
│ qwen requests running │ 22:15:20 +60 s │  40.0 │ 4.00 requests │       6 │
└───────────────────────┴────────────────┴───────┴───────────────┴─────────┘
"""  # noqa: E501


def test_the_verdicts_and_each_gauge_per_interval(scrapes: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Utilization pinned (no rank: it never moves); power's elasticity: slope 0.1 W per tok/s
    (46.67 / 466.67 over the deviations from the means 23.33 tok/s and 32.33 W), times 23.33 /
    32.33 = 0.07, flat; running requests exactly in proportion: 1.00. Memory, which nvidia-smi
    always reports, has no reading: unsupported."""
    assert main(["instruments", "--store", scrapes, "--bin", "60", "--readings"]) == 0
    assert stdout_unpadded(capsys) == VERDICTS_AND_READINGS_PRINTED


def _readings(values: tuple[float, ...]) -> list[dict[str, object]]:
    return [
        {"interval": label, "throughput": rate, "value": value, "samples": 6}
        for label, rate, value in zip(BINS, RATES, values, strict=True)
    ]


def _gauge(
    instrument: str, metric: str, key: dict[str, str], unit: str, **figures: object
) -> dict[str, object]:
    """One gauge of the JSON document: its name, series, unit, then ``figures`` in field order."""
    return {"instrument": instrument, "metric": metric, "attributes": key, "unit": unit, **figures}


NO_KNEE = {"knee_throughput": None, "knee_value": None, "flat_min": None, "flat_max": None}


def test_the_json_document(scrapes: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["instruments", "--store", scrapes, "--bin", "60", "--json"]) == 0
    span = {"throughput_min": 10.0, "throughput_max": 40.0}
    gpu, qwen = {sc.GPU_ID: "0"}, {sc.ENGINE: "qwen"}
    gauges = [
        _gauge("GPU 0 utilization", sc.GPU_UTILIZATION, gpu, "%", verdict="not load", reason="pinned",
               engine=None, other_engines=[], n_readings=18,
               evidence="3 intervals, 10.0 to 40.0 tok/s (4.0x): pinned at 96.0% (moves 0.0%) while "
               "throughput moved 4.0x (elasticity 0.00, rank correlation -)",
               n_intervals=3, n_samples=18, zero_samples=0, constant_samples=18, constant_value=96.0, **span,
               gauge_min=96.0, gauge_max=96.0, relative_range=0.0, elasticity=0.0, rank_correlation=None,
               **NO_KNEE, measure=None, readings=_readings((96.0, 96.0, 96.0))),
        _gauge("GPU 0 power", sc.GPU_POWER, gpu, "W", verdict="not load", reason="moves slowly",
               engine=None, other_engines=[], n_readings=18,
               evidence="3 intervals, 10.0 to 40.0 tok/s (4.0x): reads 31.0 to 34.0 W, moves 0.07x as fast "
               "as throughput (elasticity 0.07 < 0.5; rank correlation 1.00)",
               n_intervals=3, n_samples=18, zero_samples=0, constant_samples=6, constant_value=31.0, **span,
               gauge_min=31.0, gauge_max=34.0, relative_range=pytest.approx(3 / (97 / 3)),
               elasticity=pytest.approx(0.1 * (70 / 3) / (97 / 3)), rank_correlation=1.0,
               **NO_KNEE, measure=None, readings=_readings(POWER)),
        _gauge("GPU 0 memory used", sc.GPU_MEMORY_USED, gpu, "GiB", verdict="unsupported",
               reason="no readings", engine=None, other_engines=[], n_readings=0,
               evidence="no readings in 3 loaded intervals (10.0 to 40.0 tok/s): its source recorded other "
               "quantities but not this one",
               n_intervals=0, n_samples=0, zero_samples=0, constant_samples=0, constant_value=None,
               throughput_min=None, throughput_max=None, gauge_min=None, gauge_max=None, relative_range=None,
               elasticity=None, rank_correlation=None, **NO_KNEE, measure=None, readings=[]),
        _gauge("qwen requests running", sc.ENGINE_REQUESTS_RUNNING, qwen, "requests", verdict="tracks load",
               reason="tracks", engine="qwen", other_engines=[], n_readings=18,
               evidence="3 intervals, 10.0 to 40.0 tok/s (4.0x): reads 1.00 to 4.00 requests, rises with "
               "throughput (elasticity 1.00, rank correlation 1.00)",
               n_intervals=3, n_samples=18, zero_samples=0, constant_samples=6, constant_value=1.0, **span,
               gauge_min=1.0, gauge_max=4.0, relative_range=pytest.approx(3 / (7 / 3)),
               elasticity=pytest.approx(1.0), rank_correlation=1.0,
               **NO_KNEE, measure=None, readings=_readings((1.0, 2.0, 4.0))),
    ]  # fmt: skip
    assert json.loads(capsys.readouterr().out) == {
        "interval_source": "receiver",
        "intervals": [
            {
                "label": label,
                "source": "receiver",
                "start_unix_ns": T0 + k * 60 * S,
                "end_unix_ns": T0 + (k + 1) * 60 * S,
                "throughput": rate,
                "engines": {"qwen": rate},
                "time_scale": 1.0,
            }
            for k, (label, rate) in enumerate(zip(BINS, RATES, strict=True))
        ],
        **span,
        "thresholds": {
            "min_intervals": 3,
            "min_load_ratio": 2.0,
            "tracks_elasticity": 0.5,
            "tracks_rank_correlation": 0.8,
            "pinned_range": 0.05,
            "flat_elasticity": 0.1,
            "saturation_span": 1.5,
        },
        "instruments": gauges,
        "notes": [
            "spark_otel.engine.generation_tokens is these intervals' throughput: not graded against itself",
            "no Nsight captures: ingest one taken under load with `spark-otel ingest-nsight`",
        ],
    }


@pytest.mark.parametrize(("source", "what"), [("probe", "probe levels"), ("evals", "eval cells")])
def test_an_interval_source_the_store_lacks_is_refused_by_name(
    scrapes: str, source: str, what: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The store holds receiver bins only: asked for another source, the command does not fall
    back on them."""
    assert main(["instruments", "--store", scrapes, "--bin", "60", "--intervals", source]) == 1
    captured = capsys.readouterr()
    assert (captured.out, captured.err) == (
        "",
        f"spark-otel: error: {scrapes}: no load to pair the gauges with (no {what}); {MEASURE}\n",
    )


def test_load_without_throughput_and_throughput_without_gauges_are_one_line_each(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    idle = _scrapes(tmp_path / "idle.sqlite", rates=(0.0, 0.0, 0.0))
    assert main(["instruments", "--store", idle, "--bin", "60"]) == 1
    assert capsys.readouterr().err == (
        f"spark-otel: error: {idle}: none of the 3 receiver intervals had any token throughput; {MEASURE}\n"
    )
    bare = _scrapes(tmp_path / "bare.sqlite", gauges=False)
    assert main(["instruments", "--store", bare, "--bin", "60"]) == 1
    assert capsys.readouterr().err == (
        f"spark-otel: error: {bare}: 3 receiver intervals but no gauge readings to grade: run "
        "`spark-otel receive --engine NAME=URL --gpu auto` beside the load\n"
    )


def test_the_options_as_help_lists_them(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["instruments", "--help"])
    assert exited.value.code == 0
    out = capsys.readouterr().out
    assert " ".join(out[out.index("options:") :].split()) == (
        "options: -h, --help show this help message and exit "
        f"--store PATH embedded store file (default: $SPARK_OTEL_STORE or {default_store_path()}) "
        "--intervals {auto,probe,receiver,evals} what to pair the gauges with: probe levels, receiver bins "
        "of engine scrapes, eval runs (default: auto) "
        "--bin SECONDS receiver intervals: seconds of engine scrapes in each (default: 30, widened where "
        "the scrapes span more bins than the cap; a given bin that makes more is refused) "
        "--readings also list every gauge's value per interval "
        "--json print JSON instead of tables"
    )
