"""Salvage: exactly the complete findings of any prefix of a findings document."""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_otel import ConfigError
from spark_otel.deadline.salvage import (
    CallableFindings,
    Extractor,
    JsonFindings,
    JsonLinesFindings,
    RegexFindings,
    as_extractor,
    json_findings,
    jsonl_findings,
    regex_findings,
)

# Strings built to confuse a naive scanner: structure characters, quotes, escapes, fences,
# tags and non-ASCII text.
_NASTY = st.sampled_from([*'{}[]",:\\/`<>\n\t', "</think>", "<think>", "```", '\\"', "✓", "é", "😀"])
nasty_text = st.lists(_NASTY | st.characters(exclude_categories=("Cs",)), max_size=10).map("".join)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**12), 10**12) | nasty_text,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(nasty_text, children, max_size=3),
    max_leaves=6,
)
findings_lists = st.lists(st.dictionaries(nasty_text, json_values, max_size=4), max_size=5)
# Prose a JSON document may follow: no brackets, no fence, no tag (those are tested by hand).
prose = st.text(st.characters(exclude_characters="[{`<", exclude_categories=("Cs",)), max_size=30)
think = nasty_text.filter(lambda s: "</think>" not in s).map(lambda s: f"<think>{s}</think>\n")


class Doc:
    """A document built piece by piece, remembering where each finding's closing brace ends."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.ends: list[int] = []
        self.size = 0

    def add(self, text: str) -> None:
        self.parts.append(text)
        self.size += len(text)

    def add_finding(self, text: str) -> None:
        self.add(text)
        self.ends.append(self.size)

    @property
    def text(self) -> str:
        return "".join(self.parts)


@st.composite
def json_documents(draw: st.DrawFn) -> tuple[str, list[dict[str, Any]], list[int]]:
    findings = draw(findings_lists)
    indent = draw(st.sampled_from([None, 2]))
    ascii_only = draw(st.booleans())
    doc = Doc()
    preamble = draw(st.sampled_from(["", "think", "prose", "think+prose"]))
    if "think" in preamble:
        doc.add(draw(think))
    if "prose" in preamble:
        doc.add(draw(prose))
    fenced = draw(st.booleans())
    if fenced:
        doc.add(draw(st.sampled_from(["```json\n", "```\n"])))
    form = draw(st.sampled_from(["array", "object"]))
    if form == "object":
        doc.add('{"summary": ' + json.dumps(draw(nasty_text), ensure_ascii=ascii_only) + ', "findings": [')
    else:
        doc.add("[")
    for i, finding in enumerate(findings):
        if i:
            doc.add(",\n  " if indent else ", ")
        doc.add_finding(json.dumps(finding, indent=indent, ensure_ascii=ascii_only))
    doc.add("]")
    if form == "object":
        doc.add(', "note": ' + json.dumps(draw(nasty_text), ensure_ascii=ascii_only) + "}")
    if fenced:
        doc.add("\n```\n")
    return doc.text, findings, doc.ends


@st.composite
def jsonl_documents(draw: st.DrawFn) -> tuple[str, list[dict[str, Any]], list[int]]:
    findings = draw(findings_lists)
    doc = Doc()
    if draw(st.booleans()):
        # A reasoning block whose lines look like findings but are not.
        doc.add(
            '<think>\n{"id": "not a finding"}\n' + draw(nasty_text).replace("</think>", "") + "\n</think>\n"
        )
    for finding in findings:
        if draw(st.booleans()):
            doc.add(draw(prose).replace("\n", " ").lstrip("{") + "\n")
        doc.add_finding(json.dumps(finding, ensure_ascii=draw(st.booleans())))
        doc.add("\n")
    return doc.text, findings, doc.ends


def _chunks(text: str, cuts: list[int]) -> list[str]:
    points = sorted({min(c, len(text)) for c in cuts} | {0, len(text)})
    return [text[a:b] for a, b in itertools.pairwise(points)]


def _salvages_exactly_the_complete_findings(
    document: tuple[str, list[dict[str, Any]], list[int]],
    data: st.DataObject,
    whole: Callable[[str], list[Any]],
    extractor: Extractor,
) -> list[Any]:
    """A random prefix of ``document``, salvaged whole and fed in random chunks: both give the
    findings complete within it, and what `feed` and `close` return adds up to them. Returns
    what `close` returned."""
    text, findings, ends = document
    cut = data.draw(st.integers(0, len(text)), label="cut")
    prefix = text[:cut]
    expected = [f for f, end in zip(findings, ends, strict=True) if end <= cut]

    assert whole(prefix) == expected

    fed: list[Any] = []
    for chunk in _chunks(
        prefix, data.draw(st.lists(st.integers(0, len(prefix)), max_size=8), label="splits")
    ):
        fed.extend(extractor.feed(chunk))
    closed = extractor.close()
    assert fed + closed == expected
    assert extractor.findings == expected
    return closed


@settings(max_examples=150, deadline=None)
@given(json_documents(), st.data())
def test_json_salvage_of_any_prefix_is_exactly_the_complete_findings(
    document: tuple[str, list[dict[str, Any]], list[int]], data: st.DataObject
) -> None:
    # A JSON finding completes with its closing brace, so feeding returns it and closing adds nothing.
    assert _salvages_exactly_the_complete_findings(document, data, json_findings, JsonFindings()) == []


@settings(max_examples=150, deadline=None)
@given(jsonl_documents(), st.data())
def test_jsonl_salvage_of_any_prefix_is_exactly_the_complete_lines(
    document: tuple[str, list[dict[str, Any]], list[int]], data: st.DataObject
) -> None:
    _salvages_exactly_the_complete_findings(document, data, jsonl_findings, JsonLinesFindings())


def test_json_salvage_passes_over_prose_with_brackets_before_the_document() -> None:
    text = 'Looking at [the diff] and {x}, numbers [1, 2]:\n[{"a": 1}, {"b": "} ]"}, {"c": '
    assert json_findings(text) == [{"a": 1}, {"b": "} ]"}]


def test_json_salvage_keeps_findings_of_every_fenced_document() -> None:
    text = '```json\n[{"a": 1}]\n```\nand more:\n```json\n{"findings": [{"b": 2}, {"c": '
    assert json_findings(text) == [{"a": 1}, {"b": 2}]


def test_json_salvage_never_returns_a_partial_or_invalid_object() -> None:
    assert json_findings('[{"a": 1}, {"b": tru') == [{"a": 1}]
    assert json_findings('[{"a": tru}, {"b": 1}]') == [{"b": 1}]
    assert json_findings('[{"a": 1}, {"b": "open string }') == [{"a": 1}]


def test_json_salvage_ignores_non_objects_and_other_keys() -> None:
    assert json_findings('[1, "x", [{"nested": 1}], {"a": 1}]') == [{"a": 1}]
    assert json_findings('{"other": [{"a": 1}], "findings": [{"b": 2}]}') == [{"b": 2}]
    assert json_findings('{"issues": [{"b": 2}]}') == []
    assert json_findings('{"issues": [{"b": 2}]}', keys=["issues"]) == [{"b": 2}]


def test_json_salvage_treats_prose_inside_a_string_field_as_no_finding() -> None:
    text = '{"findings": [{"a": 1}, {"analysis": "the bug is {\\"x\\": [1]} because'
    assert json_findings(text) == [{"a": 1}]


def test_json_salvage_waits_for_an_escape_split_across_chunks() -> None:
    extractor = JsonFindings()
    assert extractor.feed('[{"a": "x\\') == []
    assert extractor.feed('"}"}, {"b": 1}]') == [{"a": 'x"}'}, {"b": 1}]


def test_json_salvage_of_a_long_stream_keeps_only_a_bounded_window() -> None:
    finding = {"id": 1, "title": "x" * 100}
    extractor = JsonFindings()
    extractor.feed('{"findings": [')
    for i in range(2000):
        extractor.feed(json.dumps({**finding, "id": i}) + ", ")
    assert len(extractor.findings) == 2000
    assert len(extractor._text) < 10_000  # consumed text is dropped, so the work stays linear


def test_regex_salvage_drops_a_match_that_may_be_cut_off() -> None:
    pattern = r"BUG (?P<file>\S+): (?P<what>[^\n]+)\n"
    assert regex_findings(pattern, "BUG a.py: leak\nBUG b.py: ra") == [{"file": "a.py", "what": "leak"}]
    assert regex_findings(re.compile(r"BUG \S+"), "BUG a.py ok BUG b.p") == ["BUG a.py"]
    assert regex_findings(re.compile(r"BUG \S+"), "BUG a.py ok BUG b.py\n") == ["BUG a.py", "BUG b.py"]
    assert regex_findings(re.compile(r"BUG \S+"), "BUG a.py ok BUG b.py", cut_off=False) == [
        "BUG a.py",
        "BUG b.py",
    ]


@pytest.mark.parametrize(("cut_off", "last"), [(True, []), (False, ["F3"])])
def test_regex_salvage_fed_in_chunks_matches_the_whole_text(cut_off: bool, last: list[str]) -> None:
    # "F3" at the end may be the start of "F34": kept only if the text was not cut off.
    extractor = RegexFindings(r"F\d+")
    fed: list[Any] = []
    for chunk in ["F1\nF", "2", "\nF3"]:
        fed.extend(extractor.feed(chunk))
    assert fed == extractor.findings == ["F1", "F2"]
    assert extractor.close(cut_off=cut_off) == last
    assert extractor.findings == ["F1", "F2", *last]
    assert regex_findings(r"F\d+", "F1\nF2\nF3", cut_off=cut_off) == extractor.findings


def test_a_plain_callable_runs_once_on_the_whole_text() -> None:
    calls: list[str] = []

    def count_words(text: str) -> list[str]:
        calls.append(text)
        return text.split()

    extractor = as_extractor(count_words)
    assert isinstance(extractor, CallableFindings)
    extractor.feed("a b")
    extractor.feed(" c")
    assert extractor.close() == ["a", "b", "c"]
    assert calls == ["a b c"]


def test_unknown_extractor_names_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="unknown extractor 'yaml'"):
        as_extractor("yaml")
    with pytest.raises(ConfigError, match="neither"):
        as_extractor(42)  # type: ignore[arg-type]
