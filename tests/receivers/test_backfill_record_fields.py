"""One record to one cell (`cell_from_record`): the whole message for each field that does not fit,
and the edges where a value is just accepted.

Each refusal names the field's meaning, its path and the value (cut to 40 characters), so a
person fixes the record or the mapping from the message alone; the cases here pin whole messages
over small hand-made records. The accepted edges are where an off-by-one would silently move or
drop cells: a zero elapsed time, 2000-01-01 itself, the unit boundaries of Unix times, a count of
2**53 - 1, first-token and decode time exactly at the elapsed time's slack.
"""

from __future__ import annotations

from typing import Any

import pytest

from spark_otel._validate import EARLIEST_NS
from spark_otel.model import Cell, CellStatus
from spark_otel.receivers.backfill import FieldMapping, cell_from_record

MAPPING = FieldMapping(
    name="m",
    cell_id="id",
    prompt_tokens="p",
    completion_tokens="n",
    elapsed="el",
    start="start",
    end="end",
    status="status",
    timeout_flag="timeout",
    deadline_s="ceiling",
    workers="w",
    first_token="ft",
    decode="dec",
    queue_wait="qw",
)
START = "2026-09-17T10:00:00Z"
START_NS = 1_789_639_200 * 10**9  # 2026-09-17T10:00:00Z
S = 10**9


def _cell(record: dict[str, Any], mapping: FieldMapping = MAPPING, **kwargs: Any) -> Cell:
    return cell_from_record(
        {"id": "c", **record},
        mapping,
        uid="0123456789abcdef",
        eval_name=kwargs.pop("eval_name", "ev"),
        **kwargs,
    )


def _refusal(record: dict[str, Any], mapping: FieldMapping = MAPPING, **kwargs: Any) -> str:
    with pytest.raises(ValueError) as caught:  # noqa: PT011 - the whole message is compared
        _cell(record, mapping, **kwargs)
    return str(caught.value)


@pytest.mark.parametrize(
    ("record", "message"),
    [
        ({"p": 1.5}, "prompt tokens (p) is 1.5, not a whole number"),
        ({"n": 2**53}, "completion tokens (n) is 9007199254740992; expected a whole number from 0 to 2**53"),
        ({"n": 10**400}, f"completion tokens (n) is 1{'0' * 36}..., too large for a number"),
        ({"p": "x" * 38}, f"prompt tokens (p) is '{'x' * 38}', not a number"),  # a repr of 40: whole
        ({"p": "x" * 39}, f"prompt tokens (p) is '{'x' * 36}..., not a number"),  # 41: cut to 37 and '...'
        ({"el": True}, "elapsed (el) is a boolean, not a number"),
        ({"el": {"a": 1}}, "elapsed (el) is {'a': 1}, not a number"),
        ({"el": [1]}, "elapsed (el) is [1], not a number"),
        ({"el": 1e10}, "elapsed (el) is 1e+10 s, more than a century; is elapsed_unit right?"),
        ({"dec": -1}, "decode time (dec) is -1; expected a finite, non-negative number"),
        ({"qw": -1}, "queue wait (qw) is -1; expected a finite, non-negative number"),
        ({"ceiling": "soon"}, "deadline (ceiling) is 'soon', not a number"),
        ({"w": 1.5}, "workers (w) is 1.5, not a whole number"),
        (
            {"status": "exploded"},
            "status 'exploded' at 'status' is not one this mapping knows (add it to status_values)",
        ),
        ({"start": "yesterday"}, "start (start) is 'yesterday', neither ISO 8601 nor a Unix time"),
        ({"start": "-5"}, "start (start) is -5.0; expected a finite, non-negative number"),
        (
            {"start": "1999-12-31T23:59:59Z"},
            "start (start) '1999-12-31T23:59:59Z' reads as the year 1999, outside 2000-2100; "
            "expected ISO 8601 or Unix seconds, ms, µs or ns",
        ),
        (
            {"end": "2100-01-01T00:00:00Z"},
            "end (end) '2100-01-01T00:00:00Z' reads as the year 2100, outside 2000-2100; "
            "expected ISO 8601 or Unix seconds, ms, µs or ns",
        ),
        (
            {"start": "2099-12-31T12:00:00Z", "el": 86_400},
            "the end (start plus elapsed) reads as the year 2100, outside 2000-2100; is elapsed_unit right?",
        ),
        (
            # the longest elapsed time the century allows, from its first moment: ends on 2100-01-01
            {"start": "2000-01-01T00:00:00Z", "el": 3_155_760_000.0},
            "the end (start plus elapsed) reads as the year 2100, outside 2000-2100; is elapsed_unit right?",
        ),
        (
            {"start": None, "end": "2000-01-01T00:00:10Z", "el": 20},
            "the start (end minus elapsed) reads as the year 1999, outside 2000-2100; is elapsed_unit right?",
        ),
        (
            {"start": "2026-09-17T10:00:01.5Z", "end": START, "el": None},
            "ends before it starts (-1.500 s)",
        ),
        (
            {"start": None},
            "cannot place the cell in time: need start and end, or one of them and elapsed",
        ),
    ],
)
def test_a_field_that_does_not_fit_is_named_with_its_value(record: dict[str, Any], message: str) -> None:
    assert _refusal({"start": START, "el": 100, **record}) == message


@pytest.mark.parametrize(
    "unix",
    [
        "100000000000",  # 1e11: read as ms
        "100000000000000",  # 1e14: read as µs
        "100000000000000000",  # 1e17: read as ns
    ],
)
def test_a_unix_time_at_a_unit_boundary_is_read_in_the_larger_unit(unix: str) -> None:
    """Each boundary is 1e17 ns in its own unit: 1973-03-03, named in the refusal (read in the
    unit below, it would be 1e20 ns, the year 5138)."""
    assert _refusal({"start": unix}) == (
        f"start (start) '{unix}' reads as the year 1973, outside 2000-2100; "
        "expected ISO 8601 or Unix seconds, ms, µs or ns"
    )


def test_without_a_place_in_time_the_message_says_when_elapsed_is_what_is_missing() -> None:
    """A record with only a start (or only an end) and no elapsed time cannot be placed, even in a
    single-record file whose mtime is known: the mtime is used only when neither time is there."""
    mtime = START_NS + 3600 * S
    missing = (
        "cannot place the cell in time: need start and end, or one of them and elapsed "
        "(elapsed at 'el' is missing)"
    )
    assert _refusal({"start": START}, file_mtime_ns=mtime) == missing
    assert _refusal({"end": START}, file_mtime_ns=mtime) == missing
    without_elapsed = MAPPING.model_copy(update={"elapsed": None})
    assert _refusal({}, without_elapsed, file_mtime_ns=mtime) == (
        "cannot place the cell in time: need start and end, or one of them and elapsed"
    )


def test_the_mtime_minus_elapsed_must_land_in_the_century() -> None:
    assert _refusal({"el": 10}, file_mtime_ns=EARLIEST_NS + 5 * S) == (
        "the start (the file's mtime minus elapsed) reads as the year 1999, outside 2000-2100; "
        "is elapsed_unit right?"
    )


def test_a_record_with_its_own_times_is_never_moved_to_the_files_mtime() -> None:
    cell = _cell(
        {"start": START, "end": "2026-09-17T10:01:40Z", "el": 100}, file_mtime_ns=START_NS + 3600 * S
    )
    assert (cell.start_unix_ns, cell.end_unix_ns) == (START_NS, START_NS + 100 * S)


def test_a_single_record_is_placed_by_the_mtime_without_saying_how_many_records_the_file_has() -> None:
    cell = _cell({"el": 100}, file_mtime_ns=START_NS)
    assert (cell.start_unix_ns, cell.end_unix_ns) == (START_NS - 100 * S, START_NS)


def test_no_eval_name_is_named_with_the_path_looked_at() -> None:
    assert _refusal({"start": START, "el": 1}, eval_name=None) == "no eval name at None; give --eval NAME"
    with_eval = MAPPING.model_copy(update={"eval_name": "eval"})
    assert _refusal({"start": START, "el": 1}, with_eval, eval_name=None) == (
        "no eval name at 'eval'; give --eval NAME"
    )
    # a record without the field takes the --eval name
    assert _cell({"start": START, "el": 1}, with_eval, eval_name="fallback").eval_name == "fallback"
    assert _cell({"start": START, "el": 1, "eval": "own"}, with_eval, eval_name="fallback").eval_name == "own"


@pytest.mark.parametrize(
    ("record", "start_ns", "end_ns"),
    [
        ({"start": "2000-01-01T00:00:00Z", "el": 0}, EARLIEST_NS, EARLIEST_NS),  # the century's first moment
        ({"start": START, "el": 0.5}, START_NS, START_NS + S // 2),
        ({"start": START, "el": "1,000"}, START_NS, START_NS + 1000 * S),  # thousands separators
        ({"start": "2026-09-17Z", "el": 1}, START_NS - 10 * 3600 * S, START_NS - 10 * 3600 * S + S),
    ],
)
def test_edges_that_are_accepted(record: dict[str, Any], start_ns: int, end_ns: int) -> None:
    cell = _cell(record)
    assert (cell.start_unix_ns, cell.end_unix_ns) == (start_ns, end_ns)


@pytest.mark.usefixtures("india_local_time")
def test_a_naive_iso_time_is_utc_whatever_the_machines_zone() -> None:
    assert _cell({"start": "2026-09-17T10:00:00", "el": 1}).start_unix_ns == START_NS


@pytest.mark.parametrize(("unit", "elapsed", "seconds"), [("ns", 1.5e9, 1.5), ("ms", 86_400_000, 86_400)])
def test_elapsed_in_each_unit(unit: str, elapsed: float, seconds: float) -> None:
    cell = _cell({"start": START, "el": elapsed}, MAPPING.model_copy(update={"elapsed_unit": unit}))
    assert cell.end_unix_ns - cell.start_unix_ns == seconds * S


def test_counts_up_to_just_below_2_to_the_53_and_zero_are_kept() -> None:
    cell = _cell({"start": START, "el": 1, "p": 0, "n": 2**53 - 1, "w": "3"})
    assert (cell.prompt_tokens, cell.completion_tokens, cell.workers) == (0, 2**53 - 1, 3)


@pytest.mark.parametrize(
    ("first_token", "decode"),
    [
        (1.0015, None),  # inside the slack: 1 s * 1.001 + 0.001 s
        (1.0019999999999998, None),  # exactly at it, as floats compute it
        (None, 1.0),
        (1.0, None),
        (0.5, 0.5),
    ],
)
def test_first_token_and_decode_time_up_to_the_elapsed_time_and_its_slack(
    first_token: float | None, decode: float | None
) -> None:
    cell = _cell({"start": START, "el": 1, "ft": first_token, "dec": decode})
    assert (cell.first_token_s, cell.decode_s) == (first_token, decode)


@pytest.mark.parametrize(
    ("flag", "status"),
    [
        *(
            (value, CellStatus.DEADLINE)
            for value in ("1", "true", " TRUE ", "yes", "Y", "y", "t", "T", True, 1)
        ),
        *((value, CellStatus.OK) for value in ("0", "false", "no", "n", "f", False, 0)),
    ],
)
def test_a_timeout_flag_in_any_spelling(flag: object, status: CellStatus) -> None:
    cell = _cell({"start": START, "el": 1, "timeout": flag})
    assert (cell.status, cell.deadline_hit) == (status, status is CellStatus.DEADLINE)


def test_an_ok_cell_carries_only_the_mappings_name_and_a_numeric_ceiling_applies_to_every_cell() -> None:
    mapping = MAPPING.model_copy(update={"deadline_s": 1800})
    cell = _cell({"start": START, "el": 1, "status": "done"}, mapping)
    assert cell.attributes == {"spark_otel.backfill.mapping": "m"}
    assert (cell.status, cell.deadline_s) == (CellStatus.OK, 1800.0)


def test_statuses_are_the_mappings_own_when_the_caller_gives_none() -> None:
    mapping = MAPPING.model_copy(update={"status_values": {"wall": CellStatus.DEADLINE}})
    assert _cell({"start": START, "el": 1, "status": " Wall "}, mapping).status is CellStatus.DEADLINE
    assert _cell({"start": START, "el": 1, "status": "timeout"}, mapping).status is CellStatus.DEADLINE


@pytest.mark.parametrize(
    ("record", "cell_id"),
    [
        ({"samples": [{"id": "s0"}, {"id": "s1"}]}, "s1"),
        ({"samples": [{"id": "s0"}, {"id": "s1"}], "id": "fallback"}, "s1"),
        ({"samples": [{"id": "s0"}, {"id": "s1", "k": 1}], "name": "abc"}, "s1"),
    ],
)
def test_a_path_indexes_a_list_by_position(record: dict[str, Any], cell_id: str) -> None:
    mapping = MAPPING.model_copy(update={"cell_id": "samples.1.id"})
    assert _cell({"start": START, "el": 1, **record}, mapping).cell_id == cell_id


@pytest.mark.parametrize(
    ("path", "record"),
    [
        ("samples.2.id", {"samples": [{"id": "s0"}, {"id": "s1"}]}),  # one past the end
        ("name.1", {"name": "abc"}),  # text is not indexed
        ("obj.0", {"obj": {"a": 1}}),  # an object has no positions
        ("samples.١", {"samples": ["s0", "s1"]}),  # a digit, but not an ASCII one
    ],
)
def test_a_path_that_does_not_index_finds_nothing(path: str, record: dict[str, Any]) -> None:
    mapping = MAPPING.model_copy(update={"cell_id": path})
    assert _refusal({"start": START, "el": 1, **record}, mapping) == f"no cell id at {path!r}"
