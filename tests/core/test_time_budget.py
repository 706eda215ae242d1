"""The time budget's split of a cell's elapsed time, on plain stamps: each instant in one phase
(decode over first_token over unsplit over other), so the parts add up to elapsed exactly."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from spark_otel.time_budget import IN_CELL_PHASES, PHASES, RequestStamps, split_elapsed

S = 1_000_000_000


def test_one_stream_then_runner_work_then_a_call_that_is_not_streamed() -> None:
    stamps = [
        RequestStamps(start_ns=1 * S, first_ns=3 * S, end_ns=10 * S, streaming=True),
        RequestStamps(start_ns=12 * S, first_ns=0, end_ns=15 * S, streaming=False),
    ]
    assert split_elapsed(stamps, 0, 20 * S) == {
        "first_token": 2.0,
        "decode": 7.0,
        "unsplit": 3.0,
        "other": 8.0,
    }


def test_overlapping_requests_count_each_instant_once_decode_first() -> None:
    """Two streams of one cell in parallel: while one decodes and the other waits for its first
    token, the cell is decoding."""
    stamps = [
        RequestStamps(0, 2 * S, 6 * S, True),
        RequestStamps(1 * S, 5 * S, 8 * S, True),
        RequestStamps(7 * S, 0, 9 * S, False),
    ]
    assert split_elapsed(stamps, 0, 10 * S) == {
        "first_token": 2.0,
        "decode": 6.0,
        "unsplit": 1.0,
        "other": 1.0,
    }


def test_a_stream_without_a_first_chunk_waited_all_its_time_and_requests_are_clipped_to_the_cell() -> None:
    stamps = [
        RequestStamps(-5 * S, 0, 4 * S, True),  # began before the cell (clipped), never streamed
        RequestStamps(8 * S, 9 * S, 30 * S, True),  # ends after the cell
        RequestStamps(40 * S, 41 * S, 50 * S, True),  # wholly outside
    ]
    assert split_elapsed(stamps, 0, 10 * S, scale=2.0) == {
        "first_token": 10.0, "decode": 2.0, "unsplit": 0.0, "other": 8.0,
    }  # fmt: skip


def test_the_phases_are_named_in_the_order_a_cell_lives_them() -> None:
    assert PHASES == ("admission", "first_token", "decode", "unsplit", "other")
    assert PHASES[1:] == IN_CELL_PHASES


@st.composite
def _requests(draw: st.DrawFn) -> list[RequestStamps]:
    out = []
    for _ in range(draw(st.integers(0, 6))):
        start = draw(st.integers(-50, 150))
        end = draw(st.integers(start, 200))
        streaming = draw(st.booleans())
        first = draw(st.integers(start, end)) if streaming and draw(st.booleans()) else 0
        out.append(RequestStamps(start * S // 10, first * S // 10, end * S // 10, streaming))
    return out


@given(_requests(), st.integers(0, 100))
def test_the_parts_add_up_to_elapsed_and_none_exceeds_the_time_requests_cover(
    requests: list[RequestStamps], length: int
) -> None:
    total_ns = length * S // 10
    parts = split_elapsed(requests, 0, total_ns)
    assert set(parts) == set(IN_CELL_PHASES)
    assert all(v >= 0 for v in parts.values())
    assert sum(parts.values()) == pytest.approx(total_ns / S, abs=1e-9)
    covered = set()
    for r in requests:
        covered |= set(range(max(0, r.start_ns // (S // 10)), min(length, r.end_ns // (S // 10))))
    assert parts["first_token"] + parts["decode"] + parts["unsplit"] == pytest.approx(
        len(covered) / 10, abs=1e-9
    )


def test_a_call_not_streamed_ends_its_unsplit_time_when_it_ends() -> None:
    """Runner work between a call and a later stream is ``other``, not the call's."""
    stamps = [
        RequestStamps(start_ns=1 * S, first_ns=0, end_ns=3 * S, streaming=False),
        RequestStamps(start_ns=5 * S, first_ns=6 * S, end_ns=8 * S, streaming=True),
    ]
    assert split_elapsed(stamps, 0, 10 * S) == {
        "first_token": 1.0,
        "decode": 2.0,
        "unsplit": 2.0,
        "other": 5.0,
    }


def test_a_cell_that_does_not_start_at_zero_has_its_own_elapsed_time() -> None:
    stamps = [RequestStamps(start_ns=101 * S, first_ns=102 * S, end_ns=104 * S, streaming=True)]
    assert split_elapsed(stamps, 100 * S, 105 * S) == {
        "first_token": 1.0,
        "decode": 2.0,
        "unsplit": 0.0,
        "other": 2.0,
    }


def test_a_cell_of_no_time_has_no_time_in_any_phase() -> None:
    assert split_elapsed([], 7 * S, 7 * S) == dict.fromkeys(IN_CELL_PHASES, 0.0)
    assert split_elapsed([], 7 * S, 6 * S) == dict.fromkeys(IN_CELL_PHASES, 0.0)
