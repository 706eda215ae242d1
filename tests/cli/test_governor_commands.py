"""`spark-otel advise --write-rules`, `spark-otel rules check` and `spark-otel lanes`, over real
store files, a real simulated engine and a real shared state file."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest
from tests.support.waiting import wait_for

from spark_otel import cell
from spark_otel.cli import main
from spark_otel.governor import govern, load_rules, ungovern
from spark_otel.sim import run_box


def test_advise_writes_the_enforceable_rules_with_their_evidence(
    article_store: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "rules.toml"
    # By eval (version 1): each rule names the eval it was measured on, as the advice does; the
    # general forms are tested in tests/governor/test_classing.py and test_matching.py.
    assert main(["advise", "--store", article_store, "--json", "--by-eval", "--write-rules", str(path)]) == 0
    advice = json.loads(capsys.readouterr().out)
    rules = load_rules(path)  # what it wrote validates
    assert rules.version == 1
    by_kind: dict[str, list[dict[str, object]]] = {}
    for r in advice["rules"]:
        by_kind.setdefault(r["kind"], []).append(r)
    assert [(r.engine, r.eval, r.cell_class, r.cells) for r in rules.limit] == [
        (r["engine"], r["eval_name"], r["cell_class"], r["workers"]) for r in by_kind.get("batch", [])
    ]
    assert [(r.engine, r.cells) for r in rules.lane] == [
        (r["engine"], r["workers"]) for r in by_kind.get("cap", [])
    ]
    assert [(r.engine, r.while_engine, r.while_eval, r.cells) for r in rules.cross_engine] == [
        (r["engine"], r["while_engine"], r["eval_name"], r["workers"])
        for r in by_kind.get("cross-engine", [])
    ]
    assert rules.cross_engine, "the article's store has the Nemotron-beside-Qwen rule"
    assert all(r.evidence for r in rules.rules)
    assert len(rules.unmeasured) == len(by_kind.get("measure", []))
    text = path.read_text()
    assert text.startswith("# Queue rules for spark-otel's governor")


def test_rules_check_names_an_unknown_key_and_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "rules.toml"
    path.write_text("[[lane]]\nengine = 'q'\ncels = 2\n")
    assert main(["rules", "check", str(path)]) == 2
    err = capsys.readouterr().err
    assert err == f"spark-otel: error: {path}: lane[0].cels: unknown key (did you mean cells?)\n"


def test_rules_check_reports_a_rule_whose_engine_now_serves_another_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with run_box({"qwen": "dense"}, speed=50.0) as box:
        url = box.url("qwen")
        serving = box.model_id("qwen")
        path = tmp_path / "rules.toml"
        path.write_text(
            f"[engines.qwen]\nmodel = 'qwen3.6-27b'\nurl = '{url}'\n\n[[lane]]\nengine = 'qwen'\ncells = 8\n"
        )
        assert main(["rules", "check", str(path), "--json"]) == 0
        report = json.loads(capsys.readouterr().out)
        [engine] = report["engines"]
        assert engine["serving"][0] == serving  # the sim also lists the engine's name as an alias
        assert engine["stale"] is True
        assert (
            f"measured on qwen3.6-27b, now serves {', '.join(engine['serving'])}: stale (still applied); "
            "re-measure with "
            f"`spark-otel probe --engine qwen={url} --streams 1,2,4,8`" in engine["problem"]
        )
        path.write_text(path.read_text().replace("qwen3.6-27b", serving))
        assert main(["rules", "check", str(path), "--json"]) == 0
        [engine] = json.loads(capsys.readouterr().out)["engines"]
        assert (engine["stale"], engine["problem"]) == (False, None)


def test_lanes_shows_cells_in_use_and_waiting_with_the_rule_that_holds_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], tracer_provider, meter_provider
) -> None:
    rules = tmp_path / "rules.toml"
    rules.write_text("[[lane]]\nengine = 'q'\ncells = 1\n")
    state = tmp_path / "governor.sqlite"
    govern(rules, state=state)
    release = threading.Event()

    def run(name: str) -> None:
        with cell(name, "c", engine="q", tracer_provider=tracer_provider, meter_provider=meter_provider):
            release.wait(10)

    threads = [threading.Thread(target=run, args=(name,)) for name in ("first", "second")]

    def lane() -> dict[str, Any]:
        """The lane as `lanes --json` shows it; empty while the first runner is still creating
        the state file (which `lanes` refuses until its tables are there)."""
        code = main(["lanes", "--rules", str(rules), "--state", str(state), "--json"])
        out = capsys.readouterr().out
        return json.loads(out)["lanes"][0] if code == 0 else {}

    try:
        threads[0].start()
        wait_for(lambda: lane().get("in_use") == ["first"], "the first cell to be admitted", 5)
        threads[1].start()
        wait_for(lambda: len(lane().get("waiting", [])) == 1, "the second cell to queue", 5)
        assert main(["lanes", "--rules", str(rules), "--state", str(state), "--json"]) == 0
        [lane] = json.loads(capsys.readouterr().out)["lanes"]
        assert (lane["engine"], lane["cap"], lane["in_use"]) == ("q", 1, ["first"])
        assert [(w["eval"], w["rule"]) for w in lane["waiting"]] == [("second", "q lane at most 1 cell")]
        assert main(["lanes", "--rules", str(rules), "--state", str(state)]) == 0
        table = capsys.readouterr().out
        assert "q lane at most 1 cell (1)" in table
    finally:
        release.set()
        for t in threads:
            t.join(10)
        ungovern()


def test_lanes_without_any_state_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    state = tmp_path / "none.sqlite"
    assert main(["lanes", "--state", str(state)]) == 1
    assert "no governor state here: no governed runner has started on this box yet" in capsys.readouterr().err
    assert not state.exists()  # reading creates nothing
