"""A store of the day after a measured run, and the rules that run gave in both forms, for the
tests of which cells each rule catches (`spark_otel.governor.matching`, `rules check --store`).

The rules were measured on ``demo-serial-2e14`` (a serial eval whose p90 cell takes 1,300 s alone
on qwen, 2.174 times longer beside nemotron), ``quick-gen-2e14`` (60 s cells) and
``demo-nemotron-2e14`` (prompt-heavy cards on nemotron). The store holds the next day's runs,
under new names, and what else ran, all under an 1,800 s ceiling unless said (seconds after
`T0_NS`):

=============== ======== ========================== =========================================
cell            engine   eval                       what the rules make of it
=============== ======== ========================== =========================================
s1 0-100        qwen     demo-serial-7f3a           its family's history: ceiling-bound,
s2 101-200                                          generation-heavy (1,300 x 2.174 >= 1,350)
s3 201-300
q1 400-460      qwen     quick-gen-7f3a             60 x 2.174 < 1,350: not ceiling-bound
p1 600-700      qwen     nightly-proof              never measured, with a ceiling: ceiling-bound
f1 800-900      qwen     free-chat                  no ceiling: never ceiling-bound
d1 820-830      qwen     doc-qa-1                   a 30,000-token prompt: long-context
m1 50-150       nemotron demo-nemotron-7f3a         beside s1 and s2
m2 201.5-250                                        beside s3
m3 301-350                                          1 s after s3 ended: within eval_gap_s (2 s)
m4 302-390                                          from the gap's end: nothing ceiling-bound
m5 450-500                                          beside q1 only
m6 650-680                                          beside p1
m7 850-870                                          beside f1 only
a1 1000-1010    nemotron adhoc                      ran as prompt-heavy (its recorded class)
x1 500-510      (none)   scratch                    names no engine: never governed
o1 25 h before  qwen     demo-serial-2e0c           outside the last 24 h before a1
=============== ======== ========================== =========================================
"""

from __future__ import annotations

from pathlib import Path

from tests.support.cells import cell

from spark_otel import _semconv as sc
from spark_otel._clock import NS_PER_S
from spark_otel.model import Cell
from spark_otel.store import Store

T0_NS = 1_796_000_000 * NS_PER_S  # 2026-11-30 00:53:20 UTC
CEILING_S = 1800.0

GENERAL_RULES = """\
version = 2
eval_gap_s = 2
ceiling_s = 1800.0

[slowdown]
qwen = 2.174

[[lane]]
engine = "qwen"
cells = 8

[[limit]]
engine = "qwen"
cell_class = "generation-heavy"
ceiling_bound = true
cells = 1

[[limit]]
engine = "qwen"
cell_class = "generation-heavy"
ceiling_bound = false
cells = 8

[[limit]]
engine = "qwen"
cell_class = "long-context"
cells = 2

[[limit]]
engine = "nemotron"
cell_class = "prompt-heavy"
cells = 4

[[cross_engine]]
engine = "nemotron"
while_engine = "qwen"
while_ceiling_bound = true
cells = 0

[[history]]
engine = "qwen"
family = "demo-serial"
cell_class = "generation-heavy"
n_cells = 30
share = 1.0
p90_alone_s = 1300.0

[[history]]
engine = "qwen"
family = "quick-gen"
cell_class = "generation-heavy"
n_cells = 50
share = 1.0
p90_alone_s = 60.0

[[history]]
engine = "nemotron"
family = "demo-nemotron"
cell_class = "prompt-heavy"
n_cells = 572
share = 1.0
p90_alone_s = 100.0
"""

BY_EVAL_RULES = """\
eval_gap_s = 2

[[limit]]
engine = "qwen"
eval = "demo-serial-2e14"
cell_class = "generation-heavy"
cells = 1

[[limit]]
engine = "nemotron"
eval = "demo-nemotron-2e14"
cells = 4

[[cross_engine]]
engine = "nemotron"
while_engine = "qwen"
while_eval = "demo-serial-2e14"
cells = 0
"""


def _cells() -> list[Cell]:
    def c(uid: str, start: float, end: float, eval_name: str, engine: str | None, **kw: object) -> Cell:
        kw.setdefault("deadline_s", CEILING_S)
        return cell(uid, start, end, 100, eval_name=eval_name, engine=engine, t0_ns=T0_NS, **kw)

    nemotron = [(50, 150), (201.5, 250), (301, 350), (302, 390), (450, 500), (650, 680), (850, 870)]
    return [
        *(c(f"s{k + 1}", 100 * k + min(k, 1), 100 * (k + 1), "demo-serial-7f3a", "qwen") for k in range(3)),
        c("q1", 400, 460, "quick-gen-7f3a", "qwen"),
        c("p1", 600, 700, "nightly-proof", "qwen"),
        c("f1", 800, 900, "free-chat", "qwen", deadline_s=None),
        c("d1", 820, 830, "doc-qa-1", "qwen", deadline_s=None, prompt_tokens=30_000),
        *(c(f"m{k + 1}", a, b, "demo-nemotron-7f3a", "nemotron") for k, (a, b) in enumerate(nemotron)),
        c("a1", 1000, 1010, "adhoc", "nemotron", attributes={sc.CELL_CLASS: "prompt-heavy"}),
        c("x1", 500, 510, "scratch", None),
        c("o1", -25 * 3600, -25 * 3600 + 100, "demo-serial-2e0c", "qwen"),
    ]


def next_day_store(path: Path) -> Path:
    """The store the module docstring describes, written to ``path``."""
    with Store(path) as store:
        store.write_cells(_cells())
    return path
