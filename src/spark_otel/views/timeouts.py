"""Why each timeout happened, in words: the verdict line the command line and the report both
show for a cut-off cell, the table they list them in, and the JSON shape ``timeouts --json``
prints (the verdict's facts with its line and the source of its share beside them)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from .._clock import NS_PER_S
from ..analysis.timeouts import SLOWED_BELOW, TimeoutKind, TimeoutVerdict, Unjudged
from .requests import cell_label

__all__ = ["share_source", "timeouts_table", "verdict_json", "verdict_line"]


def _seconds(value: float) -> str:
    return f"{value:,.0f} s"


def share_source(v: TimeoutVerdict) -> str | None:
    """What the cell's share of baseline rests on; None where it has none."""
    if v.share_of_baseline is None:
        return None
    return "own rate" if v.share_cells is None else f"the eval's cells inside the load (n={v.share_cells})"


def verdict_line(v: TimeoutVerdict) -> str:
    """One line: why the cell hit its ceiling, and what it would have needed (or what would judge it)."""
    ceiling = f"ceiling {_seconds(v.ceiling_s)}"
    if v.kind is TimeoutKind.QUEUED:
        assert v.admission_s is not None
        return f"queued {_seconds(v.admission_s)} before it started ({ceiling})"
    if v.unjudged is Unjudged.NO_BASELINE:
        return (
            f"no verdict: {v.eval_name} has no baseline (no cell of it ran alone); run some of its "
            f"cells with nothing else on the box, then `spark-otel timeouts --eval {v.eval_name}`"
        )
    if v.kind is TimeoutKind.UNKNOWN:
        what = "recorded no tokens" if v.unjudged is Unjudged.NO_TOKENS else "has no rate"
        return (
            f"no verdict: it overlapped no measured load and {what}; stream it "
            "(spark_otel.stream_with_deadline keeps a cut-off cell's tokens) to judge its next timeout"
        )
    needed = _needed(v, ceiling)
    if v.kind is TimeoutKind.SLOWED:
        assert v.share_of_baseline is not None
        loads = ", ".join(v.loads) or "other load"
        source = "" if v.share_cells is None else f", as {share_source(v)}"
        line = f"slowed by {loads} (ran at {v.share_of_baseline:.0%} of baseline{source})"
        return line + (f"; {needed}" if needed else "")
    return f"long by itself: {needed or f'ran at baseline speed, {ceiling}'}"


def _needed(v: TimeoutVerdict, ceiling: str) -> str | None:
    """What the cell would have needed: its tokens at baseline speed (a lower bound), or what its
    re-run took, and at the share it ran at."""
    needed = None
    if v.needed_at_baseline_s is not None:
        needed = f"needed at least {_seconds(v.needed_at_baseline_s)} at baseline, {ceiling}"
    rerun, share = v.rerun, v.share_of_baseline
    if rerun is not None:
        ran = (
            f"{rerun.share_of_baseline:.0%} of baseline"
            if rerun.share_of_baseline is not None
            else "an unknown rate"
        )
        needed = f"its re-run took {_seconds(rerun.elapsed_s)} at {ran}"
        if share is not None and share < SLOWED_BELOW and v.baseline_rate:
            at_share = rerun.completion_tokens / (share * v.baseline_rate)
            needed += f", so at {share:.0%} it needed about {_seconds(at_share)}"
        needed += f", {ceiling}"
    return needed


def timeouts_table(verdicts: Sequence[TimeoutVerdict]) -> tuple[list[str], list[list[str]]]:
    """One row per cut-off cell: when it ran, what it produced, its share of baseline, its verdict."""
    columns = ["cell", "started (UTC)", "elapsed s", "output tok", "tok/s", "of baseline", "verdict"]
    rows = [
        [
            cell_label(v.cell_id, request_as_cell=v.request_as_cell),
            datetime.fromtimestamp(v.start_unix_ns / NS_PER_S, UTC).strftime("%Y-%m-%d %H:%M"),
            f"{v.elapsed_s:,.0f}",
            f"{v.completion_tokens:,}" if v.completion_tokens is not None else "none",
            f"{v.rate:.2f}" if v.rate is not None else "-",
            f"{v.share_of_baseline:.0%}" if v.share_of_baseline is not None else "-",
            verdict_line(v),
        ]
        for v in verdicts
    ]
    return columns, rows


def verdict_json(v: TimeoutVerdict) -> dict[str, Any]:
    """A verdict as ``timeouts --json`` prints it: its facts, the source of its share and its line."""
    return v.model_dump(mode="json") | {"share_source": share_source(v), "verdict": verdict_line(v)}
