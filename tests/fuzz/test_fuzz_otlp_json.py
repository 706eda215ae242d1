"""Fuzzing the OTLP JSON trace reader (`read_otlp_json`): random bytes, a real export cut at every
line boundary and a stride of offsets (every offset inside its multi-byte characters), random
mutations of its export requests, bytes edited in it.

Each read ends in `OtlpRecords` or an `InputError` naming the file and line. A line that does
not read is skipped and named in ``skipped`` (``file:line: why``) when another line has spans,
and the records of every other line are kept; the records it returns are ones a report can
place (times in 2000-2100, in order; counts whole numbers from 0 to 2**53).

The sample (data/otlp-traces.jsonl) is what `make_otlp_sample` wrote with the real SDK encoder.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from tests.support.backfill_checks import assert_placeable
from tests.support.fuzzing import FUZZ, JSON_VALUES, finite_or_none, timed

from spark_otel import InputError
from spark_otel._validate import EARLIEST_NS, LATEST_NS, MAX_COUNT
from spark_otel.receivers.otlp_json import OtlpRecords, read_otlp_json

SAMPLE = Path(__file__).parent / "data" / "otlp-traces.jsonl"
SAMPLE_BYTES = SAMPLE.read_bytes()
SAMPLE_LINES = SAMPLE_BYTES.decode("utf-8").splitlines()


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz-otlp")


def read(path: Path) -> OtlpRecords | InputError:
    """`read_otlp_json`'s records or the `InputError` it raised; anything else fails the test."""
    try:
        records = timed(lambda: read_otlp_json([path]), f"read_otlp_json({path.name})")
    except InputError as exc:
        refused = exc
    else:
        check_records(path, records)
        return records
    message = str(refused)
    assert message.startswith(f"{path}:"), message
    assert "\n" not in message, message
    assert len(message) < 1000, message
    return refused


def check_records(path: Path, records: OtlpRecords) -> None:
    for skipped in records.skipped:
        assert skipped.startswith(f"{path}:"), skipped
        assert "\n" not in skipped, skipped
    for cell in records.cells:
        assert_placeable(cell)
    for item in [*records.requests, *records.windows]:
        assert EARLIEST_NS <= item.start_unix_ns <= item.end_unix_ns < LATEST_NS, item
    for request in records.requests:
        for count in (request.input_tokens, request.output_tokens, request.server_port):
            assert count is None or 0 <= count < MAX_COUNT, request
        assert finite_or_none(request.time_to_first_chunk_s), request
    for window in records.windows:
        assert window.streams is None or 0 <= window.streams < MAX_COUNT, window


def keys(records: OtlpRecords) -> set[tuple[str, str]]:
    """What a read found, comparable across reads: each record's kind and uid."""
    return (
        {("cell", c.uid) for c in records.cells}
        | {("request", r.uid) for r in records.requests}
        | {("window", w.uid) for w in records.windows}
    )


@pytest.fixture(scope="module")
def per_line(workdir: Path) -> list[set[tuple[str, str]]]:
    """The records each line of the sample holds, read on its own."""
    found = []
    for number, line in enumerate(SAMPLE_LINES, start=1):
        path = workdir / f"line{number}.jsonl"
        path.write_text(line + "\n", encoding="utf-8")
        outcome = read(path)
        found.append(keys(outcome) if isinstance(outcome, OtlpRecords) else set())
    return found


def test_the_sample_holds_cells_requests_and_windows_on_separate_lines(
    workdir: Path, per_line: list[set[tuple[str, str]]]
) -> None:
    outcome = read(SAMPLE)
    assert isinstance(outcome, OtlpRecords)
    assert not outcome.skipped
    assert sorted(c.cell_id for c in outcome.cells) == ["B#265 — µ", "E#84 — µ"]
    assert (len(outcome.requests), len(outcome.windows)) == (1, 1)
    assert [len(found) for found in per_line] == [2, 1, 1, 0]


# -- truncation ---------------------------------------------------------------------------------------
def cut_points(data: bytes, stride: int) -> list[int]:
    points = set(range(0, len(data) + 1, stride)) | {len(data)}
    for i, byte in enumerate(data):
        if byte == ord("\n"):
            points |= {i - 1, i, i + 1}
        if byte >= 0x80:  # inside and around a multi-byte character
            points |= {i, i + 1}
    return sorted(p for p in points if 0 <= p <= len(data))


def test_the_sample_cut_anywhere_keeps_the_records_of_every_whole_line_before_the_cut(
    workdir: Path, per_line: list[set[tuple[str, str]]]
) -> None:
    path = workdir / "cut.jsonl"
    ends = [i for i, byte in enumerate(SAMPLE_BYTES) if byte == ord("\n")]
    failures: list[str] = []
    for cut in cut_points(SAMPLE_BYTES, 11):
        path.write_bytes(SAMPLE_BYTES[:cut])
        outcome = read(path)
        whole = sum(1 for end in ends if end <= cut)  # lines whose every byte is before the cut
        expected = set().union(*per_line[:whole])
        if isinstance(outcome, InputError):
            if expected:
                failures.append(f"cut at {cut}: {outcome}, though lines 1-{whole} hold records")
            continue
        if not expected <= keys(outcome):
            failures.append(f"cut at {cut}: lost {sorted(expected - keys(outcome))}")
        if any(not s.startswith(f"{path}:{whole + 1}:") for s in outcome.skipped):
            failures.append(f"cut at {cut}: skipped a line other than the cut one: {outcome.skipped}")
    assert not failures, "\n".join(failures[:5])


# -- random bytes -------------------------------------------------------------------------------------
@FUZZ
@given(data=st.binary(max_size=2000), suffix=st.sampled_from([".jsonl", ".json"]))
@example(data=b'{"resourceSpans": ["x"]}', suffix=".json")  # AttributeError: 'str' has no .get
@example(data=b"[" * 5000, suffix=".jsonl")  # RecursionError from json
@example(data=b"\xef\xbb\xbf" + SAMPLE_LINES[1].encode(), suffix=".jsonl")  # a BOM, as Windows tools write
def test_random_bytes_are_records_or_an_input_error_naming_file_and_line(
    workdir: Path, data: bytes, suffix: str
) -> None:
    path = workdir / f"random{suffix}"
    path.write_bytes(data)
    read(path)


def test_a_bom_does_not_cost_the_first_line(workdir: Path, per_line: list[set[tuple[str, str]]]) -> None:
    path = workdir / "bom.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + SAMPLE_BYTES)
    outcome = read(path)
    assert isinstance(outcome, OtlpRecords)
    assert not outcome.skipped
    assert keys(outcome) == set().union(*per_line)


# -- random mutations of the export requests ---------------------------------------------------------
def nodes(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """The path of every node under ``value`` (dict keys and list indexes), the root excluded."""
    found: list[tuple[Any, ...]] = []
    children = (
        value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else []
    )
    for key, child in children:
        found.append((*path, key))
        found.extend(nodes(child, (*path, key)))
    return found


def mutate(document: Any, where: tuple[Any, ...], op: str, value: Any) -> None:
    parent = document
    for key in where[:-1]:
        parent = parent[key]
    if op == "delete":
        del parent[where[-1]]
    else:
        parent[where[-1]] = value


SPAN_FIELDS = ["traceId", "spanId", "startTimeUnixNano", "endTimeUnixNano", "attributes", "name"]
OTLP_VALUES = JSON_VALUES | st.sampled_from(
    [
        "0" * 32,
        "0" * 16,
        "00_11223344556677",
        "+0112233445566778",
        "1796170635442138633",
        "1796170635442138633.5",
        "1e18",
        " 1796170635442138633",
        {"intValue": "1" + "0" * 30},
        {"intValue": 10**400},
        {"doubleValue": 10**400},
        {"doubleValue": "Infinity"},
        {"doubleValue": "NaN"},
        {"intValue": "-5"},
        {"arrayValue": {"values": 5}},
        {"arrayValue": "x"},
        {"kvlistValue": {"values": [{"value": {"intValue": 1}}]}},
        [{"key": "spark_otel.span.kind", "value": {"stringValue": "cell"}}],
    ]
)


@st.composite
def mutated_lines(draw: st.DrawFn) -> tuple[int, str]:
    """(line number, the new line) for one span-holding line of the sample, mutated in 1-3 places."""
    index = draw(st.integers(0, 2))
    document = json.loads(SAMPLE_LINES[index])
    for _ in range(draw(st.integers(1, 3))):
        candidates = nodes(document)
        if not candidates:
            break
        # Half the time a span's own field, where the reader's checks are.
        spans = [n for n in candidates if n[-1] in SPAN_FIELDS or (len(n) > 1 and n[-2] == "value")]
        pool = spans if spans and draw(st.booleans()) else candidates
        where = draw(st.sampled_from(pool))
        op = draw(st.sampled_from(["set", "set", "delete"]))
        # A copy: the pool's own dicts must not be mutated by a later step (hypothesis replays draws).
        mutate(document, where, op, copy.deepcopy(draw(OTLP_VALUES)) if op == "set" else None)
    return index + 1, json.dumps(document, ensure_ascii=draw(st.booleans()))


def _sample_with(line: int, text: str) -> str:
    lines = list(SAMPLE_LINES)
    lines[line - 1] = text
    return "\n".join(lines) + "\n"


def check_mutated(workdir: Path, per_line: list[set[tuple[str, str]]], line: int, text: str) -> None:
    path = workdir / "mutated.jsonl"
    path.write_text(_sample_with(line, text), encoding="utf-8")
    outcome = read(path)
    assert isinstance(outcome, OtlpRecords), "other lines hold spans: the file must read"
    others = set().union(*(found for i, found in enumerate(per_line, start=1) if i != line))
    assert others <= keys(outcome)
    assert all(s.startswith(f"{path}:{line}: ") for s in outcome.skipped), outcome.skipped


@FUZZ
@given(mutation=mutated_lines())
def test_a_mutated_export_line_is_read_or_skipped_and_the_other_lines_still_load(
    workdir: Path, per_line: list[set[tuple[str, str]]], mutation: tuple[int, str]
) -> None:
    check_mutated(workdir, per_line, *mutation)


DROP = object()
REGRESSIONS = {  # what the mutations found: (line, attribute, its new value or DROP)
    "infinite-prompt-tokens-OverflowError": (2, "spark_otel.cell.prompt_tokens", {"doubleValue": "Infinity"}),
    "nan-deadline": (2, "spark_otel.cell.deadline_s", {"doubleValue": "NaN"}),
    "negative-workers": (2, "spark_otel.cell.workers", {"intValue": "-5"}),
    "output-tokens-past-2**53": (1, "gen_ai.usage.output_tokens", {"intValue": "1" + "0" * 30}),
    "line-separators-in-a-string": (1, "spark_otel.cell.id", {"stringValue": "B#265 \u2028 \x85 µ"}),
    "a-cell-of-no-eval": (2, "spark_otel.eval", DROP),
}


@pytest.mark.parametrize(("line", "key", "value"), REGRESSIONS.values(), ids=REGRESSIONS.keys())
def test_a_mutated_export_line_found_by_fuzzing(
    workdir: Path, per_line: list[set[tuple[str, str]]], line: int, key: str, value: Any
) -> None:
    document = json.loads(SAMPLE_LINES[line - 1])
    for scope in document["resourceSpans"][0]["scopeSpans"]:
        for span in scope["spans"]:
            span["attributes"] = [a for a in span["attributes"] if a["key"] != key]
            if value is not DROP:
                span["attributes"].append({"key": key, "value": value})
    check_mutated(workdir, per_line, line, json.dumps(document, ensure_ascii=False))


@settings(FUZZ, max_examples=FUZZ.max_examples * 2 // 3)
@given(
    edits=st.lists(
        st.tuples(
            st.integers(0, len(SAMPLE_BYTES) - 1),
            st.sampled_from(["flip", "insert", "delete"]),
            st.binary(min_size=1, max_size=3),
        ),
        min_size=1,
        max_size=3,
    )
)
def test_bytes_edited_in_the_sample_keep_the_records_of_the_lines_before(
    workdir: Path, per_line: list[set[tuple[str, str]]], edits: list[tuple[int, str, bytes]]
) -> None:
    data = bytearray(SAMPLE_BYTES)
    first = min(position for position, _, _ in edits)
    for position, op, payload in sorted(edits, reverse=True):
        if op == "flip":
            chunk = data[position : position + len(payload)]
            data[position : position + len(payload)] = bytes(
                b ^ p for b, p in zip(chunk, payload, strict=False)
            )
        elif op == "insert":
            data[position:position] = payload
        else:
            del data[position : position + len(payload)]
    path = workdir / "edited.jsonl"
    path.write_bytes(bytes(data))
    outcome = read(path)
    untouched = SAMPLE_BYTES[:first].count(b"\n")
    expected = set().union(*per_line[:untouched])
    if expected:
        assert isinstance(outcome, OtlpRecords), outcome
        assert expected <= keys(outcome)
