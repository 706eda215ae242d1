"""Salvage at its edges: a candidate document abandoned with or without findings, the regex
extractor's run points (a newline, every `RUN_EVERY_CHARS`), a closed extractor, and what each
extractor name gives."""

from __future__ import annotations

import json
import re

import pytest

from spark_otel.deadline.salvage import (
    JsonFindings,
    JsonLinesFindings,
    NoFindings,
    RegexFindings,
    as_extractor,
    json_findings,
    jsonl_findings,
    regex_findings,
)


def test_an_abandoned_candidate_is_rescanned_from_just_after_its_first_bracket() -> None:
    # The outer "[" fails at "x" having yielded nothing: the array just inside it is the document.
    assert json_findings('[[{"id": 1}] x') == [{"id": 1}]
    # An object left open, a findings document as its value, then prose: the inner one counts.
    assert json_findings('{"a": {"findings": [{"id": 2}]} x') == [{"id": 2}]


def test_an_abandoned_document_that_yielded_findings_is_not_read_twice() -> None:
    # The array's one finding is complete when a stray "}" ends the document: rescanning it would
    # find the object inside that finding a second time.
    text = '[{"findings": [{"id": 1}]}}'
    assert json_findings(text) == [{"findings": [{"id": 1}]}]


def test_long_prose_after_an_abandoned_candidate_is_read_and_trimmed() -> None:
    extractor = JsonFindings()
    assert extractor.feed("[x " + "prose " * 1000) == []
    assert extractor.feed('[{"id": 1}]') == [{"id": 1}]
    assert len(extractor._text) < 4096 + 20  # the prose before the document was dropped


@pytest.mark.parametrize("extractor", [JsonFindings(), JsonLinesFindings(), RegexFindings(r"x")])
def test_a_closed_extractor_refuses_more_text(
    extractor: JsonFindings | JsonLinesFindings | RegexFindings,
) -> None:
    extractor.close()
    with pytest.raises(ValueError, match=r"^this extractor was closed; make a new one per answer$"):
        extractor.feed("x\n")


def test_the_regex_runs_once_every_1024_characters_without_a_newline() -> None:
    assert RegexFindings.RUN_EVERY_CHARS == 1024
    extractor = RegexFindings(r"ab")
    assert extractor.feed("ab" + "x" * 1021) == []  # 1023 characters: not yet
    assert extractor.feed("x") == ["ab"]  # the 1024th
    assert extractor.feed("ab" + "x" * 510) == []  # the count starts again
    assert extractor.feed("x" * 511) == []
    assert extractor.feed("x") == ["ab"]  # 1024 since the last run, over three reads


def test_after_a_newline_run_the_character_count_starts_from_zero() -> None:
    extractor = RegexFindings(r"[a-d]{2}")
    assert extractor.feed("ab\n") == ["ab"]
    assert extractor.feed("cd" + "x" * 1021) == []
    assert extractor.feed("x") == ["cd"]


def test_text_before_no_match_is_kept_for_a_match_that_spans_reads() -> None:
    extractor = RegexFindings(r"a\nb")
    assert extractor.feed("a\n") == []
    assert extractor.feed("b\n") == ["a\nb"]


def test_empty_matches_are_skipped_not_the_end_of_the_matches() -> None:
    assert regex_findings(r"\d*", "x12 y345", cut_off=False) == ["12", "345"]


def test_close_without_cut_off_keeps_a_match_at_the_end_of_the_text() -> None:
    extractor = RegexFindings(r"BUG: \w+")
    assert extractor.feed("BUG: leak") == []
    assert extractor.close() == ["BUG: leak"]


def test_each_extractor_name_gives_a_fresh_extractor_of_its_kind() -> None:
    assert type(as_extractor("json")) is JsonFindings
    assert type(as_extractor("jsonl")) is JsonLinesFindings
    assert as_extractor("json") is not as_extractor("json")
    pattern = re.compile(r"F\d+")
    regex = as_extractor(pattern)
    assert type(regex) is RegexFindings
    assert regex.feed("F1\nF2") == ["F1"]
    none = as_extractor(None)
    assert type(none) is NoFindings
    assert none.feed("[{}]") == []
    assert none.close(cut_off=True) == []
    assert none.findings == []


def test_a_reasoning_block_is_skipped_from_its_own_start() -> None:
    # A stray closing tag before the block is prose; the block's own closing tag ends it.
    assert json_findings('</think>\n<think>[{"a": 1}]</think>[{"b": 2}]') == [{"b": 2}]
    assert json_findings('<think>[{"a": 1}]</think>[{"b": 2}]') == [{"b": 2}]


@pytest.mark.parametrize("split", [1, 7, 8])
def test_a_closing_tag_split_across_chunks_after_a_long_block_ends_it(split: int) -> None:
    extractor = JsonFindings()
    end = '</think>[{"a": 1}]'
    assert extractor.feed("<think>" + "x" * 5000 + end[:split]) == []
    assert extractor.feed(end[split:]) == [{"a": 1}]


def test_a_fence_line_is_skipped_whole_whatever_it_holds() -> None:
    assert json_findings('```[{"a": 1}]\n[{"b": 2}]') == [{"b": 2}]
    assert json_findings('```{\n[{"a": 1}]') == [{"a": 1}]
    extractor = JsonFindings()
    assert extractor.feed("```" + "x" * 5000) == []  # a fence line longer than the trim window
    assert extractor.feed('\n[{"a": 1}]') == [{"a": 1}]


def test_jsonl_keeps_a_last_line_split_across_chunks() -> None:
    extractor = JsonLinesFindings()
    assert extractor.feed('{"a":') == []
    assert extractor.feed(" 1}") == []
    assert extractor.close() == [{"a": 1}]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # A closing tag inside a string of the object that follows the block's end.
        ('<think>\nx</think>{"a": "</think>"}\n', [{"a": "</think>"}]),
        ('<think>a</think>{"a": "</think>"}\n', [{"a": "</think>"}]),
        ('<think>a</think>{"a": "<think>"}\n', [{"a": "<think>"}]),
        ('<think>a</think>{"a": 1}\n', [{"a": 1}]),
        # An object that mentions the tag, after indentation, is an object, not a block's start.
        ('  {"a": "<think>"}\n{"b": 1}\n', [{"a": "<think>"}, {"b": 1}]),
        # A stray closing tag before a block does not end the block that opens after it.
        ('</think> <think>x\n{"in": "think"}\n</think>\n{"a": 1}\n', [{"a": 1}]),
    ],
)
def test_jsonl_reasoning_blocks_end_at_their_own_closing_tag(text: str, expected: list[object]) -> None:
    assert jsonl_findings(text) == expected


def test_a_bad_string_abandons_the_candidate_and_the_scan_goes_on() -> None:
    # "\x" is no JSON escape: the object is not a document, and the array after it is.
    assert json_findings('{"a": "\\x"} [{"b": 1}]') == [{"b": 1}]
    # A letter outside strings is not structure: the candidate ends there.
    assert json_findings('{"a": X [{"b": 1}]') == [{"b": 1}]


@pytest.mark.parametrize("chunk", [1, 97, 4096, 10_000])
def test_a_long_candidate_abandoned_after_trims_is_rescanned_from_its_start(chunk: int) -> None:
    # An object document too long to keep whole fails at "oops" having yielded nothing: the
    # scan goes back to just after its "{" and finds the array inside it.
    text = '{"pad": "' + "x" * 5000 + '", "z": [{"findings": [{"id": 1}]}] oops'
    extractor = JsonFindings()
    for start in range(0, len(text), chunk):
        extractor.feed(text[start : start + chunk])
    assert extractor.findings == [{"findings": [{"id": 1}]}]


@pytest.mark.parametrize("chunk", [1, 97, 4096])
def test_findings_and_strings_that_span_trims_are_read_whole(chunk: int) -> None:
    findings = [{"id": i, "text": "y" * 900 + '"}{[' * 3} for i in range(12)]
    text = '{"findings": [' + ", ".join(json.dumps(f) for f in findings) + "]}"
    extractor = JsonFindings()
    for start in range(0, len(text), chunk):
        extractor.feed(text[start : start + chunk])
    assert extractor.findings == findings


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('```json\nHere: [{"a": 1}]', [{"a": 1}]),  # prose after a fence line
        ('{"findings": [{"a": "\\x"}, {"b": 1}]}', [{"b": 1}]),  # a bad string inside a finding
        ('{"findings": [{"a": 1}], "\\x": 2} [{"b": 2}]', [{"a": 1}, {"b": 2}]),  # bad key, committed
        ('{"findings": [{"a": 1}], x} [{"b": 2}]', [{"a": 1}, {"b": 2}]),  # bad character, committed
        ('[{"a": 1}} [{"b": 2}]', [{"a": 1}, {"b": 2}]),  # a mismatched closer, committed
        ('{"findings": [{"a": 1}], "other": [{"c": 3}]}', [{"a": 1}]),  # after the findings array
        ('{"findings": [{"a": 1}], [{"b": 2}]}', [{"a": 1}]),  # an array with no key of its own
        ('{"x": {"findings": [{"a": 1}]}} x', []),  # a complete document is not rescanned
    ],
)
def test_what_follows_a_document_or_its_failure(text: str, expected: list[object]) -> None:
    assert json_findings(text) == expected


def test_a_finding_longer_than_the_trim_window_is_read_whole() -> None:
    finding = {"id": 1, "text": "y" * 10_000}
    text = '{"findings": [' + json.dumps(finding) + ', {"id": 2}]}'
    extractor = JsonFindings()
    for start in range(0, len(text), 97):
        extractor.feed(text[start : start + 97])
    assert extractor.findings == [finding, {"id": 2}]


def test_positions_stay_right_when_prose_before_a_document_is_trimmed() -> None:
    prose = "p" * 5000
    # A candidate that fails, begun in the same read as the prose: rescanned from its start.
    candidate = JsonFindings()
    candidate.feed(prose + '{"pad": "x", "z": [{"findings": [{"id": 1}]}')
    candidate.feed("] oops")
    assert candidate.findings == [{"findings": [{"id": 1}]}]
    # A key split across reads, begun in the same read as the prose: read whole.
    key = JsonFindings()
    assert key.feed(prose + '{"find') == []
    assert key.feed('ings": [{"a": 1}]}') == [{"a": 1}]


def test_a_long_finding_after_the_first_is_read_whole() -> None:
    finding = {"id": 1, "text": "y" * 10_000}
    text = '{"findings": [{"id": 0}, ' + json.dumps(finding) + "]}"
    extractor = JsonFindings()
    for start in range(0, len(text), 97):
        extractor.feed(text[start : start + 97])
    assert extractor.findings == [{"id": 0}, finding]


def test_a_key_split_across_reads_after_trimmed_prose_names_only_its_own_array() -> None:
    extractor = JsonFindings()
    assert extractor.feed("p" * 5000 + '{"find') == []
    assert extractor.feed('ings": [{"a": 1}], "x": [{"b": 2}]}') == [{"a": 1}]
