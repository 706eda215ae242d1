"""What `build_report` puts in each field of a `ReportContent`, and what `overview_from_inputs` hands
the analyses, on one box's records built by hand with known answers: an eval run under a model
clock with a time budget, an engine split for one of its requests, a timeout beside a recorded
load, a second eval with its own timeout, a failed cell on a second engine and the GPU's energy
counter. A field filled from the wrong eval, or from the analysis called without one of its
inputs, still looks like a report; only its figures say it is wrong."""

from __future__ import annotations

from typing import Any

from spark_otel import _semconv as sc
from spark_otel.analysis.adaptive_decisions import AdaptiveDecisions
from spark_otel.analysis.advisor import AdvisorConfig
from spark_otel.analysis.budget import CellBudget, EvalBudget
from spark_otel.analysis.outcomes import DeadlineOutcome
from spark_otel.analysis.overview import overview
from spark_otel.model import Cell, CellStatus, LoadWindow, MetricSample, Request, ServerTiming
from spark_otel.records.rate_curve import CurvePoint, RateCurve
from spark_otel.report.content import ReportContent, build_report, eval_time_scales, overview_from_inputs
from spark_otel.report.inputs import ReportInputs
from spark_otel.views.answers import answers
from spark_otel.views.rules import rule_evidence, rule_text

S = 1_000_000_000
T0 = 1_790_000_000 * S
URL = "http://127.0.0.1:8011"
CONFIG = AdvisorConfig(threshold=0.3, ceiling_s=900.0)
"""Not the defaults (0.2, 1800 s): a report run without it reads otherwise."""


def _cell(uid: str, eval_name: str, start_s: float, elapsed_s: float, tokens: int | None, **kw: Any) -> Cell:
    fields: dict[str, Any] = {
        "uid": uid, "eval_name": eval_name, "cell_id": uid, "engine": "qwen", "workers": 1,
        "start_unix_ns": T0 + int(start_s * S), "end_unix_ns": T0 + int((start_s + elapsed_s) * S),
        "completion_tokens": tokens,
    }  # fmt: skip
    fields.update(kw)
    return Cell(**fields)


def _inputs() -> ReportInputs:
    """review (model time at 100x): r0 and r1 alone at 10 and 12 tok/s with a budget, r2 cut off
    at its 100 s ceiling inside the nemotron load, with none. triage: t0 at 10 tok/s, t1 cut off,
    and n0 failed on nemo (no curve from it: the one note). The GPU counter reads 100 W from the
    first cell's start to the last one's end; r0's one request was queued 1 s and prefilled 3 s."""
    model = {sc.TIME_SCALE: 100}
    cells = [
        _cell("r0", "review", 0, 100, 1000, first_token_s=10.0, decode_s=90.0, attributes=model),
        _cell("r1", "review", 100, 100, 1200, first_token_s=20.0, decode_s=80.0, attributes=model),
        _cell("r2", "review", 200, 100, None, status=CellStatus.DEADLINE, deadline_s=100.0,
              attributes=model),
        _cell("t0", "triage", 300, 50, 500),
        _cell("t1", "triage", 350, 50, None, status=CellStatus.DEADLINE, deadline_s=50.0),
        _cell("n0", "triage", 400, 50, None, engine="nemo", status=CellStatus.ERROR),
    ]  # fmt: skip
    load = LoadWindow(
        uid="load", name="nemotron load", kind="load", engine="nemotron",
        start_unix_ns=T0 + 200 * S, end_unix_ns=T0 + 300 * S, streams=4,
    )  # fmt: skip
    return ReportInputs(
        source="box.db",
        cells=cells,
        windows=[load],
        gpu_energy=[
            MetricSample(name=sc.GPU_ENERGY, unix_ns=T0 + t * S, value=j, attributes={sc.GPU_ID: "0"})
            for t, j in ((0, 0.0), (450, 45000.0))
        ],
        requests=[
            Request(uid="q0", cell_uid="r0", operation="chat", start_unix_ns=T0, end_unix_ns=T0 + 100 * S)
        ],
        server_timings={
            "q0": ServerTiming(
                request_uid="q0", trace_id="t", span_uid="s", arrival_unix_ns=T0, queue_s=1.0, prefill_s=3.0
            )
        },
        engine_urls={"qwen": URL},
        gpu_utilization=[99.0] * 5,
        token_rates=[10.0, 40.0],
    )


NO_NEMO_CURVE = (
    "no curve from cells on nemo: engine 'nemo': no completed cells with token counts to build a curve from"
)


def test_one_evals_report_counts_every_record_but_takes_outcomes_budgets_energy_timeouts_from_its_own() -> (
    None
):
    """With ``eval_name``, the outcomes, budgets (r0's first token split 1:3 by the engine into queue
    and prefill; r2 counted as recorded without one), energy (shared over every cell on the box,
    then narrowed) and timeouts (r2 beside the load, not triage's t1) are review's alone; the
    counts, model-time scales and notes stay the box's; the advice is run under ``config``."""
    inputs = _inputs()
    content = build_report(inputs, eval_name="review", config=CONFIG)
    assert (content.source, content.eval_name, content.n_cells, content.n_windows) == (
        "box.db",
        "review",
        6,
        1,
    )
    assert content.outcomes == [
        DeadlineOutcome(
            eval_name="review", workers=1, cells=3,
            statuses={"ok": 2, "error": 0, "deadline": 1, "length_cap": 0},
            ceiling_hits=1, salvaged_findings=0, degraded=0,
        )
    ]  # fmt: skip
    engine, client = "engine server spans", "client"
    assert content.budgets == [
        CellBudget(
            uid="r0", eval_name="review", cell_id="r0", status="ok", elapsed_s=100.0, wall_s=100.0,
            seconds={"queue": 2.5, "prefill": 7.5, "decode": 90.0},
            sources={"queue": engine, "prefill": engine, "decode": client}, requests=1, joined=1,
        ),
        CellBudget(
            uid="r1", eval_name="review", cell_id="r1", status="ok", elapsed_s=100.0, wall_s=100.0,
            seconds={"first_token": 20.0, "decode": 80.0}, sources={"first_token": client, "decode": client},
            requests=0, joined=0,
        ),
    ]  # fmt: skip
    assert content.eval_budgets == [
        EvalBudget(
            eval_name="review", n_cells=2, unsplit_cells=1, requests=1, joined=1, wall_s=200.0,
            seconds={"queue": 2.5, "prefill": 7.5, "first_token": 20.0, "decode": 170.0},
            sources={"queue": engine, "prefill": engine, "first_token": client, "decode": client},
        )
    ]  # fmt: skip
    energy = content.energy
    assert energy is not None
    assert (energy.gpus, energy.box_j, energy.attributed_j, energy.idle_j) == (["0"], 45000.0, 45000.0, 0.0)
    assert [(c.uid, c.share_j, c.j_per_token) for c in energy.cells] == [
        ("r0", 10000.0, 10.0),
        ("r1", 10000.0, 10000.0 / 1200),
        ("r2", 10000.0, None),
    ]
    assert [(e.eval_name, e.n_cells, e.energy_j, e.output_tokens) for e in energy.evals] == [
        ("review", 3, 30000.0, 2200)
    ]
    assert [(t.uid, t.loads, t.baseline_rate) for t in content.timeouts] == [("r2", ["nemotron load"], 11.0)]
    assert (content.time_scales, content.scales) == ({"review": 100.0}, [100.0, 1.0])
    assert content.notes == [NO_NEMO_CURVE]
    assert content.engine_urls == {"qwen": URL}
    assert (content.probes, content.instruments) == ([], None)
    assert content.advice is not None
    assert content.advice.config == CONFIG
    found = overview_from_inputs(inputs, config=CONFIG, eval_name="review")
    assert (content.curves, content.concurrency, content.neighbours, content.advice) == (
        found.curves, found.concurrency, found.neighbours, found.advice,
    )  # fmt: skip
    assert content.answers == answers(found)


def test_the_whole_boxs_report_keeps_every_evals_energy_and_timeouts() -> None:
    """Without ``eval_name`` nothing is narrowed: both evals' energy (triage's 150 s of the box's
    100 W over its 500 tokens) and both timeouts, in time order."""
    content = build_report(_inputs())
    assert content.energy is not None
    assert [(e.eval_name, e.energy_j, e.output_tokens) for e in content.energy.evals] == [
        ("review", 30000.0, 2200),
        ("triage", 15000.0, 500),
    ]
    assert [(t.uid, t.loads) for t in content.timeouts] == [("r2", ["nemotron load"]), ("t1", [])]
    assert [o.eval_name for o in content.outcomes] == ["review", "triage"]
    assert [e.eval_name for e in content.eval_budgets] == ["review", "triage"]


def _curve() -> RateCurve:
    return RateCurve(
        engine="qwen",
        points=[
            CurvePoint(streams=1, per_stream_rate=10.0, aggregate_rate=10.0, n=1),
            CurvePoint(streams=4, per_stream_rate=8.0, aggregate_rate=32.0, n=4),
        ],
    )


def test_a_report_of_a_curve_alone_is_in_real_time_with_nothing_else_to_show() -> None:
    """No cells: no model clock, so the page's time labels read real time (scale 1), and every
    cell-based part is empty."""
    inputs = ReportInputs(source="probe.json", curves=[_curve()])
    content = build_report(inputs)
    assert content == ReportContent(
        source="probe.json", eval_name=None, n_cells=0, n_windows=0, probes=[], curves=[_curve()],
        concurrency=None, neighbours=[], outcomes=[], advice=None, notes=[], time_scales={}, engine_urls={},
        scales=[1.0], answers=answers(overview_from_inputs(inputs)), energy=None, instruments=None,
        budgets=[], eval_budgets=[], timeouts=[],
        decisions=AdaptiveDecisions(cells_seen=0, cells=0, held=0, hold_s=0.0, longest=None, evals=[]),
    )  # fmt: skip


def test_the_overview_is_the_one_call_advise_makes_with_every_recorded_input() -> None:
    """`overview_from_inputs` passes the config, engine, GPU utilization, token rates and engine URLs
    through: the pinned gauge (99%) beside token rates that vary 4x gives the gauge rule, and the
    measuring commands name qwen's URL."""
    inputs = _inputs()
    found = overview_from_inputs(inputs, config=CONFIG, eval_name="review", engine="qwen")
    assert found == overview(
        inputs.cells, inputs.windows, [], config=CONFIG, gpu_utilization=[99.0] * 5, token_rates=[10.0, 40.0],
        eval_name="review", engine="qwen", engine_urls={"qwen": URL},
    )  # fmt: skip
    assert (found.config, found.engine, found.eval_name) == (CONFIG, "qwen", "review")
    assert found.advice is not None
    commands = [r.command for r in found.advice.rules]
    assert commands == [
        f"spark-otel probe --engine qwen={URL} --streams 1,2,4,8",
        f"spark-otel probe --engine qwen={URL} --streams 1,2,4",
        None,
    ]
    gauge = found.advice.rules[-1]
    assert (rule_text(gauge), rule_evidence(gauge)) == (
        "Read load from token counts, never from the GPU utilization gauge",
        "utilization median 99% (p10 99%, p90 99%) over 5 samples while token rate ranged 10.0 to 40.0 tok/s"
        " (4.0x)",
    )


def test_an_evals_time_scale_is_the_largest_it_was_recorded_under_and_real_time_is_left_out() -> None:
    """A model clock of 1 is real time (left out), a speed below 1 still counts, and a missing or
    non-numeric one is none; an eval recorded at two speeds reads the larger, whatever the order."""
    cells = [
        _cell("a", "fast", 0, 1, 1, attributes={sc.TIME_SCALE: 100}),
        _cell("b", "fast", 1, 1, 1, attributes={sc.TIME_SCALE: 50.0}),
        _cell("c", "slow", 2, 1, 1, attributes={sc.TIME_SCALE: 0.5}),
        _cell("d", "double", 3, 1, 1, attributes={sc.TIME_SCALE: 2}),
        _cell("e", "real", 4, 1, 1, attributes={sc.TIME_SCALE: 1}),
        _cell("f", "named", 5, 1, 1, attributes={sc.TIME_SCALE: "100"}),
        _cell("g", "none", 6, 1, 1),
    ]
    assert eval_time_scales(cells) == {"fast": 100.0, "slow": 0.5, "double": 2.0}
    assert eval_time_scales(reversed(cells)) == {"double": 2.0, "slow": 0.5, "fast": 100.0}


def test_the_reports_timeouts_are_the_row_paths_verdicts_with_each_governor_wait() -> None:
    """`build_report` judges the timeouts over the cells' columns; they are `timeout_verdicts`' of the
    records, field for field, the governor's wait (in a cell's attributes, not its columns) included:
    q1 waited 60 s of its 100 s ceiling (queued), and the cells are handed over out of time order."""
    from spark_otel.analysis.timeouts import TimeoutKind, timeout_verdicts

    inputs = _inputs()
    queued = _cell("q1", "review", 500, 100, 300, status=CellStatus.DEADLINE, deadline_s=100.0,
                   attributes={sc.CELL_QUEUE_WAIT_S: 60})  # fmt: skip
    inputs.cells = [inputs.cells[-1], queued, *inputs.cells[:-1]]
    for eval_name in (None, "review", "triage"):
        content = build_report(inputs, eval_name=eval_name)
        assert content.timeouts == timeout_verdicts(inputs.cells, inputs.windows, eval_name=eval_name)
    assert [(t.uid, t.kind, t.admission_s) for t in build_report(inputs, eval_name="review").timeouts] == [
        ("r2", TimeoutKind.UNKNOWN, None),  # no tokens to judge by
        ("q1", TimeoutKind.QUEUED, 60.0),
    ]
