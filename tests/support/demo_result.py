"""A demo run's result built by hand, with something for every act; its --json document; and the
acts as `spark-otel demo` prints them on a narrow terminal."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.support.neighbour_reports import neighbour_report, window_cost
from tests.support.probe_figures import level_with_figures, report_of_levels
from tests.support.queue_rules import cap_rule, yields_rule
from tests.support.report_content import (
    engine_concurrency,
    instrument_verdict,
    instruments_report,
    probe_curve,
    report_content,
    speedup_of,
)

from spark_otel.analysis.advisor import Advice, AdvisorConfig
from spark_otel.analysis.concurrency import ConcurrencyReport, RunSummary
from spark_otel.analysis.energy import CellEnergy, EnergyReport, per_eval
from spark_otel.analysis.neighbour import NeighbourReport
from spark_otel.analysis.stats import RateSummary
from spark_otel.demo import DemoResult
from spark_otel.demo.governed import RunFigures
from spark_otel.records.probe_report import ProbeReport
from spark_otel.views.answers import Answer

S = 1_000_000_000


T0 = 1_790_000_000 * S  # 2026-09-21 14:13:20 UTC


SERIAL, REVIEW, LOAD = "demo-serial-t1", "demo-review-t1", "demo-nemotron-t1"


OUT = Path("/tmp/demo out")


WIDTH = 60
"""Narrow enough that a table of many columns prints as "header  value" records: text to compare."""


def _probe(engine: str, streams: int) -> ProbeReport:
    report = report_of_levels([level_with_figures(streams)], time_scale=20.0)
    return report.model_copy(update={"metadata": report.metadata.model_copy(update={"engine": engine})})


def _run(
    workers: int | None, eval_name: str, n_cells: int, wall_s: float, median: float | None, hits: int
) -> RunSummary:
    return RunSummary(
        eval_name=eval_name, engine="qwen", workers=workers, start_unix_ns=T0, end_unix_ns=T0 + S,
        n_cells=n_cells, wall_s=wall_s, completion_tokens=1000, aggregate_rate=None,
        rate=RateSummary(n=n_cells, median=median), ceiling_hits=hits, failures=0,
    )  # fmt: skip


def _cell_energy(uid: str, eval_name: str, workers: int, start_s: int, share_j: float) -> CellEnergy:
    """A cell of 1,000 tokens, 100 s long from ``start_s`` after `T0`, its share ``share_j``."""
    return CellEnergy(
        uid=uid, eval_name=eval_name, cell_id=uid, engine="qwen", workers=workers,
        start_unix_ns=T0 + start_s * S, end_unix_ns=T0 + (start_s + 100) * S, completion_tokens=1000,
        box_j=share_j, share_j=share_j, j_per_token=share_j / 1000,
    )  # fmt: skip


def _energy(*cells: CellEnergy) -> EnergyReport:
    return EnergyReport(
        gpus=["0"], estimated=False, covered_start_unix_ns=T0, covered_end_unix_ns=T0 + 600 * S,
        box_j=13_400.4, attributed_j=13_400.4, partial_j=0.0, idle_j=2_000.6, cells=list(cells),
        evals=per_eval(cells), unmeasured=0, measure=None,
    )  # fmt: skip


ANSWERS = [
    Answer(topic="curve", text="qwen: 2 streams bought 1.9x the aggregate", measured=True),
    Answer(topic="curve", text="nemotron: one level measured, no curve", measured=False),
    Answer(topic="concurrency", text=f"{REVIEW} at 8 workers on qwen: 6.0x the wall speed", measured=True),
    Answer(topic="concurrency", text="other-eval at 4 workers on qwen: 3.1x the wall speed", measured=True),
    Answer(topic="neighbour", text=f"an eval at 4 workers on nemotron cost {SERIAL} 62%", measured=True),
    Answer(topic="neighbour", text=f"{LOAD}: no baseline", measured=False),
    Answer(topic="rules", text="2 queue rules, from the curves and the neighbour costs", measured=True),
]


CAP = cap_rule("nemotron", 8, peak=40.0, after=30.0)


YIELDS = yields_rule("nemotron", SERIAL, "qwen", cost=0.62)


GROUND_TRUTH = {"load": 0.6, "1 more qwen stream": 0.074, "4 more qwen streams": 0.26}


BASELINE = RateSummary(n=20, median=10.0, p10=8.5, p90=11.25)


def _figures(label: str, **kw: Any) -> RunFigures:
    fields: dict[str, Any] = {
        "label": label, "serial_cells": 6, "serial_median": 9.5, "beside_cells": 3, "beside_median": 3.75,
        "cost": 0.625, "ceiling_hits": 1, "serial_longest_s": 1800.4, "load_cells": 12, "load_wall_s": 987.6,
        "load_peak": 4, "load_waited_max_s": 0.4, "load_started_after_serial": False, "both_wall_s": 1234.5,
    }  # fmt: skip
    return RunFigures(**(fields | kw))


GOVERNED = [
    _figures("without rules"),
    _figures(
        "with the rules", beside_cells=0, beside_median=None, serial_median=9.875, cost=0.0125,
        ceiling_hits=0, serial_longest_s=1100.5, load_wall_s=1500.0, load_waited_max_s=456.6,
        load_started_after_serial=True, both_wall_s=1789.4,
    ),
]  # fmt: skip


ADAPTIVE = _figures(
    "adaptive, no rules", beside_cells=4, beside_median=7.5, cost=0.25, ceiling_hits=0,
    serial_longest_s=1310.5, load_wall_s=1049.4, load_peak=2, load_waited_max_s=120.4, both_wall_s=1300.0,
)  # fmt: skip
"""Act 5's third run: the law let nemotron run two wide in the serial cells' slack; its wall
1,049.4 against the rules' 1,500.0 is 30% shorter (0.3004 to a whole percent)."""


def _neighbour() -> NeighbourReport:
    """The serial eval beside one more qwen stream and the nemotron eval, never beside 4 streams."""
    return neighbour_report(
        [
            window_cost("w1", 0.09, name="1 more qwen stream", engine="qwen", streams=1, same_engine=True,
                        n_cells=3, timeouts=0, rate=RateSummary(n=3, median=9.1)),
            window_cost("w2", None, name="4 more qwen streams", engine="qwen", n_cells=0),
            window_cost("w3", 0.62, name=f"run {LOAD}", n_cells=5, rate=RateSummary(n=5, median=3.8)),
        ],
        eval_name=SERIAL, engine="qwen", baseline=BASELINE,
    )  # fmt: skip


def demo_result(
    out: Path = OUT, *, neighbour: NeighbourReport | None = None, governed: list[RunFigures] = GOVERNED,
    adaptive: RunFigures | None = ADAPTIVE, **content: Any,
) -> DemoResult:  # fmt: skip
    """A demo run with something for every act: a probe on each engine, the review eval's runs at
    8, 1 and an unrecorded number of workers (and another eval's run), its energy at 1 and 8
    workers (and the serial eval's), the loads beside the serial eval, the gauges, two rules and
    Act 5's three runs. ``content`` replaces parts of the report's content."""
    probes = [_probe("qwen", 2), _probe("nemotron", 1)]
    runs = [
        _run(8, REVIEW, 8, 301.6, 9.125, 1),
        _run(1, REVIEW, 8, 1799.5, 10.5, 0),
        _run(None, REVIEW, 2, 50.4, None, 0),
        _run(4, "other-eval", 4, 99.0, 7.0, 0),
    ]
    engine = engine_concurrency(
        "qwen", [], [speedup_of(8, 301.6, 1799.5, 5.97, eval_name=REVIEW, per_cell_cost=0.131)]
    )
    neighbour = neighbour or _neighbour()
    fields: dict[str, Any] = {
        "probes": probes,
        "curves": [probe_curve("qwen", 1)],
        "concurrency": ConcurrencyReport(eval_name=None, engines=[engine.model_copy(update={"runs": runs})]),
        "neighbours": [neighbour],
        "advice": Advice(config=AdvisorConfig(), classes=[], rules=[CAP, YIELDS]),
        "answers": ANSWERS,
        "energy": _energy(
            _cell_energy("r1a", REVIEW, 1, 0, 5000.0),
            _cell_energy("r1b", REVIEW, 1, 100, 6000.0),
            _cell_energy("r8", REVIEW, 8, 300, 1500.0),
            _cell_energy("s1", SERIAL, 1, 500, 900.0),
        ),
        "instruments": instruments_report(),
        "scales": [20.0],
    }
    return DemoResult(
        run_tag="t1",
        serial_eval=SERIAL,
        review_eval=REVIEW,
        load_eval=LOAD,
        store_path=out / "store.sqlite",
        report_path=out / "report.html",
        probes=probes,
        neighbour=neighbour,
        content=report_content(**(fields | content)),
        ground_truth=GROUND_TRUTH,
        wall_s=83.46,
        rules_path=out / "rules.toml",
        state_path=out / "governor.sqlite",
        governed=governed,
        adaptive=adaptive,
    )


NOTHING_BUT_PROBES_AND_LOADS: dict[str, Any] = {
    "concurrency": None,
    "energy": None,
    "instruments": None,
    "advice": None,
    "governed": [],
    "adaptive": None,
}
"""What a run without Acts 3 and 5, gauges or rules leaves out (`demo_result`'s keywords)."""


def _probe_record(streams: int, aggregate: str, engine_aggregate: str, j_per_token: str) -> list[str]:
    """One probe level as a record: `_level`'s figures at ``streams``."""
    return [
        f"streams                    {streams}",
        "wall model s               10.0",
        "per-stream tok/s (median)  10.25",
        "p10 to p90 tok/s           9.50 to 11.12",
        f"probe aggregate tok/s      {aggregate}",
        f"engine aggregate tok/s     {engine_aggregate}",
        "engine/probe               1.25",
        "power W                    200.0",
        f"J/tok                      {j_per_token}",
        "TTFT model s               0.12",
        "client CPU µs/tok          7.2",
        "streams off pin            0",
    ]


# Each engine's probe, its terms explained under the first, and the answer naming its engine.
# J/tok: 200 W for 10 s over 200 tokens at 2 streams, over 100 at 1.
ACT_2 = [
    "Act 2. Probe on qwen, the box otherwise idle",
    "",
    *_probe_record(2, "20.0", "25.0", "10.000"),
    "engine/probe: the engine's own generation counter over the",
    "probe's tokens; above 1, another tenant decoded too",
    "J/tok: joules per output token: the box's GPU energy over",
    "the level (mean power x wall) over the probe's tokens, or a",
    "cell's share over its tokens",
    "client CPU µs/tok: the probe client's own CPU time per",
    "streamed token (real time); ! past its budget: the client's",
    "lag may read as the engine's",
    "streams off pin: streams that did not produce exactly the",
    "pinned token count, or failed; 0: every stream was pinned",
    "=> qwen: 2 streams bought 1.9x the aggregate",
    "",
    "Act 2. Probe on nemotron, the box otherwise idle",
    "",
    *_probe_record(1, "10.0", "12.5", "20.000"),
    "=> nemotron: one level measured, no curve",
    "",
]


# The loads the serial eval ran beside (not the 4 streams it never met), each cost against the
# simulation's: the nemotron eval's is "load", a qwen load's its own name. 0.09 reads 9.
ACT_4 = [
    "Act 4. What other load cost demo-serial-t1 (alone: median",
    "10.00 tok/s over 20 cells, p10 8.50, p90 11.25)",
    "",
    "load elsewhere on the box  1 more qwen stream",
    "cells                      3",
    "timeouts                   0",
    "serial eval tok/s          9.10",
    "cost %                     9",
    "simulated cost %           7",
    "",
    "load elsewhere on the box  run demo-nemotron-t1",
    "cells                      5",
    "timeouts                   2",
    "serial eval tok/s          3.80",
    "cost %                     62",
    "simulated cost %           60",
    "simulated cost %: what the simulated box was told the load",
    "costs: the answer to check against",
    "=> an eval at 4 workers on nemotron cost demo-serial-t1 62%",
    "",
]


def json_result(out: Path = OUT, **content: Any) -> DemoResult:
    """`demo_result` with one of each thing the JSON holds, the serial eval beside no load;
    ``content`` as there."""
    one_of_each: dict[str, Any] = {
        "answers": ANSWERS[:1],
        "advice": Advice(config=AdvisorConfig(), classes=[], rules=[CAP]),
        "energy": _energy(_cell_energy("r8", REVIEW, 8, 300, 1500.0)),
        "instruments": instruments_report(
            instruments=[instrument_verdict("GPU 0 power", "not load", 2, 0.04, None)]
        ),
    }
    neighbour = neighbour_report([], eval_name=SERIAL, engine="qwen", baseline=BASELINE)
    return demo_result(out, neighbour=neighbour, **(one_of_each | content))


def expected_json(out: Path, speed: float) -> dict[str, Any]:
    """`json_result` as --json prints it."""
    return {
        "run_tag": "t1",
        "speed": speed,
        "wall_s": 83.5,
        "store": f"{out}/store.sqlite",
        "report": f"{out}/report.html",
        "evals": {"review": REVIEW, "serial": SERIAL, "load": LOAD},
        "answers": [
            {"topic": "curve", "text": "qwen: 2 streams bought 1.9x the aggregate", "measured": True}
        ],
        "curves": [
            {
                "engine": "qwen",
                "points": [
                    {
                        "streams": 1,
                        "per_stream_rate": 10.0,
                        "aggregate_rate": 10.0,
                        "p10": None,
                        "p90": None,
                        "n": 1,
                        "ci_low": None,
                        "ci_high": None,
                    },
                ],
                "source": "probe",
                "model": None,
                "measured_unix_ns": 1_772_600_767 * S,  # test_html_sections' T0: 2026-03-04 05:06:07
                "run": None,
                "under_load": None,
            }
        ],
        "speedups": [
            {
                "eval_name": REVIEW,
                "engine": "qwen",
                "base_workers": 1,
                "workers": 8,
                "base_start_unix_ns": 1_772_600_767 * S,
                "start_unix_ns": 1_772_610_767 * S,
                "base_wall_s": 1799.5,
                "wall_s": 301.6,
                "base_cells": 4,
                "n_cells": 4,
                "speedup": 5.97,
                "same_cells": True,
                "base_rate_median": 11.0,
                "rate_median": 5.0,
                "per_cell_cost": 0.131,
            }
        ],
        # Every field but the cells (a rate for each, thousands in a long run).
        "neighbour": {
            "eval_name": SERIAL,
            "engine": "qwen",
            "workers": None,
            "without_count": False,
            "min_overlap_fraction": 0.5,
            "n_cells": 30,
            "timeouts": 2,
            "failures": 0,
            "baseline": {
                "n": 20,
                "median": 10.0,
                "p10": 8.5,
                "p90": 11.25,
                "mean": None,
                "ci_low": None,
                "ci_high": None,
            },
            "baseline_timeouts": 0,
            "windows": [],
            "warnings": [],
            "requests_as_cells": 0,
        },
        "ground_truth": {"load": 0.6, "1 more qwen stream": 0.074, "4 more qwen streams": 0.26},
        # The rule's facts as they are, its words beside them.
        "rules": [
            CAP.model_dump(mode="json")
            | {
                "rule": "nemotron lane at most 8 streams",
                "evidence": "aggregate peaks at 40 tok/s at 8 streams and falls to 30 at 16 (probe, idle, at "
                "1, 8, 16 streams)",
            }
        ],
        "rules_file": f"{out}/rules.toml",
        "governed": [
            {
                "label": "without rules",
                "serial_cells": 6,
                "serial_median": 9.5,
                "beside_cells": 3,
                "beside_median": 3.75,
                "cost": 0.625,
                "ceiling_hits": 1,
                "serial_longest_s": 1800.4,
                "load_cells": 12,
                "load_wall_s": 987.6,
                "load_peak": 4,
                "load_waited_max_s": 0.4,
                "load_started_after_serial": False,
                "both_wall_s": 1234.5,
            },
            {
                "label": "with the rules",
                "serial_cells": 6,
                "serial_median": 9.875,
                "beside_cells": 0,
                "beside_median": None,
                "cost": 0.0125,
                "ceiling_hits": 0,
                "serial_longest_s": 1100.5,
                "load_cells": 12,
                "load_wall_s": 1500.0,
                "load_peak": 4,
                "load_waited_max_s": 456.6,
                "load_started_after_serial": True,
                "both_wall_s": 1789.4,
            },
            {
                "label": "adaptive, no rules",
                "serial_cells": 6,
                "serial_median": 9.5,
                "beside_cells": 4,
                "beside_median": 7.5,
                "cost": 0.25,
                "ceiling_hits": 0,
                "serial_longest_s": 1310.5,
                "load_cells": 12,
                "load_wall_s": 1049.4,
                "load_peak": 2,
                "load_waited_max_s": 120.4,
                "load_started_after_serial": False,
                "both_wall_s": 1300.0,
            },
        ],
        "instruments": [
            {
                "instrument": "GPU 0 power",
                "verdict": "not load",
                "evidence": "no readings in 2 loaded intervals (12.5 to 1,234.5 tok/s): its source "
                "recorded other quantities but not this one",
            }
        ],
        # The report's energy per eval and worker count: 1,500 J over 1,000 tokens.
        "energy": [
            {
                "eval_name": REVIEW,
                "workers": 8,
                "n_cells": 1,
                "n_measured": 1,
                "output_tokens": 1000,
                "energy_j": 1500.0,
                "j_per_token": 1.5,
                "j_per_cell": 1500.0,
                "per_cell": {
                    "n": 1,
                    "median": 1500.0,
                    "p10": 1500.0,
                    "p90": 1500.0,
                    "mean": 1500.0,
                    "ci_low": None,
                    "ci_high": None,
                },
                "start_unix_ns": T0 + 300 * S,
                "end_unix_ns": T0 + 400 * S,
            }
        ],
    }
