"""`spark-otel backfill --otlp`: the cell spans' resource (its service name, the default or
OTEL_SERVICE_NAME's), every cell sent even where OTEL_BSP_MAX_QUEUE_SIZE is smaller than the
batch, the "otlp" flag of --json, and the export phase on a terminal.

A backfill is one batch of historical spans sent once: its queue is sized to the cells so that
none is dropped, whatever the environment's queue setting, and a collector files them under
"spark-otel-backfill" unless the user names the service.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.support.backfill_files import backfill_argv, backfill_document, backfill_stderr
from tests.support.otlp import OtlpSink
from tests.support.printed import drawn_lines, stderr_on_a_terminal

from spark_otel.cli import main
from spark_otel.receivers.backfill.records import record_uid


def _sent(sink: OtlpSink) -> list[tuple[str, str, str]]:
    """(service.name, cell id, span id) of every span the sink received."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    sent = []
    for body in sink.bodies:
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        for rs in request.resource_spans:
            resource = {a.key: a.value.string_value for a in rs.resource.attributes}
            for ss in rs.scope_spans:
                for span in ss.spans:
                    attrs = {a.key: a.value.string_value for a in span.attributes}
                    sent.append((resource["service.name"], attrs["spark_otel.cell.id"], span.span_id.hex()))
    return sorted(sent, key=lambda s: s[1])


@pytest.fixture(scope="module")
def sink() -> Iterator[OtlpSink]:
    """One sink for the module (shutting one down takes half a second)."""
    sink = OtlpSink()
    yield sink
    sink.server.shutdown()
    sink.server.server_close()


@pytest.fixture
def endpoint(sink: OtlpSink, monkeypatch: pytest.MonkeyPatch) -> OtlpSink:
    """The sink, emptied, as the OTLP endpoint; no service named by the environment."""
    sink.clear()
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{sink.server.server_address[1]}")
    for name in ("OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES", "OTEL_BSP_MAX_QUEUE_SIZE"):
        monkeypatch.delenv(name, raising=False)
    return sink


def _cells(service: str, tmp_path: Path) -> list[tuple[str, str, str]]:
    """Each cell's span: its span id is its record's uid (re-sending replaces, never duplicates)."""
    a, b = (tmp_path / name for name in ("a.csv", "b.csv"))
    return [
        (service, cell_id, record_uid(path.resolve(), line))
        for cell_id, path, line in (("a1", a, 2), ("a2", a, 3), ("a3", a, 4), ("b1", b, 2))
    ]


def test_otlp_sends_every_cell_under_spark_otel_backfill_and_json_says_so(
    endpoint: OtlpSink, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(backfill_argv(tmp_path, "--otlp", "--no-store", "--json")) == 1
    captured = capsys.readouterr()
    expected: dict[str, Any] = backfill_document(tmp_path, dry_run=False, store=None, otlp=True)
    assert json.loads(captured.out) == expected
    assert captured.err.splitlines() == backfill_stderr(tmp_path)
    assert _sent(endpoint) == _cells("spark-otel-backfill", tmp_path)


def test_otel_service_name_names_the_service(
    endpoint: OtlpSink, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("OTEL_SERVICE_NAME", "golden-review-history")
    assert main(backfill_argv(tmp_path, "--otlp", "--no-store", "--json")) == 1
    assert capsys.readouterr().err.splitlines() == backfill_stderr(tmp_path)
    assert _sent(endpoint) == _cells("golden-review-history", tmp_path)


def test_a_queue_size_in_the_environment_smaller_than_a_batch_drops_no_cell(
    endpoint: OtlpSink, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The SDK's own default would take this (and refuse it: below its 512-span export batch).
    monkeypatch.setenv("OTEL_BSP_MAX_QUEUE_SIZE", "1")
    assert main(backfill_argv(tmp_path, "--otlp", "--no-store", "--json")) == 1
    assert capsys.readouterr().err.splitlines() == backfill_stderr(tmp_path)
    assert _sent(endpoint) == _cells("spark-otel-backfill", tmp_path)


def test_otlp_with_no_cell_sends_nothing_and_json_says_so(
    endpoint: OtlpSink, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    records = tmp_path / "none.csv"
    records.write_text("cell_id,start,elapsed_s\nx,2026-09-19T05:00:00Z,x\n")
    argv = [
        "backfill",
        str(records),
        "--mapping",
        "generic-csv",
        "--eval",
        "e",
        "--otlp",
        "--no-store",
        "--json",
    ]
    assert main(argv) == 1
    document = json.loads(capsys.readouterr().out)
    assert (document["otlp"], document["counts"]["cells"], document["counts"]["rejected"]) == (False, 0, 1)
    assert endpoint.bodies == []


def test_on_a_terminal_it_names_the_export(
    endpoint: OtlpSink, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with stderr_on_a_terminal() as terminal:
        assert main(backfill_argv(tmp_path, "--otlp", "--no-store")) == 1
    assert drawn_lines(terminal.getvalue()) == [
        "reading records",
        f"reading {tmp_path / 'b.csv'} (1 of 2 files)",
        f"reading {tmp_path / 'a.csv'} (2 of 2 files)",
        "exporting 4 cells over OTLP",
        *backfill_stderr(tmp_path),
    ]
    capsys.readouterr()


def test_a_collector_that_refuses_the_cells_is_an_error_saying_nothing_was_stored(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    refusing = OtlpSink(status=400)
    try:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", refusing.url)
        code = main(backfill_argv(tmp_path, "--otlp", "--no-store", "--json"))
    finally:
        refusing.server.shutdown()
        refusing.server.server_close()
    captured = capsys.readouterr()
    assert code == 1
    assert len(refusing.bodies) == 1  # it was asked, and said no
    assert json.loads(captured.out) == backfill_document(tmp_path, dry_run=False, store=None, otlp=False)
    assert captured.err.splitlines()[-1] == (
        f"spark-otel: error: the collector at {refusing.url} did not take 4 of 4 cells over OTLP; "
        "nothing was stored (--no-store): send them again once it is up"
    )


def test_a_collector_that_is_down_is_an_error_naming_the_store_that_keeps_the_cells(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import socket

    with socket.socket() as closed:  # a port nothing listens on
        closed.bind(("127.0.0.1", 0))
        down = f"http://127.0.0.1:{closed.getsockname()[1]}"
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", down)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "1")  # the SDK retries until its timeout
    store = tmp_path / "s.sqlite"
    assert main(backfill_argv(tmp_path, "--otlp", "--store", str(store))) == 1
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"spark-otel: error: the collector at {down} did not take 4 of 4 cells over OTLP; they are in the "
        f"store {store}: send them again once it is up"
    )
    from spark_otel.store import Store

    with Store(store, read_only=True) as kept:
        assert sorted(c.cell_id for c in kept.cells()) == ["a1", "a2", "a3", "b1"]
