"""What an eval cell cost in energy: the box's joules over its lifetime, and its share by tokens.

Computed from the cells and the GPU samples on read: `energy_shares` prices the cells a command
shows from what `Store.energy_inputs` reads for them, and reports price the whole store. The box's
energy is the sum over its GPUs of each one's cumulative energy: NVML's energy counter where the
part has one (``spark_otel.gpu.energy``, J, read across counter resets), else the trapezoid
integral of its power samples, flagged ``estimated``. Between samples the energy is interpolated
linearly (a counter read every few seconds integrates the draw exactly between reads; the
interpolation only places each joule inside its sampling interval). Where the samples do not cover
a cell's whole lifetime (from before its start to after its end) the cell has no energy, and the
report says so and names the command that would measure it.

The attribution rule (`attribute`): cut time at every cell's start and end; over each stretch,
the box's energy in it is split among the cells in flight in proportion to their tokens in
that stretch, a cell's completion tokens being spread evenly over its lifetime (as the
eval-interval throughput does; the store keeps no per-token times). So a cell's share is
``sum over stretches of E(stretch) * rate_i / sum of in-flight rates``, where ``rate_i`` is its
completion tokens over its elapsed time. A stretch whose cells in flight recorded no tokens at
all (timeouts that kept nothing, failures) is split evenly among them by time, so the shares
always sum to the box's energy over the time some cell ran. Energy while no cell ran is the
box's idle draw, reported apart and charged to no cell. Why tokens and not time: eight cells
decoding side by side make eight times the tokens for about the same joules, so a time split
would charge each cell as if it ran alone; by tokens, a cell that produced a quarter of the
box's tokens in a stretch pays a quarter of its energy. Load that is not a recorded cell (a
probe, an uninstrumented client) is charged to the cells in flight beside it: the box cannot
tell whose kernel drew the watts.

Per eval and worker count: joules per output token (the eval's shares over its cells' output
tokens) and per cell, with n, the median and its 95% interval over the cells, and the time span
they rest on. Per probe level: the level's mean power times its wall (the probe's own reading,
an energy-counter delta where the GPU has one), or the store's GPU samples over the level.
"""

from __future__ import annotations

import itertools
from bisect import bisect_left
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pydantic import Field

from .. import _semconv as sc
from .._clock import NS_PER_S
from ..model import Cell, MetricSample
from ._result import Result
from .gauges.series import cumulative
from .stats import RateSummary, summarize

if TYPE_CHECKING:
    from ..records.probe_report import ProbeReport

__all__ = [
    "MEASURE_GPU",
    "BoxEnergy",
    "CellEnergy",
    "EnergyReport",
    "EnergyShare",
    "EvalEnergy",
    "LevelEnergy",
    "attribute",
    "box_energy",
    "cell_energy",
    "energy_shares",
    "level_comparison",
    "per_eval",
    "probe_level_energy",
    "restrict",
]

MEASURE_GPU = "spark-otel receive --engine NAME=URL --gpu auto --interval 1"
"""What records the GPU beside an eval (``spark-otel gpu-sample`` records the GPU alone)."""


@dataclass(frozen=True)
class BoxEnergy:
    """The box's cumulative energy in J at instants, summed over its GPUs; `at` interpolates."""

    times: list[int]
    joules: list[float]
    gpus: list[str]
    estimated: bool
    """True where some GPU had no energy counter and its power samples were integrated."""

    @property
    def covers(self) -> tuple[int, int] | None:
        return (self.times[0], self.times[-1]) if len(self.times) >= 2 else None

    def at(self, t: int) -> float | None:
        """Cumulative J at ``t``; None outside the samples."""
        if len(self.times) < 2 or not self.times[0] <= t <= self.times[-1]:
            return None
        i = bisect_left(self.times, t)
        if self.times[i] == t:
            return self.joules[i]
        t0, t1 = self.times[i - 1], self.times[i]
        e0, e1 = self.joules[i - 1], self.joules[i]
        return e0 + (e1 - e0) * (t - t0) / (t1 - t0)

    def between(self, start: int, end: int) -> float | None:
        low, high = self.at(start), self.at(end)
        return None if low is None or high is None else high - low


def _gpu_series(samples: Iterable[MetricSample]) -> dict[str, tuple[list[int], list[float], bool]]:
    """Each GPU's cumulative J at its sample times, and whether it was integrated from power."""
    energy: dict[str, list[MetricSample]] = defaultdict(list)
    power: dict[str, list[MetricSample]] = defaultdict(list)
    for s in samples:
        gpu = str(s.attributes.get(sc.GPU_ID, "?"))
        if s.name == sc.GPU_ENERGY:
            energy[gpu].append(s)
        elif s.name == sc.GPU_POWER:
            power[gpu].append(s)
    out: dict[str, tuple[list[int], list[float], bool]] = {}
    for gpu in sorted(set(energy) | set(power)):
        rows = sorted(energy.get(gpu, []), key=lambda s: s.unix_ns)
        if len(rows) >= 2:
            out[gpu] = ([s.unix_ns for s in rows], cumulative([s.value for s in rows]), False)
            continue
        rows = sorted(power.get(gpu, []), key=lambda s: s.unix_ns)
        if len(rows) >= 2:
            total, joules = 0.0, [0.0]
            for a, b in itertools.pairwise(rows):
                total += (a.value + b.value) / 2 * (b.unix_ns - a.unix_ns) / NS_PER_S
                joules.append(total)
            out[gpu] = ([s.unix_ns for s in rows], joules, True)
    return out


def box_energy(samples: Iterable[MetricSample]) -> BoxEnergy | None:
    """The box's energy from GPU energy-counter and power samples; None without two readings of
    either. Over several GPUs it is defined where all of them have readings."""
    series = _gpu_series(samples)
    if not series:
        return None
    start = max(times[0] for times, _, _ in series.values())
    end = min(times[-1] for times, _, _ in series.values())
    if end <= start:
        return None
    instants = sorted(
        {t for times, _, _ in series.values() for t in times if start <= t <= end} | {start, end}
    )
    parts = [BoxEnergy(times, joules, [gpu], est) for gpu, (times, joules, est) in series.items()]
    totals = [sum(p.at(t) or 0.0 for p in parts) for t in instants]
    return BoxEnergy(instants, totals, sorted(series), any(p.estimated for p in parts))


# -- results -----------------------------------------------------------------------------------------
class CellEnergy(Result):
    """One cell's energy; None where the GPU samples do not cover its lifetime."""

    uid: str
    eval_name: str
    cell_id: str
    engine: str | None
    workers: int | None
    start_unix_ns: int
    end_unix_ns: int
    completion_tokens: int | None
    box_j: float | None = Field(description="the box's energy over the cell's lifetime")
    share_j: float | None = Field(description="its share by tokens among the cells in flight")
    j_per_token: float | None = Field(description="share over its completion tokens")


class EnergyShare(Result):
    """One cell's GPU energy, priced on read: the box's joules over the cell's lifetime and the
    cell's share of them by tokens among the cells in flight."""

    cell_uid: str
    box_j: float = Field(description="the box's energy over the cell's lifetime, summed over its GPUs")
    share_j: float = Field(description="the cell's share by tokens among the cells in flight")
    estimated: bool = Field(description="some GPU had no energy counter: its power samples were integrated")


class EvalEnergy(Result):
    """One eval at one worker count: joules per output token and per cell."""

    eval_name: str
    workers: int | None
    n_cells: int = Field(description="cells of the eval at this worker count")
    n_measured: int = Field(description="cells the GPU samples covered")
    output_tokens: int = Field(description="completion tokens of the measured cells")
    energy_j: float = Field(description="the measured cells' shares, summed")
    j_per_token: float | None
    j_per_cell: float | None = Field(description="energy over measured cells")
    per_cell: RateSummary = Field(description="each measured cell's share, J")
    start_unix_ns: int | None = Field(description="the span the measured cells cover")
    end_unix_ns: int | None


class EnergyReport(Result):
    """Every cell's energy, per eval, and what the box drew while no cell ran."""

    gpus: list[str]
    estimated: bool = Field(description="some GPU's energy was integrated from power samples")
    covered_start_unix_ns: int | None
    covered_end_unix_ns: int | None
    box_j: float = Field(description="the box's energy while some cell ran, within the samples")
    attributed_j: float = Field(description="shares of the cells the samples cover wholly")
    partial_j: float = Field(description="shares of cells only partly covered, charged to no figure")
    idle_j: float = Field(description="the box's energy between the first and last cell while none ran")
    cells: list[CellEnergy]
    evals: list[EvalEnergy]
    unmeasured: int = Field(description="cells the GPU samples do not cover")
    measure: str | None = Field(description="the command that would measure them")


# -- attribution -------------------------------------------------------------------------------------
def _rate(cell: Cell) -> float:
    elapsed = cell.end_unix_ns - cell.start_unix_ns
    return (cell.completion_tokens or 0) / elapsed if elapsed > 0 else 0.0


def _shares(cells: Sequence[Cell], box: BoxEnergy) -> tuple[list[float], float, float]:
    """Each cell's share of the box's energy over the stretches it ran in the samples' span, the
    energy while some cell ran, and while none did (between the first and the last)."""
    low, high = box.covers or (0, 0)
    edges = sorted(
        {t for c in cells for t in (c.start_unix_ns, c.end_unix_ns) if low <= t <= high} | {low, high}
    )
    starts = sorted(range(len(cells)), key=lambda i: cells[i].start_unix_ns)
    shares = [0.0] * len(cells)
    running: set[int] = set()
    busy = idle = 0.0
    k = 0
    first = min((c.start_unix_ns for c in cells), default=high)
    last = max((c.end_unix_ns for c in cells), default=low)
    for a, b in itertools.pairwise(edges):
        while k < len(starts) and cells[starts[k]].start_unix_ns <= a:
            running.add(starts[k])
            k += 1
        running = {i for i in running if cells[i].end_unix_ns > a}
        joules = box.between(a, b) or 0.0
        if not running:
            if first <= a and b <= last:
                idle += joules
            continue
        busy += joules
        rates = {i: _rate(cells[i]) for i in running}
        total = sum(rates.values())
        for i, r in rates.items():
            shares[i] += joules * (r / total if total > 0 else 1 / len(running))
    return shares, busy, idle


def attribute(cells: Sequence[Cell], samples: Iterable[MetricSample]) -> EnergyReport | None:
    """Every cell's energy on the box (`box_energy` of ``samples``) under the module's rule;
    None when the samples hold no GPU energy or power readings at all."""
    box = box_energy(samples)
    if box is None:
        return None
    timed = [c for c in cells if c.end_unix_ns > c.start_unix_ns]
    shares, busy, idle = _shares(timed, box)
    low, high = box.covers or (0, 0)
    rows: list[CellEnergy] = []
    partial = 0.0
    for cell, share in zip(timed, shares, strict=True):
        whole = low <= cell.start_unix_ns and cell.end_unix_ns <= high
        if not whole:
            partial += share
        tokens = cell.completion_tokens
        rows.append(
            CellEnergy(
                uid=cell.uid,
                eval_name=cell.eval_name,
                cell_id=cell.cell_id,
                engine=cell.engine,
                workers=cell.workers,
                start_unix_ns=cell.start_unix_ns,
                end_unix_ns=cell.end_unix_ns,
                completion_tokens=tokens,
                box_j=box.between(cell.start_unix_ns, cell.end_unix_ns) if whole else None,
                share_j=share if whole else None,
                j_per_token=share / tokens if whole and tokens else None,
            )
        )
    unmeasured = sum(1 for r in rows if r.share_j is None)
    return EnergyReport(
        gpus=box.gpus,
        estimated=box.estimated,
        covered_start_unix_ns=low,
        covered_end_unix_ns=high,
        box_j=busy,
        attributed_j=busy - partial,
        partial_j=partial,
        idle_j=idle,
        cells=rows,
        evals=per_eval(rows),
        unmeasured=unmeasured,
        measure=MEASURE_GPU if unmeasured else None,
    )


def per_eval(rows: Sequence[CellEnergy]) -> list[EvalEnergy]:
    """The cells' energy per eval and worker count."""
    groups: dict[tuple[str, int | None], list[CellEnergy]] = defaultdict(list)
    for row in rows:
        groups[(row.eval_name, row.workers)].append(row)
    out = []
    for (name, workers), group in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1] or 0)):
        measured = [r for r in group if r.share_j is not None]
        energy = sum(r.share_j or 0.0 for r in measured)
        tokens = sum(r.completion_tokens or 0 for r in measured)
        out.append(
            EvalEnergy(
                eval_name=name,
                workers=workers,
                n_cells=len(group),
                n_measured=len(measured),
                output_tokens=tokens,
                energy_j=energy,
                j_per_token=energy / tokens if tokens else None,
                j_per_cell=energy / len(measured) if measured else None,
                per_cell=summarize(r.share_j for r in measured),
                start_unix_ns=min((r.start_unix_ns for r in measured), default=None),
                end_unix_ns=max((r.end_unix_ns for r in measured), default=None),
            )
        )
    return out


def restrict(
    report: EnergyReport,
    *,
    eval_name: str | None = None,
    engine: str | None = None,
    since_unix_ns: int | None = None,
    until_unix_ns: int | None = None,
) -> EnergyReport:
    """The report's cells of one eval or engine only, or that start in a range, with their
    per-eval figures: the box's energy is attributed over every cell on it first, so a selection
    never changes a share."""
    kept = [
        c
        for c in report.cells
        if (eval_name is None or c.eval_name == eval_name)
        and (engine is None or c.engine == engine)
        and (since_unix_ns is None or c.start_unix_ns >= since_unix_ns)
        and (until_unix_ns is None or c.start_unix_ns <= until_unix_ns)
    ]
    unmeasured = sum(1 for c in kept if c.share_j is None)
    return report.model_copy(
        update={
            "cells": kept,
            "evals": per_eval(kept),
            "unmeasured": unmeasured,
            "measure": MEASURE_GPU if unmeasured else None,
        }
    )


def energy_shares(
    cells: Sequence[Cell], readings: Sequence[MetricSample], uids: Iterable[str] | None = None
) -> dict[str, EnergyShare]:
    """Each cell's energy share by uid, priced over ``cells`` and the GPU ``readings`` (what
    `Store.energy_inputs` reads for them): the cells of ``uids`` only, else all; a cell the
    readings do not cover has none."""
    report = attribute(cells, readings)
    if report is None:
        return {}
    wanted = None if uids is None else set(uids)
    return {
        c.uid: EnergyShare(cell_uid=c.uid, box_j=c.box_j, share_j=c.share_j, estimated=report.estimated)
        for c in report.cells
        if (wanted is None or c.uid in wanted) and c.box_j is not None and c.share_j is not None
    }


def cell_energy(report: EnergyReport | None) -> dict[str, CellEnergy]:
    """The report's cells by uid (empty without a report)."""
    return {} if report is None else {c.uid: c for c in report.cells}


# -- probe levels ------------------------------------------------------------------------------------
class LevelEnergy(Result):
    """One probe level's energy and joules per token."""

    engine: str
    streams: int
    repeat: int
    energy_j: float | None
    tokens: int = Field(description="the probe's own completion tokens at the level")
    j_per_token: float | None
    source: str | None = Field(description="probe power x wall, or the store's GPU samples")
    estimated: bool = Field(description="from mean power samples, not an energy counter")


def probe_level_energy(report: ProbeReport, box: BoxEnergy | None = None) -> list[LevelEnergy]:
    """Each level's energy: its mean power times its wall (the probe's own power reading), else
    the box's energy over the level from the store's samples. Joules per token are over the
    probe's tokens, so a level beside another tenant (engine/probe above 1) charges the probe
    with that tenant's share too."""
    meta = report.metadata
    estimated_source = meta.gpu_source == "smi"  # nvidia-smi has no energy counter
    out = []
    for lv in report.levels:
        energy, source, estimated = None, None, False
        if lv.power_w is not None and lv.wall_s > 0:
            energy, source, estimated = (
                lv.power_w * lv.wall_s,
                f"probe power ({meta.gpu_source})",
                estimated_source,
            )
        elif box is not None:
            energy = box.between(lv.start_unix_ns, lv.end_unix_ns)
            if energy is not None:
                source, estimated = "store GPU samples", box.estimated
        out.append(
            LevelEnergy(
                engine=meta.engine,
                streams=lv.streams,
                repeat=lv.repeat,
                energy_j=energy,
                tokens=lv.probe_tokens,
                j_per_token=energy / lv.probe_tokens if energy is not None and lv.probe_tokens else None,
                source=source,
                estimated=estimated,
            )
        )
    return out


def level_comparison(levels: Sequence[LevelEnergy]) -> str | None:
    """ "8 streams: 0.42 J/token against 3.10 at 1 (7.4x less)": the most streams measured against
    the fewest, medians over repeats; None with fewer than two levels measured."""
    by_streams: dict[int, list[float]] = defaultdict(list)
    for lv in levels:
        if lv.j_per_token is not None:
            by_streams[lv.streams].append(lv.j_per_token)
    if len(by_streams) < 2:
        return None
    low, high = min(by_streams), max(by_streams)
    base = summarize(by_streams[low]).median or 0.0
    top = summarize(by_streams[high]).median or 0.0
    ratio = ""
    if top > 0 and base >= top:
        ratio = f" ({base / top:.1f}x less)"
    elif top > base > 0:  # nothing at the most streams is no ratio, as nothing at the fewest
        ratio = f" ({top / base:.1f}x more)"
    return f"{high} streams: {top:.3g} J/token against {base:.3g} at {low}{ratio}"
