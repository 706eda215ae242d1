"""A store's cell energy as it keeps it against as derived on read from its readings."""

from __future__ import annotations

import pytest

from spark_otel import _semconv as sc
from spark_otel.analysis.energy import EnergyShare, attribute, energy_shares
from spark_otel.store import Store


def derived(store: Store) -> dict[str, tuple[float, float, bool]]:
    """Each covered cell's (box J, share J, estimated) as a reader derives them from everything."""
    samples = store.samples(sc.GPU_ENERGY) + store.samples(sc.GPU_POWER)
    report = attribute(store.cells(), samples)
    if report is None:
        return {}
    return {
        c.uid: (c.box_j, c.share_j, report.estimated)
        for c in report.cells
        if c.box_j is not None and c.share_j is not None
    }


def priced(store: Store, uids: list[str] | None = None) -> dict[str, EnergyShare]:
    """The shares of ``uids`` (all cells for None) as a command prices them on read."""
    return energy_shares(*store.energy_inputs(uids), uids)


def kept(store: Store) -> dict[str, tuple[float, float, bool]]:
    return {uid: (e.box_j, e.share_j, e.estimated) for uid, e in priced(store).items()}


def assert_kept_is_derived(store: Store) -> None:
    want, got = derived(store), kept(store)
    assert set(got) == set(want)
    for uid, (box_j, share_j, estimated) in want.items():
        assert got[uid][0] == pytest.approx(box_j, rel=1e-9, abs=1e-9), uid
        assert got[uid][1] == pytest.approx(share_j, rel=1e-9, abs=1e-9), uid
        assert got[uid][2] is estimated, uid
