"""The shared SSE decoder reads every legal framing the same way, at any split of the reads."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_otel.wire.sse import DONE, SseDecoder, SseError, SseEvent

# A data value holds no line break; anything else (spaces, colons, non-UTF-8 bytes) may appear.
_values = st.binary(max_size=40).map(lambda b: b.replace(b"\r", b"").replace(b"\n", b""))
_line_ends = st.sampled_from([b"\n", b"\r\n", b"\r"])


@st.composite
def _streams(draw: st.DrawFn) -> tuple[bytes, list[SseEvent]]:
    """An event stream in a random legal framing, and the events it must decode to."""
    body = b""
    expected: list[SseEvent] = []
    for _ in range(draw(st.integers(0, 6))):
        lines = draw(st.lists(_values, min_size=1, max_size=3))
        event = draw(st.none() | st.sampled_from(["message", "delta"]))
        # One line end per event: a CR followed by an LF would be one CRLF, not two line ends.
        end = draw(_line_ends)
        frame = b""
        if draw(st.booleans()):
            frame += b": keep-alive" + end
        if event is not None:
            frame += b"event: " + event.encode() + end
        for value in lines:
            # One optional space after the colon is dropped; a value that starts with a space
            # keeps it only when the separating space is written.
            space = b" " if value.startswith(b" ") or draw(st.booleans()) else b""
            frame += b"data:" + space + value + end
        frame += end
        body += frame
        expected.append(SseEvent(b"\n".join(lines), event))
    return body, expected


def _decode(decoder: SseDecoder, reads: list[bytes]) -> list[SseEvent]:
    events: list[SseEvent] = []
    for read in reads:
        events.extend(decoder.feed(read))
    events.extend(decoder.flush())
    return events


def _without_ids(events: list[SseEvent]) -> list[SseEvent]:
    return [SseEvent(e.data, e.event) for e in events]


@settings(max_examples=300, deadline=None)
@given(stream=_streams(), cuts=st.lists(st.integers(0, 400), max_size=8))
def test_every_legal_framing_decodes_to_the_same_events_at_any_split(
    stream: tuple[bytes, list[SseEvent]], cuts: list[int]
) -> None:
    body, expected = stream
    points = sorted({min(c, len(body)) for c in cuts})
    reads = [body[a:b] for a, b in zip([0, *points], [*points, len(body)], strict=True)]
    assert _without_ids(_decode(SseDecoder(), reads)) == expected


VLLM_BODY = (
    b'data: {"id":"cmpl-1","choices":[{"index":0,"text":"Hel"}],"model":"qwen"}\n\n'
    b'data: {"id":"cmpl-1","choices":[{"index":0,"text":"lo","finish_reason":"stop"}]}\n\n'
    b'data: {"id":"cmpl-1","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":2}}\n\n'
    b"data: [DONE]\n\n"
)


def test_a_real_body_split_at_every_byte_gives_the_events_it_gives_whole() -> None:
    whole = SseDecoder().feed(VLLM_BODY)
    assert [e.data[-6:] for e in whole][-1] == DONE
    assert len(whole) == 4
    for cut in range(len(VLLM_BODY) + 1):
        assert _decode(SseDecoder(), [VLLM_BODY[:cut], VLLM_BODY[cut:]]) == whole, cut
    assert _decode(SseDecoder(), [bytes([b]) for b in VLLM_BODY]) == whole


def test_a_crlf_split_between_reads_is_one_line_end_not_two() -> None:
    decoder = SseDecoder()
    assert decoder.feed(b"data: a\r") == []
    # The LF completes the CRLF; were it read as a blank line, "a" would be dispatched alone.
    assert decoder.feed(b"\ndata: b\r\n\r\n") == [SseEvent(b"a\nb")]


def test_comments_unknown_fields_and_a_bare_field_name() -> None:
    body = b": hello\nretry: 100\nfoo: bar\ndata\ndata:x\n\n"
    assert SseDecoder().feed(body) == [SseEvent(b"\nx")]


def test_a_blank_line_without_data_dispatches_nothing_and_event_names_reset() -> None:
    decoder = SseDecoder()
    assert decoder.feed(b"event: ping\n\n") == []
    assert decoder.feed(b"data: 1\n\n") == [SseEvent(b"1")]


def test_id_is_kept_across_events_and_an_id_with_nul_is_ignored() -> None:
    events = SseDecoder().feed(b"id: 7\ndata: a\n\ndata: b\n\nid: 8\x00\ndata: c\n\n")
    assert [e.id for e in events] == ["7", "7", "7"]


def test_flush_dispatches_an_event_the_server_did_not_terminate() -> None:
    decoder = SseDecoder()
    assert decoder.feed(b"data: [DO") == []
    assert decoder.feed(b"NE]") == []
    assert decoder.flush() == [SseEvent(DONE)]
    assert decoder.flush() == []
    decoder.feed(b"data: XX")  # the unterminated line is taken whole, its last bytes included
    assert decoder.flush() == [SseEvent(b"XX")]


def test_the_fast_path_and_the_general_path_agree() -> None:
    fast = SseDecoder().feed(b'data: {"a":1}\n\n')
    general = SseDecoder().feed(b'data:{"a":1}\n\n')
    spaced = SseDecoder().feed(b'data:  {"a":1}\n\n')  # two spaces: one is the separator
    assert fast == general == [SseEvent(b'{"a":1}')]
    assert spaced == [SseEvent(b' {"a":1}')]


@pytest.mark.parametrize(
    "reads",
    [
        [b"data: " + b"x" * 100 + b"\n\n"],  # one whole event (the fast path)
        [b"data: " + b"x" * 100],  # a line that never ends
        [b"data: " + b"x" * 60 + b"\n", b"data: " + b"x" * 60 + b"\n"],  # many lines of one event
    ],
)
def test_an_event_past_the_size_cap_is_a_clear_error(reads: list[bytes]) -> None:
    decoder = SseDecoder(max_event_bytes=64)
    *first, last = reads
    for read in first:
        assert decoder.feed(read) == []
    with pytest.raises(SseError, match="larger than 64 bytes"):
        decoder.feed(last)


def test_events_are_frozen() -> None:
    event = SseDecoder().feed(b"data: a\n\n")[0]
    with pytest.raises(AttributeError):
        event.data = b"b"  # type: ignore[misc]


@settings(max_examples=200, deadline=None)
@given(stream=_streams(), cuts=st.lists(st.integers(0, 400), max_size=8))
def test_feed_data_gives_the_data_feed_gives(stream: tuple[bytes, list[SseEvent]], cuts: list[int]) -> None:
    body, _ = stream
    points = sorted({min(c, len(body)) for c in cuts})
    reads = [body[a:b] for a, b in zip([0, *points], [*points, len(body)], strict=True)]
    events, datas = SseDecoder(), SseDecoder()
    from_events = [e.data for read in reads for e in events.feed(read)] + [e.data for e in events.flush()]
    from_datas = [d for read in reads for d in datas.feed_data(read)] + [e.data for e in datas.flush()]
    assert from_datas == from_events


def test_the_common_read_skips_the_general_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """A read of one ``data: {...}\\n\\n`` event (what vLLM sends, every chunk of every stream) is
    decoded without splitting the block: the general path is never entered for it, with or
    without the space, through `feed` and `feed_data`, and again after a `flush`."""
    decoder = SseDecoder()
    # The first read takes the general path (a BOM may lead it).
    assert decoder.feed(b"id: 7\ndata: 1\n\n") == [SseEvent(b"1", None, "7")]

    def general_path(self: SseDecoder, block: bytes) -> list[SseEvent]:
        raise AssertionError(f"the general path was taken for {block!r}")

    monkeypatch.setattr(SseDecoder, "_feed", general_path)
    assert decoder.feed(b'data: {"a":1}\n\n') == [SseEvent(b'{"a":1}', None, "7")]
    assert decoder.feed(b'data:{"a":2}\n\n') == [SseEvent(b'{"a":2}', None, "7")]
    assert decoder.feed_data(b"data: [DONE]\n\n") == [DONE]
    assert decoder.feed_data(b"data:x\n\n") == [b"x"]
    assert decoder.flush() == []
    assert decoder.feed(b"data: 2\n\n") == [SseEvent(b"2", None, "7")]


@pytest.mark.parametrize(
    ("reads", "expected"),
    [
        # Ends in LF LF with one LF before them, but a CR ends the first line: two data lines.
        ([b"data: a\rdata: b\n\n"], [SseEvent(b"a\nb")]),
        ([b"data: a\rb\n\n"], [SseEvent(b"a")]),  # "b" is a field with no value: ignored
        # One LF, two bytes from the end, but the read does not end the event: nothing yet.
        ([b"data: a\nd", b"ata: b\n\n"], [SseEvent(b"a\nb")]),
        ([b"data: a\n\n\n"], [SseEvent(b"a")]),  # a third LF is a blank line with nothing to dispatch
        ([b"event: e\ndata: a\n\n"], [SseEvent(b"a", "e")]),
        ([b"DATA: a\n\n", b"data: b\n\n"], [SseEvent(b"b")]),  # field names are case-sensitive
        ([b"dat: a\n\n", b"data: b\n\n"], [SseEvent(b"b")]),
    ],
)
def test_reads_that_look_like_the_common_one_but_are_not(
    reads: list[bytes], expected: list[SseEvent]
) -> None:
    decoder = SseDecoder()
    assert decoder.feed(b"data: 0\n\n") == [SseEvent(b"0")]  # past the first read: the fast path is armed
    assert _decode(decoder, reads) == expected


def test_a_decoder_reads_a_new_body_after_flush() -> None:
    decoder = SseDecoder()
    assert decoder.feed(b"data: a\r\n\r\ndata: b") == [SseEvent(b"a")]
    assert decoder.flush() == [SseEvent(b"b")]
    assert decoder.feed(b"data: c\n") == []
    assert decoder.feed(b"\n") == [SseEvent(b"c")]
    decoder.feed(b"data: d\r")
    assert decoder.flush() == [SseEvent(b"d")]
    # The CR ended the last body; an LF opening the next is its own blank line, not that CR's pair.
    assert decoder.feed(b"\ndata: e\n\n") == [SseEvent(b"e")]


def test_the_size_error_names_the_limit_and_what_follows() -> None:
    with pytest.raises(SseError) as caught:
        SseDecoder(max_event_bytes=1_000).feed(b"data: " + b"x" * 2_000 + b"\n\n")
    assert str(caught.value) == (
        "a server-sent event is larger than 1,000 bytes (is this an event stream?); "
        "the stream is not read further"
    )


@pytest.mark.parametrize(
    ("reads", "expected"),
    [
        # The next read must not skip what the last one left pending, whichever path it takes.
        ([b"data: a\n\ndata: b", b"data: c\n\n"], [[SseEvent(b"a")], [SseEvent(b"bdata: c")]]),
        ([b"event: delta\n", b"data: a\n\n"], [[], [SseEvent(b"a", "delta")]]),
        ([b"data: a\n", b"data: b\n\n"], [[], [SseEvent(b"a\nb")]]),
        # A bare CR ends the blank line: the event is complete at the end of this read.
        ([b"data: a\n\r"], [[SseEvent(b"a")]]),
        ([b"data: a\r\r", b"\ndata: b\n\n"], [[SseEvent(b"a")], [SseEvent(b"b")]]),
    ],
)
def test_each_read_returns_exactly_the_events_it_completed(
    reads: list[bytes], expected: list[list[SseEvent]]
) -> None:
    decoder = SseDecoder()
    assert decoder.feed(b"data: 0\n\n") == [SseEvent(b"0")]
    assert [decoder.feed(read) for read in reads] == expected


def test_only_a_bom_that_starts_the_stream_is_dropped() -> None:
    bom = "\ufeff".encode()
    assert SseDecoder().feed(bom + b"data: a\n\n") == [SseEvent(b"a")]
    # Anywhere later it is part of the line: a field named "\ufeffdata", which is ignored.
    assert SseDecoder().feed(b"\n" + bom + b"data: a\n\n") == []
    decoder = SseDecoder()
    assert decoder.feed(b"data: a\n\n") == [SseEvent(b"a")]
    assert decoder.feed(bom + b"data: b\n\n") == []


def test_the_size_cap_is_inclusive_and_the_same_whichever_read_brings_the_event() -> None:
    """An event of exactly ``max_event_bytes`` of data is read, one byte more refused, as the first
    read (the general path) and as a later one (the common read's path) alike; a pending line,
    which has no data yet, is capped at the same size."""
    x = b"x"
    event = b"data: " + x * 64 + b"\n\n"
    armed = SseDecoder(max_event_bytes=64)
    assert armed.feed(b"data: 0\n\n") == [SseEvent(b"0")]
    assert armed.feed(event) == [SseEvent(x * 64)]
    assert armed.feed(b"data:" + x * 64 + b"\n\n") == [SseEvent(x * 64)]
    assert SseDecoder(max_event_bytes=64).feed(event) == [SseEvent(x * 64)]
    with pytest.raises(SseError, match="larger than 64 bytes"):
        armed.feed(b"data: " + x * 65 + b"\n\n")
    with pytest.raises(SseError, match="larger than 64 bytes"):
        SseDecoder(max_event_bytes=64).feed(b"data: " + x * 65 + b"\n\n")
    # Over several data lines the cap is on their values together (the joining LFs aside).
    two = b"data: " + x * 32 + b"\ndata: " + x * 32 + b"\n\n"
    assert SseDecoder(max_event_bytes=64).feed(two) == [SseEvent(x * 32 + b"\n" + x * 32)]
    with pytest.raises(SseError, match="larger than 64 bytes"):
        SseDecoder(max_event_bytes=64).feed(two.replace(b"\n\n", b"x\n\n"))
    pending = SseDecoder(max_event_bytes=64)
    assert pending.feed(b"data: " + x * 58) == []  # a 64-byte line not yet ended
    assert pending.feed(b"\n\n") == [SseEvent(x * 58)]
    with pytest.raises(SseError, match="larger than 64 bytes"):
        SseDecoder(max_event_bytes=64).feed(b"data: " + x * 59)


@pytest.mark.parametrize(
    "reads",
    [
        [b"data: " + b"x" * 100 + b"\n\n"],
        [b"data: " + b"x" * 100],
        [b"data: " + b"x" * 60 + b"\n", b"data: " + b"x" * 60 + b"\n"],
    ],
)
def test_after_a_size_error_nothing_of_the_refused_event_is_kept(reads: list[bytes]) -> None:
    """The instrumentation flushes a stream's decoder at its end whatever happened: an event
    refused for its size must not come back from a later read or from `flush`."""
    decoder = SseDecoder(max_event_bytes=64)
    *first, last = reads
    for read in first:
        decoder.feed(read)
    with pytest.raises(SseError):
        decoder.feed(last)
    assert decoder.feed(b"data: a\n\n") == [SseEvent(b"a")]
    assert decoder.feed(b"data: b") == []
    assert decoder.flush() == [SseEvent(b"b")]
    assert decoder.flush() == []


def test_event_names_and_ids_that_are_not_utf8_are_read_with_replacement_characters() -> None:
    events = SseDecoder().feed(b"event: d\xffx\nid: 7\xfe\ndata: a\n\n")
    assert events == [SseEvent(b"a", "d\ufffdx", "7\ufffd")]
