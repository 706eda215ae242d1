"""`spark-otel demo` end to end through `main`, the demo itself replaced: the speed it refuses
(with its message, before anything starts), the options it hands the demo, the spinner naming
each phase, and what it prints after the demo (the acts, where it wrote the report, the rules
and the store, how long it took, and the commands to read the records, each path quoted for the
shell) or, with --json, the JSON document.

The real demo runs for a minute on the simulated box: tests/cli/test_demo.py runs it once and
checks what it records. Here `spark_otel.demo.run_demo` is a stand-in that records its keywords,
names one phase and returns a result built by hand (tests/cli/test_demo_printing.py), so each
test takes milliseconds and every figure printed is known."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from tests.support.demo_result import (
    ACT_2,
    ACT_4,
    NOTHING_BUT_PROBES_AND_LOADS,
    WIDTH,
    demo_result,
    expected_json,
    json_result,
)
from tests.support.printed import stderr_on_a_terminal

import spark_otel.demo
from spark_otel.cli import main
from spark_otel.demo import DemoResult

PHASE = "Act 2: probe on qwen, the box otherwise idle"
_CONTROL = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


@pytest.fixture(autouse=True)
def _narrow_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """The width test_demo_printing's tables were laid out at."""
    monkeypatch.setenv("COLUMNS", str(WIDTH))


class StandIn:
    """`run_demo` replaced: records the keywords of each call, names `PHASE`, returns ``result``."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, result: DemoResult) -> None:
        self.result = result
        self.calls: list[dict[str, Any]] = []
        monkeypatch.setattr(spark_otel.demo, "run_demo", self)

    def __call__(self, **kwargs: Any) -> DemoResult:
        on_phase: Callable[[str], None] = kwargs.pop("on_phase")
        self.calls.append(kwargs)
        on_phase(PHASE)
        return self.result


@pytest.mark.parametrize(
    ("speed", "shown"), [("0", "0"), ("-1", "-1"), ("nan", "nan"), ("inf", "inf"), ("1e300", "1e+300")]
)
def test_a_speed_that_is_not_positive_and_finite_is_refused_before_the_demo_starts(
    speed: str, shown: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    demo = StandIn(monkeypatch, demo_result())
    assert main(["demo", f"--speed={speed}"]) == 2
    assert capsys.readouterr() == (
        "",
        f"spark-otel: error: --speed must be a finite number >= 0.001 and <= 1,000,000, got {shown}\n",
    )
    assert demo.calls == []


def test_the_demo_runs_with_the_options_given_then_says_where_it_wrote_and_what_to_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Under 1x is a speed too (slower than real time); the paths hold a space, quoted where a
    command is printed to paste."""
    out = tmp_path / "my demo"
    demo = StandIn(monkeypatch, demo_result(out, **NOTHING_BUT_PROBES_AND_LOADS))
    store = str(tmp_path / "my store.sqlite")
    assert main(["demo", "--speed", "0.5", "--store", store, "--out", str(out), "--quick"]) == 0
    assert demo.calls == [{"speed": 0.5, "store_path": store, "out_dir": str(out), "quick": True}]
    # The result's own paths, not the options: the stand-in says where it wrote.
    lines = [line.rstrip() for line in capsys.readouterr().out.split("\n")]
    assert lines == [
        *ACT_2,
        *ACT_4,
        f"report: {out}/report.html",
        f"rules:  {out}/rules.toml (check: spark-otel rules check '{out}/rules.toml')",
        f"store:  {out}/store.sqlite (evals demo-review-t1, demo-serial-t1, demo-nemotron-t1)",
        "took 83 s at 0.5x",
        "to explore the demo's records:",
        f"  spark-otel neighbour-cost --store '{out}/store.sqlite' --eval demo-serial-t1",
        f"  spark-otel concurrency --store '{out}/store.sqlite'",
        f"  spark-otel advise --store '{out}/store.sqlite'",
        f"  spark-otel lanes --rules '{out}/rules.toml' --state '{out}/governor.sqlite'",
        f"  spark-otel report --store '{out}/store.sqlite' --out '{out}'",
        "",
    ]


def test_json_prints_the_document_alone_and_the_demo_runs_with_the_defaults(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    out = Path("/tmp/demo out")
    demo = StandIn(monkeypatch, json_result(out))
    assert main(["demo", "--json"]) == 0
    assert demo.calls == [{"speed": 100.0, "store_path": None, "out_dir": "spark-otel-demo", "quick": False}]
    assert json.loads(capsys.readouterr().out) == expected_json(out, 100.0)


def test_on_a_terminal_a_spinner_says_starting_then_each_phase_the_demo_names(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    StandIn(monkeypatch, json_result())
    with stderr_on_a_terminal() as terminal:
        assert main(["demo", "--json"]) == 0
    frames = [_CONTROL.sub("", f) for f in re.split(r"[\r\n]", terminal.getvalue())]
    # Each frame is the spinner's glyph, a space and the phase; the spinner may redraw one.
    phases = [f[2:] for f in frames if f]
    assert [p for i, p in enumerate(phases) if i == 0 or phases[i - 1] != p] == ["starting", PHASE]
    assert json.loads(capsys.readouterr().out)["run_tag"] == "t1"  # stdout keeps the result alone
