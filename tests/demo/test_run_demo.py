"""`run_demo` end to end at 500x (quick schedule, about 15 s): the structure of the story, every act
in order with the records it leaves, checked on what does not depend on timing accuracy (at 500x
a millisecond of the client's lag is half a model second, so the rates here are not the
simulation's; tests/cli/test_demo.py runs it at 20x against the ground truth).

One run per test call, not a fixture: mutmut limits each mutant's CPU from the tests' call time,
so a run in a fixture's setup would read as a timeout. The checks of that one run are split into
helpers by act. The run adds to a store given with ``store_path`` that holds an earlier demo run
whose windows overlap this one's model time: this run's analysis must leave them out.
"""

from __future__ import annotations

import itertools
import random
import re
import threading
from collections.abc import Sequence
from pathlib import Path

import pytest
from tests.support.demo_phases import PHASES, SPEED, Phases, Stopped, check_the_box_clock

from spark_otel import _clock
from spark_otel import _semconv as sc
from spark_otel._clock import NS_PER_S
from spark_otel.analysis.gauges import STORED_METRICS
from spark_otel.demo import DemoPlan, DemoResult, ground_truth, run_demo
from spark_otel.demo.governed import DEMO_ACT, run_figures
from spark_otel.demo.schedule import DEMO_RUN
from spark_otel.model import Cell, LoadWindow, MetricSample, Request
from spark_otel.records.probe_report import ProbeSettings
from spark_otel.records.rules_file import load_rules
from spark_otel.store import Store

PLAN = DemoPlan.quick(SPEED)
OLD_TAG = "0fad"
QWEN_MODEL, NEMOTRON_MODEL = "qwen3.8-27b", "nemotron-3.5-30b-a3b"


def _old_run(path: Path, around_ns: int) -> None:
    """An earlier demo run in the same store, its windows spanning this run's model time."""
    hour = 3600 * NS_PER_S
    with Store(path) as store:
        store.put_document("demo", OLD_TAG, {"serial_eval": f"demo-serial-{OLD_TAG}"})
        store.write_cells(
            [
                Cell(
                    uid="old-cell",
                    eval_name=f"demo-serial-{OLD_TAG}",
                    cell_id="qwen-1-000",
                    engine="qwen",
                    start_unix_ns=around_ns - hour,
                    end_unix_ns=around_ns + hour,
                    completion_tokens=100,
                    source="demo",
                )
            ]
        )
        store.write_windows(
            [
                LoadWindow(
                    uid=f"demo-{OLD_TAG}-load-1",
                    name="1 more qwen stream",
                    kind="load",
                    engine="qwen",
                    start_unix_ns=around_ns - 3 * hour,
                    end_unix_ns=around_ns + 3 * hour,
                    streams=1,
                    attributes={DEMO_RUN: OLD_TAG},
                ),
                LoadWindow(
                    uid="old-probe-level",
                    name="8 streams",
                    kind="probe",
                    engine="nemotron",
                    start_unix_ns=around_ns - 3 * hour,
                    end_unix_ns=around_ns + 3 * hour,
                    streams=8,
                    attributes={sc.PROBE_RUN: f"demo probe nemotron {OLD_TAG}"},
                ),
            ]
        )


@pytest.mark.slow
def test_the_demo_tells_each_act_in_order_and_leaves_its_records(tmp_path: Path) -> None:
    store_path, out = tmp_path / "shared" / "store.sqlite", tmp_path / "report"
    store_path.parent.mkdir()
    _old_run(store_path, _clock.real_wall_ns() - int(1.25 * PLAN.expected_model_s * NS_PER_S))
    phases = Phases()
    threads_before = {t.name for t in threading.enumerate()}
    started = _clock.real_monotonic_ns()
    result = run_demo(speed=SPEED, store_path=store_path, out_dir=out, quick=True, on_phase=phases)
    took_s = (_clock.real_monotonic_ns() - started) / NS_PER_S

    assert phases.names == PHASES
    assert 0 < result.wall_s <= took_s
    assert result.wall_s == pytest.approx(took_s, abs=1.0)
    assert not {t.name for t in threading.enumerate()} - threads_before  # nothing left running
    check_the_box_clock(phases, PLAN)
    tag = result.run_tag
    assert re.fullmatch(r"[0-9a-f]{4}", tag)
    assert tag != OLD_TAG
    assert (result.serial_eval, result.review_eval, result.load_eval) == (
        f"demo-serial-{tag}",
        f"demo-review-{tag}",
        f"demo-nemotron-{tag}",
    )
    assert (result.store_path, result.report_path, result.rules_path, result.state_path) == (
        store_path,
        out / "report.html",
        out / "rules.toml",
        out / "governor.sqlite",
    )
    assert result.report_path.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert result.state_path.exists()
    assert result.ground_truth == ground_truth(PLAN)

    with Store(store_path, read_only=True) as store:
        assert {d["name"]: d["body"] for d in store.documents("demo")} == {
            OLD_TAG: {"serial_eval": f"demo-serial-{OLD_TAG}"},
            tag: {
                "serial_eval": result.serial_eval,
                "review_eval": result.review_eval,
                "load_eval": result.load_eval,
                "speed": SPEED,
                "quick": True,
            },
        }
        assert sorted(store.eval_names()) == sorted(
            [f"demo-serial-{OLD_TAG}", result.serial_eval, result.review_eval, result.load_eval]
        )
        cells = [c for c in store.cells() if c.uid != "old-cell"]
        requests = store.requests()
        windows = store.windows()
        samples = {name: store.samples(name) for name in STORED_METRICS}
        probe_docs = store.documents("probe")
    assert {c.source for c in cells} == {"demo"}
    _check_act_2(result, probe_docs, windows)
    _check_act_3(result, cells, requests)
    _check_act_4(result, cells, requests, windows)
    _check_act_5(result, cells, requests)
    _check_the_receiver(samples, cells, windows)
    _check_the_analysis(result, cells, windows)
    _check_the_rules(result)


def _of(cells: Sequence[Cell], eval_name: str, act: str | None = None) -> list[Cell]:
    return sorted(
        (c for c in cells if c.eval_name == eval_name and c.attributes.get(DEMO_ACT) == act),
        key=lambda c: (c.start_unix_ns, c.cell_id),
    )


def _length(seed: int, tokens: tuple[int, int]) -> int:
    return random.Random(seed).randint(*tokens)


def _check_lengths(cells: Sequence[Cell], seeds: Sequence[int], tokens: tuple[int, int]) -> None:
    """Each cell asked for at least its seed's length and at most four times it."""
    for cell, seed in zip(cells, seeds, strict=True):
        n = _length(seed, tokens)
        assert cell.completion_tokens is not None
        assert n <= cell.completion_tokens <= 4 * n, (cell.cell_id, n, cell.completion_tokens)


def _check_requests(cells: Sequence[Cell], requests: Sequence[Request], model: str, streaming: bool) -> None:
    mine = [r for r in requests if r.cell_uid in {c.uid for c in cells}]
    assert {r.cell_uid for r in mine} == {c.uid for c in cells}
    assert {(r.request_model, r.streaming) for r in mine} == {(model, streaming)}


def _check_act_2(result: DemoResult, probe_docs: list[dict], windows: list[LoadWindow]) -> None:
    """Both engines probed with the box otherwise idle, plain requests, no warm-up."""
    tag = result.run_tag
    assert [p.settings for p in result.probes] == [
        ProbeSettings(
            streams=[1, 2, 4, 8],
            tokens=256,
            warmup=False,
            mode="plain",
            engine="qwen",
            name=f"demo probe qwen {tag}",
            time_scale=SPEED,
        ),
        ProbeSettings(
            streams=[1, 2, 4, 8, 16],
            tokens=256,
            warmup=False,
            mode="plain",
            engine="nemotron",
            name=f"demo probe nemotron {tag}",
            time_scale=SPEED,
        ),
    ]
    assert [(d["name"], d["body"]) for d in probe_docs] == [
        (p.settings.name, p.model_dump(mode="json")) for p in result.probes
    ]
    levels = sorted((w.engine, w.streams, w.attributes[sc.PROBE_RUN]) for w in windows if w.kind == "probe")
    assert levels == sorted(
        [("qwen", n, f"demo probe qwen {tag}") for n in (1, 2, 4, 8)]
        + [("nemotron", n, f"demo probe nemotron {tag}") for n in (1, 2, 4, 8, 16)]
        + [("nemotron", 8, f"demo probe nemotron {OLD_TAG}")]
    )


def _check_act_3(result: DemoResult, cells: list[Cell], requests: list[Request]) -> None:
    """The same eight cells at one worker, then at eight: plain requests, one at a time, then all at once."""
    review = _of(cells, result.review_eval)
    one, eight = review[:8], review[8:]
    assert [(c.cell_id, c.workers) for c in sorted(one, key=lambda c: c.cell_id)] == [
        (f"pr-{i:02d}", 1) for i in range(8)
    ]
    assert [(c.cell_id, c.workers) for c in sorted(eight, key=lambda c: c.cell_id)] == [
        (f"pr-{i:02d}", 8) for i in range(8)
    ]
    assert max(c.end_unix_ns for c in one) <= min(c.start_unix_ns for c in eight)
    assert all(a.end_unix_ns <= b.start_unix_ns for a, b in itertools.pairwise(one))
    # At eight workers the cells run at once: most of them in flight together (on a loaded machine
    # the last thread may start a few ms late, seconds of model time at 500x, after the first
    # ended), and the batch takes a fraction of the serial run's time.
    events = sorted([(c.start_unix_ns, 1) for c in eight] + [(c.end_unix_ns, -1) for c in eight])
    assert max(itertools.accumulate(step for _, step in events)) >= 4
    span = max(c.end_unix_ns for c in eight) - min(c.start_unix_ns for c in eight)
    assert span < (max(c.end_unix_ns for c in one) - min(c.start_unix_ns for c in one)) / 2
    for run in (one, eight):
        _check_lengths(sorted(run, key=lambda c: c.cell_id), [500 + i for i in range(8)], PLAN.review_tokens)
    assert {(c.engine, c.prompt_tokens) for c in review} == {("qwen", 4 + 1600 // 4)}
    _check_requests(review, requests, QWEN_MODEL, streaming=False)


def _check_act_4(
    result: DemoResult, cells: list[Cell], requests: list[Request], windows: list[LoadWindow]
) -> None:
    """The serial eval streams one cell at a time throughout, beside the recorded same-engine
    loads, then beside four nemotron workers, then alone again."""
    serial = _of(cells, result.serial_eval)
    assert [c.cell_id for c in serial] == [f"qwen-1-{i:03d}" for i in range(len(serial))]
    assert {(c.engine, c.workers, c.prompt_tokens) for c in serial} == {("qwen", 1, 4 + 1600 // 4)}
    assert all(a.end_unix_ns <= b.start_unix_ns for a, b in itertools.pairwise(serial))
    _check_lengths(serial, [1000 + i for i in range(len(serial))], PLAN.serial_tokens)
    _check_requests(serial, requests, QWEN_MODEL, streaming=True)

    loads = sorted(
        (w for w in windows if w.kind == "load" and w.attributes.get(DEMO_RUN) != OLD_TAG),
        key=lambda w: w.start_unix_ns,
    )
    tag = result.run_tag
    assert [(w.uid, w.name, w.engine, w.streams, w.attributes) for w in loads] == [
        (f"demo-{tag}-load-1", "1 more qwen stream", "qwen", 1, {DEMO_RUN: tag}),
        (f"demo-{tag}-load-4", "4 more qwen streams", "qwen", 4, {DEMO_RUN: tag}),
    ]
    assert all(w.elapsed_s >= PLAN.same_engine_load_s for w in loads)
    assert loads[0].end_unix_ns <= loads[1].start_unix_ns
    for window in loads:  # each stream sent long pinned answers to qwen, back to back, all answered
        imposed = [
            r
            for r in requests
            if r.cell_uid is None and window.start_unix_ns <= r.start_unix_ns <= window.end_unix_ns
        ]
        assert len(imposed) >= (window.streams or 0)
        assert {(r.request_model, r.output_tokens, r.error_type) for r in imposed} == {
            (QWEN_MODEL, 256, None)
        }

    load = _of(cells, result.load_eval)
    by_worker = {
        seed: sorted(c.cell_id for c in load if c.cell_id.startswith(f"nemotron-{seed}-"))
        for seed in range(100, 104)
    }
    assert sum(len(ids) for ids in by_worker.values()) == len(load)
    for seed, ids in by_worker.items():
        assert ids, seed  # every worker ran at least one cell
        assert ids == [f"nemotron-{seed}-{i:03d}" for i in range(len(ids))]
        _check_lengths(
            sorted((c for c in load if c.cell_id in ids), key=lambda c: c.cell_id),
            [seed * 1000 + i for i in range(len(ids))],
            PLAN.load_tokens,
        )
    assert {(c.engine, c.workers, c.prompt_tokens) for c in load} == {("nemotron", 4, 4 + 800 // 4)}
    _check_requests(load, requests, NEMOTRON_MODEL, streaming=False)
    # The serial eval runs before the first load and after the nemotron eval's last cell.
    assert serial[0].start_unix_ns < loads[0].start_unix_ns
    assert loads[1].end_unix_ns < min(c.start_unix_ns for c in load)
    assert max(c.end_unix_ns for c in load) < serial[-1].end_unix_ns


def _check_act_5(result: DemoResult, cells: list[Cell], requests: list[Request]) -> None:
    """Three runs: five serial cells streamed at one worker, twelve nemotron cells at four from the
    other process, the governed run's nemotron cells held until the serial eval is done, the
    adaptive run's (the deadline-slack law, no rules file) admitted by the law."""
    for act in ("5-open", "5-governed", "5-adaptive"):
        serial, load = _of(cells, result.serial_eval, act), _of(cells, result.load_eval, act)
        assert sorted((c.cell_id, c.workers, c.engine) for c in serial) == [
            (f"pr-{i:02d}", 1, "qwen") for i in range(5)
        ]
        assert sorted((c.cell_id, c.workers, c.engine) for c in load) == [
            (f"pr-{i:02d}", 4, "nemotron") for i in range(12)
        ]
        _check_lengths(
            sorted(serial, key=lambda c: c.cell_id), [500 + i for i in range(5)], PLAN.governed_serial_tokens
        )
        _check_lengths(
            sorted(load, key=lambda c: c.cell_id), [500 + i for i in range(12)], PLAN.governed_load_tokens
        )
        assert {c.prompt_tokens for c in serial} == {4 + 1600 // 4}
        assert {c.prompt_tokens for c in load} == {4 + 800 // 4}
        _check_requests(serial, requests, QWEN_MODEL, streaming=True)
        _check_requests(load, requests, NEMOTRON_MODEL, streaming=False)
    open_serial, open_load = _of(cells, result.serial_eval, "5-open"), _of(cells, result.load_eval, "5-open")
    governed_serial, governed_load = (
        _of(cells, result.serial_eval, "5-governed"),
        _of(cells, result.load_eval, "5-governed"),
    )
    assert {c.admission_s for c in open_serial + open_load} == {None}  # nothing governed the open run
    assert all(c.admission_s is not None for c in governed_serial + governed_load)
    assert max(c.end_unix_ns for c in governed_serial) <= min(c.start_unix_ns for c in governed_load)
    assert max(c.end_unix_ns for c in open_serial + open_load) < min(c.start_unix_ns for c in governed_serial)
    baseline = result.neighbour.baseline.median
    assert baseline is not None
    assert result.governed == [
        run_figures("without rules", open_serial, open_load, baseline),
        run_figures("with the rules", governed_serial, governed_load, baseline),
    ]
    adaptive_serial, adaptive_load = (
        _of(cells, result.serial_eval, "5-adaptive"),
        _of(cells, result.load_eval, "5-adaptive"),
    )
    assert max(c.end_unix_ns for c in governed_serial + governed_load) < min(
        c.start_unix_ns for c in adaptive_serial
    )
    assert all(c.admission_s is not None for c in adaptive_serial + adaptive_load)
    # every nemotron cell was judged by the law, and the serial cells declared their cap
    assert all(c.attributes.get(sc.CELL_ADAPTIVE_REASON) for c in adaptive_load)
    assert not any(c.deadline_hit for c in adaptive_serial)
    assert result.adaptive == run_figures("adaptive, no rules", adaptive_serial, adaptive_load, baseline)
    assert result.state_path.with_name("governor-adaptive.sqlite").exists()


def _check_the_receiver(
    samples: dict[str, list[MetricSample]], cells: list[Cell], windows: list[LoadWindow]
) -> None:
    """The box's gauges, read from before the first probe to the end of Act 4, straight into the
    store: none through the demo's own meter provider. (How often: at 500x a read of the box
    takes longer than the 25 model s interval, so the spacing says nothing here.)"""
    gpu = sorted(s.unix_ns for s in samples[sc.GPU_POWER])
    assert {s.source for series in samples.values() for s in series} == {"receiver"}
    first_probe = min(w.start_unix_ns for w in windows if w.kind == "probe" and w.uid != "old-probe-level")
    act_4_load_end = max(c.end_unix_ns for c in cells if c.cell_id.startswith("nemotron-"))
    act_5 = min(c.start_unix_ns for c in cells if DEMO_ACT in c.attributes)
    assert gpu[0] <= first_probe
    assert act_4_load_end <= gpu[-1] < act_5


def _check_the_analysis(result: DemoResult, cells: list[Cell], windows: list[LoadWindow]) -> None:
    """The report reads this run's cells of Acts 2 to 4 and this run's windows, nothing else."""
    content = result.content
    assert content.source == f"{result.store_path} (demo run {result.run_tag})"
    assert content.n_cells == sum(1 for c in cells if DEMO_ACT not in c.attributes)
    assert content.n_windows == len(windows) - 2  # not the earlier run's two
    urls = {p.metadata.engine: p.metadata.engine_url for p in result.probes}
    assert sorted(urls) == ["nemotron", "qwen"]
    assert content.engine_urls == urls
    assert result.neighbour == next(n for n in content.neighbours if n.eval_name == result.serial_eval)
    assert result.neighbour.eval_name == result.serial_eval
    assert content.energy is not None
    review = {
        e.workers: (e.n_cells, e.n_measured)
        for e in content.energy.evals
        if e.eval_name == result.review_eval
    }
    assert review == {1: (8, 8), 8: (8, 8)}
    assert content.instruments is not None
    assert content.instruments.interval_source == "probe"
    assert [i.label for i in content.instruments.intervals] == [
        *(f"qwen {n} stream{'s' if n > 1 else ''}" for n in (1, 2, 4, 8)),
        *(f"nemotron {n} stream{'s' if n > 1 else ''}" for n in (1, 2, 4, 8, 16)),
    ]


def _check_the_rules(result: DemoResult) -> None:
    """The rules `advise --write-rules` writes from this run's records, with Act 5's eval gap."""
    rules = load_rules(result.rules_path)
    assert rules.source == result.content.source
    assert rules.eval_gap_s == PLAN.governed_eval_gap_s
    assert {name: (e.model, e.url) for name, e in rules.engines.items()} == {
        "qwen": (QWEN_MODEL, result.content.engine_urls["qwen"]),
        "nemotron": (NEMOTRON_MODEL, result.content.engine_urls["nemotron"]),
    }
    [yields] = rules.cross_engine
    assert (yields.engine, yields.while_engine, yields.while_eval, yields.cells) == (
        "nemotron",
        "qwen",
        result.serial_eval,
        0,
    )


def test_a_demo_stopped_at_its_first_act_leaves_nothing_running_and_its_defaults_in_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stopped once the box, the store and the receiver are up: by then the defaults (the full
    schedule, into ./spark-otel-demo) have set the box's clock and written the demo's document."""
    monkeypatch.chdir(tmp_path)
    phases = Phases(stop_at=PHASES[1])
    threads_before = {t.name for t in threading.enumerate()}
    with pytest.raises(Stopped):
        run_demo(speed=SPEED, on_phase=phases)
    assert {t.name for t in threading.enumerate()} - threads_before == set()
    assert phases.names == PHASES[:2]
    check_the_box_clock(phases, DemoPlan.full(SPEED))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["spark-otel-demo"]
    with Store(tmp_path / "spark-otel-demo" / "store.sqlite", read_only=True) as store:
        [document] = store.documents("demo")
    assert document["body"]["quick"] is False
    assert document["body"]["speed"] == SPEED


def test_a_demo_stopped_in_act_4_stops_its_lanes_with_it(tmp_path: Path) -> None:
    """Stopped (as by Ctrl-C) while the serial eval streams its cells: its lanes stop with it,
    instead of the demo waiting on them forever, and nothing is left running."""
    phases = Phases(stop_at=PHASES[6])
    threads_before = {t.name for t in threading.enumerate()}
    with pytest.raises(Stopped):
        run_demo(speed=SPEED, out_dir=tmp_path, quick=True, on_phase=phases)
    assert phases.names == PHASES[:7]
    assert {t.name for t in threading.enumerate()} - threads_before == set()
