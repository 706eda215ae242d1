"""A cut-off cell without tokens reads its share of baseline off its eval's other cells inside the
loads it ran beside: the median of those loads' medians, over as many cells as they hold, loads
without a rated cell left out (and none at all: no share)."""

from __future__ import annotations

from tests.support.cells import S, cell

from spark_otel.analysis.timeouts import timeout_verdicts
from spark_otel.model import CellStatus, LoadWindow


def load(name: str, start_s: int, end_s: int) -> LoadWindow:
    return LoadWindow(
        uid=name, name=name, kind="load", engine="q", start_unix_ns=start_s * S, end_unix_ns=end_s * S
    )


def test_the_share_is_the_median_of_the_loads_medians_over_their_cells() -> None:
    baseline = [cell(f"b{k}", k * 100, k * 100 + 100, 1000, workers=1) for k in range(4)]  # 10 tok/s alone
    inside = [
        cell("i1", 1100, 1200, 500, workers=1),  # 5 tok/s, in L1, L2 and L3
        cell("i2", 2100, 2200, 700, workers=1),  # 7 tok/s, in L2 and L3
        cell("i3", 2600, 2700, 800, workers=1),  # 8 tok/s, in L2
    ]
    cut = cell("x", 1500, 1900, None, workers=1, status=CellStatus.DEADLINE, deadline_s=400.0)
    alone = cell("y", 3500, 3900, None, workers=1, status=CellStatus.DEADLINE, deadline_s=400.0)
    loads = [load("L1", 1000, 2000), load("L2", 1000, 3000), load("L3", 1000, 2500), load("L4", 3400, 4000)]
    verdicts = {v.uid: v for v in timeout_verdicts([*baseline, *inside, cut, alone], loads)}
    x = verdicts["x"]
    assert sorted(x.loads) == ["L1", "L2", "L3"]
    assert x.baseline_rate == 10.0
    # L1's median 5 (1 cell), L2's 7 (3 cells), L3's 6 (2 cells): their median 6, over 6 cells.
    assert (x.share_of_baseline, x.share_cells) == (0.6, 6)
    # Beside a load none of its eval's cells were rated in, there is no share to read.
    y = verdicts["y"]
    assert y.loads == ["L4"]
    assert (y.share_of_baseline, y.share_cells) == (None, None)
