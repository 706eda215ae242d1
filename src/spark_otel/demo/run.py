"""`run_demo`: the acts in order, then the evals' own records read back and the report."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import _clock
from .. import _semconv as sc
from .._clock import NS_PER_S
from .box_process import box_process
from .governed import ACT5_RUNS, DEMO_ACT, RunFigures, run_figures, run_governed_act
from .load import Lane, openai_client, same_engine_load, sleep_model
from .own_store import clear_own_store, demo_store_path, run_tag
from .schedule import (
    DEFAULT_SPEED,
    DEMO_RUN,
    LOAD_ENGINE,
    LOAD_WORKERS,
    SERIAL_ENGINE,
    DemoPlan,
    ground_truth,
)

if TYPE_CHECKING:
    from ..analysis.gauges import InstrumentsReport
    from ..analysis.neighbour import NeighbourReport
    from ..receivers.receiver import Receiver
    from ..records.probe_report import ProbeReport
    from ..report import ReportContent
    from ..store import Store
    from ..telemetry import Telemetry

__all__ = ["DemoResult", "PhaseCallback", "run_demo"]

PhaseCallback = Callable[[str], None]


@dataclass
class DemoResult:
    """What the demo measured and where it wrote it."""

    run_tag: str
    serial_eval: str
    review_eval: str
    load_eval: str
    store_path: Path
    report_path: Path
    probes: list[ProbeReport]
    neighbour: NeighbourReport
    content: ReportContent
    ground_truth: dict[str, float]
    wall_s: float
    rules_path: Path
    state_path: Path
    """Act 5's governor state, shared by both of its runners."""
    governed: list[RunFigures]
    """Act 5: the two evals run again without and with the rules."""
    adaptive: RunFigures | None = None
    """Act 5's third run: governed by the deadline-slack law, no rules file, nothing measured."""


def run_demo(
    *,
    speed: float = DEFAULT_SPEED,
    store_path: str | Path | None = None,
    out_dir: str | Path = "spark-otel-demo",
    quick: bool = False,
    on_phase: PhaseCallback | None = None,
) -> DemoResult:
    """Run the demo end to end; see the module docstring. Needs the ``sim`` extra."""
    from ..sim.clock import box_model_time

    plan = DemoPlan.quick(speed) if quick else DemoPlan.full(speed)
    run = _start_run(plan, store_path, out_dir, on_phase)
    started = _clock.real_monotonic_ns()
    run.phase("starting the simulated box")
    # Model time runs `speed` times faster than the real clock; the box's starts far enough in
    # the past that the run ends near the real present, so the store holds no future records for
    # a later real eval to mistake for overlapping load. This process follows the box's clock.
    epoch = _clock.real_wall_ns() - int(1.25 * plan.expected_model_s * NS_PER_S)
    with (
        box_process(plan.speed, epoch) as urls,
        box_model_time(urls[SERIAL_ENGINE]),
        _recording(run, urls) as recording,
    ):
        _put_run_document(recording.store, run, quick=quick)
        engines = _engines(urls)
        probes = _act2_probes(run, engines, recording.store)
        _act3_workers(run, engines)
        _act4_neighbours(run, engines, recording.store)
        truth = ground_truth(plan)
        content, neighbour = _read_acts(run, recording, probes)
        rules_path, state_path = _act5_governed(run, engines, content, Path(out_dir))
    *governed, adaptive = _read_act5(run, neighbour.baseline.median or 0.0)
    from ..report import write_report

    report_path = write_report(content, out_dir)
    return DemoResult(
        run_tag=run.tag,
        serial_eval=run.serial_eval,
        review_eval=run.review_eval,
        load_eval=run.load_eval,
        store_path=run.store_path,
        report_path=report_path,
        probes=probes,
        neighbour=neighbour,
        content=content,
        ground_truth=truth,
        wall_s=(_clock.real_monotonic_ns() - started) / NS_PER_S,
        rules_path=rules_path,
        state_path=state_path,
        governed=governed,
        adaptive=adaptive,
    )


@dataclass(frozen=True)
class _Run:
    """What every act shares: the schedule, where phases are reported, the store, and the evals,
    named by the run's tag so that a store holding earlier runs tells this one's records apart."""

    plan: DemoPlan
    phase: PhaseCallback
    store_path: Path
    tag: str
    serial_eval: str
    review_eval: str
    load_eval: str

    @property
    def evals(self) -> tuple[str, str, str]:
        """The serial eval first: the one whose neighbours Act 4 prices."""
        return self.serial_eval, self.review_eval, self.load_eval


def _start_run(
    plan: DemoPlan, store_path: str | Path | None, out_dir: str | Path, on_phase: PhaseCallback | None
) -> _Run:
    """The run's store (its own, emptied: simulated cells must never read as load beside real
    evals; or the caller's, added to) and its tag and eval names."""
    phase = on_phase or (lambda _name: None)
    path = demo_store_path(store_path, out_dir)
    if store_path is None:
        clear_own_store(path)
    tag = run_tag(path)
    serial_eval, review_eval, load_eval = (f"demo-{what}-{tag}" for what in ("serial", "review", "nemotron"))
    return _Run(plan, phase, path, tag, serial_eval, review_eval, load_eval)


@dataclass(frozen=True)
class _Recording:
    """Where the acts' records go: the telemetry's store, and the receiver beside the acts."""

    telemetry: Telemetry
    store: Store
    receiver: Receiver


@contextmanager
def _recording(run: _Run, urls: dict[str, str]) -> Iterator[_Recording]:
    """This process instrumented into the run's store, with the box's gauges and the engines'
    counters recorded beside every act, as `spark-otel receive --gpu sim` would record them: what
    the instruments verdicts and the cells' energy read. All of it stops however the acts end."""
    from opentelemetry.sdk.metrics import MeterProvider

    import spark_otel

    from ..receivers.gpu import SimGpuSource
    from ..receivers.receiver import Receiver
    from ..telemetry import configure

    telemetry = configure(
        service_name="spark-otel-demo", store=run.store_path, metric_export_interval_ms=60_000
    )
    spark_otel.instrument()
    # A meter provider of its own: the receiver's samples reach the store directly, once.
    gauges = MeterProvider()
    receiver: Receiver | None = None
    try:
        store = telemetry.store
        assert store is not None
        receiver = Receiver(
            urls,
            interval_s=_scrape_interval_s(run.plan.speed),
            meter_provider=gauges,
            store=store,
            gpu=SimGpuSource(urls[SERIAL_ENGINE]),
            close_gpu=True,
        ).start()
        yield _Recording(telemetry, store, receiver)
    finally:
        if receiver is not None:
            receiver.stop()
        gauges.shutdown()
        spark_otel.uninstrument()
        telemetry.force_flush()
        telemetry.shutdown()


def _put_run_document(store: Store, run: _Run, *, quick: bool) -> None:
    """The run's eval names and schedule as a "demo" document, under its tag."""
    store.put_document(
        "demo",
        run.tag,
        {
            "serial_eval": run.serial_eval,
            "review_eval": run.review_eval,
            "load_eval": run.load_eval,
            "speed": run.plan.speed,
            "quick": quick,
        },
    )


@dataclass(frozen=True)
class _Engines:
    """The box's engines as its evals reach them: each one's URL, OpenAI client and served model."""

    urls: dict[str, str]
    qwen: Any
    qwen_model: str
    nemotron: Any
    nemotron_model: str


def _engines(urls: dict[str, str]) -> _Engines:
    """Each engine's client, and the model it serves as the engine itself lists it."""
    qwen, nemotron = openai_client(urls[SERIAL_ENGINE]), openai_client(urls[LOAD_ENGINE])
    return _Engines(urls, qwen, qwen.models.list().data[0].id, nemotron, nemotron.models.list().data[0].id)


def _act2_probes(run: _Run, engines: _Engines, store: Store) -> list[ProbeReport]:
    """Act 2, what more streams buy: each engine's concurrency curve, the box otherwise idle."""
    from ..probe import ProbeSettings, run_probe

    plan = run.plan
    probes = []
    for engine, levels in ((SERIAL_ENGINE, plan.qwen_levels), (LOAD_ENGINE, plan.nemotron_levels)):
        run.phase(f"Act 2: probe on {engine}, the box otherwise idle")
        probes.append(
            run_probe(
                engines.urls[engine],
                ProbeSettings(
                    streams=list(levels),
                    tokens=plan.probe_tokens,
                    warmup=False,
                    # Plain requests cost this process nothing while they decode.
                    mode="plain",
                    engine=engine,
                    name=_probe_name(run.tag, engine),
                    time_scale=plan.speed,
                ),
                store=store,
            )
        )
    return probes


def _act3_workers(run: _Run, engines: _Engines) -> None:
    """Act 3, what workers buy on real cells: the review eval's cells at one worker, then the same
    cells at the plan's workers (wall speedup against per-cell cost)."""
    plan = run.plan

    def review(workers: int) -> Lane:
        return Lane(
            client=engines.qwen,
            model=engines.qwen_model,
            eval_name=run.review_eval,
            engine=SERIAL_ENGINE,
            workers=workers,
            tokens=plan.review_tokens,
            prompt_chars=plan.serial_prompt_chars,
            stream=False,
        )

    run.phase(f"Act 3: {plan.review_cells} cells on qwen at one worker")
    review(1).run_set(plan.review_cells)
    run.phase(f"Act 3: the same cells at {plan.review_workers} workers")
    review(plan.review_workers).run_set(plan.review_cells)
    sleep_model(plan.gap_s)  # an idle gap: the eval's runs end here


def _act4_neighbours(run: _Run, engines: _Engines, store: Store) -> None:
    """Act 4, what a neighbour costs: the serial eval on qwen throughout, alone, beside more qwen
    streams, beside an eval on nemotron, then alone again."""
    plan = run.plan
    stop_serial, stop_load = threading.Event(), threading.Event()
    with ThreadPoolExecutor(1 + LOAD_WORKERS, thread_name_prefix="demo") as pool:
        # On any error (Ctrl-C included) the lanes must stop too: leaving the block waits
        # for them, and each runs cells until its event is set.
        try:
            run.phase("Act 4: the serial eval on qwen, alone")
            serial_lane = Lane.serial(
                engines.qwen,
                engines.qwen_model,
                run.serial_eval,
                plan.serial_tokens,
                plan.serial_prompt_chars,
            )
            serial = pool.submit(serial_lane.run, stop_serial, 1)
            sleep_model(plan.baseline_s)
            _beside_qwen_streams(run, engines, store)
            run.phase("Act 4: quiet gap")
            sleep_model(plan.gap_s)
            _beside_nemotron_eval(run, engines, pool, stop_load)
            run.phase("Act 4: the serial eval alone again")
            sleep_model(plan.tail_s)
            stop_serial.set()
            serial.result()
        finally:
            stop_load.set()
            stop_serial.set()


def _beside_qwen_streams(run: _Run, engines: _Engines, store: Store) -> None:
    """Act 4's same-engine neighbours: more streams on qwen in turn, each recorded as a load
    window (the streams are no eval's cells: the window is what says when they ran)."""
    for streams in run.plan.same_engine_loads:
        run.phase(f"Act 4: the serial eval beside {streams} more qwen stream(s)")
        store.write_windows(
            [
                same_engine_load(
                    engines.qwen, engines.qwen_model, streams, run.plan.same_engine_load_s, run.tag
                )
            ]
        )


def _beside_nemotron_eval(
    run: _Run, engines: _Engines, pool: ThreadPoolExecutor, stop: threading.Event
) -> None:
    """Act 4's cross-engine neighbour: an eval at four workers on nemotron for the plan's
    ``load_s``, its lanes stopped and waited for before the act goes on."""
    plan = run.plan
    run.phase("Act 4: the serial eval beside an eval at 4 workers on nemotron")
    load_lane = Lane(
        client=engines.nemotron,
        model=engines.nemotron_model,
        eval_name=run.load_eval,
        engine=LOAD_ENGINE,
        workers=LOAD_WORKERS,
        tokens=plan.load_tokens,
        prompt_chars=plan.load_prompt_chars,
        stream=False,
    )
    loads = [pool.submit(load_lane.run, stop, 100 + i) for i in range(LOAD_WORKERS)]
    sleep_model(plan.load_s)
    stop.set()
    for f in loads:
        f.result()


def _act5_governed(run: _Run, engines: _Engines, content: ReportContent, out: Path) -> tuple[Path, Path]:
    """Act 5, what the rules buy: the rules Acts 2 to 4 gave written out, then the serial eval and
    an eval on nemotron (from another process) run again without and with them. Returns the rules
    file and the governor state both runs share."""
    rules_path = _write_rules(content, out, run.plan)
    state_path = out / "governor.sqlite"
    run_governed_act(
        run.plan,
        urls=engines.urls,
        qwen=engines.qwen,
        qwen_model=engines.qwen_model,
        serial_eval=run.serial_eval,
        load_eval=run.load_eval,
        store_path=run.store_path,
        rules_path=rules_path,
        state_path=state_path,
        on_phase=run.phase,
    )
    return rules_path, state_path


def _read_acts(
    run: _Run, recording: _Recording, probes: Sequence[ProbeReport]
) -> tuple[ReportContent, NeighbourReport]:
    """Acts 2 to 4 as the evals' own records tell them: every record written first (the receiver
    stopped, the telemetry flushed), then read back from the store."""
    from ..store import Store

    recording.receiver.stop()
    run.phase("reading the evals' own records")
    recording.telemetry.force_flush()
    with Store(run.store_path, read_only=True) as reader:
        return _analyse(reader, run.tag, run.evals, probes)


def _read_act5(run: _Run, baseline: float) -> list[RunFigures]:
    """Act 5's three runs as their records tell them, priced against Act 4's serial baseline."""
    from ..store import Store

    run.phase("reading Act 5's records")
    with Store(run.store_path, read_only=True) as reader:
        return _act5_figures(reader, run.serial_eval, run.load_eval, baseline)


def _scrape_interval_s(speed: float) -> float:
    """The receiver's interval in model seconds: 50 ms of real time between scrapes, and at
    least one model second."""
    return max(1.0, speed / 20)


def _write_rules(content: ReportContent, out: Path, plan: DemoPlan) -> Path:
    """The rules Acts 2 to 4 gave, as `spark-otel advise --write-rules --by-eval` writes them:
    naming the serial eval, because its cells sit far inside their ceiling, so the general form
    (which holds nemotron only beside ceiling-bound cells) would rightly let nemotron run beside
    them, and Act 5 shows what a rule that holds it buys."""
    from ..views.rules_file import dump_rules, rules_from_advice

    assert content.advice is not None
    rules = rules_from_advice(
        content.advice, content.curves, engine_urls=content.engine_urls, source=content.source, by_eval=True
    )
    rules = rules.model_copy(update={"eval_gap_s": plan.governed_eval_gap_s})
    out.mkdir(parents=True, exist_ok=True)  # with --store, nothing has written into it yet
    path = out / "rules.toml"
    path.write_text(dump_rules(rules), encoding="utf-8")
    return path


def _act5_figures(store: Store, serial_eval: str, load_eval: str, baseline: float) -> list[RunFigures]:
    serial = store.cells(eval_name=serial_eval)
    load = store.cells(eval_name=load_eval)
    return [
        run_figures(
            label,
            [c for c in serial if c.attributes.get(DEMO_ACT) == act],
            [c for c in load if c.attributes.get(DEMO_ACT) == act],
            baseline,
        )
        for act, label in ACT5_RUNS
    ]


def _analyse(
    store: Store, tag: str, evals: Sequence[str], probes: Sequence[ProbeReport]
) -> tuple[ReportContent, NeighbourReport]:
    """This run's cells and windows only: a store may hold earlier runs whose model-time stamps
    overlap this one's (a run at speed S stamps times up to S times its length ahead)."""
    from ..report import ReportInputs, build_report
    from ..report.inputs import energy_samples

    serial_eval = evals[0]
    cells = [c for name in evals for c in store.cells(eval_name=name) if DEMO_ACT not in c.attributes]
    runs = {_probe_name(tag, p.metadata.engine) for p in probes}
    windows = [
        w
        for w in store.windows()
        if w.attributes.get(sc.PROBE_RUN) in runs or w.attributes.get(DEMO_RUN) == tag
    ]
    spans = [(c.start_unix_ns, c.end_unix_ns) for c in cells]
    spans += [(lv.start_unix_ns, lv.end_unix_ns) for p in probes for lv in p.levels]
    inputs = ReportInputs(
        source=f"{store.path} (demo run {tag})",
        cells=cells,
        windows=windows,
        probes=list(probes),
        engine_urls={p.metadata.engine: p.metadata.engine_url for p in probes},
        gpu_energy=energy_samples(store, spans),
        instruments=_instruments(store, probes),
    )
    content = build_report(inputs)
    neighbour = next(n for n in content.neighbours if n.eval_name == serial_eval)
    return content, neighbour


def _instruments(store: Store, probes: Sequence[ProbeReport]) -> InstrumentsReport | None:
    """Which of the box's gauges tracked the load this run's probes put on it (Appendix F)."""
    from ..analysis.gauges import STORED_METRICS, instrument_verdicts, probe_intervals

    intervals, _ = probe_intervals({"name": "demo", "body": p.model_dump(mode="json")} for p in probes)
    if not intervals:
        return None
    margin = 60 * NS_PER_S  # a counter's reading either side of each level
    since = min(i.start_unix_ns for i in intervals) - margin
    until = max(i.end_unix_ns for i in intervals) + margin
    samples = [
        s for name in STORED_METRICS for s in store.samples(name, since_unix_ns=since, until_unix_ns=until)
    ]
    urls = {p.metadata.engine: p.metadata.engine_url for p in probes}
    return instrument_verdicts(intervals, samples, interval_source="probe", engine_urls=urls)


def _probe_name(tag: str, engine: str) -> str:
    return f"demo probe {engine} {tag}"
