"""The probe package's surface: each public name loads from its module on first use (so reading
a stored report never imports the HTTP client) and is kept; ``dir()`` lists them; and a report
file is UTF-8 whatever the locale, and one that cannot be read, or is of another version, is
refused naming the file (or, for a stored document, saying it is one).
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest
from tests.support.locales import ascii_locale

import spark_otel.probe as probe
from spark_otel import InputError
from spark_otel.analysis.probe_levels import LevelMeasurement, StreamTiming, curve_of, summarize_level
from spark_otel.records.probe_report import ProbeMetadata, ProbeReport, ProbeSettings, load_probe_report

HOMES = {
    "PROBE_REPORT_VERSION": "spark_otel.records.probe_report",
    "ProbeIncomplete": "spark_otel.probe.prober",
    "ProbeLevel": "spark_otel.records.probe_report",
    "ProbeMetadata": "spark_otel.records.probe_report",
    "ProbeReport": "spark_otel.records.probe_report",
    "ProbeSettings": "spark_otel.records.probe_report",
    "arun_probe": "spark_otel.probe.prober",
    "default_engine_label": "spark_otel.probe.prober",
    "load_probe_report": "spark_otel.records.probe_report",
    "run_probe": "spark_otel.probe.prober",
}
S = 1_000_000_000


def test_each_public_name_loads_from_its_module_on_first_use_and_is_kept(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name, home in HOMES.items():
        monkeypatch.delitem(vars(probe), name, raising=False)  # as before its first use
        value = getattr(probe, name)
        assert value is getattr(importlib.import_module(home), name), name
        assert vars(probe)[name] is value, name  # kept: the next use does not ask again


def test_a_name_the_package_does_not_have_is_an_attribute_error_naming_it() -> None:
    with pytest.raises(AttributeError) as caught:
        probe.run_probes  # noqa: B018
    assert str(caught.value) == "module 'spark_otel.probe' has no attribute 'run_probes'"


def test_dir_lists_the_public_names() -> None:
    assert dir(probe) == sorted(HOMES)


def _report(engine: str) -> ProbeReport:
    streams = [StreamTiming(start_ns=0, first_ns=S // 4, end_ns=50 * S, events=514, completion_tokens=512)]
    level = summarize_level(
        LevelMeasurement(
            streams=1, repeat=0, tokens=512, streaming=True, results=streams, engine_generation_tokens=512.0,
            requests_running_before=0.0, requests_running_after=0.0, quiescent=True, start_unix_ns=0,
            end_unix_ns=50 * S, cpu_s=0.01,
        )
    )  # fmt: skip
    return ProbeReport(
        metadata=ProbeMetadata(
            created_unix_ns=1, engine_url="http://127.0.0.1:8011", engine=engine, model="m"
        ),
        settings=ProbeSettings(streams=[1], engine=engine),
        levels=[level],
        curve=curve_of(engine, [level]),
        warnings=["level 1: 3 µs per token"],
    )


def test_a_report_file_is_utf8_whatever_the_locale(tmp_path: Path) -> None:
    report = _report("qwen✓")
    with ascii_locale():
        path = report.save_file(tmp_path / "probe.json")
        loaded = ProbeReport.load_file(path)
    assert path.read_bytes() == (report.model_dump_json(indent=2) + "\n").encode("utf-8")
    assert loaded == report


def test_a_report_file_that_cannot_be_read_is_refused_naming_it(tmp_path: Path) -> None:
    missing = tmp_path / "missing.json"
    with pytest.raises(InputError) as caught:
        ProbeReport.load_file(missing)
    assert str(caught.value) == f"probe report {missing}: no such file"


def test_a_report_of_another_version_is_refused_naming_the_file_or_the_document(tmp_path: Path) -> None:
    body = _report("qwen").model_dump(mode="json")
    body["metadata"]["version"] = 2
    path = tmp_path / "probe.json"
    path.write_text(json.dumps(body))
    with pytest.raises(InputError) as caught:
        ProbeReport.load_file(path)
    assert str(caught.value) == f"{path}: probe report version 2; this spark-otel reads version 1"
    with pytest.raises(InputError) as caught:
        load_probe_report(body)
    assert str(caught.value) == "probe document: probe report version 2; this spark-otel reads version 1"
    body["metadata"]["version"] = 1
    body["levels"] = "none"
    with pytest.raises(InputError) as caught:
        load_probe_report(body)
    assert str(caught.value) == "probe document: not a probe report: levels: Input should be a valid list"
