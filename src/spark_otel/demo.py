"""The whole story on a simulated two-engine box: ``spark-otel demo``.

A dense engine ("qwen") and a mixture-of-experts engine ("nemotron") share one simulated GPU,
running ``speed`` times faster than real time; the process's clock reads model time, so every
figure comes out as in the article. Every eval is instrumented as any eval is
(``spark_otel.instrument()`` and one ``spark_otel.cell`` per cell, into the embedded store), and
the story is told in the article's acts:

Act 2, what more streams buy: the probe on each engine with the box otherwise idle, qwen at 1
    to 8 streams, nemotron at 1 to 16 (where its aggregate falls: its lane's ceiling).
Act 3, what workers buy on real cells: one eval's fixed set of cells on qwen, at one worker and
    then the same cells at eight: wall speedup against per-cell cost.
Act 4, what a neighbour costs: a serial eval on qwen under a 1,800 s ceiling, alone, then beside
    one and four more qwen streams (recorded load windows), then beside an eval at four workers
    on nemotron, then alone again.

Then it reads the evals' own records back, answers each act in a line, writes the advisor's
queue rules with their evidence, and writes the HTML report.

Its records are simulated, so by default they go to a store of their own beside the report
(``<out>/store.sqlite``, replaced on each run), never the user's store: demo cells there would
read as load overlapping real evals. Demo cells carry ``source="demo"``, eval names a short run
tag (``demo-serial-2e14``), and the probes' and loads' windows the run's name.
"""

from __future__ import annotations

import contextlib
import logging
import random
import secrets
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import _clock
from . import _semconv as sc
from ._clock import NS_PER_S
from ._exceptions import ConfigError, EngineError

if TYPE_CHECKING:
    from .analysis.neighbour import NeighbourReport
    from .model import LoadWindow
    from .probe.results import ProbeReport
    from .report import ReportContent
    from .store import Store

__all__ = ["DemoPlan", "DemoResult", "demo_store_path", "run_demo"]

_logger = logging.getLogger(__name__)
CEILING_S = 1800.0
SERIAL_ENGINE = "qwen"
LOAD_ENGINE = "nemotron"
LOAD_WORKERS = 4
_ENGINES = {SERIAL_ENGINE: "dense", LOAD_ENGINE: "moe"}
_BOX_START_S = 60.0
DEMO_SOURCE = "demo"
DEMO_RUN = "spark_otel.demo.run"
"""The attribute naming the demo run on its load windows."""
_DEMO_CELL_ATTRIBUTES: dict[str, Any] = {sc.CELL_SOURCE: DEMO_SOURCE}
STORE_FILE = "store.sqlite"
# At 100x an instrumented streamed cell reads within about 3% of the simulated rate on a 2-core
# machine; at 200x the client's own work per chunk (openai parsing, instrumentation) holds a
# serial stream about 8% under it, which understates every cost against the baseline.
DEFAULT_SPEED = 100.0
PhaseCallback = Callable[[str], None]


@dataclass(frozen=True)
class DemoPlan:
    """The demo's schedule, in model seconds, and the cells' shapes.

    Each imposed load lasts at least twice the longest serial cell, so whole cells run inside it
    and its cost reads as the simulation's, not diluted by cells half outside.
    """

    speed: float
    probe_tokens: int
    review_cells: int
    review_tokens: tuple[int, int]
    baseline_s: float
    same_engine_load_s: float
    gap_s: float
    load_s: float
    tail_s: float
    serial_tokens: tuple[int, int]
    load_tokens: tuple[int, int]
    qwen_levels: tuple[int, ...] = (1, 2, 4, 8)
    nemotron_levels: tuple[int, ...] = (1, 2, 4, 8, 16)
    review_workers: int = 8
    same_engine_loads: tuple[int, ...] = (1, 4)
    serial_prompt_chars: int = 1600
    load_prompt_chars: int = 800

    @property
    def expected_model_s(self) -> float:
        """About how long the run lasts in model time, from the simulation's own rates."""
        truth = _box_model(self.speed)

        def level_s(engine: str, n: int) -> float:
            return self.probe_tokens / truth.predicted_rate(engine, n)

        probes = sum(level_s(SERIAL_ENGINE, n) for n in self.qwen_levels)
        probes += sum(level_s(LOAD_ENGINE, n) for n in self.nemotron_levels)
        mean_review = sum(self.review_tokens) / 2
        review = self.review_cells * mean_review / truth.predicted_rate(SERIAL_ENGINE, 1)
        review += self.review_tokens[1] / truth.predicted_rate(SERIAL_ENGINE, self.review_workers)
        act4 = self.baseline_s + len(self.same_engine_loads) * self.same_engine_load_s
        act4 += self.gap_s + self.load_s + self.tail_s
        return probes + review + act4

    @classmethod
    def full(cls, speed: float = DEFAULT_SPEED) -> DemoPlan:
        return cls(
            speed=speed,
            probe_tokens=512,
            review_cells=8,
            review_tokens=(800, 1500),
            baseline_s=1200.0,
            same_engine_load_s=400.0,
            gap_s=300.0,
            load_s=2000.0,
            tail_s=400.0,
            serial_tokens=(1200, 2000),
            load_tokens=(2000, 3000),
        )

    @classmethod
    def quick(cls, speed: float = DEFAULT_SPEED) -> DemoPlan:
        return cls(
            speed=speed,
            probe_tokens=256,
            review_cells=8,
            review_tokens=(300, 500),
            baseline_s=500.0,
            same_engine_load_s=170.0,
            gap_s=100.0,
            load_s=800.0,
            tail_s=100.0,
            serial_tokens=(500, 800),
            load_tokens=(1500, 2500),
        )


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


def _prompt(chars: int, seed: int) -> str:
    words = ("diff", "review", "function", "branch", "return", "pointer", "buffer", "lock", "retry", "index")
    rng = random.Random(seed)
    text = " ".join(rng.choice(words) for _ in range(chars // 5))
    return text[:chars]


def _generate(client: Any, model: str, prompt: str, tokens: int, *, stream: bool) -> None:
    """One chat completion of about ``tokens`` output tokens.

    Streamed cells go through `spark_otel.stream_with_deadline` (the ceiling holds, and what
    arrives is kept); the other evals send plain calls, which cost the demo's own process
    nothing per token, so its CPU does not slow the box it measures.
    """
    import spark_otel

    # min_tokens sets the length; the model then stops on its own ("stop", not a length cap), as a
    # real answer does, well inside max_tokens.
    kwargs: dict[str, Any] = {
        "model": model,
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": 4 * tokens,
        "extra_body": {"min_tokens": tokens},
    }
    if stream:
        spark_otel.stream_with_deadline(client, deadline_s=CEILING_S, extractor=None, **kwargs)
    else:
        client.chat.completions.create(**kwargs)


@dataclass(frozen=True)
class _Lane:
    """One eval's cells on one engine: who sends them and what they look like."""

    client: Any
    model: str
    eval_name: str
    engine: str
    workers: int
    tokens: tuple[int, int]
    prompt_chars: int
    stream: bool

    def cell(self, cell_id: str, seed: int) -> None:
        """Run one cell; its length and prompt follow from ``seed`` alone."""
        import spark_otel

        n = random.Random(seed).randint(*self.tokens)
        try:
            with spark_otel.cell(
                self.eval_name,
                cell_id,
                engine=self.engine,
                deadline_s=CEILING_S,
                workers=self.workers,
                **_DEMO_CELL_ATTRIBUTES,
            ):
                _generate(self.client, self.model, _prompt(self.prompt_chars, seed), n, stream=self.stream)
        except Exception as exc:  # the cell's span records the failure; the eval goes on
            _logger.info("demo: cell %s of %s ended with %s", cell_id, self.eval_name, exc)

    def run(self, stop: threading.Event, seed: int) -> int:
        """Run cells back to back until ``stop`` is set; returns how many ran."""
        count = 0
        while not stop.is_set():
            self.cell(f"{self.engine}-{seed}-{count:03d}", seed * 1000 + count)
            count += 1
        return count

    def run_set(self, n_cells: int) -> None:
        """The same ``n_cells`` cells (ids, prompts, lengths) at this lane's worker count."""
        with ThreadPoolExecutor(self.workers, thread_name_prefix="demo-cells") as pool:
            list(pool.map(lambda i: self.cell(f"pr-{i:02d}", 500 + i), range(n_cells)))


def _sleep_model(seconds: float) -> None:
    time.sleep(_clock.to_wall_s(seconds))


def _openai_client(base_url: str) -> Any:
    import openai

    return openai.OpenAI(
        base_url=base_url + "/v1", api_key="sim", timeout=_clock.to_wall_s(CEILING_S), max_retries=0
    )


def _same_engine_load(client: Any, model: str, streams: int, seconds: float, tag: str) -> LoadWindow:
    """``streams`` more plain requests on the serial eval's engine, back to back for ``seconds``:
    the article's "one more Qwen stream". Returns the window it ran over, for the store."""
    from .model import LoadWindow

    stop = threading.Event()
    ends: list[int] = []

    def stream(seed: int) -> None:
        count = 0
        while not stop.is_set():
            prompt = _prompt(200, 9000 + seed * 1000 + count)
            with contextlib.suppress(Exception):  # a failed request ends nothing of the eval's
                client.chat.completions.create(
                    model=model,
                    messages=[{"role": "user", "content": prompt}],
                    max_tokens=64,
                    extra_body={"ignore_eos": True},
                )
            count += 1
        ends.append(_clock.wall_ns())

    start = _clock.wall_ns()
    with ThreadPoolExecutor(streams, thread_name_prefix="demo-load") as pool:
        for i in range(streams):
            pool.submit(stream, i)
        _sleep_model(seconds)
        stop.set()
    name = f"{streams} more {SERIAL_ENGINE} stream{'' if streams == 1 else 's'}"
    return LoadWindow(
        uid=f"demo-{tag}-load-{streams}",
        name=name,
        kind="load",
        engine=SERIAL_ENGINE,
        start_unix_ns=start,
        end_unix_ns=max(ends, default=_clock.wall_ns()),
        streams=streams,
        attributes={DEMO_RUN: tag},
    )


def _run_tag(path: Path) -> str:
    """A short tag no eval in the store already carries (``2e14``)."""
    from .store import Store

    taken: set[str] = set()
    if path.exists():
        with Store(path, read_only=True) as store:
            taken = set(store.eval_names())
    while True:
        tag = secrets.token_hex(2)
        if not any(name.endswith(f"-{tag}") for name in taken):
            return tag


def run_demo(
    *,
    speed: float = DEFAULT_SPEED,
    store_path: str | Path | None = None,
    out_dir: str | Path = "spark-otel-demo",
    quick: bool = False,
    on_phase: PhaseCallback | None = None,
) -> DemoResult:
    """Run the demo end to end; see the module docstring. Needs the ``sim`` extra."""
    import spark_otel

    from .probe import ProbeSettings, run_probe
    from .sim.clock import box_model_time
    from .store import Store
    from .telemetry import configure

    plan = DemoPlan.quick(speed) if quick else DemoPlan.full(speed)
    phase = on_phase or (lambda _name: None)
    path = demo_store_path(store_path, out_dir)
    if store_path is None:
        _clear_own_store(path)
    tag = _run_tag(path)
    serial_eval, review_eval, load_eval = (f"demo-{what}-{tag}" for what in ("serial", "review", "nemotron"))
    started = _clock.real_monotonic_ns()
    phase("starting the simulated box")
    # Model time runs `speed` times faster than the real clock; the box's starts far enough in
    # the past that the run ends near the real present, so the store holds no future records for
    # a later real eval to mistake for overlapping load. This process follows the box's clock.
    epoch = _clock.real_wall_ns() - int(1.25 * plan.expected_model_s * NS_PER_S)
    with _box_process(plan.speed, epoch) as urls, box_model_time(urls[SERIAL_ENGINE]):
        telemetry = configure(service_name="spark-otel-demo", store=path, metric_export_interval_ms=60_000)
        spark_otel.instrument()
        try:
            store = telemetry.store
            assert store is not None
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
            qwen, nemotron = _openai_client(urls[SERIAL_ENGINE]), _openai_client(urls[LOAD_ENGINE])
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

            def review(workers: int) -> _Lane:
                return _Lane(
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
            _sleep_model(plan.gap_s)  # an idle gap: the eval's runs end here

            stop_serial, stop_load = threading.Event(), threading.Event()
            with ThreadPoolExecutor(1 + LOAD_WORKERS, thread_name_prefix="demo") as pool:
                phase("Act 4: the serial eval on qwen, alone")
                serial_lane = _Lane(
                    client=qwen,
                    model=qwen_model,
                    eval_name=serial_eval,
                    engine=SERIAL_ENGINE,
                    workers=1,
                    tokens=plan.serial_tokens,
                    prompt_chars=plan.serial_prompt_chars,
                    stream=True,
                )
                serial = pool.submit(serial_lane.run, stop_serial, 1)
                _sleep_model(plan.baseline_s)
                for streams in plan.same_engine_loads:
                    phase(f"Act 4: the serial eval beside {streams} more qwen stream(s)")
                    store.write_windows(
                        [_same_engine_load(qwen, qwen_model, streams, plan.same_engine_load_s, tag)]
                    )
                phase("Act 4: quiet gap")
                _sleep_model(plan.gap_s)
                phase("Act 4: the serial eval beside an eval at 4 workers on nemotron")
                load_lane = _Lane(
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
                _sleep_model(plan.load_s)
                stop_load.set()
                for f in loads:
                    f.result()
                phase("Act 4: the serial eval alone again")
                _sleep_model(plan.tail_s)
                stop_serial.set()
                serial.result()
            ground_truth = _ground_truth(plan)
        finally:
            spark_otel.uninstrument()
            telemetry.force_flush()
            telemetry.shutdown()
    phase("reading the evals' own records")
    with Store(path, read_only=True) as reader:
        content, neighbour = _analyse(reader, tag, (serial_eval, review_eval, load_eval), probes)
    from .report import write_report

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
        ground_truth=ground_truth,
        wall_s=(_clock.real_monotonic_ns() - started) / NS_PER_S,
    )


def demo_store_path(store_path: str | Path | None, out_dir: str | Path) -> Path:
    """``store_path`` when given, else the demo's own store in its output directory."""
    return Path(store_path) if store_path is not None else Path(out_dir) / STORE_FILE


def _clear_own_store(path: Path) -> None:
    """Start the demo's own store afresh: an earlier run's model-time stamps overlap this one's
    (a run at speed S stamps times up to S times its length back), so its cells would read as
    load. Only a store the demo wrote is removed; any other file there is refused."""
    from .store import Store

    if not path.exists():
        return
    with Store(path) as old:
        ours = bool(old.documents("demo")) and all(e.startswith("demo-") for e in old.eval_names())
    if not ours:
        raise ConfigError(
            f"{path} exists and was not written by spark-otel demo; pass --out with another "
            "directory, or --store to add the demo's records to that store"
        )
    for suffix in ("", "-wal", "-shm", "-journal"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


def _box_model(speed: float) -> Any:
    from .sim import BoxModel, get_profile

    return BoxModel({name: get_profile(profile) for name, profile in _ENGINES.items()}, speed=speed)


def _ground_truth(plan: DemoPlan) -> dict[str, float]:
    """What the simulation was told: the serial stream's cost under each imposed load, and the
    review cells' per-cell cost at the plan's worker count."""
    box = _box_model(plan.speed)
    alone = box.predicted_rate(SERIAL_ENGINE, 1)
    truth = {"baseline_rate": alone}
    for n in plan.same_engine_loads:
        name = f"{n} more {SERIAL_ENGINE} stream{'' if n == 1 else 's'}"
        truth[name] = 1.0 - box.predicted_rate(SERIAL_ENGINE, 1 + n) / alone
    truth["load"] = 1.0 - box.predicted_rate(SERIAL_ENGINE, 1, {LOAD_ENGINE: LOAD_WORKERS}) / alone
    truth["review_per_cell_cost"] = 1.0 - box.predicted_rate(SERIAL_ENGINE, plan.review_workers) / alone
    return truth


def serve_box_main() -> None:
    """The simulated box in a child process: its servers then never compete with the demo's
    clients for one interpreter lock, as a real engine never would. Prints the engines' URLs as
    one JSON line and serves until its stdin closes."""
    import json
    import sys

    try:
        from .sim import run_box

        speed, epoch = float(sys.argv[1]), int(sys.argv[2])
        with _clock.model_time(speed, epoch_unix_ns=epoch), run_box(_ENGINES, speed=speed, seed=0) as box:
            print(json.dumps({name: box.url(name) for name in box.engines}), flush=True)
            sys.stdin.read()
    except Exception as exc:
        print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}), flush=True)


@contextmanager
def _box_process(speed: float, epoch_unix_ns: int) -> Iterator[dict[str, str]]:
    import json
    import subprocess
    import sys

    code = "from spark_otel.demo import serve_box_main; serve_box_main()"
    proc = subprocess.Popen(
        [sys.executable, "-c", code, repr(speed), str(epoch_unix_ns)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdin is not None
    assert proc.stdout is not None
    try:
        ready = threading.Thread(target=lambda: lines.append(proc.stdout.readline()), daemon=True)  # type: ignore[union-attr]
        lines: list[str] = []
        ready.start()
        ready.join(_BOX_START_S)
        if not lines or not lines[0].strip():
            raise EngineError(f"the simulated box did not start within {_BOX_START_S:.0f} s")
        urls = json.loads(lines[0])
        if "error" in urls:
            raise ConfigError(f"the simulated box did not start: {urls['error']}")
        yield urls
    finally:
        with contextlib.suppress(OSError):
            proc.stdin.close()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.terminate()
            proc.wait(5)


def _analyse(
    store: Store, tag: str, evals: Sequence[str], probes: Sequence[ProbeReport]
) -> tuple[ReportContent, NeighbourReport]:
    """This run's cells and windows only: a store may hold earlier runs whose model-time stamps
    overlap this one's (a run at speed S stamps times up to S times its length ahead)."""
    from .report import ReportInputs, build_report

    serial_eval = evals[0]
    cells = [c for name in evals for c in store.cells(eval_name=name)]
    runs = {_probe_name(tag, p.metadata.engine) for p in probes}
    windows = [
        w
        for w in store.windows()
        if w.attributes.get(sc.PROBE_RUN) in runs or w.attributes.get(DEMO_RUN) == tag
    ]
    inputs = ReportInputs(
        source=f"{store.path} (demo run {tag})",
        cells=cells,
        windows=windows,
        probes=list(probes),
        engine_urls={p.metadata.engine: p.metadata.engine_url for p in probes},
    )
    content = build_report(inputs)
    neighbour = next(n for n in content.neighbours if n.eval_name == serial_eval)
    return content, neighbour


def _probe_name(tag: str, engine: str) -> str:
    return f"demo probe {engine} {tag}"
