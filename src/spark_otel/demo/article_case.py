"""The article's case in three arms, on the simulated box (issue 37, item 5): a serial
ceiling-bound eval on qwen whose cells take 300 to 1,400 model seconds alone under an 1,800 s
ceiling, and a 4-worker eval on nemotron started midway from another process.

Each arm runs both evals as two runner processes (`runner_main`) on a box of its own, recording
into a store of its own, and sharing a governor state file of its own:

- ``open``: no governor;
- ``static``: the rules file ``spark-otel advise --write-rules`` writes (`advise_rules`, the CLI
  in a subprocess) from the run a user measures first (`measure_rules`);
- ``adaptive``: ``govern(adaptive=True)``, no rules file, nothing measured before.

The ungoverned arm's store cannot give the static arm its rule: the only serial cell that ran
beside the nemotron eval was cut off at its ceiling, and the neighbour cost is priced from cells
that finished (a cut-off cell's rate says where the runner stopped it, not how fast it decoded),
so ``advise`` writes no cross-engine rule from it. The measuring run is that run as a user
measures it first: the same two evals ungoverned, the serial eval under a ceiling its cells
finish within (twice the real one) and its streams asking for their usage, the neighbour given
enough cells to run beside most of the first serial cell (docs/decisions.md).

A serial cell that reaches its ceiling is cut off there, as the article's runner cut it, and is
recorded as a ceiling hit. `ArmFigures` says what each arm did, read back from its store.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from .._clock import NS_PER_S

__all__ = [
    "ARMS",
    "LOAD_EVAL",
    "MEASURE",
    "SERIAL_EVAL",
    "ArmFigures",
    "ArticleCase",
    "advise_rules",
    "arm_figures",
    "measure_rules",
    "run_arms",
    "runner_main",
]

ARMS = ("open", "static", "adaptive")
MEASURE = "measure"
"""The measuring run's folder and arm: the two evals ungoverned, every serial cell rated."""
SERIAL_EVAL = "article-serial"
LOAD_EVAL = "article-batch"
_DONE_S = 600.0


@dataclass(frozen=True)
class ArticleCase:
    """The sizes: model seconds alone of each serial cell (11.1 tok/s on qwen alone), its
    ceiling and declared ``max_tokens``; the nemotron eval's cells and their tokens."""

    speed: float = 100.0
    serial_alone_s: tuple[float, ...] = (1400.0, 300.0, 1000.0, 600.0, 1200.0, 500.0)
    ceiling_s: float = 1800.0
    max_tokens: int = 16_000
    """What the serial runner caps each answer at (1,441 s alone): the law's length bound."""
    load_cells: int = 150
    load_tokens: int = 400
    load_workers: int = 4
    measure_load_cells: int = 300
    """The measuring run's nemotron cells: at four wide beside the serial eval (about 24 model s
    a cell, some 1,800 s in all) they run beside most of its first cell and end inside it, so
    the cells after it run alone (the baseline)."""

    @property
    def serial_tokens(self) -> list[int]:
        return [round(s * 11.1) for s in self.serial_alone_s]


@dataclass(frozen=True)
class ArmFigures:
    """One arm, from its store, in model seconds."""

    arm: str
    serial_cells: int
    serial_longest_s: float
    serial_ceiling_hits: int
    load_cells: int
    load_wall_s: float
    """From the nemotron eval's first cell asking (its start less its wait) to its last end."""
    load_longest_wait_s: float
    both_wall_s: float
    serial_end_after_load_asked_s: float
    """The serial eval's last end less the nemotron eval's first ask: how long a rule that holds
    nemotron while the serial eval runs would have kept it waiting, at the least."""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def arm_figures(arm: str, serial: Sequence[Any], load: Sequence[Any]) -> ArmFigures:
    """`ArmFigures` from the stored cells of both evals (pure)."""
    every = [*serial, *load]
    asked = min((c.start_unix_ns - int((c.admission_s or 0.0) * NS_PER_S) for c in load), default=0)
    return ArmFigures(
        arm=arm,
        serial_cells=len(serial),
        serial_longest_s=max((c.elapsed_s for c in serial), default=0.0),
        serial_ceiling_hits=sum(1 for c in serial if c.deadline_hit),
        load_cells=len(load),
        load_wall_s=(max((c.end_unix_ns for c in load), default=0) - asked) / NS_PER_S,
        load_longest_wait_s=max((c.admission_s or 0.0 for c in load), default=0.0),
        both_wall_s=(max(c.end_unix_ns for c in every) - min(c.start_unix_ns for c in every)) / NS_PER_S
        if every
        else 0.0,
        serial_end_after_load_asked_s=(max((c.end_unix_ns for c in serial), default=0) - asked) / NS_PER_S,
    )


def runner_main(argv: Sequence[str]) -> None:
    """One eval in this process, recording into a store: ``CONFIG`` (JSON) names the mode
    (``open``, ``adaptive`` or a rules file), state, store, url, eval, engine, workers, the
    tokens of each cell, the ceiling (0: none), ``max_tokens`` and whether to stream. Prints
    "started" when its first cell is admitted."""
    import openai

    import spark_otel

    from ..governor import govern
    from ..sim.clock import follow
    from ..telemetry import configure

    config = json.loads(argv[0])
    telemetry = configure(
        service_name="spark-otel-article-case",
        store=config["store"],
        metric_export_interval_ms=60_000,
        clock=follow(config["url"]),
    )
    if config["mode"] == "adaptive":
        govern(state=config["state"], adaptive=True)
    elif config["mode"] != "open":
        govern(config["mode"], state=config["state"])
    spark_otel.instrument(include_usage=True if config.get("usage") else None)
    client = openai.OpenAI(base_url=config["url"] + "/v1", api_key="none", max_retries=0)
    model = client.models.list().data[0].id
    todo: queue.Queue[tuple[int, int]] = queue.Queue()
    for item in enumerate(config["tokens"]):
        todo.put(item)
    started = threading.Event()

    def work() -> None:
        while True:
            try:
                i, tokens = todo.get_nowait()
            except queue.Empty:
                return
            _run_cell(config, (client, model), i, tokens, started)

    failures: list[BaseException] = []

    def worker() -> None:
        try:
            work()
        except BaseException as exc:
            failures.append(exc)
            raise

    threads = [threading.Thread(target=worker) for _ in range(config["workers"])]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    spark_otel.uninstrument()
    telemetry.force_flush()
    telemetry.shutdown()
    if failures:
        raise SystemExit(f"{config['eval']}: {failures[0]!r}")


def _run_cell(
    config: dict[str, Any], engine: tuple[Any, str], i: int, tokens: int, started: threading.Event
) -> None:
    """One cell: a chat completion of exactly ``tokens`` tokens; a streamed one that reaches the
    ceiling is cut off there, as the article's runner cut it, and recorded as a ceiling hit."""
    import spark_otel

    from .. import _clock
    from ..model import CellStatus

    client, model = engine
    ceiling = config["ceiling_s"] or None
    with spark_otel.cell(
        config["eval"], f"{config['eval']}-{i:03d}", engine=config["engine"],
        deadline_s=ceiling, max_tokens=config["max_tokens"] or None,
    ) as cell:  # fmt: skip
        if not started.is_set():
            started.set()
            print("started", flush=True)
        begun = _clock.wall_ns()
        answer = client.chat.completions.create(
            model=model,
            messages=[{"role": "user", "content": "review this"}],
            max_tokens=tokens,
            extra_body={"min_tokens": tokens},
            stream=config["stream"],
        )
        if not config["stream"]:
            return
        for _chunk in answer:
            if ceiling is not None and (_clock.wall_ns() - begun) / NS_PER_S >= ceiling:
                answer.close()
                cell.set_status(CellStatus.DEADLINE)
                return


def _env() -> dict[str, str]:
    """A child's environment: this package on its path, no telemetry or governing settings of
    the caller's."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "SPARK_OTEL_"))}
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    return env


def _spawn(config: dict[str, Any]) -> subprocess.Popen[str]:
    code = "import sys; from spark_otel.demo.article_case import runner_main; runner_main(sys.argv[1:])"
    return subprocess.Popen(
        [sys.executable, "-c", code, json.dumps(config)], stdout=subprocess.PIPE, text=True, env=_env()
    )


class _Arm:
    """One arm's two runners on its box: the serial eval first, the nemotron eval once the
    serial eval's first cell runs."""

    def __init__(
        self, arm: str, case: ArticleCase, urls: dict[str, str], folder: Path, rules: Path | None = None
    ) -> None:
        self.arm, self.case, self.folder = arm, case, folder
        folder.mkdir(parents=True, exist_ok=True)
        mode = {"static": str(rules), MEASURE: "open"}.get(arm, arm)
        self.common = {"mode": mode, "state": str(folder / "governor.sqlite"), "store": str(self.store)}
        self.urls = urls
        measuring = arm == MEASURE
        self.serial = _spawn(
            {**self.common, "url": urls["qwen"], "eval": SERIAL_EVAL, "engine": "qwen", "workers": 1,
             "tokens": case.serial_tokens, "ceiling_s": case.ceiling_s * (2 if measuring else 1),
             "max_tokens": case.max_tokens, "stream": True, "usage": measuring}
        )  # fmt: skip
        self.load_cells = case.measure_load_cells if measuring else case.load_cells
        self.load: subprocess.Popen[str] | None = None

    @property
    def store(self) -> Path:
        return self.folder / "store.sqlite"

    def start_load(self) -> None:
        assert self.serial.stdout is not None
        if self.serial.stdout.readline().strip() != "started":
            raise RuntimeError(f"arm {self.arm}: the serial runner did not start")
        self.load = _spawn(
            {**self.common, "url": self.urls["nemotron"], "eval": LOAD_EVAL, "engine": "nemotron",
             "workers": self.case.load_workers, "tokens": [self.case.load_tokens] * self.load_cells,
             "ceiling_s": 0, "max_tokens": 0, "stream": False}
        )  # fmt: skip

    def finish(self) -> ArmFigures:
        from ..store import Store

        for proc in (self.serial, self.load):
            assert proc is not None
            proc.communicate(timeout=_DONE_S)
            if proc.returncode != 0:
                raise RuntimeError(f"arm {self.arm}: a runner exited with {proc.returncode}")
        store = Store(self.store)
        try:
            return arm_figures(self.arm, store.cells(eval_name=SERIAL_EVAL), store.cells(eval_name=LOAD_EVAL))
        finally:
            store.close()


@contextmanager
def _boxes(n: int, speed: float) -> Iterator[list[dict[str, str]]]:
    from .. import _clock
    from .box_process import box_process

    with ExitStack() as stack:
        yield [stack.enter_context(box_process(speed, _clock.real_wall_ns())) for _ in range(n)]


def _run(arm: str, case: ArticleCase, folder: Path, rules: Path | None = None) -> ArmFigures:
    with _boxes(1, case.speed) as (urls,):
        running = _Arm(arm, case, urls, folder, rules)
        running.start_load()
        return running.finish()


def run_arms(
    case: ArticleCase, folder: Path, arms: Sequence[str] = ARMS, *, rules: Path | None = None
) -> dict[str, ArmFigures]:
    """Each arm of ``arms`` in turn, each on a fresh box of its own (at once, their streams
    would starve a small machine's cores and slow the box's model time); figures by arm. The
    static arm is governed by ``rules`` (`measure_rules`)."""
    if "static" in arms and rules is None:
        raise ValueError("the static arm needs the rules file advise wrote: measure_rules(case, folder)")
    return {arm: _run(arm, case, folder / arm, rules if arm == "static" else None) for arm in arms}


def advise_rules(store: Path, out: Path, ceiling_s: float) -> Path:
    """``spark-otel advise --store STORE --ceiling CEILING --write-rules OUT``, as a user runs it
    (a process of its own); ``out``."""
    done = subprocess.run(
        [sys.executable, "-m", "spark_otel", "advise", "--store", str(store), "--ceiling", f"{ceiling_s:g}",
         "--write-rules", str(out)],
        capture_output=True, text=True, env=_env(), timeout=_DONE_S, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"advise --write-rules {out} exited with {done.returncode}: {done.stderr.strip()}")
    return out


def measure_rules(case: ArticleCase, folder: Path) -> tuple[Path, ArmFigures]:
    """The run a user measures first (the module's docstring), on a box of its own, then the
    rules ``advise --write-rules`` writes from its store: the rules file and the run's figures."""
    measured = folder / MEASURE
    figures = _run(MEASURE, case, measured)
    return advise_rules(measured / "store.sqlite", measured / "rules.toml", case.ceiling_s), figures
