"""Where one JSON candidate ends and the next begins: a mismatched closer abandons the candidate,
and a document that ends is followed at once by the next, even with nothing between them."""

from __future__ import annotations

import pytest

from spark_otel.deadline.salvage import JsonFindings, json_findings


def test_a_mismatched_closer_abandons_the_candidate_and_the_next_document_is_read() -> None:
    # "]" closes the "{" of the first finding: not JSON. Read on as if it were, the second array
    # would sit inside the first and its object would be no finding.
    assert json_findings('[{"a": 1]\n[{"b": 2}]') == [{"b": 2}]
    # A document that yielded a finding ends at the mismatch, keeping it; the next is read.
    assert json_findings('{"findings": [{"a": 1}}\n{"findings": [{"b": 2}]}') == [{"a": 1}, {"b": 2}]


@pytest.mark.parametrize(
    ("text", "findings"),
    [
        ('[][{"id": 1}]', [{"id": 1}]),
        ('{"findings": []}{"findings": [{"id": 2}]}', [{"id": 2}]),
        ('[{"id": 1}][{"id": 2}]', [{"id": 1}, {"id": 2}]),
    ],
)
def test_a_document_right_after_one_that_ended_is_read(text: str, findings: list[object]) -> None:
    extractor = JsonFindings()
    assert extractor.feed(text) == findings
    assert extractor.findings == findings


def test_a_findings_array_inside_a_reasoning_block_is_never_read() -> None:
    # Right before "</think>", and reached again when prose after the block abandons a candidate.
    assert json_findings('<think>maybe [{}]</think>Here: [{"id": 1}]') == [{"id": 1}]


def test_prose_after_a_fence_line_is_passed_over_once_an_earlier_candidate_was_abandoned() -> None:
    # The "[the diff]" candidate fails at "t"; after the fence line the prose is a new search, not
    # a rescan from just after that first bracket (which would find the fence again, and again).
    assert json_findings('see [the diff]\n```\nprose [{"id": 1}]') == [{"id": 1}]
