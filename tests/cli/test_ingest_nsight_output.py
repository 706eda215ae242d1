"""`spark-otel ingest-nsight`'s whole output on captures small enough to work out by hand: each
capture's table (title, headers, a row per metric and GPU), --json's summaries, the error line
of a file that is not an export, what the store keeps, the phases on a terminal, and an OTLP
export the collector refuses.

The command's own tests read one row of a 19-metric capture; here "tiny" holds SM Issue at 1,
2, 4 and 10 % and the GPC clock at 2,418 MHz (recorded in Hz) 1 ms apart, and "two GPUs" one
instant of SM Issue on two GPUs that TARGET_INFO_GPU does not list, in an export without a
product version: every figure of the title (start, duration, samples, rate, GPUs, version) and
of each row is known.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.support.nsight import (
    GPC_CLOCK_ID,
    MS,
    SESSION_START_UNIX_NS,
    SM_ISSUE_ID,
    TYPE_ID,
    capture_with,
)
from tests.support.otlp import OtlpSink
from tests.support.printed import drawn_lines, stderr_on_a_terminal, unpadded_lines

from spark_otel import _semconv as sc
from spark_otel.cli import main
from spark_otel.store import Store

S = SESSION_START_UNIX_NS  # 2026-09-17 06:16:00 UTC
GPU = "fa2a1d7d-0000-4000-8000-0000000000b1"  # the one GPU TARGET_INFO_GPU lists


@pytest.fixture(scope="module")
def captures(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("captures")
    tiny = capture_with(
        folder / "tiny.sqlite",
        f"DELETE FROM GPU_METRICS WHERE metricId NOT IN ({SM_ISSUE_ID}, {GPC_CLOCK_ID});"
        f"UPDATE GPU_METRICS SET value = CASE timestamp WHEN {MS} THEN 1 WHEN {2 * MS} THEN 2 "
        f"WHEN {3 * MS} THEN 4 ELSE 10 END WHERE metricId = {SM_ISSUE_ID};",
    )
    two_gpus = capture_with(
        folder / "two-gpus.sqlite",
        f"DELETE FROM GPU_METRICS WHERE metricId != {SM_ISSUE_ID} OR timestamp > {MS};"  # 2 % at 1 ms
        f"UPDATE GPU_METRICS SET typeId = {TYPE_ID | 5};"
        f"INSERT INTO GPU_METRICS SELECT rawTimestamp, timestamp, {TYPE_ID | 3}, metricId, value + 1 "
        "FROM GPU_METRICS;"
        f"UPDATE TARGET_INFO_GPU_METRICS SET typeId = {TYPE_ID | 5};"
        f"INSERT INTO TARGET_INFO_GPU_METRICS SELECT {TYPE_ID | 3}, sourceId, typeName, metricId, metricName "
        "FROM TARGET_INFO_GPU_METRICS;"
        "DELETE FROM META_DATA_EXPORT WHERE name = 'EXPORT_PRODUCT_VERSION';",
    )
    late = capture_with(  # SM Issue's sample at 4 ms (row 12: metricId 2's 4th) moved past 2100
        folder / "late.sqlite",
        f"DELETE FROM GPU_METRICS WHERE metricId != {SM_ISSUE_ID};"
        f"UPDATE GPU_METRICS SET timestamp = {LATE_NS} WHERE timestamp = {4 * MS};",
    )
    not_an_export = folder / "notes.sqlite"
    not_an_export.write_text("not a database")
    return {"tiny": tiny, "two GPUs": two_gpus, "late": late, "not an export": not_an_export}


LATE_NS = 4_000_000_000_000_000_000


def _left_out(path: Path) -> str:
    return (
        f"spark-otel: error: {path}: GPU_METRICS row 12: timestamp {LATE_NS} reads as the year 2153, "
        "outside 2000-2100 (1 row of 4 left out)"
    )


TINY_TABLE = [
    "  tiny.sqlite: NVIDIA GB10 (fa2a1d7d-0000-4000-8000-0000000000b1), 2026-09-17",
    "   06:16:00 UTC, 0.0 s, 4 samples per metric (~1,333 Hz), Nsight 2026.1.3.425",
    "┏━━━━━━━━━━━━━━━━━━━━━┳━━━━━━┳━━━━━━━━━┳━━━━━━━━━┳━━━━━━━━━┳━━━━━━━━━┳━━━━━━━━━┓",
    "┃ metric              ┃ unit ┃    mean ┃     p50 ┃     p95 ┃     min ┃     max ┃",
    "┡━━━━━━━━━━━━━━━━━━━━━╇━━━━━━╇━━━━━━━━━╇━━━━━━━━━╇━━━━━━━━━╇━━━━━━━━━╇━━━━━━━━━┩",
    # mean 4.25 (printed half to even), p50 halfway from 2 to 4, p95 0.85 of the way from 4 to 10
    "│ SM Issue            │ %    │     4.2 │     3.0 │     9.1 │     1.0 │    10.0 │",
    "│ GPC Clock Frequency │ MHz  │ 2,418.0 │ 2,418.0 │ 2,418.0 │ 2,418.0 │ 2,418.0 │",
    "└─────────────────────┴──────┴─────────┴─────────┴─────────┴─────────┴─────────┘",
]
TWO_GPUS_TABLE = [  # one instant: 0 s, and no rate
    "two-gpus.sqlite: GPU (3), GPU (5), 2026-09-17 06:16:00",
    "  UTC, 0.0 s, 1 samples per metric (~0 Hz), Nsight ?",
    "┏━━━━━━━━━━━━━━┳━━━━━━┳━━━━━━┳━━━━━┳━━━━━┳━━━━━┳━━━━━┓",
    "┃ metric       ┃ unit ┃ mean ┃ p50 ┃ p95 ┃ min ┃ max ┃",
    "┡━━━━━━━━━━━━━━╇━━━━━━╇━━━━━━╇━━━━━╇━━━━━╇━━━━━╇━━━━━┩",
    "│ SM Issue [3] │ %    │  3.0 │ 3.0 │ 3.0 │ 3.0 │ 3.0 │",
    "│ SM Issue [5] │ %    │  2.0 │ 2.0 │ 2.0 │ 2.0 │ 2.0 │",
    "└──────────────┴──────┴──────┴─────┴─────┴─────┴─────┘",
]


def _not_an_export(path: Path) -> str:
    return f"spark-otel: error: {path}: not an Nsight Systems SQLite export (file is not a database)"


def _metric(name: str, unit: str, gpu: tuple[str, str | None], samples: int, figures: list[float]) -> dict:
    metric = {"SM Issue": "SM Issue [Throughput %]", "GPC Clock Frequency": "GPC Clock Frequency [MHz]"}[name]
    mean, p50, p95, low, high = figures
    return {
        "metric": metric,
        "name": name,
        "unit": unit,
        "gpu_id": gpu[0],
        "gpu_name": gpu[1],
        "samples": samples,
        "mean": mean,
        "p50": p50,
        "p95": p95,
        "min": low,
        "max": high,
        "scaled_from_hz": unit == "MHz",
    }


def _summaries(captures: dict[str, Path], interval_ms: float) -> list[dict]:
    import hashlib

    def uid(path: Path) -> str:
        return hashlib.sha256(f"{path.resolve()}|{S}".encode()).hexdigest()[:24]

    tiny, two = captures["tiny"], captures["two GPUs"]
    named = (GPU, "NVIDIA GB10")
    return [
        {
            "capture": "tiny.sqlite",
            "path": str(tiny.resolve()),
            "uid": uid(tiny),
            "layout": "raw",
            "product_version": "2026.1.3.425",
            "schema_version": "3.24.18",
            "session_start_unix_ns": S,
            "start_unix_ns": S + MS,
            "end_unix_ns": S + 4 * MS,
            "duration_s": 0.003,
            "interval_ms": interval_ms,
            "metrics": [
                _metric("SM Issue", "%", named, 4, [4.25, 3.0, pytest.approx(9.1), 1.0, 10.0]),
                _metric("GPC Clock Frequency", "MHz", named, 4, [2418.0] * 5),
            ],
        },
        {
            "capture": "two-gpus.sqlite",
            "path": str(two.resolve()),
            "uid": uid(two),
            "layout": "raw",
            "product_version": None,
            "schema_version": "3.24.18",
            "session_start_unix_ns": S,
            "start_unix_ns": S + MS,
            "end_unix_ns": S + MS,
            "duration_s": 0.0,
            "interval_ms": interval_ms,
            "metrics": [
                _metric("SM Issue", "%", ("3", None), 1, [3.0] * 5),
                _metric("SM Issue", "%", ("5", None), 1, [2.0] * 5),
            ],
        },
    ]


def _argv(captures: dict[str, Path], *more: str) -> list[str]:
    paths = (captures["tiny"], captures["not an export"], captures["two GPUs"])
    return ["ingest-nsight", *(str(p) for p in paths), *more]


@pytest.mark.usefixtures("india_local_time")  # the start is printed in UTC, not the local zone
def test_each_capture_prints_its_whole_table_and_a_bad_file_its_error(
    captures: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store_path = tmp_path / "s.sqlite"
    assert main(_argv(captures, "--store", str(store_path), "--interval-ms", "2")) == 1  # the bad file
    captured = capsys.readouterr()
    assert unpadded_lines(captured.out) == TINY_TABLE + TWO_GPUS_TABLE
    assert captured.err.splitlines() == [_not_an_export(captures["not an export"])]
    with Store(store_path) as store:
        docs = store.documents("nsight_summary")
        samples = store.samples(sc.NSIGHT_METRIC)
    assert [(d["name"], d["body"]) for d in docs] == [
        (s["capture"], s) for s in _summaries(captures, interval_ms=2.0)
    ]
    # 2 ms buckets: tiny's samples at 1 | 2, 3 | 4 ms for each of its 2 metrics; two GPUs' at 1 ms
    assert sorted((s.unix_ns, s.value, s.unit) for s in samples) == [
        (S, 1.0, "%"),
        (S, 2.0, "%"),
        (S, 3.0, "%"),
        (S, 2418.0, "MHz"),
        (S + 2 * MS, 3.0, "%"),
        (S + 2 * MS, 2418.0, "MHz"),
        (S + 4 * MS, 10.0, "%"),
        (S + 4 * MS, 2418.0, "MHz"),
    ]


def test_json_prints_the_summaries_of_the_captures_read(
    captures: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(_argv(captures, "--no-store", "--json")) == 1
    captured = capsys.readouterr()
    assert json.loads(captured.out) == _summaries(captures, interval_ms=100.0)
    assert captured.err.splitlines() == [_not_an_export(captures["not an export"])]


def test_good_captures_alone_exit_0(captures: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["ingest-nsight", str(captures["tiny"]), "--no-store", "--json", "--interval-ms", "0.5"]
    assert main(argv) == 0  # any interval above 0 ms
    captured = capsys.readouterr()
    assert json.loads(captured.out) == _summaries(captures, interval_ms=0.5)[:1]
    assert captured.err == ""


def test_an_interval_of_0_is_refused_by_name(
    captures: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["ingest-nsight", str(captures["tiny"]), "--no-store", "--interval-ms", "0"]) == 2
    assert capsys.readouterr() == (
        "",
        "spark-otel: error: --interval-ms must be a finite number > 0 and <= 3,600,000, got 0\n",
    )


def test_a_row_left_out_is_an_error_and_the_rest_of_the_capture_loads(
    captures: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    late = captures["late"]
    assert main(["ingest-nsight", str(late), "--no-store", "--json"]) == 1
    captured = capsys.readouterr()
    [summary] = json.loads(captured.out)
    assert (summary["capture"], summary["metrics"][0]["samples"]) == ("late.sqlite", 3)
    assert captured.err.splitlines() == [_left_out(late)]


def test_every_failure_counts_toward_the_exit_code(
    captures: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    bad, late = captures["not an export"], captures["late"]
    assert main(["ingest-nsight", str(bad), str(late), "--no-store", "--json"]) == 1
    captured = capsys.readouterr()
    assert [s["capture"] for s in json.loads(captured.out)] == ["late.sqlite"]
    assert captured.err.splitlines() == [_not_an_export(bad), _left_out(late)]


def test_on_a_terminal_it_names_each_capture_and_phase(
    captures: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store_path = tmp_path / "s.sqlite"
    with stderr_on_a_terminal() as terminal:
        assert main(_argv(captures, "--store", str(store_path))) == 1
    tiny, bad, two = (captures[name] for name in ("tiny", "not an export", "two GPUs"))
    assert drawn_lines(terminal.getvalue()) == [
        f"reading {tiny} (1 of 3 captures)",
        f"storing the series of {tiny} (1 of 3 captures)",
        f"reading {bad} (2 of 3 captures)",
        _not_an_export(bad),  # printed above the spinner, which goes on
        f"reading {bad} (2 of 3 captures)",
        f"reading {two} (3 of 3 captures)",
        f"storing the series of {two} (3 of 3 captures)",
    ]
    capsys.readouterr()


@pytest.fixture
def refusing(monkeypatch: pytest.MonkeyPatch) -> Iterator[OtlpSink]:
    endpoint = OtlpSink(status=400)  # a refusal the exporter does not retry
    port = endpoint.server.server_address[1]
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", f"http://127.0.0.1:{port}/v1/metrics")
    yield endpoint
    endpoint.server.shutdown()
    endpoint.server.server_close()


def test_an_export_the_collector_refuses_is_an_error_naming_the_capture(
    captures: dict[str, Path], refusing: OtlpSink, capsys: pytest.CaptureFixture[str]
) -> None:
    bad, tiny = captures["not an export"], captures["tiny"]
    with stderr_on_a_terminal() as terminal:
        assert main(["ingest-nsight", str(bad), str(tiny), "--no-store", "--json"]) == 1
    summaries = json.loads(capsys.readouterr().out)
    assert summaries == _summaries(captures, interval_ms=100.0)[:1]  # still summarised
    exporting = f"exporting the series of {tiny} over OTLP (2 of 2 captures)"
    assert drawn_lines(terminal.getvalue()) == [
        f"reading {bad} (1 of 2 captures)",
        _not_an_export(bad),
        f"reading {bad} (1 of 2 captures)",
        f"reading {tiny} (2 of 2 captures)",
        exporting,
        "spark-otel: error: Failed to export metrics batch code: 400, reason: Bad Request",  # the SDK's log
        exporting,
        f"spark-otel: error: {tiny}: OTLP export of the series failed",
        exporting,
    ]
