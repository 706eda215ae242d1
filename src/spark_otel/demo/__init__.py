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

    schedule     the schedule, and the simulation's ground truth
    load         the load: an eval's cells on one engine, imposed streams
    box_process  the simulated box in a child process
    own_store    the demo's own store and run tag
    run     `run_demo`: the acts, then the records read back and the report
"""

from __future__ import annotations

from .box_process import serve_box_main
from .own_store import clear_own_store, demo_store_path
from .run import DemoResult, run_demo
from .schedule import DEFAULT_SPEED, DemoPlan, ground_truth

__all__ = [
    "DEFAULT_SPEED",
    "DemoPlan",
    "DemoResult",
    "clear_own_store",
    "demo_store_path",
    "ground_truth",
    "run_demo",
    "serve_box_main",
]
