"""`run_demo`: the acts in order, then the evals' own records read back and the report."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from .. import _clock
from .. import _semconv as sc
from .._clock import NS_PER_S
from .box_process import box_process
from .governed import DEMO_ACT, RunFigures, run_figures, run_governed_act
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
    from ..records.probe_report import ProbeReport
    from ..report import ReportContent
    from ..store import Store

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


def run_demo(
    *,
    speed: float = DEFAULT_SPEED,
    store_path: str | Path | None = None,
    out_dir: str | Path = "spark-otel-demo",
    quick: bool = False,
    on_phase: PhaseCallback | None = None,
) -> DemoResult:
    """Run the demo end to end; see the module docstring. Needs the ``sim`` extra."""
    from opentelemetry.sdk.metrics import MeterProvider

    import spark_otel

    from ..probe import ProbeSettings, run_probe
    from ..receivers.gpu import SimGpuSource
    from ..receivers.receiver import Receiver
    from ..sim.clock import box_model_time
    from ..store import Store
    from ..telemetry import configure

    plan = DemoPlan.quick(speed) if quick else DemoPlan.full(speed)
    phase = on_phase or (lambda _name: None)
    path = demo_store_path(store_path, out_dir)
    if store_path is None:
        clear_own_store(path)
    tag = run_tag(path)
    serial_eval, review_eval, load_eval = (f"demo-{what}-{tag}" for what in ("serial", "review", "nemotron"))
    started = _clock.real_monotonic_ns()
    phase("starting the simulated box")
    # Model time runs `speed` times faster than the real clock; the box's starts far enough in
    # the past that the run ends near the real present, so the store holds no future records for
    # a later real eval to mistake for overlapping load. This process follows the box's clock.
    epoch = _clock.real_wall_ns() - int(1.25 * plan.expected_model_s * NS_PER_S)
    with box_process(plan.speed, epoch) as urls, box_model_time(urls[SERIAL_ENGINE]):
        telemetry = configure(service_name="spark-otel-demo", store=path, metric_export_interval_ms=60_000)
        spark_otel.instrument()
        # The box's gauges and the engines' counters beside every act, as `spark-otel receive
        # --gpu sim` would record them: what the instruments verdicts and the cells' energy read.
        # A meter provider of its own: the receiver's samples reach the store directly, once.
        gauges = MeterProvider()
        receiver: Receiver | None = None
        try:
            store = telemetry.store
            assert store is not None
            receiver = Receiver(
                urls,
                interval_s=_scrape_interval_s(plan.speed),
                meter_provider=gauges,
                store=store,
                gpu=SimGpuSource(urls[SERIAL_ENGINE]),
                close_gpu=True,
            ).start()
            store.put_document(
                "demo",
                tag,
                {
                    "serial_eval": serial_eval,
                    "review_eval": review_eval,
                    "load_eval": load_eval,
                    "speed": plan.speed,
                    "quick": quick,
                },
            )
            qwen, nemotron = openai_client(urls[SERIAL_ENGINE]), openai_client(urls[LOAD_ENGINE])
            qwen_model, nemotron_model = qwen.models.list().data[0].id, nemotron.models.list().data[0].id

            probes = []
            for engine, levels in ((SERIAL_ENGINE, plan.qwen_levels), (LOAD_ENGINE, plan.nemotron_levels)):
                phase(f"Act 2: probe on {engine}, the box otherwise idle")
                probes.append(
                    run_probe(
                        urls[engine],
                        ProbeSettings(
                            streams=list(levels),
                            tokens=plan.probe_tokens,
                            warmup=False,
                            # Plain requests cost this process nothing while they decode.
                            mode="plain",
                            engine=engine,
                            name=_probe_name(tag, engine),
                            time_scale=plan.speed,
                        ),
                        store=store,
                    )
                )

            def review(workers: int) -> Lane:
                return Lane(
                    client=qwen,
                    model=qwen_model,
                    eval_name=review_eval,
                    engine=SERIAL_ENGINE,
                    workers=workers,
                    tokens=plan.review_tokens,
                    prompt_chars=plan.serial_prompt_chars,
                    stream=False,
                )

            phase(f"Act 3: {plan.review_cells} cells on qwen at one worker")
            review(1).run_set(plan.review_cells)
            phase(f"Act 3: the same cells at {plan.review_workers} workers")
            review(plan.review_workers).run_set(plan.review_cells)
            sleep_model(plan.gap_s)  # an idle gap: the eval's runs end here

            stop_serial, stop_load = threading.Event(), threading.Event()
            with ThreadPoolExecutor(1 + LOAD_WORKERS, thread_name_prefix="demo") as pool:
                # On any error (Ctrl-C included) the lanes must stop too: leaving the block waits
                # for them, and each runs cells until its event is set.
                try:
                    phase("Act 4: the serial eval on qwen, alone")
                    serial_lane = Lane.serial(
                        qwen, qwen_model, serial_eval, plan.serial_tokens, plan.serial_prompt_chars
                    )
                    serial = pool.submit(serial_lane.run, stop_serial, 1)
                    sleep_model(plan.baseline_s)
                    for streams in plan.same_engine_loads:
                        phase(f"Act 4: the serial eval beside {streams} more qwen stream(s)")
                        store.write_windows(
                            [same_engine_load(qwen, qwen_model, streams, plan.same_engine_load_s, tag)]
                        )
                    phase("Act 4: quiet gap")
                    sleep_model(plan.gap_s)
                    phase("Act 4: the serial eval beside an eval at 4 workers on nemotron")
                    load_lane = Lane(
                        client=nemotron,
                        model=nemotron_model,
                        eval_name=load_eval,
                        engine=LOAD_ENGINE,
                        workers=LOAD_WORKERS,
                        tokens=plan.load_tokens,
                        prompt_chars=plan.load_prompt_chars,
                        stream=False,
                    )
                    loads = [pool.submit(load_lane.run, stop_load, 100 + i) for i in range(LOAD_WORKERS)]
                    sleep_model(plan.load_s)
                    stop_load.set()
                    for f in loads:
                        f.result()
                    phase("Act 4: the serial eval alone again")
                    sleep_model(plan.tail_s)
                    stop_serial.set()
                    serial.result()
                finally:
                    stop_load.set()
                    stop_serial.set()
            truth = ground_truth(plan)
            receiver.stop()

            phase("reading the evals' own records")
            telemetry.force_flush()
            with Store(path, read_only=True) as reader:
                content, neighbour = _analyse(reader, tag, (serial_eval, review_eval, load_eval), probes)
            rules_path = _write_rules(content, Path(out_dir), plan)
            state_path = Path(out_dir) / "governor.sqlite"
            run_governed_act(
                plan,
                urls=urls,
                qwen=qwen,
                qwen_model=qwen_model,
                serial_eval=serial_eval,
                load_eval=load_eval,
                store_path=path,
                rules_path=rules_path,
                state_path=state_path,
                on_phase=phase,
            )
        finally:
            if receiver is not None:
                receiver.stop()
            gauges.shutdown()
            spark_otel.uninstrument()
            telemetry.force_flush()
            telemetry.shutdown()
    phase("reading Act 5's records")
    with Store(path, read_only=True) as reader:
        governed = _act5_figures(reader, serial_eval, load_eval, neighbour.baseline.median or 0.0)
    from ..report import write_report

    report_path = write_report(content, out_dir)
    return DemoResult(
        run_tag=tag,
        serial_eval=serial_eval,
        review_eval=review_eval,
        load_eval=load_eval,
        store_path=path,
        report_path=report_path,
        probes=probes,
        neighbour=neighbour,
        content=content,
        ground_truth=truth,
        wall_s=(_clock.real_monotonic_ns() - started) / NS_PER_S,
        rules_path=rules_path,
        state_path=state_path,
        governed=governed,
    )


def _scrape_interval_s(speed: float) -> float:
    """The receiver's interval in model seconds: 50 ms of real time between scrapes, and at
    least one model second."""
    return max(1.0, speed / 20)


def _write_rules(content: ReportContent, out: Path, plan: DemoPlan) -> Path:
    """The rules Acts 2 to 4 gave, as `spark-otel advise --write-rules` writes them."""
    from ..analysis.advisor.rules_file import dump_rules, rules_from_advice

    assert content.advice is not None
    rules = rules_from_advice(
        content.advice, content.curves, engine_urls=content.engine_urls, source=content.source
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
        for act, label in (("5-open", "without rules"), ("5-governed", "with the rules"))
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
