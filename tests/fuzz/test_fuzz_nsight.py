"""Fuzzing the Nsight Systems SQLite export reader (`read_capture`): random bytes, real captures of
each layout cut at a stride of offsets (every page boundary, and offsets inside pages), bytes
flipped in them, random mutations through SQL (a hostile value in a cell, rows deleted, a table
dropped, a column renamed), and the ``--interval-ms`` bound.

Each read ends in an `NsightCapture` or spark-otel's own `InputError` (or `NoGpuMetricsError`)
whose one-line message starts with the file's path, within the time bound. A capture's numbers
are finite, its times lie in 2000-2100 and its series' points within its window. A sample row
that does not fit is named by table and row in ``skipped`` and only that row is left out: the
capture reads exactly as the export with that row deleted.
"""

from __future__ import annotations

import contextlib
import math
import shutil
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import event, example, given, settings
from hypothesis import strategies as st
from tests.support.fuzzing import FUZZ, timed
from tests.support.nsight import GB10_METRICS, build_capture

from spark_otel import ConfigError, InputError
from spark_otel._validate import EARLIEST_NS, LATEST_NS
from spark_otel.receivers.nsight import MAX_INTERVAL_MS, NsightCapture, check_interval_ms, read_capture

LAYOUTS = ("generic", "plain", "raw")
KEPT = ("GR Active [Throughput %]", "SMs Active [Throughput %]", "SM Issue [Throughput %]")
KEPT += ("Tensor Active [Throughput %]", "GPC Clock Frequency [MHz]")  # Hz-scale values, rescaled
KEPT_IDS = [i for i, (name, _, _) in enumerate(GB10_METRICS) if name in KEPT]
SAMPLES = 1000  # 1 s at 1 kHz
# Every column without NOT NULL, as another tool (or a damaged export) may leave them; 5 metrics kept.
SAMPLE_TABLE = {"generic": "GENERIC_EVENTS", "plain": "GPU_METRICS", "raw": "GPU_METRICS"}
SAMPLE_COLUMNS = {
    "generic": ("rawTimestamp", "timestamp", "typeId", "data"),
    "plain": ("timestamp", "typeId", "metricId", "value"),
    "raw": ("rawTimestamp", "timestamp", "typeId", "metricId", "value"),
}
META_COLUMNS = {
    "TARGET_INFO_GPU_METRICS": ("typeId", "sourceId", "typeName", "metricId", "metricName"),
    "TARGET_INFO_GPU": ("vmId", "id", "name", "pwGpuId", "uuid"),
    "TARGET_INFO_SESSION_START_TIME": ("utcEpochNs", "utcTime"),
    "META_DATA_EXPORT": ("name", "value"),
}


def loosen(conn: sqlite3.Connection, table: str) -> None:
    columns = [row[1] for row in conn.execute(f"PRAGMA table_info({table})")]
    conn.executescript(
        f"CREATE TABLE loose ({', '.join(columns)}); INSERT INTO loose SELECT * FROM {table}; "
        f"DROP TABLE {table}; ALTER TABLE loose RENAME TO {table};"
    )


def build(path: Path, layout: str) -> None:
    build_capture(path, layout=layout, seconds=SAMPLES / 1000, hz=1000)
    with sqlite3.connect(path) as conn:
        if layout == "generic":
            keys = [n.split(" [")[0].replace("SMs Active", "SM Active") for n in KEPT]
            pairs = ", ".join(f"'{k}', json_extract(data, '$.\"{k}\"')" for k in keys)
            conn.execute(f"UPDATE GENERIC_EVENTS SET data = json_object({pairs})")
        else:
            ids = ", ".join(map(str, KEPT_IDS))
            conn.execute(f"DELETE FROM GPU_METRICS WHERE metricId NOT IN ({ids})")
            conn.execute(f"DELETE FROM TARGET_INFO_GPU_METRICS WHERE metricId NOT IN ({ids})")
        for table in (SAMPLE_TABLE[layout], *META_COLUMNS):
            if table != "TARGET_INFO_GPU_METRICS" or layout != "generic":
                loosen(conn, table)
    conn.execute("VACUUM")
    conn.close()


@pytest.fixture(scope="module")
def captures(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("fuzz-nsight-captures")
    out = {}
    for layout in LAYOUTS:
        out[layout] = folder / f"{layout}.sqlite"
        build(out[layout], layout)
    return out


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz-nsight")


# -- what every read must hold ------------------------------------------------------------------------
def read(path: Path, interval_ms: float = 100.0) -> NsightCapture | InputError:
    """`read_capture`'s capture, checked, or the `InputError` it raised, checked; anything else
    (another exception, a read past the time bound) fails the test."""
    try:
        capture = timed(lambda: read_capture(path, interval_ms=interval_ms), f"read_capture({path.name})")
    except InputError as exc:
        message = str(exc)
        assert message.startswith(f"{path}: "), message
        assert "\n" not in message, message
        return exc
    assert_sound(capture, path, interval_ms)
    return capture


def assert_sound(capture: NsightCapture, path: Path, interval_ms: float) -> None:
    summary = capture.summary
    for line in capture.skipped:
        assert line.startswith(f"{path}: "), line
        assert "\n" not in line, line
    assert EARLIEST_NS <= summary.start_unix_ns <= summary.end_unix_ns < LATEST_NS, summary
    assert math.isfinite(summary.duration_s), summary
    assert summary.duration_s >= 0, summary
    assert summary.metrics, summary
    interval_ns = max(1, round(interval_ms * 1_000_000))
    samples = {}
    for m in summary.metrics:
        figures = (m.mean, m.p50, m.p95, m.min, m.max)
        assert all(math.isfinite(f) for f in figures), m
        assert m.samples > 0, m
        assert m.min <= m.p50 <= m.p95 <= m.max or math.isclose(m.p50, m.p95), m
        assert m.min <= m.max, m
        samples[(m.gpu_id, m.metric)] = m.samples
    for key, points in capture.series.items():
        assert points, key
        where = f"series {key}"
        assert all(math.isfinite(p.value) and p.count > 0 for p in points), where
        times = [p.unix_ns for p in points]
        assert times == sorted(set(times)), where
        # A point is the start of the interval that holds its samples: after the capture's
        # first sample less one interval, and not after its last sample; never before 2000.
        assert max(EARLIEST_NS, summary.start_unix_ns - interval_ns) < times[0] or (
            times[0] == summary.start_unix_ns
        ), (where, times[0], summary.start_unix_ns)
        assert times[-1] <= summary.end_unix_ns, (where, times[-1], summary.end_unix_ns)
        assert sum(p.count for p in points) == samples.get(key), where


def figures(capture: NsightCapture) -> tuple[Any, ...]:
    """What a capture reads as, apart from the file's name and path."""
    s = capture.summary
    return (
        s.layout,
        s.session_start_unix_ns,
        s.start_unix_ns,
        s.end_unix_ns,
        [m.model_dump() for m in s.metrics],
        {k: [(p.unix_ns, pytest.approx(p.value), p.count) for p in v] for k, v in capture.series.items()},
        capture.gpu_names,
    )


# -- random bytes, truncation, bytes flipped --------------------------------------------------------
@FUZZ
@given(data=st.binary(max_size=5000), header=st.booleans())
@example(data=b"", header=False)
@example(data=b"\x00" * 4096, header=True)
def test_random_bytes_are_an_input_error_naming_the_file(workdir: Path, data: bytes, header: bool) -> None:
    path = workdir / "random.sqlite"
    path.write_bytes((b"SQLite format 3\x00" if header else b"") + data)
    assert isinstance(read(path), InputError)


def cuts(size: int, page: int) -> list[int]:
    """Every page boundary, and offsets inside each page (in the header, a cell, the last byte)."""
    inside = (1, 16, 28, 99, 100, 101, page // 2, page - 1)
    return sorted(
        {c for start in range(0, size, page) for c in (start, *(start + i for i in inside))} - {size}
    )


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_capture_cut_short_reads_whole_or_is_an_input_error(
    captures: dict[str, Path], workdir: Path, layout: str
) -> None:
    data = captures[layout].read_bytes()
    page = int.from_bytes(data[16:18], "big")
    full = read(captures[layout])
    assert isinstance(full, NsightCapture)
    path = workdir / f"cut-{layout}.sqlite"
    failures = []
    for cut in cuts(len(data), page):
        path.write_bytes(data[:cut])
        result = read(path)
        # Every page of the export holds the tables read, so a cut shows: no partial capture.
        if isinstance(result, NsightCapture) and figures(result) != figures(full):
            failures.append(f"cut at {cut}: a capture that is not the whole one")
    assert not failures, "\n".join(failures[:10])


@FUZZ
@given(
    layout=st.sampled_from(LAYOUTS),
    edits=st.lists(
        st.tuples(st.floats(0, 1, exclude_max=True), st.binary(min_size=1, max_size=4)), max_size=6
    ),
)
def test_bytes_flipped_in_a_capture_read_soundly_or_are_an_input_error(
    captures: dict[str, Path], workdir: Path, layout: str, edits: list[tuple[float, bytes]]
) -> None:
    data = bytearray(captures[layout].read_bytes())
    for where, payload in edits:
        at = int(where * len(data))
        for i, byte in enumerate(payload[: len(data) - at]):
            data[at + i] ^= byte
    path = workdir / f"flipped-{layout}.sqlite"
    path.write_bytes(bytes(data))
    read(path)


# -- random mutations through SQL ----------------------------------------------------------------------
HOSTILE_SQL = st.sampled_from(
    [
        "NULL",
        "'abc'",
        "''",
        "'12'",
        "' 7 '",
        "x'00ff'",
        "zeroblob(9)",
        "-1",
        "0",
        "1.5",
        "-2.5",
        "9223372036854775807",
        "-9223372036854775808",
        "99999999999999999999",  # past 2**63: SQLite reads it as a REAL
        "9e999",
        "-9e999",
        "(9e999 - 9e999)",  # NaN: SQLite stores NULL
        "1.7976931348623157e308",
        "-1.7976931348623157e308",
        "4611686018427387904",
        "1099511627776",
        "'NaN'",
        "'{}'",
        "'{\"SM Issue\": 1}'",
        "'[1, 2]'",
        "'{bad'",
        "'SM Issue [Throughput %]'",
        "'GR Active [Throughput %]'",
    ]
)
HOSTILE_JSON = st.sampled_from(
    [
        *("null", "true", '"high"', "[]", "{}", "1e999", "-1e999", "9223372036854775807"),
        *("18446744073709551616", "-5", "0.25", "1.7976931348623157e308", '"NaN"', "[1e999]"),
    ]
)


@dataclass(frozen=True)
class Mutation:
    sql: str
    params: tuple[Any, ...] = ()
    left_out: str | None = None
    """For one sample row's mutation: the SQL that leaves that row (or value) out of the original,
    which the capture must then read as, when `skipped` names the row."""
    table: str | None = None
    rowid: int | None = None


@st.composite
def value_sql(draw: st.DrawFn) -> tuple[str, tuple[Any, ...]]:
    """A hostile value as SQL, and its parameters."""
    kind = draw(st.sampled_from(["literal", "literal", "integer", "float"]))
    if kind == "integer":
        return "?", (draw(st.integers(-(2**63), 2**63 - 1)),)
    if kind == "float":
        return "?", (draw(st.floats()),)
    return draw(HOSTILE_SQL), ()


@st.composite
def mutations(draw: st.DrawFn, layout: str) -> list[Mutation]:
    out = []
    for _ in range(draw(st.sampled_from([1, 1, 1, 2]))):
        op = draw(st.sampled_from(["sample"] * 5 + ["meta", "meta", "delete", "drop", "rename"]))
        table = SAMPLE_TABLE[layout]
        rows = SAMPLES * (1 if layout == "generic" else len(KEPT))
        rowid = draw(st.integers(1, rows))
        if op == "sample":
            value, params = draw(value_sql())
            columns = (*SAMPLE_COLUMNS[layout], "rowid", *(["json", "json"] if layout == "generic" else []))
            column = draw(st.sampled_from(columns))
            where = f"WHERE rowid = {rowid}"
            if column == "json":
                key = draw(st.sampled_from(["GR Active", "SM Issue", "GPC Clock Frequency", "new"]))
                out.append(
                    Mutation(
                        f"UPDATE {table} SET data = json_set(data, '$.\"{key}\"', json(?)) {where}",
                        (draw(HOSTILE_JSON),),
                        f"UPDATE {table} SET data = json_remove(data, '$.\"{key}\"') {where}",
                        table,
                        rowid,
                    )
                )
            else:
                sql = f"UPDATE OR REPLACE {table} SET {column} = {value} {where}"
                out.append(Mutation(sql, params, f"DELETE FROM {table} {where}", table, rowid))
        elif op == "meta":
            meta = draw(
                st.sampled_from(sorted(META_COLUMNS) if layout != "generic" else sorted(META_COLUMNS)[1:])
            )
            value, params = draw(value_sql())
            column = draw(st.sampled_from(META_COLUMNS[meta]))
            out.append(
                Mutation(f"UPDATE {meta} SET {column} = {value} WHERE rowid = ?", (*params, rowid % 5 + 1))
            )
        elif op == "delete":
            every, at = draw(st.integers(1, 500)), draw(st.integers(0, 499))
            out.append(Mutation(f"DELETE FROM {table} WHERE rowid % {every} = {at % every}"))
        elif op == "drop":
            out.append(Mutation(f"DROP TABLE {draw(st.sampled_from(sorted(META_COLUMNS)))}"))
        else:
            meta = draw(st.sampled_from([table, *sorted(META_COLUMNS)]))
            column = draw(st.sampled_from(SAMPLE_COLUMNS[layout] if meta == table else META_COLUMNS[meta]))
            out.append(Mutation(f"ALTER TABLE {meta} RENAME COLUMN {column} TO {column}_"))
    return out


def copy_with(source: Path, path: Path, changes: list[Mutation], *, use_left_out: bool = False) -> None:
    shutil.copy(source, path)
    with sqlite3.connect(path) as conn:
        for change in changes:
            sql = change.left_out if use_left_out else change.sql
            if sql is not None:
                # a column renamed or a table dropped before: nothing to change
                with contextlib.suppress(sqlite3.Error):
                    conn.execute(sql, () if use_left_out else change.params)
    conn.close()


@st.composite
def layouts_and_mutations(draw: st.DrawFn) -> tuple[str, list[Mutation]]:
    layout = draw(st.sampled_from(LAYOUTS))
    return layout, draw(mutations(layout))


@FUZZ
@given(
    case=layouts_and_mutations(),
    interval_ms=st.sampled_from([100.0, 1.0, 0.0005, 5.0, 30.0, MAX_INTERVAL_MS]),
)
@example(  # the reader's chunks stepped through every 4096 rowids up to 2**62: a hang
    case=("plain", [Mutation("UPDATE GPU_METRICS SET rowid = 4611686018427387904 WHERE rowid = 7")]),
    interval_ms=100.0,
)
@example(  # 2**63 - 1 + 4096: OverflowError binding the last chunk's bound
    case=("raw", [Mutation("UPDATE GPU_METRICS SET rowid = 9223372036854775807 WHERE rowid = 7")]),
    interval_ms=100.0,
)
@example(  # a time in 2160 gave a bucket past the packed key's 2**39: read as a sample of metric id + 1
    case=(
        "plain",
        [
            Mutation(
                "UPDATE GPU_METRICS SET timestamp = 6000000000000000000 WHERE rowid = 9",
                (),
                "DELETE FROM GPU_METRICS WHERE rowid = 9",
                "GPU_METRICS",
                9,
            )
        ],
    ),
    interval_ms=5.0,
)
def test_a_mutated_capture_reads_soundly_and_a_bad_sample_row_is_only_left_out(
    captures: dict[str, Path], workdir: Path, case: tuple[str, list[Mutation]], interval_ms: float
) -> None:
    layout, changes = case
    path = workdir / f"mutated-{layout}.sqlite"
    copy_with(captures[layout], path, changes)
    result = read(path, interval_ms)
    event("an InputError" if isinstance(result, InputError) else f"a capture, {len(result.skipped)} skipped")
    if not isinstance(result, NsightCapture) or len(changes) != 1 or changes[0].left_out is None:
        return
    [change] = changes
    named = [
        line for line in result.skipped if line.startswith(f"{path}: {change.table} row {change.rowid}: ")
    ]
    reference = workdir / f"reference-{layout}.sqlite"
    event(f"one sample row changed: {'named and left out' if named else 'read'}")
    if named:
        copy_with(captures[layout], reference, changes, use_left_out=True)
        expected = read(reference, interval_ms)
        assert isinstance(expected, NsightCapture), expected
        assert figures(result) == figures(expected)
    else:  # the row was read: the series it was never part of are unchanged
        original = read(captures[layout], interval_ms)
        assert isinstance(original, NsightCapture)
        changed = [k for k in original.series if figures_of(original, k) != figures_of(result, k)]
        assert len(changed) <= 2 if layout != "generic" else len(changed) <= len(KEPT), changed


def figures_of(capture: NsightCapture, key: tuple[str, str]) -> list[tuple[int, Any, int]] | None:
    points = capture.series.get(key)
    return None if points is None else [(p.unix_ns, pytest.approx(p.value), p.count) for p in points]


@settings(FUZZ, max_examples=max(10, FUZZ.max_examples // 4))
@given(
    layout=st.sampled_from(LAYOUTS),
    intervals=st.integers(-3000, 3000),
    interval_ms=st.sampled_from([0.0005, 0.25, 1.0, 3.0, 100.0, 700.0]),
)
@example(layout="plain", intervals=-1, interval_ms=100.0)  # bucket 0 held -99..99 ms: SQLite's `/` truncates
def test_a_session_start_moved_by_whole_intervals_reads_the_same_series(
    captures: dict[str, Path], workdir: Path, layout: str, intervals: int, interval_ms: float
) -> None:
    """The samples' absolute times unchanged, the session start moved by whole intervals (so
    some session-relative times turn negative): every point and mean stays where it was."""
    shift = intervals * max(1, round(interval_ms * 1_000_000))
    path = workdir / f"shifted-{layout}.sqlite"
    table = SAMPLE_TABLE[layout]
    change = Mutation(
        f"UPDATE {table} SET timestamp = timestamp - {shift}; "
        f"UPDATE TARGET_INFO_SESSION_START_TIME SET utcEpochNs = utcEpochNs + {shift}"
    )
    shutil.copy(captures[layout], path)
    with sqlite3.connect(path) as conn:
        conn.executescript(change.sql)
    conn.close()
    before, after = read(captures[layout], interval_ms), read(path, interval_ms)
    assert isinstance(before, NsightCapture)
    assert isinstance(after, NsightCapture)
    assert figures(after)[2:] == figures(before)[2:]


# -- the interval bound --------------------------------------------------------------------------------
@FUZZ
@given(
    interval=st.floats()
    | st.integers(-(10**20), 10**20)
    | st.sampled_from(
        [True, False, None, "100", 5e-324, MAX_INTERVAL_MS, math.nextafter(MAX_INTERVAL_MS, 1e99)]
    )
)
def test_an_interval_is_a_float_in_its_bounds_or_a_config_error(interval: Any) -> None:
    good = (
        isinstance(interval, int | float)
        and not isinstance(interval, bool)
        and math.isfinite(interval)
        and 0 < interval <= MAX_INTERVAL_MS
    )
    if not good:
        with pytest.raises(ConfigError) as caught:
            check_interval_ms(interval)
        assert "\n" not in str(caught.value)
        assert repr(interval) in str(caught.value)
        return
    checked = check_interval_ms(interval)
    assert isinstance(checked, float)
    assert checked == interval


@settings(FUZZ, max_examples=max(10, FUZZ.max_examples // 4))
@given(layout=st.sampled_from(LAYOUTS), interval=st.floats(5e-324, MAX_INTERVAL_MS))
@example(layout="plain", interval=5e-324)
@example(layout="raw", interval=MAX_INTERVAL_MS)
def test_any_interval_in_bounds_reads_the_same_samples(
    captures: dict[str, Path], layout: str, interval: float
) -> None:
    capture = read(captures[layout], interval)
    assert isinstance(capture, NsightCapture)
    assert {m.samples for m in capture.summary.metrics} == {SAMPLES}
    assert capture.skipped == []
