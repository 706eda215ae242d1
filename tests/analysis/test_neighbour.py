"""Neighbour cost: the article's Act 4 table and Appendix D, and the sweep behind them."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.support.article import (
    APPENDIX_D,
    D_BASELINE,
    D_BASELINE_N,
    D_EVAL,
    S,
    appendix_d_cells,
    appendix_d_loads,
)

from spark_otel import ConfigError, InputError
from spark_otel import _semconv as sc
from spark_otel.analysis import (
    WindowCost,
    neighbour_cost,
    neighbour_costs,
    overlapping_pairs,
    peak_concurrency,
    windows_from_cells,
)
from spark_otel.model import Cell, CellStatus, LoadWindow

NEMOTRON = "nemotron-cards eval, 4 workers on nemotron"
AB_ONE = "qwen-ab eval, 1 worker on qwen"
AB_FOUR = "qwen-ab eval, 4 workers on qwen"


def _cell(
    uid: str, start_s: int, end_s: int, *, eval_name: str = "e", engine: str | None = "q", **fields: Any
) -> Cell:
    """A cell from ``start_s`` to ``end_s`` seconds; its id is its uid unless ``cell_id`` says."""
    fields.setdefault("cell_id", uid)
    return Cell(
        uid=uid,
        eval_name=eval_name,
        engine=engine,
        start_unix_ns=start_s * S,
        end_unix_ns=end_s * S,
        **fields,
    )


@pytest.fixture(scope="module")
def article_report():
    probes, others = appendix_d_loads()
    return neighbour_cost(D_EVAL, appendix_d_cells() + others, probes)


def test_baseline_is_the_cells_overlapping_no_other_load(article_report) -> None:
    b = article_report.baseline
    median, p10, p90 = D_BASELINE
    assert b.n == D_BASELINE_N
    assert b.median == pytest.approx(median, abs=1e-6)
    assert b.p10 == pytest.approx(p10, abs=1e-6)
    assert b.p90 == pytest.approx(p90, abs=1e-6)


def test_nemotron_window_costs_the_serial_eval_54_percent(article_report) -> None:
    w = article_report.window(NEMOTRON)
    assert w.kind == "eval"
    assert w.engine == "nemotron"
    assert w.same_engine is False
    assert w.streams == 4
    # Four serial cells inside the window: one rate (5.25 tok/s) and three timeouts.
    assert (w.n_cells, w.timeouts, w.rate.n) == (4, 3, 1)
    assert w.rate.median == pytest.approx(5.25, abs=1e-6)
    assert w.cost == pytest.approx(1 - 5.25 / 11.51, abs=1e-6)
    assert f"{w.cost:.0%}" == "54%"


def test_one_more_qwen_stream_costs_five_percent(article_report) -> None:
    w = article_report.window(AB_ONE)
    assert w.same_engine is True
    assert w.rate.n == 1
    assert w.rate.median == pytest.approx(10.97, abs=1e-6)
    assert f"{w.cost:.0%}" == "5%"


def test_four_more_qwen_streams_span_the_article_range(article_report) -> None:
    w = article_report.window(AB_FOUR)
    # "10.0 to 10.9": the five attributed cells' rates. Their median (10.14) reads 12%; the
    # article's 9% is the token-weighted rate of the four cells wholly inside the arm.
    assert w.rate.n == 5
    assert w.min_rate == pytest.approx(10.01, abs=1e-6)
    assert w.max_rate == pytest.approx(10.92, abs=1e-6)
    assert w.rate.median == pytest.approx(10.14, abs=1e-6)
    rows = {c.cell_id: c for c in article_report.cells}
    inside = [rows[f"F #11 {n}"] for n in ("tests run2", "tests run3", "quality run1", "quality run2")]
    weighted = sum(c.completion_tokens for c in inside) / sum(c.elapsed_s for c in inside)
    assert f"{1 - weighted / 11.51:.0%}" == "9%"


def test_cells_list_their_windows_and_timeouts_stay_out_of_rates(article_report) -> None:
    rows = {c.cell_id: c for c in article_report.cells}
    for name, _, _, tokens, rate, _ in APPENDIX_D:
        row = rows[name]
        if tokens is None:
            assert row.timed_out
            assert row.decode_rate is None
        else:
            assert row.decode_rate == pytest.approx(rate, abs=1e-6)
        assert not row.baseline
    assert rows["B #454 security run2"].windows == (NEMOTRON,)
    # 09:42-09:48 brushes the 1-worker arm for one minute of six (< 25%): only the 4-worker arm.
    assert rows["F #11 tests run1"].windows == (AB_FOUR,)
    assert set(rows["F #11 tests run1"].overlapped) == {AB_ONE, AB_FOUR}
    assert rows["B #454 tests run2"].windows == ("probe, 1 to 8 streams",)
    assert article_report.timeouts == 3
    assert article_report.baseline_timeouts == 0


def test_a_cell_that_only_brushes_a_window_is_neither_baseline_nor_attributed() -> None:
    cells = [_cell("a", 0, 100, completion_tokens=1000), _cell("b", 200, 300, completion_tokens=500)]
    window = LoadWindow(uid="w", name="w", kind="load", engine="q", start_unix_ns=90 * S, end_unix_ns=250 * S)
    strict = neighbour_cost("e", cells, [window], min_overlap_fraction=0.25)
    assert strict.window("w").n_cells == 1  # b: 50 of 100 s inside; a: 10 of 100 s
    assert strict.baseline.n == 0
    assert strict.window("w").cost is None
    loose = neighbour_cost("e", cells, [window], min_overlap_fraction=0.05)
    assert loose.window("w").n_cells == 2
    assert loose.window("w").rate.median == pytest.approx(7.5)


def test_cost_is_one_minus_window_median_over_baseline_median() -> None:
    def c(uid: str, start: int, tokens: int) -> Cell:
        return _cell(uid, start, start + 100, completion_tokens=tokens)

    cells = [c("b1", 0, 1000), c("b2", 200, 1200), c("b3", 400, 1100), c("l1", 1000, 800), c("l2", 1200, 600)]
    window = LoadWindow(
        uid="w",
        name="job",
        kind="load",
        engine="other",
        start_unix_ns=1000 * S,
        end_unix_ns=1300 * S,
        streams=2,
    )
    report = neighbour_cost("e", cells, [window])
    assert report.baseline.median == 11.0  # 10, 12, 11 tok/s
    w = report.window("job")
    assert w.rate.median == 7.0  # 8 and 6 tok/s
    assert w.cost == pytest.approx(1 - 7 / 11)
    assert w.same_engine is False


def test_recorded_windows_of_the_eval_itself_are_not_its_neighbours() -> None:
    cells = [_cell("a", 0, 100, completion_tokens=1000)]
    own = LoadWindow(uid="w", name="e", kind="eval", engine="q", start_unix_ns=0, end_unix_ns=100 * S)
    tagged = LoadWindow(
        uid="x",
        name="run",
        kind="load",
        engine="q",
        start_unix_ns=0,
        end_unix_ns=100 * S,
        attributes={sc.EVAL_NAME: "e"},
    )
    report = neighbour_cost("e", cells, [own, tagged])
    assert report.windows == []
    assert report.baseline.n == 1


def test_neighbour_cost_names_a_missing_eval_and_a_bad_fraction() -> None:
    cells = [Cell(uid="a", eval_name="e", cell_id="a", start_unix_ns=0, end_unix_ns=S)]
    with pytest.raises(InputError, match="no cells recorded for eval 'nope'"):
        neighbour_cost("nope", cells)
    with pytest.raises(ConfigError, match="min_overlap_fraction 2"):
        neighbour_cost("e", cells, min_overlap_fraction=2)


def test_windows_from_cells_merge_per_engine_and_worker_count_within_the_gap() -> None:
    def c(uid: str, start: int, end: int, workers: int | None, engine: str = "q") -> Cell:
        return _cell(uid, start, end, eval_name="other", engine=engine, workers=workers)

    cells = [
        c("a", 0, 100, 1),
        c("b", 130, 200, 1),  # 30 s apart: one window
        c("c", 400, 500, 1),  # 200 s later: a second window
        c("d", 0, 50, 4),
        c("e", 10, 60, 4),  # another worker count: its own window
        c("f", 0, 10, None, "n"),
        c("g", 5, 15, None, "n"),
        c("h", 6, 9, None, "n"),  # no workers: peak 3
    ]
    windows = windows_from_cells(cells, merge_gap_s=60)
    got = sorted(
        (w.engine, w.streams, w.start_unix_ns // S, w.end_unix_ns // S, w.attributes["cells"])
        for w in windows
    )
    assert got == [("n", 3, 0, 15, 3), ("q", 1, 0, 200, 2), ("q", 1, 400, 500, 1), ("q", 4, 0, 60, 2)]
    assert all(w.kind == "eval" and w.attributes[sc.EVAL_NAME] == "other" for w in windows)


def test_timeouts_inside_a_window_are_counted_but_not_rated() -> None:
    cells = [
        _cell("t", 0, 1800, status=CellStatus.DEADLINE, completion_tokens=9000),
        _cell("r", 1800, 2000, completion_tokens=1000),
    ]
    window = LoadWindow(uid="w", name="w", kind="load", start_unix_ns=0, end_unix_ns=2000 * S)
    w = neighbour_cost("e", cells, [window]).window("w")
    assert (w.n_cells, w.timeouts, w.rate.n) == (2, 1, 1)
    assert w.rate.median == 5.0


def _pairs_brute_force(left, right):
    return sorted(
        (i, j, min(e1, e2) - max(s1, s2))
        for i, (s1, e1) in enumerate(left)
        for j, (s2, e2) in enumerate(right)
        if e1 > s1 and e2 > s2 and min(e1, e2) > max(s1, s2)
    )


interval = st.tuples(st.integers(0, 60), st.integers(0, 20)).map(lambda t: (t[0], t[0] + t[1]))


@settings(max_examples=80, deadline=None)
@given(st.lists(interval, max_size=25), st.lists(interval, max_size=10))
def test_overlapping_pairs_sweep_equals_all_pairs(left, right) -> None:
    assert sorted(overlapping_pairs(left, right)) == _pairs_brute_force(left, right)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(interval, min_size=1, max_size=20),
    st.lists(interval, max_size=6),
    st.sampled_from([0.0, 0.25, 0.5, 1.0]),
)
def test_neighbour_cost_attribution_equals_all_pairs(cells_iv, windows_iv, fraction) -> None:
    cells = [_cell(str(i), s, e, completion_tokens=10 + i) for i, (s, e) in enumerate(cells_iv)]
    windows = [
        LoadWindow(uid=f"w{j}", name=f"w{j}", kind="load", start_unix_ns=s * S, end_unix_ns=e * S)
        for j, (s, e) in enumerate(windows_iv)
    ]
    report = neighbour_cost("e", cells, windows, min_overlap_fraction=fraction)
    rows = {row.uid: row for row in report.cells}
    assert len(rows) == len(cells)
    for c in cells:
        row = rows[c.uid]
        expected = []
        touched = False
        for w in windows:
            overlap = min(c.end_unix_ns, w.end_unix_ns) - max(c.start_unix_ns, w.start_unix_ns)
            if c.end_unix_ns > c.start_unix_ns and w.end_unix_ns > w.start_unix_ns and overlap > 0:
                touched = True
                if overlap >= fraction * (c.end_unix_ns - c.start_unix_ns):
                    expected.append(w.name)
        assert sorted(row.windows) == sorted(expected)
        assert row.baseline == (not touched and c.end_unix_ns > c.start_unix_ns)


def test_peak_concurrency_ignores_touching_intervals() -> None:
    assert peak_concurrency([(0, 10), (10, 20)]) == 1
    assert peak_concurrency([(0, 10), (5, 20), (6, 7)]) == 3
    assert peak_concurrency([]) == 0


def test_neighbour_report_is_json_serializable(article_report) -> None:
    dumped = article_report.model_dump(mode="json")
    assert dumped["eval_name"] == D_EVAL
    assert any(w["name"] == NEMOTRON for w in dumped["windows"])


def _serial_and_nemotron() -> tuple[list[Cell], LoadWindow]:
    """Twenty 100 s serial cells (11.5 tok/s, 5.0 inside 1000-1600 s) beside a nemotron eval
    at four workers, whose run was also recorded as one eval window."""
    cells = []
    for i in range(20):
        t = 100 * i
        rate = 5.0 if 1000 <= t < 1600 else 11.5
        cells.append(
            _cell(
                f"u{i}",
                t,
                t + 100,
                eval_name="serial",
                engine="qwen",
                cell_id=f"c{i}",
                completion_tokens=int(rate * 100),
                workers=1,
            )
        )
    for j in range(3):
        for k in range(4):
            s = 1000 + j * 200
            cells.append(
                _cell(
                    f"n{j}{k}",
                    s,
                    s + 200,
                    eval_name="nemo",
                    engine="nemotron",
                    completion_tokens=300,
                    workers=4,
                )
            )
    recorded = LoadWindow(
        uid="L",
        name="nemotron eval, 4 workers",
        kind="eval",
        engine="nemotron",
        start_unix_ns=1000 * S,
        end_unix_ns=1600 * S,
        streams=4,
        attributes={sc.EVAL_NAME: "nemo"},
    )
    return cells, recorded


def test_a_recorded_eval_window_whose_cells_are_here_is_not_counted_twice() -> None:
    cells, recorded = _serial_and_nemotron()
    report = neighbour_cost("serial", cells, [recorded])
    assert [w.name for w in report.windows] == ["nemo eval, 4 workers on nemotron"]
    assert report.window("nemo eval, 4 workers on nemotron").cost == pytest.approx(1 - 5.0 / 11.5)
    # Without the eval's cells, the recorded window is the only evidence, and it is kept.
    serial_only = [c for c in cells if c.eval_name == "serial"]
    kept = neighbour_cost("serial", serial_only, [recorded])
    assert [w.name for w in kept.windows] == ["nemotron eval, 4 workers"]
    assert kept.window("nemotron eval, 4 workers").cost == pytest.approx(1 - 5.0 / 11.5)
    # Nor when the caller derives nothing from cells.
    underived = neighbour_cost("serial", cells, [recorded], derive_from_cells=False)
    assert [w.name for w in underived.windows] == ["nemotron eval, 4 workers"]


def test_failed_cells_are_counted_apart_from_timeouts() -> None:
    def c(uid: str, start: int, **kw: Any) -> Cell:
        return _cell(uid, start, start + 100, **({"completion_tokens": 1000} | kw))

    cells = [
        c("ok", 0),
        c("cut", 100, status=CellStatus.DEADLINE, completion_tokens=None),
        c("err", 200, status=CellStatus.ERROR, completion_tokens=50),
        c("err2", 300, status=CellStatus.ERROR, completion_tokens=None),
    ]
    window = LoadWindow(uid="w", name="w", kind="load", start_unix_ns=0, end_unix_ns=400 * S)
    report = neighbour_cost("e", cells, [window])
    w = report.window("w")
    assert (w.n_cells, w.timeouts, w.failures, w.rate.n) == (4, 1, 2, 1)
    assert (report.timeouts, report.failures) == (1, 2)
    rows = {r.cell_id: r for r in report.cells}
    assert (rows["err"].timed_out, rows["err"].failed, rows["err"].decode_rate) == (False, True, None)
    assert (rows["cut"].timed_out, rows["cut"].failed) == (True, False)


def _mixed_workers() -> list[Cell]:
    """One eval: five serial cells at 10 tok/s, then five at 8 workers (8 tok/s each), alone."""
    cells = [
        _cell(f"s{k}", 100 * k, 100 * (k + 1), cell_id=f"c{k}", completion_tokens=1000, workers=1)
        for k in range(5)
    ]
    cells += [
        _cell(f"p{k}", 10_000, 10_100, cell_id=f"c{k}", completion_tokens=800, workers=8) for k in range(5)
    ]
    return cells


def test_an_eval_at_several_worker_counts_is_priced_per_count_or_warned_about() -> None:
    cells = _mixed_workers()
    mixed = neighbour_cost("e", cells)
    assert mixed.workers is None
    assert mixed.baseline.n == 10  # both runs in one baseline: what the warning is about
    assert any("ran at 1, 8 workers" in w for w in mixed.warnings)

    serial = neighbour_cost("e", cells, workers=1)
    assert (serial.workers, serial.n_cells, serial.baseline.median) == (1, 5, 10.0)
    assert serial.warnings == []
    # Its own 8-worker run is another load now, but it overlapped none of the serial cells.
    assert [w.name for w in serial.windows] == ["e eval, 8 workers on q"]
    assert serial.windows[0].n_cells == 0

    reports = neighbour_costs(cells)
    assert [(r.workers, r.n_cells, r.baseline.median) for r in reports] == [(1, 5, 10.0), (8, 5, 8.0)]
    with pytest.raises(InputError, match="no cells at 4 workers"):
        neighbour_cost("e", cells, workers=4)


def _varied_box(seed: int) -> tuple[list[Cell], list[LoadWindow]]:
    """Evals at one, several or no worker counts on two engines (some on none), with timeouts,
    failures, zero-length cells, ties in time, and recorded windows of every sort."""
    import random

    rng = random.Random(seed)
    cells = []
    for k in range(160):
        ev = rng.choice(["a", "b", "c", "d"])
        workers = {"a": rng.choice([1, 4]), "b": 2, "c": rng.choice([None, 1, 8]), "d": None}[ev]
        start = rng.randrange(0, 4000, 50)  # coarse, so starts tie
        status = rng.choice([CellStatus.OK] * 6 + [CellStatus.DEADLINE, CellStatus.ERROR])
        cells.append(
            _cell(
                f"u{k}",
                start,
                start + rng.choice([0, 40, 100, 300]),
                eval_name=ev,
                engine=rng.choice(["q", "n", None]),
                cell_id=f"c{k % 9}",
                completion_tokens=rng.randint(100, 3000),
                status=status,
                workers=workers,
            )
        )
    windows = [
        LoadWindow(uid="p1", name="probe 2 streams", kind="probe", engine="q", start_unix_ns=500 * S,
                   end_unix_ns=900 * S, streams=2),
        LoadWindow(uid="p2", name="probe 2 streams", kind="probe", engine="q", start_unix_ns=500 * S,
                   end_unix_ns=700 * S, streams=2),
        LoadWindow(uid="own", name="a run", kind="eval", engine="q", start_unix_ns=0, end_unix_ns=4000 * S,
                   attributes={sc.EVAL_NAME: "a"}),
        LoadWindow(uid="gone", name="zz eval", kind="eval", engine="n", start_unix_ns=1000 * S,
                   end_unix_ns=2500 * S, attributes={sc.EVAL_NAME: "zz"}),
        LoadWindow(uid="dup", name="d", kind="eval", engine="n", start_unix_ns=200 * S, end_unix_ns=800 * S),
    ]  # fmt: skip
    return cells, windows


@pytest.mark.parametrize("seed", range(4))
def test_neighbour_costs_equal_neighbour_cost_per_eval_and_worker_count(seed: int) -> None:
    cells, windows = _varied_box(seed)
    expected = []
    for name in sorted({c.eval_name for c in cells}):
        counts = sorted({c.workers for c in cells if c.eval_name == name and c.workers is not None})
        for workers in counts if len(counts) > 1 else [None]:
            expected.append(neighbour_cost(name, cells, windows, workers=workers, merge_gap_s=30))
        if len(counts) > 1 and any(c.eval_name == name and c.workers is None for c in cells):
            # its cells without a count, priced on their own: the eval's other cells left out
            uncounted = [c for c in cells if c.eval_name != name or c.workers is None]
            alone = neighbour_cost(name, uncounted, windows, merge_gap_s=30)
            expected.append(alone.model_copy(update={"without_count": True}))
    got = neighbour_costs(cells, windows, min_cells=1, merge_gap_s=30)
    assert [(r.eval_name, r.workers) for r in got] == [(r.eval_name, r.workers) for r in expected]
    assert len(got) > 4  # some eval was priced per worker count
    assert [r.model_dump() for r in got] == [r.model_dump() for r in expected]
    assert any(w.n_cells for r in got for w in r.windows)


def test_neighbour_costs_build_an_untouched_windows_row_once_for_every_report() -> None:
    """A window none of an eval's cells ran beside has the same row in every report on its
    engine: one object, not one validated per report (issue 38: 22 reports over 14,000 windows)."""
    cells, windows = _varied_box(0)
    got = neighbour_costs(cells, windows, min_cells=1, merge_gap_s=30)
    rows: dict[tuple[str, bool | None], list[WindowCost]] = defaultdict(list)
    for report in got:
        for w in report.windows:
            if not w.n_cells:
                rows[w.uid, w.same_engine].append(w)
    shared = [same for same in rows.values() if len(same) > 1]
    assert shared
    assert all(row is same[0] for same in shared for row in same)


def test_a_negative_merge_gap_is_refused_by_every_analysis_that_merges() -> None:
    cells = [Cell(uid="a", eval_name="e", cell_id="a", start_unix_ns=0, end_unix_ns=S)]
    for call in (
        lambda: windows_from_cells(cells, merge_gap_s=-1),
        lambda: neighbour_cost("e", cells, merge_gap_s=-1),
        lambda: neighbour_costs(cells, merge_gap_s=-1),
    ):
        with pytest.raises(ConfigError, match="merge gap -1 s must not be negative"):
            call()
