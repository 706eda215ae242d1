"""Properties of the shared SSE decoder: every legal framing, every split of the reads.

Two oracles: the events a generated stream was built from (each with its ``event`` name and the
last ``id``), and a small reference parser written from the WHATWG event-stream text alone,
run over the whole body at once. The decoder, fed the body in any reads (single bytes, empty
reads, a CRLF pair split between two reads), must give what both give.
"""

from __future__ import annotations

import re

from hypothesis import example, given, settings
from hypothesis import strategies as st

from spark_otel.wire.sse import SseDecoder, SseEvent

BOM = "\ufeff".encode()
_LINE_END = re.compile(rb"\r\n|\r|\n")


# -- a reference parser, from the spec's text --------------------------------------------------------
def reference(body: bytes) -> list[SseEvent]:
    """WHATWG "Interpreting an event stream", on the whole body, with the decoder's one documented
    deviation: at the end of the body an unterminated last line is processed and the event under
    way dispatched (some servers close right after the last ``data:`` line)."""
    body = body.removeprefix(BOM)  # "One leading U+FEFF BYTE ORDER MARK character must be ignored"
    lines = _LINE_END.split(body)  # "lines ... separated by CRLF, LF or CR"; the last is unterminated
    events: list[SseEvent] = []
    data: bytes | None = None  # None: the data buffer is "" (no data field seen)
    event: str | None = None
    last_id: str | None = None

    def process(line: bytes) -> None:
        nonlocal data, event, last_id
        if not line:  # a blank line: dispatch
            if data is not None:  # "If the data buffer is an empty string ... return"
                events.append(SseEvent(data, event, last_id))
            data, event = None, None
            return
        if line.startswith(b":"):
            return  # a comment
        if b":" in line:
            field, _, value = line.partition(b":")
            value = value.removeprefix(b" ")  # "If value starts with a U+0020 SPACE, remove it"
        else:
            field, value = line, b""
        if field == b"data":  # append value and LF; the last LF is removed at dispatch
            data = value if data is None else data + b"\n" + value
        elif field == b"event":
            event = value.decode("utf-8", "replace")
        elif field == b"id" and b"\0" not in value:
            last_id = value.decode("utf-8", "replace")
        # "retry" and any other field: ignored here

    for line in lines[:-1]:
        process(line)
    if lines[-1]:
        process(lines[-1])
    process(b"")
    return events


# -- generated legal streams --------------------------------------------------------------------------
_no_break = st.binary(max_size=12).map(lambda b: b.replace(b"\r", b"").replace(b"\n", b""))
_text = st.text(st.characters(exclude_characters="\r\n\0", exclude_categories=["Cs"]), max_size=8)
_ends = st.sampled_from([b"\n", b"\r\n", b"\r"])


def _separator(draw: st.DrawFn, value: bytes) -> bytes:
    """The colon's separating space, or none: one space after the colon is dropped, so a value
    that starts with a space keeps it only when the separating space is written."""
    return b" " if value.startswith(b" ") or draw(st.booleans()) else b""


@st.composite
def streams(draw: st.DrawFn) -> tuple[bytes, list[SseEvent]]:
    """A body in a random legal framing (a random line end per line), and the events it holds."""
    lines: list[bytes] = []  # lines without their ends
    expected: list[SseEvent] = []
    last_id: str | None = None

    def noise() -> None:  # comments and ignored fields, anywhere inside an event
        for _ in range(draw(st.integers(0, 2))):
            lines.append(
                draw(
                    st.sampled_from([b":", b": keep-alive", b":data: not data", b"retry: 10", b"foo: bar"])
                    | _no_break.map(lambda b: b":" + b)
                )
            )

    count = draw(st.integers(0, 5))
    for i in range(count):
        noise()
        event = draw(st.none() | _text.filter(lambda s: s != ""))
        new_id = draw(st.none() | _text)
        values = draw(st.lists(_no_break, min_size=0 if draw(st.booleans()) else 1, max_size=3))
        fields: list[bytes] = []
        others: list[bytes] = []
        if event is not None:
            others.append(b"event:" + _separator(draw, event.encode()) + event.encode())
        if new_id is not None:
            others.append(b"id:" + _separator(draw, new_id.encode()) + new_id.encode())
            last_id = new_id
        for value in values:
            if not value and draw(st.booleans()):
                fields.append(b"data")  # a field name alone: an empty value
                continue
            fields.append(b"data:" + _separator(draw, value) + value)
        for other in others:  # `event` and `id` anywhere among the data lines, which keep their order
            fields.insert(draw(st.integers(0, len(fields))), other)
        for field in fields:
            lines.append(field)
            noise()
        last = i == count - 1
        # The last event may end with the body, without its blank line (flush dispatches it).
        if not (last and draw(st.booleans())):
            lines.extend([b""] * draw(st.integers(1, 3)))  # blank lines past the first dispatch nothing
        if values:
            expected.append(SseEvent(b"\n".join(values), event, last_id))
    body = b""
    previous = b""
    for k, line in enumerate(lines):
        if k == len(lines) - 1 and draw(st.booleans()):
            end = b""  # the body may stop without a last line end
        else:
            end = draw(_ends)
            if previous == b"\r" and not line and end == b"\n":
                end = b"\r\n"  # CR then LF would be one CRLF, not two line ends
        body += line + end
        previous = end
    if draw(st.booleans()):
        body = BOM + body
    return body, expected


_EVENT_END = re.compile(rb"(?:\r\n|\r|\n){2}")


def split(body: bytes, cuts: list[int], mode: str) -> list[bytes]:
    """``body`` cut into reads: at the given points (inside a CRLF pair too; a repeated point is an
    empty read), one byte a read, or one read per event (the common read, the decoder's fast path)."""
    if mode == "bytes":
        return [body[i : i + 1] for i in range(len(body))]
    if mode == "events":
        cuts = [m.end() for m in _EVENT_END.finditer(body)]
    points = sorted(min(c, len(body)) for c in cuts)
    return [body[a:b] for a, b in zip([0, *points], [*points, len(body)], strict=True)]


_cuts = st.lists(st.integers(0, 300), max_size=12)
_modes = st.sampled_from(["cuts", "bytes", "events"])


def decode(reads: list[bytes], *, data_only: bool = False) -> list[SseEvent]:
    decoder = SseDecoder()
    events: list[SseEvent] = []
    for read in reads:
        if data_only:
            events.extend(SseEvent(d, "?", "?") for d in decoder.feed_data(read))
        else:
            events.extend(decoder.feed(read))
    events.extend(decoder.flush())
    return events


# -- properties ---------------------------------------------------------------------------------------
@settings(max_examples=200, deadline=None)
@given(stream=streams(), cuts=_cuts, mode=_modes)
def test_any_legal_framing_at_any_split_decodes_to_the_events_written(
    stream: tuple[bytes, list[SseEvent]], cuts: list[int], mode: str
) -> None:
    body, expected = stream
    reads = split(body, cuts, mode)
    assert reference(body) == expected  # the oracle agrees with the generator
    assert decode(reads) == expected
    assert [e.data for e in decode(reads, data_only=True)] == [e.data for e in expected]


# Bytes a framing is made of, so arbitrary bodies are mostly near-legal streams.
_FIELDS = [b"data", b"data:", b"data: ", b"event:", b"id:", b"id: 7", b"retry:", b":", b" ", b"x", b"\0"]
_atoms = st.sampled_from([*_FIELDS, b"\r", b"\n", b"\r\n", b"\n\n", b"\r\r", BOM, b"\xff"])
_bodies = st.lists(_atoms, max_size=40).map(b"".join)


@settings(max_examples=200, deadline=None)
@given(body=_bodies, cuts=_cuts, mode=_modes)
@example(body=b"data: YHOO\ndata: +2\ndata: 10\n\n", cuts=[1, 5, 6], mode="cuts")
@example(body=b"data\n\ndata\ndata\n\ndata:", cuts=[], mode="bytes")
@example(body=b"data:test\n\ndata: test\n\n", cuts=[5, 5, 6], mode="cuts")
@example(body=b"data: a\r\ndata: b\r\n\r\n", cuts=[8, 8, 9], mode="cuts")  # CRLF split, an empty read
@example(body=b"\xef\xbb\xbfdata: after a BOM\n\n", cuts=[1, 2], mode="cuts")
@example(body=b'data: {"a":1}\n\ndata:{"b":2}\n\n', cuts=[], mode="events")  # the fast path
@example(body=b"id: 7\ndata: a\n\nid: 8\0\ndata:b\n\n", cuts=[], mode="events")  # an id with NUL
@example(body=b"id: 1\nid\ndata:\r\r", cuts=[], mode="bytes")  # an empty id resets it
def test_any_body_at_any_split_decodes_as_the_reference_parser_reads_it(
    body: bytes, cuts: list[int], mode: str
) -> None:
    assert decode(split(body, cuts, mode)) == reference(body)


# The WHATWG section's own examples, and framings at the edges.
SPEC_CASES = [
    # "data: YHOO\ndata: +2\ndata: 10\n\n": one event, lines joined by LF.
    (b"data: YHOO\ndata: +2\ndata: 10\n\n", [SseEvent(b"YHOO\n+2\n10")]),
    # A comment, an event with an id, then an event after which the id persists.
    (
        b": test stream\n\ndata: first event\nid: 1\n\ndata:second event\nid\n\ndata:  third event\n\n",
        [
            SseEvent(b"first event", None, "1"),
            SseEvent(b"second event", None, ""),
            SseEvent(b" third event", None, ""),
        ],
    ),
    # "data\n\ndata\ndata\n\ndata:": "", "\n", and (here, unlike a browser) the unterminated "".
    (b"data\n\ndata\ndata\n\ndata:", [SseEvent(b""), SseEvent(b"\n"), SseEvent(b"")]),
    # "data:test\n\ndata: test\n\n": the same event twice, space or not.
    (b"data:test\n\ndata: test\n\n", [SseEvent(b"test"), SseEvent(b"test")]),
    # CR and CRLF line ends; an event name resets after dispatch.
    (b"event: a\rdata: 1\r\rdata: 2\r\n\r\n", [SseEvent(b"1", "a"), SseEvent(b"2")]),
    # An event without data dispatches nothing, but its id is kept.
    (b"id: 5\nevent: x\n\ndata: y\n\n", [SseEvent(b"y", None, "5")]),
    (b"\xef\xbb\xbfdata: after a BOM\n\n", [SseEvent(b"after a BOM")]),
    (b"data: a\r\n\r\n", [SseEvent(b"a")]),
    (b"", []),
    (b"\n\n\r\r\n", []),
]


def test_the_spec_examples_at_every_split() -> None:
    for body, expected in SPEC_CASES:
        assert reference(body) == expected, body
        for cut in range(len(body) + 1):
            assert decode([body[:cut], body[cut:]]) == expected, (body, cut)
            assert decode([body[:cut], b"", body[cut:]]) == expected, (body, cut, "empty read")
        assert decode([body[i : i + 1] for i in range(len(body))]) == expected, body


def test_an_empty_read_between_cr_and_lf_keeps_them_one_line_end() -> None:
    decoder = SseDecoder()
    assert decoder.feed(b"data: a\r") == []
    assert decoder.feed(b"") == []
    assert decoder.feed(b"\ndata: b\n\n") == [SseEvent(b"a\nb")]
