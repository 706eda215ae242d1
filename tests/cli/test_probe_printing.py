"""What `spark-otel probe` prints of a finished report (`_print_report`), on a report built by hand
so every figure is known: the whole table (title with the model-time scale, one record per level
at 108 columns, the glossary notes once), the energy line and the report's warnings; with
``--json`` the report itself, indented as ``--out`` writes the file; and where "wrote FILE" is
said for ``--out`` and ``--plot``: on stdout under the table, on stderr when stdout is the JSON."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest
from tests.support.printed import unpadded
from tests.support.snapshots import Snapshot

from spark_otel.cli import reset_notes
from spark_otel.cli.probe import _print_report
from spark_otel.records.probe_report import ProbeLevel, ProbeMetadata, ProbeReport, ProbeSettings
from spark_otel.records.rate_curve import CurvePoint, RateCurve

S = 10**9
T0 = 1_790_000_000 * S


def _level(streams: int, **kw: object) -> ProbeLevel:
    """A level of 64 tokens per stream over 8 model seconds at 100 W, unless ``kw`` says otherwise."""
    fields: dict[str, object] = {
        "streams": streams,
        "start_unix_ns": T0,
        "end_unix_ns": T0 + 8 * S,
        "wall_s": 8.0,
        "tokens_expected": 64,
        "probe_tokens": 64 * streams,
        "per_stream_median": 8.0,
        "per_stream_p10": 7.5,
        "per_stream_p90": 8.5,
        "probe_aggregate_rate": 8.0 * streams,
        "engine_aggregate_rate": 8.0 * streams,
        "engine_probe_ratio": 1.0,
        "ttft_s_median": 0.25,
        "power_w": 100.0,
        "client_cpu_us_per_token": 12.5,
    }
    fields.update(kw)
    return ProbeLevel.model_validate(fields)


REPORT = ProbeReport(
    metadata=ProbeMetadata(
        created_unix_ns=T0,
        engine_url="http://127.0.0.1:8011",
        engine="qwen",
        model="qwen3.8-27b",
        time_scale=100.0,
        gpu_source="sim",
    ),
    settings=ProbeSettings(streams=[1, 4], tokens=64),
    levels=[
        _level(1),
        _level(
            4,
            wall_s=10.0,
            per_stream_median=6.4,
            per_stream_p10=6.0,
            per_stream_p90=7.0,
            probe_aggregate_rate=25.6,
            engine_aggregate_rate=32.0,
            engine_probe_ratio=1.25,
            ttft_s_median=0.5,
            power_w=200.0,
            token_mismatches=1,
            client_cpu_over_budget=True,
        ),
    ],
    curve=RateCurve(
        engine="qwen",
        points=[
            CurvePoint(streams=1, per_stream_rate=8.0, aggregate_rate=8.0, n=1),
            CurvePoint(streams=4, per_stream_rate=6.4, aggregate_rate=25.6, n=1),
        ],
    ),
    warnings=["level 4: another tenant decoded too"],
)

# J/tok: 100 W x 8 s over 64 tokens = 12.5; 200 W x 10 s over 256 tokens = 7.8125 (7.812 at
# three digits, 7.81 in the energy line, 12.5 / 7.8125 = 1.6x less).


@pytest.fixture(autouse=True)
def _narrow_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """108 columns: too narrow for the probe's twelve columns, so the table leaves out the ones
    Appendix A does not have and keeps one line per level; and every glossary term unexplained,
    as at the start of a command."""
    monkeypatch.setenv("COLUMNS", "108")
    reset_notes()


def _args(*, json: bool = False, out: Path | None = None, plot: Path | None = None) -> argparse.Namespace:
    return argparse.Namespace(
        json=json, out=None if out is None else str(out), plot=None if plot is None else str(plot), wide=False
    )


def test_the_table_the_energy_line_and_the_warnings_and_nothing_on_stderr(
    capsys: pytest.CaptureFixture[str], snapshot: Snapshot
) -> None:
    _print_report(REPORT, _args())
    out, err = capsys.readouterr()
    assert err == ""
    assert all(len(line) <= 108 for line in out.splitlines())
    snapshot(unpadded(out))


def test_out_is_said_under_the_table_on_stdout(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], snapshot: Snapshot
) -> None:
    out_path = tmp_path / "probe.json"
    _print_report(REPORT, _args(out=out_path))
    out, err = capsys.readouterr()
    assert err == ""
    assert unpadded(out).endswith(f"wrote {out_path}\n")
    snapshot(unpadded(out).removesuffix(f"wrote {out_path}\n"), "table")
    assert ProbeReport.load_file(out_path) == REPORT


def test_json_is_the_report_as_out_writes_it_and_what_was_written_is_said_on_stderr(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out_path, png = tmp_path / "probe.json", tmp_path / "probe.png"
    _print_report(REPORT, _args(json=True, out=out_path, plot=png))
    out, err = capsys.readouterr()
    assert out == out_path.read_text(encoding="utf-8")  # stdout is the file, byte for byte
    assert out.startswith('{\n  "metadata": {\n    "version": 1,\n    "tool": "spark-otel",\n')  # indent 2
    assert out.endswith("\n  ]\n}\n")  # the warnings list closes it, then one newline
    assert json.loads(out) == REPORT.model_dump(mode="json")
    assert err == f"wrote {out_path}\nwrote {png}\n"
    assert png.read_bytes().startswith(b"\x89PNG")
