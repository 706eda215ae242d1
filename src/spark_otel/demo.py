"""The whole story on a simulated two-engine box: ``spark-otel demo``.

A dense engine ("qwen") and a mixture-of-experts engine ("nemotron") share one simulated GPU,
running ``speed`` times faster than real time; the process's clock reads model time, so every
figure comes out as in the article. A serial, generation-heavy eval runs on qwen under a 1,800 s
ceiling the whole time, instrumented like any eval (``spark_otel.instrument()`` and one
``spark_otel.cell`` per cell, into the embedded store). While it runs, the demo imposes:

1. a probe on qwen (one and four more streams), recorded as load windows;
2. a quiet gap;
3. an eval at four workers on nemotron, recorded as that eval's cells (the analyses make its
   load windows from them).

Then it reads the eval's own records back and answers the article's questions: the probe's
curve, per-cell rate against concurrency, what each load cost the serial eval (the same-engine
probe a few percent, the other engine about half), and the advisor's queue rules; and writes the
HTML report.

Its records are simulated, so by default they go to a store of their own beside the report
(``<out>/store.sqlite``, replaced on each run), never the user's store: demo cells there would
read as load overlapping real evals. Demo cells carry ``source="demo"``, eval names a run tag
(``demo-serial-<tag>``), and the probe's windows the run's name (``demo probe <tag>``).
"""

from __future__ import annotations

import contextlib
import logging
import random
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import _clock
from . import _semconv as sc
from ._clock import NS_PER_S
from ._exceptions import ConfigError, EngineError

if TYPE_CHECKING:
    from .analysis.neighbour import NeighbourReport
    from .probe.results import ProbeReport
    from .report import ReportContent

__all__ = ["DemoPlan", "DemoResult", "demo_store_path", "run_demo"]

_logger = logging.getLogger(__name__)
CEILING_S = 1800.0
SERIAL_ENGINE = "qwen"
LOAD_ENGINE = "nemotron"
LOAD_WORKERS = 4
_ENGINES = {SERIAL_ENGINE: "dense", LOAD_ENGINE: "moe"}
_BOX_START_S = 60.0
DEMO_SOURCE = "demo"
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

    Each probe level lasts at least twice the longest serial cell, so whole cells run inside it
    and its cost reads as the simulation's, not diluted by cells half outside.
    """

    speed: float
    baseline_s: float
    probe_levels: tuple[int, ...]
    probe_tokens: int
    gap_s: float
    load_s: float
    tail_s: float
    serial_tokens: tuple[int, int]
    load_tokens: tuple[int, int]
    serial_prompt_chars: int = 1600
    load_prompt_chars: int = 800

    @property
    def expected_model_s(self) -> float:
        """Roughly how long the run lasts in model time (the probe at about 10 tok/s per stream)."""
        probe_s = len(self.probe_levels) * self.probe_tokens / 10.0
        return self.baseline_s + probe_s + self.gap_s + self.load_s + self.tail_s

    @classmethod
    def full(cls, speed: float = DEFAULT_SPEED) -> DemoPlan:
        return cls(
            speed=speed,
            baseline_s=1800.0,
            probe_levels=(1, 4),
            probe_tokens=4096,
            gap_s=400.0,
            load_s=2000.0,
            tail_s=400.0,
            serial_tokens=(1200, 2000),
            load_tokens=(2000, 3000),
        )

    @classmethod
    def quick(cls, speed: float = DEFAULT_SPEED) -> DemoPlan:
        return cls(
            speed=speed,
            baseline_s=500.0,
            probe_levels=(1, 4),
            probe_tokens=2048,
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
    load_eval: str
    store_path: Path
    report_path: Path
    probe: ProbeReport
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
    arrives is kept); the other engine's eval sends plain calls, which cost the demo's own
    process nothing per token, so its CPU does not slow the box it measures.
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

    def run(self, stop: threading.Event, seed: int) -> int:
        """Run cells back to back until ``stop`` is set; returns how many ran."""
        import spark_otel

        rng = random.Random(seed)
        count = 0
        while not stop.is_set():
            cell_id = f"{self.engine}-{seed}-{count:03d}"
            n = rng.randint(*self.tokens)
            prompt = _prompt(self.prompt_chars, seed * 1000 + count)
            try:
                with spark_otel.cell(
                    self.eval_name,
                    cell_id,
                    engine=self.engine,
                    deadline_s=CEILING_S,
                    workers=self.workers,
                    **_DEMO_CELL_ATTRIBUTES,
                ):
                    _generate(self.client, self.model, prompt, n, stream=self.stream)
            except Exception as exc:  # the cell's span records the failure; the eval goes on
                _logger.info("demo: cell %s of %s ended with %s", cell_id, self.eval_name, exc)
            count += 1
        return count


def _sleep_model(seconds: float) -> None:
    time.sleep(_clock.to_wall_s(seconds))


def _openai_client(base_url: str) -> Any:
    import openai

    return openai.OpenAI(
        base_url=base_url + "/v1", api_key="sim", timeout=_clock.to_wall_s(CEILING_S), max_retries=0
    )


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
    now = datetime.fromtimestamp(_clock.real_wall_ns() / NS_PER_S)
    tag = now.strftime("%Y%m%d-%H%M%S") + "-" + uuid.uuid4().hex[:4]
    serial_eval, load_eval = f"demo-serial-{tag}", f"demo-nemotron-{tag}"
    path = demo_store_path(store_path, out_dir)
    if store_path is None:
        _clear_own_store(path)
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
                {"serial_eval": serial_eval, "load_eval": load_eval, "speed": plan.speed, "quick": quick},
            )
            qwen, nemotron = _openai_client(urls[SERIAL_ENGINE]), _openai_client(urls[LOAD_ENGINE])
            qwen_model, nemotron_model = qwen.models.list().data[0].id, nemotron.models.list().data[0].id
            stop_serial, stop_load = threading.Event(), threading.Event()
            with ThreadPoolExecutor(1 + LOAD_WORKERS, thread_name_prefix="demo") as pool:
                phase("serial eval on qwen: baseline")
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
                phase("probe on qwen while the serial eval runs")
                probe = run_probe(
                    urls[SERIAL_ENGINE],
                    ProbeSettings(
                        streams=list(plan.probe_levels),
                        tokens=plan.probe_tokens,
                        warmup=False,
                        # Plain requests cost this process nothing while they decode, so the
                        # probe's own client work does not slow the serial eval it measures.
                        mode="plain",
                        engine=SERIAL_ENGINE,
                        name=_probe_name(tag),
                        time_scale=plan.speed,
                    ),
                    store=store,
                )
                phase("quiet gap")
                _sleep_model(plan.gap_s)
                phase("eval at 4 workers on nemotron")
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
                phase("serial eval alone again")
                _sleep_model(plan.tail_s)
                stop_serial.set()
                serial.result()
            ground_truth = _ground_truth(plan)
        finally:
            spark_otel.uninstrument()
            telemetry.force_flush()
            telemetry.shutdown()
    phase("reading the eval's own records")
    with Store(path) as reader:
        content, neighbour = _analyse(reader, tag, serial_eval, load_eval, probe)
    from .report import write_report

    report_path = write_report(content, out_dir)
    return DemoResult(
        run_tag=tag,
        serial_eval=serial_eval,
        load_eval=load_eval,
        store_path=path,
        report_path=report_path,
        probe=probe,
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


def _ground_truth(plan: DemoPlan) -> dict[str, float]:
    """What the simulation was told: the serial stream's cost under each imposed load."""
    from .sim import BoxModel, get_profile

    box = BoxModel({name: get_profile(profile) for name, profile in _ENGINES.items()}, speed=plan.speed)
    alone = box.predicted_rate(SERIAL_ENGINE, 1)
    truth = {"baseline_rate": alone}
    for n in plan.probe_levels:
        truth[f"probe {n} streams"] = 1.0 - box.predicted_rate(SERIAL_ENGINE, 1 + n) / alone
    truth["load"] = 1.0 - box.predicted_rate(SERIAL_ENGINE, 1, {LOAD_ENGINE: LOAD_WORKERS}) / alone
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
    store: Any, tag: str, serial_eval: str, load_eval: str, probe: ProbeReport
) -> tuple[ReportContent, NeighbourReport]:
    """This run's cells and windows only: a store may hold earlier runs whose model-time stamps
    overlap this one's (a run at speed S stamps times up to S times its length ahead)."""
    from .report import ReportInputs, build_report

    cells = store.cells(eval_name=serial_eval) + store.cells(eval_name=load_eval)
    windows = [w for w in store.windows() if w.attributes.get(sc.PROBE_RUN) == _probe_name(tag)]
    inputs = ReportInputs(
        source=f"{store.path} (demo run {tag})", cells=cells, windows=windows, probes=[probe]
    )
    content = build_report(inputs)
    neighbour = next(n for n in content.neighbours if n.eval_name == serial_eval)
    return content, neighbour


def _probe_name(tag: str) -> str:
    return f"demo probe {tag}"
