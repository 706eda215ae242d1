"""What the OTLP JSON reader makes of well-formed input, over small hand-made exports: the span it
rebuilds (ids, times in each encoding proto3 JSON allows, parent, name, attributes), the values it
decodes, how it splits a file into lines (a BOM, a pretty-printed export, blank lines), the span
count over several files, and `OtlpRecords.write_to` into a real store.

The rebuilt span is what the store's codec reads, so each field is pinned whole: a span that is
not remote and sampled, with no parent unless one is named, as the SDK's own exporter has it.
"""

from __future__ import annotations

import codecs
import json
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.trace import SpanContext, TraceFlags
from tests.support.otlp_json_export import (
    CELL,
    DROP,
    REQUEST,
    SERVER,
    SPAN_ID,
    TRACE_ID,
    WINDOW,
    export,
    span,
)

from spark_otel.receivers.otlp_json import OtlpRecords, decode_any_value, read_otlp_json, spans_from_export
from spark_otel.store import Store

START_NS = 1_700_000_000_000_000_000
END_NS = 1_700_000_001_500_000_000


def rebuilt(**fields: Any) -> Any:
    [one] = spans_from_export(export(span(**fields)))
    return one


def test_a_span_is_rebuilt_as_a_sampled_local_span_with_its_name_and_times() -> None:
    one = rebuilt(name="text_completion qwen")
    assert one.name == "text_completion qwen"
    assert one.context == SpanContext(
        trace_id=int(TRACE_ID, 16),
        span_id=int(SPAN_ID, 16),
        is_remote=False,
        trace_flags=TraceFlags(TraceFlags.SAMPLED),
    )
    assert (one.start_time, one.end_time, one.parent) == (START_NS, END_NS, None)


def test_a_span_without_a_name_is_named_empty() -> None:
    assert rebuilt(name=DROP).name == ""


def test_a_parent_is_a_sampled_local_context_in_the_same_trace() -> None:
    one = rebuilt(parentSpanId="00000000000000aa")
    assert one.parent == SpanContext(
        trace_id=int(TRACE_ID, 16), span_id=0xAA, is_remote=False, trace_flags=TraceFlags(TraceFlags.SAMPLED)
    )


def test_an_empty_parent_id_is_no_parent() -> None:
    assert rebuilt(parentSpanId="").parent is None


@pytest.mark.parametrize(
    "end", [DROP, None, "", "0", 0], ids=["absent", "null", "empty", "zero-text", "zero"]
)
def test_a_span_without_an_end_ends_when_it_starts(end: Any) -> None:
    one = rebuilt(endTimeUnixNano=end)
    assert (one.start_time, one.end_time) == (START_NS, START_NS)


@pytest.mark.parametrize("start", [START_NS, 1.7e18], ids=["number", "float"])
def test_a_time_may_be_a_json_number(start: Any) -> None:
    one = rebuilt(startTimeUnixNano=start)
    assert (one.start_time, type(one.start_time)) == (START_NS, int)


def test_an_attribute_without_a_value_is_left_out() -> None:
    attributes = [{"key": "none"}, {"key": "empty", "value": {}}, {"key": "n", "value": {"intValue": "3"}}]
    assert rebuilt(attributes=attributes).attributes == {"n": 3}


def test_decode_any_value_reads_bytes_as_their_text_and_an_empty_value_as_none() -> None:
    assert decode_any_value({"bytesValue": "AAE="}) == "AAE="
    assert decode_any_value({}) is None


def test_a_kvlist_value_is_json_with_its_keys_sorted() -> None:
    kvlist = {
        "values": [{"key": "b", "value": {"intValue": "2"}}, {"key": "a", "value": {"stringValue": "x"}}]
    }
    assert decode_any_value({"kvlistValue": kvlist}) == '{"a": "x", "b": 2}'


# -- files ---------------------------------------------------------------------------------------------
def test_a_file_starting_with_a_bom_reads(tmp_path: Path) -> None:
    path = tmp_path / "bom.json"
    path.write_bytes(codecs.BOM_UTF8 + json.dumps(export(span())).encode())
    records = read_otlp_json([path])
    assert (records.spans, records.skipped) == (1, [])


def test_a_pretty_printed_export_is_one_document(tmp_path: Path) -> None:
    path = tmp_path / "pretty.json"
    path.write_text(json.dumps(export(span(), span(spanId="00000000000000bb")), indent=2))
    records = read_otlp_json([path])
    assert (records.spans, records.skipped) == (2, [])


def test_spans_are_counted_over_lines_and_files_past_blank_lines(tmp_path: Path) -> None:
    line = json.dumps(export(span()))
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    first.write_text(f"{line}\n   \n{line}\n")
    second.write_text(f"{line}\n")
    records = read_otlp_json([first, second])
    assert (records.spans, records.skipped) == (3, [])


def test_extend_adds_the_span_counts_and_skipped_lines() -> None:
    # read_otlp_json extends twice (line into file, file into all), so a subtracting `extend`
    # would still total right there: pinned on its own.
    records = OtlpRecords(spans=2, skipped=["a.jsonl:3: cut"])
    records.extend(OtlpRecords(spans=3, skipped=["b.jsonl:1: cut"]))
    assert (records.spans, records.skipped) == (5, ["a.jsonl:3: cut", "b.jsonl:1: cut"])


def test_write_to_stores_every_kind_of_record(tmp_path: Path) -> None:
    spans = [
        span(spanId="00000000000000c1", attrs=CELL),
        span(spanId="00000000000000a1", attrs=REQUEST, parentSpanId="00000000000000c1"),
        span(spanId="00000000000000d1", attrs=WINDOW),
        span(spanId="00000000000000e1", attrs=SERVER, parentSpanId="00000000000000a1"),
    ]
    path = tmp_path / "traces.jsonl"
    path.write_text(json.dumps(export(*spans)))
    records = read_otlp_json([path])
    with Store(tmp_path / "s.sqlite") as store:
        records.write_to(store)
        assert [c.uid for c in store.cells()] == ["00000000000000c1"]
        assert store.cells() == records.cells
        assert [r.uid for r in store.requests()] == ["00000000000000a1"]
        assert store.requests() == records.requests
        assert [w.uid for w in store.windows()] == ["00000000000000d1"]
        assert store.windows() == records.windows
        [timing] = records.server_timings
        assert (timing.request_uid, timing.span_uid, timing.e2e_s) == (
            "00000000000000a1",
            "00000000000000e1",
            2.0,
        )
        assert store.server_timings() == {"00000000000000a1": timing}
