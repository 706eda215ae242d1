"""Bad options and bad files at the command line: one line naming the option or the file (and the
row or line), a non-zero exit, and nothing already recorded lost."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest
from tests.support.nsight import LOOSE, build_capture

from spark_otel import _semconv as sc
from spark_otel.cli import main
from spark_otel.store import Store

GUARD = "a guard against a typo that would swamp the engine and this machine; add --allow-large to mean it"


def one_error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert err.startswith("spark-otel: error: ")
    return err.removeprefix("spark-otel: error: ").rstrip("\n")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["receive", "--engine", "q=http://127.0.0.1:8011", "--interval", "nan"],
            "--interval must be a finite number > 0 and <= 86,400, got nan",
        ),
        (
            ["receive", "--engine", "q=http://127.0.0.1:8011", "--interval", "0"],
            "--interval must be a finite number > 0 and <= 86,400, got 0",
        ),
        (
            ["receive", "--engine", "q=http://127.0.0.1:8011", "--timeout", "0"],
            "--timeout must be a finite number > 0 and <= 3,600, got 0",
        ),
        (
            ["receive", "--engine", "q=http://127.0.0.1:8011", "--timeout", "inf"],
            "--timeout must be a finite number > 0 and <= 3,600, got inf",
        ),
        (
            ["receive", "--engine", "q=http://127.0.0.1:8011", "--duration=-inf"],
            "--duration must be a finite number >= 0 and <= 31,536,000, got -inf",
        ),
        (
            ["receive", "--engine", "q=http://127.0.0.1:70000"],
            "--engine 'http://127.0.0.1:70000': port '70000' is not a number from 1 to 65535",
        ),
        (
            ["receive", "--engine", "q=http://127.0.0.1:0"],
            "--engine 'http://127.0.0.1:0': port '0' is not a number from 1 to 65535",
        ),
        (
            ["gpu-sample", "--interval", "inf"],
            "--interval must be a finite number > 0 and <= 86,400, got inf",
        ),
        (
            ["gpu-sample", "--duration", "nan"],
            "--duration must be a finite number >= 0 and <= 31,536,000, got nan",
        ),
        (
            ["gpu-sample", "--source", "sim", "--sim-url", "http://127.0.0.1:65536"],
            "--sim-url 'http://127.0.0.1:65536': port '65536' is not a number from 1 to 65535",
        ),
        (
            ["ingest-nsight", "x.sqlite", "--interval-ms", "nan"],
            "--interval-ms must be a finite number > 0 and <= 3,600,000, got nan",
        ),
        (
            ["ingest-nsight", "x.sqlite", "--interval-ms", "1e300"],
            "--interval-ms must be a finite number > 0 and <= 3,600,000, got 1e+300",
        ),
        (
            ["probe", "--engine", "http://127.0.0.1:99999"],
            "--engine 'http://127.0.0.1:99999': port '99999' is not a number from 1 to 65535",
        ),
        (
            ["probe", "--engine", "http://127.0.0.1:8011", "--streams", "1,1000"],
            f"--streams 1,000 is past the limit of 256, {GUARD}",
        ),
        (
            ["probe", "--engine", "http://127.0.0.1:8011", "--tokens", "200000"],
            f"--tokens 200,000 is past the limit of 131,072, {GUARD}",
        ),
        (
            ["probe", "--engine", "http://127.0.0.1:8011", "--timeout", "0"],
            "--timeout must be a finite number > 0 and <= 86,400, got 0",
        ),
        (
            ["probe", "--engine", "http://127.0.0.1:8011", "--time-scale", "nan"],
            "--time-scale must be a finite number > 0, got nan",
        ),
        (["cells", "--limit", "0"], "--limit must be a whole number >= 1 and <= 1,000,000,000, got 0"),
        (["cells", "--limit", "-5"], "--limit must be a whole number >= 1 and <= 1,000,000,000, got -5"),
        (
            ["concurrency", "--merge-gap", "nan"],
            "--merge-gap must be a finite number >= 0 and <= 31,536,000, got nan",
        ),
        (
            ["neighbour-cost", "--eval", "e", "--min-overlap", "1.5"],
            "--min-overlap must be a finite number >= 0 and <= 1, got 1.5",
        ),
        (
            ["neighbour-cost", "--eval", "e", "--workers", "0"],
            "--workers must be a whole number >= 1 and <= 1,000,000,000, got 0",
        ),
        (
            ["sim", "--engine", "a=0:dense", "--contention", "nan"],
            "--contention must be a finite number >= 0, got nan",
        ),
    ],
)
def test_a_bad_option_is_one_line_naming_it_with_exit_2(
    argv: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "never.sqlite"
    assert main([*argv, *(["--store", str(store)] if argv[0] not in ("sim",) else [])]) == 2
    assert one_error(capsys) == message
    assert not store.exists()  # refused before anything was opened


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["report", "--threshold", "nan"], "--threshold must be a finite number >= 0 and <= 1, got nan"),
        (["report", "--ceiling", "inf"], "--ceiling must be a finite number > 0, got inf"),
        (
            ["neighbour-cost", "--eval", "e", "--threshold", "2"],
            "--threshold must be a finite number >= 0 and <= 1, got 2",
        ),
    ],
)
def test_the_shared_advisor_options_refuse_nan_and_infinities(
    argv: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*argv, "--store", str(tmp_path / "never.sqlite")]) == 2
    assert one_error(capsys) == message


def test_probe_allow_large_lifts_the_guard(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], free_port: int
) -> None:
    """Past the guard the probe runs (and here fails to reach a closed port, naming it)."""
    code = main(
        [
            "probe",
            "--engine",
            f"http://127.0.0.1:{free_port}",
            "--streams",
            "300",
            "--allow-large",
            "--no-store",
        ]
    )
    assert code == 1
    assert f"127.0.0.1:{free_port}" in capsys.readouterr().err


def test_ingest_nsight_names_a_bad_row_keeps_the_rest_and_the_other_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good, bad = tmp_path / "good.sqlite", tmp_path / "bad.sqlite"
    for path in (good, bad):
        build_capture(path, layout="plain", seconds=0.05, hz=1000)
    with sqlite3.connect(bad) as conn:
        conn.executescript(LOOSE["plain"] + "UPDATE GPU_METRICS SET value = 'oops' WHERE rowid = 7;")
    conn.close()
    before = bad.read_bytes()
    store_path = tmp_path / "s.sqlite"
    assert main(["ingest-nsight", str(bad), str(good), "--store", str(store_path), "--json"]) == 1
    assert (
        one_error(capsys)
        == f"{bad}: GPU_METRICS row 7: value is 'oops', not a number (1 row of 950 left out)"
    )
    assert bad.read_bytes() == before
    with Store(store_path, read_only=True) as store:
        docs = {d["name"]: d["body"] for d in store.documents("nsight_summary")}
        samples = store.samples(sc.NSIGHT_METRIC)
    assert sorted(docs) == ["bad.sqlite", "good.sqlite"]
    samples_of = {name: sum(m["samples"] for m in body["metrics"]) for name, body in docs.items()}
    assert samples_of == {"bad.sqlite": 949, "good.sqlite": 950}
    assert {s.attributes[sc.NSIGHT_CAPTURE] for s in samples} == {"bad.sqlite", "good.sqlite"}


def test_ingest_nsight_of_a_copy_never_touches_the_original(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    capture = tmp_path / "c.sqlite"
    build_capture(capture, layout="raw", seconds=0.05, hz=1000)
    copy = tmp_path / "copy.sqlite"
    shutil.copy(capture, copy)
    mtime = copy.stat().st_mtime_ns
    assert main(["ingest-nsight", str(copy), "--no-store", "--json"]) == 0
    assert copy.stat().st_mtime_ns == mtime
    assert copy.read_bytes() == capture.read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.sqlite", "copy.sqlite"]
