"""The adaptive governor's decisions read back from a real store: two runner processes governed
adaptively with no rules file (a serial ceiling-bound eval on qwen, a 4-worker eval on nemotron
started while the first serial cell runs) record into one embedded store on the simulated box;
the store then yields the decisions each process saw on its spans, as equal figures on the fact
model, in the report's section and in `spark-otel lanes`; while the cells run, `lanes --json`
shows each one's admission verdict from the state file, equal to what its span records."""

from __future__ import annotations

import html
import json
import os
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from spark_otel import _semconv as sc
from spark_otel._exceptions import InputError
from spark_otel.analysis.adaptive_decisions import AdaptiveDecisions, adaptive_decisions
from spark_otel.cli import main
from spark_otel.governor.state import read_lanes
from spark_otel.report import build_report, inputs_from_store, render_html
from spark_otel.sim import run_box
from spark_otel.store import Store
from spark_otel.views.adaptive_decisions import summary_line
from spark_otel.views.live_cells import in_flight_json

RUNNER = Path(__file__).with_name("adaptive_runner.py")
SPEED = 20.0
"""Model seconds per real second: a serial cell of about 5 real seconds, long enough for its
live rate to drive the law (as in test_adaptive_box)."""
SERIAL_CELLS = 2
SERIAL_TOKENS = 1100
CEILING_S = 180.0
NEIGHBOUR_CELLS = 16
NEIGHBOUR_TOKENS = 400


@pytest.fixture(scope="module")
def box() -> Iterator[Any]:
    with run_box({"qwen": "dense", "nemotron": "moe"}, speed=SPEED, seed=0) as running:
        yield running


def _runner(store: Path, state: Path, url: str, *args: object) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "SPARK_OTEL_"))}
    env["PYTHONPATH"] = os.pathsep.join(sys.path)
    command = [sys.executable, str(RUNNER), "--store", str(store), str(state), url, *map(str, args)]
    return subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=env)


def _spans(proc: subprocess.Popen[str]) -> dict[str, dict[str, Any]]:
    out, _ = proc.communicate(timeout=180)
    assert proc.returncode == 0
    lines = [json.loads(line) for line in out.splitlines()]
    return {s["attributes"][sc.CELL_ID]: s["attributes"] for s in lines if s["event"] == "span"}


class _InFlight:
    """What `lanes --json` lists in flight, read from the state file every 50 ms while the run
    goes: each cell's entry (its admission verdict is fixed while it runs)."""

    def __init__(self, state: Path) -> None:
        self.state = state
        self.seen: dict[str, dict[str, Any]] = {}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._poll, daemon=True)
        self.thread.start()

    def _poll(self) -> None:
        while not self.stop.wait(0.05):
            try:
                lanes = read_lanes(self.state)
            except InputError:  # not there yet, or its first writer still making its tables
                continue
            for lane in lanes:
                for entry in in_flight_json(lane):
                    self.seen.setdefault(entry["cell"], entry)

    def done(self) -> dict[str, dict[str, Any]]:
        self.stop.set()
        self.thread.join(5)
        return self.seen


@pytest.fixture(scope="module")
def governed(
    box: Any, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, Path, dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
    """The store and state of the run, every cell span's attributes as its process saw them,
    and what `lanes --json` listed in flight meanwhile, by cell."""
    tmp = tmp_path_factory.mktemp("adaptive-report")
    store, state = tmp / "store.sqlite", tmp / "governor.sqlite"
    in_flight = _InFlight(state)
    serial = _runner(
        store, state, box.url("qwen"), "serial", "qwen", 1, SERIAL_CELLS, SERIAL_TOKENS, CEILING_S
    )
    assert serial.stdout is not None
    assert json.loads(serial.stdout.readline()) == {"event": "admitted", "cell": "serial-0"}
    neighbour = _runner(
        store, state, box.url("nemotron"), "batch", "nemotron", 4, NEIGHBOUR_CELLS, NEIGHBOUR_TOKENS, 0
    )
    spans = {**_spans(serial), **_spans(neighbour)}
    assert len(spans) == SERIAL_CELLS + NEIGHBOUR_CELLS
    return store, state, spans, in_flight.done()


def _figures(spans: dict[str, dict[str, Any]], eval_name: str) -> dict[str, Any]:
    """What the spans of ``eval_name`` say, counted here by hand: the figures the store must give."""
    mine = {
        c: a
        for c, a in spans.items()
        if c.startswith(f"{eval_name}-")
        and (sc.CELL_ADAPTIVE_REASON in a or sc.CELL_ADAPTIVE_HELD_REASON in a)
    }
    held = {c: a for c, a in mine.items() if sc.CELL_ADAPTIVE_HELD_REASON in a}
    margins = [a[sc.CELL_ADAPTIVE_MARGIN] for a in mine.values() if sc.CELL_ADAPTIVE_MARGIN in a]
    rates = [a[sc.CELL_ADAPTIVE_RATE] for a in mine.values() if sc.CELL_ADAPTIVE_RATE in a]
    waits = {c: a[sc.CELL_ADAPTIVE_HELD_S] for c, a in held.items()}  # the law's share of each wait
    return {
        "cells": len(mine),
        "at_once": sum(1 for c, a in mine.items() if c not in held and a[sc.CELL_QUEUE_WAIT_S] == 0),
        "held": len(held),
        "hold_s": pytest.approx(sum(waits.values()), rel=1e-12),
        "longest": max(waits, key=lambda c: waits[c]) if waits else None,
        "reasons": Counter(a[sc.CELL_ADAPTIVE_HELD_REASON] for a in held.values()),
        "held_for": Counter(a[sc.CELL_ADAPTIVE_HELD_FOR] for a in held.values()),
        "admitted_on": Counter(a.get(sc.CELL_ADAPTIVE_REASON, "-") for a in mine.values()),
        "margin": (len(margins), min(margins, default=None), max(margins, default=None)),
        "rate_used": (len(rates), min(rates, default=None), max(rates, default=None)),
    }


def _facts(found: AdaptiveDecisions, eval_name: str) -> dict[str, Any]:
    [e] = [e for e in found.evals if e.eval_name == eval_name]
    return {
        "cells": e.cells,
        "at_once": e.at_once,
        "held": e.held,
        "hold_s": e.hold_s,
        "longest": e.longest.cell_id if e.longest is not None else None,
        "reasons": Counter({c.key: c.cells for c in e.reasons}),
        "held_for": Counter({c.key: c.cells for c in e.held_for}),
        "admitted_on": Counter({c.key: c.cells for c in e.admitted_on}),
        "margin": (e.margin.n, e.margin.low, e.margin.high),
        "rate_used": (e.rate_used.n, e.rate_used.low, e.rate_used.high),
    }


def test_the_store_yields_each_evals_decisions_as_the_runners_spans_recorded_them(
    governed: tuple[Path, Path, dict[str, dict[str, Any]], dict[str, dict[str, Any]]],
) -> None:
    store_path, _, spans, _ = governed
    with Store(store_path, read_only=True) as store:
        found = adaptive_decisions(store.cells())

    assert found.cells_seen == SERIAL_CELLS + NEIGHBOUR_CELLS
    assert [e.eval_name for e in found.evals] == ["batch", "serial"]
    for name in ("batch", "serial"):
        assert _facts(found, name) == _figures(spans, name), name
    batch = _figures(spans, "batch")
    # the run did what makes the figures worth having: neighbour cells held, each for a serial
    # cell, for a while; none of the serial cells (the protected ones) held
    assert batch["held"] > 0
    assert found.hold_s > 0
    assert set(batch["held_for"]) <= {*(f"serial-{i}" for i in range(SERIAL_CELLS)), "next cell of serial"}
    assert _figures(spans, "serial")["held"] == 0
    assert found.cells == sum(_figures(spans, n)["cells"] for n in ("batch", "serial"))
    assert found.held == batch["held"] + _figures(spans, "serial")["held"]
    assert found.longest is not None
    assert found.longest.hold_s == max(
        a[sc.CELL_ADAPTIVE_HELD_S] for a in spans.values() if sc.CELL_ADAPTIVE_HELD_REASON in a
    )
    # Every decided span says how long and how often the law held it: within its wait, at
    # least once where it names a hold, never where it does not.
    decided = [a for a in spans.values() if sc.CELL_ADAPTIVE_REASON in a or sc.CELL_ADAPTIVE_HELD_REASON in a]
    for a in decided:
        assert 0 <= a[sc.CELL_ADAPTIVE_HELD_S] <= a[sc.CELL_QUEUE_WAIT_S]
        assert (a[sc.CELL_ADAPTIVE_HOLDS] >= 1) == (sc.CELL_ADAPTIVE_HELD_REASON in a)
    assert any(a[sc.CELL_ADAPTIVE_HELD_S] > 0 for a in decided)


def test_the_report_and_lanes_show_the_stores_decisions(
    governed: tuple[Path, Path, dict[str, dict[str, Any]], dict[str, dict[str, Any]]],
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The report's section opens with the glance line of the same facts; `lanes --json` lists
    the latest-ending decided cells with what their spans recorded."""
    store_path, state, spans, _ = governed
    with Store(store_path, read_only=True) as store:
        content = build_report(inputs_from_store(store))
        cells = store.cells()
    assert content.decisions == adaptive_decisions(cells)
    page = render_html(content, {})
    assert html.escape(summary_line(content.decisions, "model s")) in page

    assert main(["lanes", "--state", str(state), "--store", str(store_path), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)["decisions"]
    assert (shown["store"], shown["cells_read"], shown["note"]) == (str(store_path), len(cells), None)
    latest = sorted(cells, key=lambda c: c.end_unix_ns, reverse=True)[:10]
    assert [d["cell_id"] for d in shown["recent"]] == [c.cell_id for c in latest]
    for d in shown["recent"]:
        a = spans[d["cell_id"]]
        assert (d["reason"], d["margin"], d["held_reason"], d["waited_s"]) == (
            a.get(sc.CELL_ADAPTIVE_REASON),
            a.get(sc.CELL_ADAPTIVE_MARGIN),
            a.get(sc.CELL_ADAPTIVE_HELD_REASON),
            a[sc.CELL_QUEUE_WAIT_S],
        )


def test_lanes_showed_each_cell_in_flight_with_the_verdict_its_span_records(
    governed: tuple[Path, Path, dict[str, dict[str, Any]], dict[str, dict[str, Any]]],
) -> None:
    """While the run went, `lanes --json` listed each cell in flight with the verdict the law
    admitted it on, from the state file; once the cell ended, its span recorded the same (the
    same figures, rounded alike). Among them, neighbour cells admitted into a serial cell's
    slack, naming it."""
    _, _, spans, in_flight = governed
    assert in_flight  # the poll saw the run
    for cell_id, entry in in_flight.items():
        a = spans[cell_id]
        assert entry["admitted_on"] == {
            "reason": a[sc.CELL_ADAPTIVE_REASON],
            "protected_cell": a.get(sc.CELL_ADAPTIVE_PROTECTED),
            "projected_finish_s": a.get(sc.CELL_ADAPTIVE_FINISH_S),
            "margin": a.get(sc.CELL_ADAPTIVE_MARGIN),
            "rate_used_tok_s": a.get(sc.CELL_ADAPTIVE_RATE),
        }, cell_id
    slack = [
        e for c, e in in_flight.items() if c.startswith("batch-") and e["admitted_on"]["reason"] == "slack"
    ]
    assert slack
    assert {e["admitted_on"]["protected_cell"] for e in slack} <= {
        *(f"serial-{i}" for i in range(SERIAL_CELLS)),
        "next cell of serial",
    }
