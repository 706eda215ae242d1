"""`spark-otel demo`: one `--quick` run end to end, each act checked against the simulation's
ground truth, as tables, one-line answers and JSON; a bad speed refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.support.stored_energy import assert_kept_is_derived, priced

from spark_otel import _semconv as sc
from spark_otel.analysis.neighbour import neighbour_cost
from spark_otel.cli import main
from spark_otel.cli.demo import _as_json, _print_acts
from spark_otel.demo import DemoPlan, DemoResult, ground_truth, run_demo
from spark_otel.demo.governed import DEMO_ACT, run_figures
from spark_otel.model import CellStatus
from spark_otel.records.rules_file import load_rules
from spark_otel.store import Store
from spark_otel.views.governed_runs import adaptive_answer
from spark_otel.views.rules import rule_text
from spark_otel.views.tables import fmt_number

# Slow enough that the instrumented client keeps pace with the streams on a loaded 2-core box (30x
# fell behind in a CI run, the same-engine load costing 0.11 against its 0.074): the
# real-time jitter of a busy machine (ms) reads as that many times as much model time.
SPEED = 20.0


@pytest.fixture(autouse=True)
def _hints_on_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    """A terminal wide enough that no answer wraps: these tests find each one whole in the output
    (how a hint wraps is tests/cli/test_demo_printing's)."""
    monkeypatch.setenv("COLUMNS", "1000")


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[DemoResult, Path]:
    # The user's own store (named by the environment, as in production) must stay untouched:
    # without --store, the demo's simulated records go to a store of their own beside the report.
    root = tmp_path_factory.mktemp("demo")
    user_store = root / "user" / "store.sqlite"
    with pytest.MonkeyPatch.context() as env:
        env.setenv("SPARK_OTEL_STORE", str(user_store))
        result = run_demo(speed=SPEED, out_dir=root / "report", quick=True)
    assert not user_store.exists()
    return result, root / "report"


@pytest.mark.slow
def test_the_demo_records_every_act_in_its_own_store(demo: tuple[DemoResult, Path]) -> None:
    result, out = demo
    assert result.store_path == out / "store.sqlite"
    tag = result.run_tag
    assert len(tag) == 4  # short: names are never cut
    assert (result.serial_eval, result.review_eval, result.load_eval) == (
        f"demo-serial-{tag}",
        f"demo-review-{tag}",
        f"demo-nemotron-{tag}",
    )
    with Store(result.store_path, read_only=True) as store:
        serial = store.cells(eval_name=result.serial_eval)
        review = store.cells(eval_name=result.review_eval)
        load = store.cells(eval_name=result.load_eval)
        windows = store.windows()
        requests = store.requests(eval_name=result.serial_eval)
        probe_docs = store.documents("probe")

    assert {c.source for c in serial + review + load} == {"demo"}  # recognisable wherever they end up
    # Act 2: both engines probed with the box otherwise idle.
    assert sorted(d["body"]["metadata"]["engine"] for d in probe_docs) == ["nemotron", "qwen"]
    probe_levels = {(w.engine, w.streams) for w in windows if w.kind == "probe"}
    assert probe_levels == {("qwen", n) for n in (1, 2, 4, 8)} | {("nemotron", n) for n in (1, 2, 4, 8, 16)}
    # Act 3: the same eight cells at one worker and at eight.
    by_workers = {w: sorted(c.cell_id for c in review if c.workers == w) for w in (1, 8)}
    assert by_workers[1] == by_workers[8] == [f"pr-{i:02d}" for i in range(8)]
    # Act 4: the serial eval throughout, one cell at a time, beside the recorded loads.
    assert len(serial) >= 10
    assert all(c.engine == "qwen" and c.workers == 1 and c.status is CellStatus.OK for c in serial)
    assert all(c.completion_tokens and 500 <= c.completion_tokens <= 4 * 800 for c in serial)
    assert {r.cell_uid for r in requests} == {c.uid for c in serial}  # instrumented request spans
    assert all(c.engine == "nemotron" and c.workers == 4 for c in load)
    loads = sorted((w.name, w.streams) for w in windows if w.kind == "load")
    assert loads == [("1 more qwen stream", 1), ("4 more qwen streams", 4)]


@pytest.mark.slow
def test_each_act_recovers_the_simulated_truth(demo: tuple[DemoResult, Path]) -> None:
    result, _ = demo
    truth = ground_truth(DemoPlan.quick(SPEED))
    content = result.content
    # Act 2: nemotron's aggregate falls past 8 streams: its lane's cap.
    assert content.advice is not None
    rules = [rule_text(r) for r in content.advice.rules]
    assert "nemotron lane at most 8 streams" in rules
    assert "qwen: no lane cap yet, measure past 8 streams" in rules
    # Act 3: eight workers cost each cell what the simulation says eight streams cost one.
    assert content.concurrency is not None
    [speedup] = [
        s for e in content.concurrency.engines for s in e.speedups if s.eval_name == result.review_eval
    ]
    assert (speedup.base_workers, speedup.workers, speedup.same_cells) == (1, 8, True)
    # A cell's elapsed time also holds its prefill and the client's own time, at both counts, so
    # its rate sits a little under the decode rate the simulation was given: within 5 points.
    assert speedup.per_cell_cost == pytest.approx(truth["review_per_cell_cost"], abs=0.05)
    with Store(result.store_path, read_only=True) as store:
        review = store.cells(eval_name=result.review_eval)
    walls = {
        w: (max(c.end_unix_ns for c in cells) - min(c.start_unix_ns for c in cells))
        for w in (1, 8)
        for cells in [[c for c in review if c.workers == w]]
    }
    assert speedup.speedup == pytest.approx(walls[1] / walls[8], rel=1e-6)
    assert speedup.speedup > 5  # eight cells at once, each a few percent slower
    # Act 4: the neighbours' costs, against the eval's own baseline.
    nb = result.neighbour
    assert nb.baseline.n >= 5
    assert nb.baseline.median == pytest.approx(truth["baseline_rate"], rel=0.06)
    [nemotron] = [w for w in nb.windows if w.engine == "nemotron" and w.n_cells]
    assert nemotron.n_cells >= 3
    # A cell counts for a load from a quarter of it inside: the rest of it decoded alone, which
    # can only dilute the cost it reports, never add to it.
    assert truth["load"] - 0.06 <= nemotron.cost <= truth["load"] + 0.02
    # Against the ground truth, the cells that ran wholly inside a load.
    with Store(result.store_path, read_only=True) as store:
        cells = [c for c in store.cells() if DEMO_ACT not in c.attributes]  # Act 5's apart
        windows = [w for w in store.windows() if w.kind == "load"]
    inside = neighbour_cost(result.serial_eval, cells, windows, min_overlap_fraction=1.0)
    [nemotron] = [w for w in inside.windows if w.engine == "nemotron" and w.n_cells]
    assert nemotron.cost == pytest.approx(truth["load"], abs=0.02)
    for name in ("1 more qwen stream", "4 more qwen streams"):
        load = inside.window(name)
        assert load.same_engine
        assert load.n_cells >= 1
        assert load.cost == pytest.approx(truth[name], abs=0.02)
    assert f"nemotron yields while {result.serial_eval} runs on qwen" in rules


@pytest.mark.slow
def test_act_5_the_rules_advise_wrote_hold_the_neighbour_back_and_remove_its_cost(
    demo: tuple[DemoResult, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    result, out = demo
    truth = ground_truth(DemoPlan.quick(SPEED))
    alone = result.neighbour.baseline.median
    assert alone is not None
    # The rules file is what `advise --write-rules` writes, and it validates.
    assert result.rules_path == out / "rules.toml"
    assert main(["rules", "check", str(result.rules_path)]) == 0
    rules = load_rules(result.rules_path)
    [yields] = rules.cross_engine
    assert (yields.engine, yields.while_engine, yields.while_eval, yields.cells) == (
        "nemotron",
        "qwen",
        result.serial_eval,
        0,
    )
    capsys.readouterr()

    with Store(result.store_path, read_only=True) as store:
        cells = store.cells()
    runs = {
        act: (
            [c for c in cells if c.attributes.get(DEMO_ACT) == act and c.eval_name == result.serial_eval],
            [c for c in cells if c.attributes.get(DEMO_ACT) == act and c.eval_name == result.load_eval],
        )
        for act in ("5-open", "5-governed")
    }
    plan = DemoPlan.quick(SPEED)
    for serial, load in runs.values():
        assert len(serial) == plan.governed_serial_cells
        assert len(load) == plan.governed_load_cells
        assert all(c.workers == 1 and c.status is CellStatus.OK for c in serial)  # no ceiling hits

    # Without rules: the cells wholly beside the nemotron eval pay the simulated cost.
    serial, load = runs["5-open"]
    window = (min(c.start_unix_ns for c in load), max(c.end_unix_ns for c in load))
    wholly = [c for c in serial if window[0] <= c.start_unix_ns and c.end_unix_ns <= window[1]]
    assert len(wholly) >= 2
    rates = sorted(c.completion_tokens / ((c.end_unix_ns - c.start_unix_ns) / 1e9) for c in wholly)
    assert 1 - rates[len(rates) // 2] / alone == pytest.approx(truth["load"], abs=0.05)
    assert not any(c.attributes.get(sc.CELL_QUEUE_WAIT_S) for c in load)  # nothing held it

    # With them: nemotron waits for the serial eval, then runs at its full width.
    serial, load = runs["5-governed"]
    serial_end = max(c.end_unix_ns for c in serial)
    assert all(c.start_unix_ns >= serial_end for c in load)
    waits = [c.attributes[sc.CELL_QUEUE_WAIT_S] for c in load]
    assert max(waits) > 100  # model s: most of the serial eval
    assert {c.attributes[sc.CELL_QUEUE_RULE] for c in load if c.attributes[sc.CELL_QUEUE_WAIT_S] > 1} == {
        yields.describe()
    }
    rates = sorted(c.completion_tokens / ((c.end_unix_ns - c.start_unix_ns) / 1e9) for c in serial)
    assert 1 - rates[len(rates) // 2] / alone == pytest.approx(0.0, abs=0.05)

    # The figures the demo prints are these.
    without, governed = result.governed
    assert (without.label, governed.label) == ("without rules", "with the rules")
    assert without.beside_cells >= len(wholly)
    assert without.cost == pytest.approx(truth["load"], abs=0.06)
    assert governed.beside_cells == 0
    assert governed.cost == pytest.approx(0.0, abs=0.05)
    assert (governed.ceiling_hits, without.ceiling_hits) == (0, 0)
    assert governed.load_started_after_serial
    assert not without.load_started_after_serial
    assert governed.load_peak == without.load_peak == 4
    assert governed.load_waited_max_s == pytest.approx(max(waits))
    every = [c for pair in runs["5-governed"] for c in pair]
    wall = (max(c.end_unix_ns for c in every) - min(c.start_unix_ns for c in every)) / 1e9
    assert governed.both_wall_s == pytest.approx(wall)

    # The third run, adaptive with no rules file: its figures are its cells' in the store.
    adaptive = [c for c in cells if c.attributes.get(DEMO_ACT) == "5-adaptive"]
    assert result.adaptive == run_figures(
        "adaptive, no rules",
        [c for c in adaptive if c.eval_name == result.serial_eval],
        [c for c in adaptive if c.eval_name == result.load_eval],
        alone,
    )
    assert result.adaptive.serial_cells == plan.governed_serial_cells
    assert result.adaptive.load_cells == plan.governed_load_cells

    _print_acts(result)
    printed = capsys.readouterr().out
    act5 = printed[printed.index("Act 5. ") :]
    assert "without rules" in act5
    assert "with the rules" in act5
    assert "adaptive, no rules" in act5
    assert f"=> {adaptive_answer(without, governed, result.adaptive)}" in " ".join(act5.split())
    # Side by side: a column per run, each figure's row holding the three runs' figures.
    rows = {
        cells[0]: cells[1:]
        for line in act5.splitlines()
        if (cells := [c.strip() for c in line.split("│")[1:-1]])
    }
    runs = (without, governed, result.adaptive)
    assert rows["serial cells at the ceiling"] == [f"{r.ceiling_hits} of {r.serial_cells}" for r in runs]
    assert rows["longest serial cell s"] == [fmt_number(r.serial_longest_s, 0) for r in runs]
    assert rows["nemotron wall s"] == [fmt_number(r.load_wall_s, 0) for r in runs]
    assert rows["nemotron cells"] == [str(r.load_cells) for r in runs]
    assert f"=> with the rules, {result.serial_eval} paid {round(governed.cost * 100)}%" in act5
    assert f"both evals took {governed.both_wall_s:.0f} model s against {without.both_wall_s:.0f}" in act5


@pytest.mark.slow
def test_the_demo_prints_each_act_with_its_answer_and_writes_the_report(
    demo: tuple[DemoResult, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    result, out = demo
    _print_acts(result)
    printed = capsys.readouterr().out
    answers: dict[str, list[str]] = {a.topic: [] for a in result.content.answers}
    for a in result.content.answers:
        answers[a.topic].append(a.text)
    # The neighbour answer Act 4 prints: the serial eval's (the nemotron eval's says it has no
    # baseline, since every one of its cells ran beside the serial eval; the report shows it).
    [serial_answer] = [t for t in answers["neighbour"] if f"cost {result.serial_eval} " in t]
    assert any(t.startswith(f"{result.load_eval}: no baseline") for t in answers["neighbour"])
    titles = [
        "Act 2. Probe on qwen, the box otherwise idle",
        "Act 2. Probe on nemotron, the box otherwise idle",
        f"Act 3. {result.review_eval}: the same cells at 1 and more workers",
        f"Act 4. What other load cost {result.serial_eval}",
        "Queue rules",
    ]
    positions = [printed.index(t) for t in titles]
    assert positions == sorted(positions)
    # Each act's answer in one line right after its tables, before the next act.
    for text, before in (
        (answers["curve"][0], titles[1]),
        (answers["concurrency"][0], titles[3]),
        (serial_answer, titles[4]),
    ):
        assert printed.index(f"=> {text}") < printed.index(before)
    assert answers["curve"][0].startswith("qwen: 8 streams bought")
    assert answers["curve"][1].startswith("nemotron: 8 streams bought")
    assert "then no more: aggregate peaks" in answers["curve"][1]
    assert answers["concurrency"][0].startswith(f"{result.review_eval} at 8 workers on qwen: ")
    assert f"=> {answers['rules'][0]}" in printed

    page = (out / "report.html").read_text()
    box = page[page.index('<section class="answers">') : page.index("</section>")]
    assert "Answers" in box
    assert f"{result.review_eval} at 8 workers on qwen" in box
    assert page.count("data:image/png;base64,") >= 4  # two curves, the timeline, the costs


@pytest.mark.slow
def test_the_demo_as_json_carries_the_answers_figures_and_rules(demo: tuple[DemoResult, Path]) -> None:
    result, _ = demo
    doc = json.loads(json.dumps(_as_json(result, SPEED)))
    assert doc["evals"] == {
        "review": result.review_eval,
        "serial": result.serial_eval,
        "load": result.load_eval,
    }
    assert [a["text"] for a in doc["answers"]] == [a.text for a in result.content.answers]
    assert {c["engine"] for c in doc["curves"]} == {"qwen", "nemotron"}
    [speedup] = doc["speedups"]
    assert speedup["eval_name"] == result.review_eval
    assert doc["neighbour"]["eval_name"] == result.serial_eval
    assert "cells" not in doc["neighbour"]
    assert any(r["kind"] == "cap" and r["engine"] == "nemotron" and r["workers"] == 8 for r in doc["rules"])
    assert doc["rules_file"] == str(result.rules_path)
    assert [run["label"] for run in doc["governed"]] == [
        "without rules",
        "with the rules",
        "adaptive, no rules",
    ]
    assert doc["governed"][1]["beside_cells"] == result.governed[1].beside_cells
    assert result.adaptive is not None
    assert doc["governed"][2] == json.loads(json.dumps(result.adaptive.as_dict()))


def test_demo_refuses_an_infinite_or_zero_speed_before_starting_anything(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for speed in ("0", "inf"):
        assert main(["demo", "--speed", speed, "--store", str(tmp_path / "s.sqlite")]) == 2
        assert "--speed must be a finite number >= 0.001 and <= 1,000,000" in capsys.readouterr().err
    assert not (tmp_path / "s.sqlite").exists()


@pytest.mark.slow
def test_the_demo_grades_the_boxs_gauges_and_prices_each_token(
    demo: tuple[DemoResult, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    result, out = demo
    instruments = result.content.instruments
    assert instruments is not None
    verdicts = {v.instrument: v.verdict for v in instruments.instruments}
    # By construction the simulated box's gauges behave as the article's did (Appendix F).
    assert verdicts["GPU 0 utilization"] == "not load"
    assert verdicts["qwen generation counter"] == "tracks load"
    assert verdicts["nemotron generation counter"] == "tracks load"
    assert verdicts["qwen requests running"] == "tracks load"
    _print_acts(result)
    printed = capsys.readouterr().out
    act4 = printed.index(f"Act 4. What other load cost {result.serial_eval}")
    table = printed.index("Appendix F. The box's gauges against the probes' load: ")
    assert act4 < table < printed.index("Queue rules")
    assert "  GPU 0 utilization: not load: " in printed
    # Energy: the box sampled beside every act, so the review eval's cells each have a share,
    # and at 8 workers a token costs less than at one.
    energy = result.content.energy
    assert energy is not None
    review = {e.workers: e for e in energy.evals if e.eval_name == result.review_eval}
    assert set(review) == {1, 8}
    assert review[1].n_measured == review[1].n_cells
    assert review[8].j_per_token is not None
    assert review[1].j_per_token is not None
    assert review[8].j_per_token < review[1].j_per_token / 2
    # Each cell's energy priced on read from its neighbourhood (the eval's cells, the sampler's
    # readings, Act 5's second process) is what a reader derives from everything, for every cell.
    with Store(result.store_path, read_only=True) as store:
        kept = priced(store)
        assert {c.uid for c in store.cells(eval_name=result.review_eval)} <= set(kept)
        assert_kept_is_derived(store)
    assert "Act 3. What each token cost: energy on the box (GPU 0, energy counter)" in printed
    page = (out / "report.html").read_text()
    assert "<h2>Instruments: which gauge measures load</h2>" in page
    assert 'data-file="instrument-1-gpu-0-utilization.png"' in page
