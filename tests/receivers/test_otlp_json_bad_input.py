"""The OTLP JSON reader's whole message for each kind of bad input, over small hand-made exports.

Bad input is named precisely (the house rule): the part of the export request (its JSON path,
``resourceSpans[0].scopeSpans[0].spans[0]``), the field and the value, and for a file the file
and line. Each case pins the whole text, so a message that loses its value, its field name or its
place fails here; the values are chosen so that each check's own message is the one raised (a
value that another check would also refuse would not pin it).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
from tests.support.otlp_json_export import CELL, DROP, REQUEST, SERVER, SPAN, START, export, span

from spark_otel import InputError
from spark_otel import _semconv as sc
from spark_otel.receivers.otlp_json import read_otlp_json, records_from_export


def raised(document: dict[str, Any]) -> str:
    with pytest.raises(ValueError) as caught:  # noqa: PT011 - the whole message is compared below
        records_from_export(document)
    return str(caught.value)


STRUCTURE = {  # an export request whose nesting is not OTLP JSON's
    "resourceSpans-not-a-list": ({"resourceSpans": 5}, "resourceSpans is 5, not a list"),
    "resource-not-an-object": ({"resourceSpans": [{}, 5]}, "resourceSpans[1] is 5, not an object"),
    "scopeSpans-not-a-list": (
        {"resourceSpans": [{"scopeSpans": 5}]},
        "resourceSpans[0].scopeSpans is 5, not a list",
    ),
    "scope-not-an-object": (
        {"resourceSpans": [{"scopeSpans": [5]}]},
        "resourceSpans[0].scopeSpans[0] is 5, not an object",
    ),
    "spans-not-a-list": (
        {"resourceSpans": [{"scopeSpans": [{"spans": 5}]}]},
        "resourceSpans[0].scopeSpans[0].spans is 5, not a list",
    ),
    "span-not-an-object": (export(5), f"{SPAN} is 5, not an object"),
}


@pytest.mark.parametrize(("document", "message"), STRUCTURE.values(), ids=STRUCTURE.keys())
def test_an_export_of_the_wrong_shape_is_named_by_its_json_path(
    document: dict[str, Any], message: str
) -> None:
    assert raised(document) == message


DASHES_58 = "-" * 58  # its repr is 60 characters: quoted whole
DASHES_59 = "-" * 59  # 61: cut to 57 and "..."
ARABIC_INDIC_START = "".join(chr(0x0660 + int(d)) for d in START)  # str.isdigit, but not ASCII
SPAN_FIELDS = {  # one field of the span, and what is said of it
    "traceId-empty": ({"traceId": ""}, "traceId is missing"),
    "traceId-a-number": ({"traceId": 5}, "traceId is missing"),
    "traceId-bad-base64": ({"traceId": "zz"}, "traceId 'zz' is neither hex nor base64"),
    "traceId-value-of-60-characters-quoted-whole": (
        {"traceId": DASHES_58},
        f"traceId '{DASHES_58}' is neither hex nor base64",
    ),
    "traceId-value-of-61-characters-cut": (
        {"traceId": DASHES_59},
        f"traceId '{'-' * 56}... is neither hex nor base64",
    ),
    "spanId-missing": ({"spanId": DROP}, "spanId is missing"),
    "spanId-base64-with-a-stray-character": (
        {"spanId": "AAAAAA*AAAAE="},  # without the "*", 8 bytes of base64
        "spanId 'AAAAAA*AAAAE=' is neither hex nor base64",
    ),
    "spanId-short-hex-read-as-base64": ({"spanId": "abcd"}, "spanId 'abcd' is 3 bytes, not 8"),
    "spanId-all-zeros": ({"spanId": "0" * 16}, "spanId is all zeros (an invalid id)"),
    "parentSpanId-bad": ({"parentSpanId": "zz"}, "parentSpanId 'zz' is neither hex nor base64"),
    "start-missing": (
        {"startTimeUnixNano": DROP},
        "startTimeUnixNano None is not a whole number of nanoseconds",
    ),
    "start-not-digits": (
        {"startTimeUnixNano": "abc"},
        "startTimeUnixNano 'abc' is not a whole number of nanoseconds",
    ),
    "start-non-ascii-digits": (
        {"startTimeUnixNano": ARABIC_INDIC_START},
        f"startTimeUnixNano {ARABIC_INDIC_START!r} is not a whole number of nanoseconds",
    ),
    "start-a-boolean": (
        {"startTimeUnixNano": True},
        "startTimeUnixNano True is not a whole number of nanoseconds",
    ),
    "start-a-fraction": (
        {"startTimeUnixNano": 1.5},
        "startTimeUnixNano 1.5 is not a whole number of nanoseconds",
    ),
    "start-in-1970": (
        {"startTimeUnixNano": "1"},
        "startTimeUnixNano reads as the year 1970, outside 2000-2100",
    ),
    "end-not-digits": (
        {"endTimeUnixNano": "abc"},
        "endTimeUnixNano 'abc' is not a whole number of nanoseconds",
    ),
    "end-before-start": (
        {"endTimeUnixNano": "1699999999999999999"},
        "endTimeUnixNano 1699999999999999999 is before startTimeUnixNano 1700000000000000000",
    ),
    "attributes-not-a-list": ({"attributes": 5}, "attributes is 5, not a list"),
    "attribute-not-an-object": ({"attributes": [5]}, "an attribute is 5, not an object"),
    "attribute-key-a-number": (
        {"attributes": [{"key": 5, "value": {"intValue": "1"}}]},
        "attribute key 5 is not a string",
    ),
}
VALUES = {  # one attribute's AnyValue, and what is said of it
    "not-an-object": (5, "attribute value is 5, not an object"),
    "intValue-a-fraction": ({"intValue": 1.5}, "intValue 1.5 is not a whole number"),
    "intValue-a-boolean": ({"intValue": True}, "intValue True is not a whole number"),
    "doubleValue-a-list": ({"doubleValue": [1]}, "doubleValue [1] is not a number"),
    "doubleValue-past-a-float": (
        {"doubleValue": 10**400},
        "attribute value {'doubleValue': 1" + "0" * 40 + "... is too large for a number",
    ),
    "arrayValue-not-an-object": ({"arrayValue": 5}, "arrayValue is 5, not an object"),
    "arrayValue-values-not-a-list": ({"arrayValue": {"values": 5}}, "arrayValue.values is 5, not a list"),
    "kvlistValue-not-an-object": ({"kvlistValue": 5}, "kvlistValue is 5, not an object"),
    "kvlistValue-values-not-a-list": ({"kvlistValue": {"values": 5}}, "kvlistValue.values is 5, not a list"),
}
SPAN_CASES = {
    **SPAN_FIELDS,
    **{f"value-{k}": ({"attributes": [{"key": "k", "value": v}]}, m) for k, (v, m) in VALUES.items()},
}


@pytest.mark.parametrize(("fields", "message"), SPAN_CASES.values(), ids=SPAN_CASES.keys())
def test_a_bad_span_field_is_named_with_its_value_and_place(fields: dict[str, Any], message: str) -> None:
    assert raised(export(span(**fields))) == f"{SPAN}: {message}"


MINUS = {"doubleValue": -1.5}
RECORDS = {  # a span that converts to a record a report cannot place
    "cell-of-blank-eval": (
        {**CELL, sc.EVAL_NAME: {"stringValue": "  "}},
        "a cell span without spark_otel.eval",
    ),
    "cell-negative-prompt-tokens": (
        {**CELL, sc.CELL_PROMPT_TOKENS: {"intValue": "-5"}},
        "prompt_tokens is -5; expected a whole number from 0 to 2**53",
    ),
    "cell-nan-deadline": (
        {**CELL, sc.CELL_DEADLINE_S: {"doubleValue": "NaN"}},
        "deadline_s is nan; expected a finite number",
    ),
    "cell-negative-deadline": ({**CELL, sc.CELL_DEADLINE_S: MINUS}, "deadline_s is -1.5, below 0"),
    "cell-zero-deadline": (
        {**CELL, sc.CELL_DEADLINE_S: {"doubleValue": 0.0}},
        "deadline_s is 0.0; a ceiling is above 0 seconds",
    ),
    "cell-zero-workers": (
        {**CELL, sc.CELL_WORKERS: {"intValue": "0"}},
        "workers is 0; a cell runs on 1 worker or more",
    ),
    "cell-negative-first-token": (
        {**CELL, sc.CELL_BUDGET_FIRST_TOKEN_S: MINUS},
        "first_token_s is -1.5, below 0",
    ),
    "cell-negative-decode": ({**CELL, sc.CELL_BUDGET_DECODE_S: MINUS}, "decode_s is -1.5, below 0"),
    "cell-negative-unsplit": ({**CELL, sc.CELL_BUDGET_UNSPLIT_S: MINUS}, "unsplit_s is -1.5, below 0"),
    "cell-negative-other": ({**CELL, sc.CELL_BUDGET_OTHER_S: MINUS}, "other_s is -1.5, below 0"),
    "request-negative-time-to-first-chunk": (
        {**REQUEST, sc.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK: MINUS},
        "time_to_first_chunk_s is -1.5, below 0",
    ),
    "server-negative-queue": ({**SERVER, sc.VLLM_LATENCY_TIME_IN_QUEUE: MINUS}, "queue_s is -1.5, below 0"),
    "server-negative-prefill": (
        {**SERVER, sc.VLLM_LATENCY_TIME_IN_MODEL_PREFILL: MINUS},
        "prefill_s is -1.5, below 0",
    ),
    "server-negative-time-to-first-token": (
        {**SERVER, sc.VLLM_LATENCY_TIME_TO_FIRST_TOKEN: MINUS},
        "time_to_first_token_s is -1.5, below 0",
    ),
    "server-negative-e2e": ({**SERVER, sc.VLLM_LATENCY_E2E: MINUS}, "e2e_s is -1.5, below 0"),
}


@pytest.mark.parametrize(("attributes", "message"), RECORDS.values(), ids=RECORDS.keys())
def test_a_record_a_report_cannot_place_is_named_by_its_span_and_field(
    attributes: dict[str, Any], message: str
) -> None:
    document = export(span(name="c", attrs=attributes, parentSpanId="00000000000000aa"))
    assert raised(document) == f"span 'c': {message}"


def test_a_long_span_name_is_quoted_to_60_characters() -> None:
    document = export(span(name="n" * 61, attrs={**CELL, sc.EVAL_NAME: {"stringValue": ""}}))
    assert raised(document) == f"span '{'n' * 60}': a cell span without spark_otel.eval"


# -- whole files ---------------------------------------------------------------------------------------
def good_line() -> str:
    return json.dumps(export(span()))


def refused(path: Path, data: bytes) -> str:
    path.write_bytes(data)
    with pytest.raises(InputError) as caught:
        read_otlp_json([path])
    return str(caught.value)


def test_a_line_that_is_not_a_json_object_is_named(tmp_path: Path) -> None:
    path = tmp_path / "list.jsonl"
    assert refused(path, b"[]\n") == f"{path}:1: not an OTLP JSON trace export: a line is not a JSON object"


def test_a_line_nested_too_deeply_is_named(tmp_path: Path) -> None:
    path = tmp_path / "deep.jsonl"
    message = refused(path, b"[" * 5000)
    assert message == f"{path}:1: not an OTLP JSON trace export: nested too deeply to read"


def status_of_length(length: int) -> bytes:
    """An export whose cell has an unknown status of ``length`` letters: the reason read names it
    whole, ``span 'c': 'x...x' is not a valid CellStatus``, 38 characters more than the status."""
    attributes = {**CELL, sc.CELL_STATUS: {"stringValue": "x" * length}}
    return json.dumps(export(span(name="c", attrs=attributes))).encode()


def test_a_reason_of_300_characters_is_kept_whole(tmp_path: Path) -> None:
    path = tmp_path / "status.jsonl"
    reason = f"span 'c': '{'x' * 262}' is not a valid CellStatus"
    assert len(reason) == 300
    assert refused(path, status_of_length(262)) == f"{path}:1: not an OTLP JSON trace export: {reason}"


def test_a_reason_past_300_characters_is_cut_to_300(tmp_path: Path) -> None:
    path = tmp_path / "status.jsonl"
    reason = f"span 'c': '{'x' * 263}' is not a valid CellStatus"
    assert len(reason) == 301
    message = refused(path, status_of_length(263))
    assert message == f"{path}:1: not an OTLP JSON trace export: {reason[:297]}..."


def test_a_line_that_is_not_utf8_is_skipped_naming_its_byte_and_column(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "latin1.jsonl"
    path.write_bytes(b"  \xff\n" + good_line().encode() + b"\n")
    with caplog.at_level(logging.WARNING, logger="spark_otel.receivers.otlp_json"):
        records = read_otlp_json([path])
    skipped = f"{path}:1: not an OTLP JSON trace export: not UTF-8 text (byte 0xff at column 3)"
    assert (records.spans, records.skipped) == (1, [skipped])
    assert [r.getMessage() for r in caplog.records] == [f"{skipped} (line skipped)"]
