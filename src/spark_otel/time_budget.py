"""Where a cell's wall time went: its elapsed time split by what the cell waited on.

The client sees each request's start, its first streamed chunk and its end. Over the cell's
elapsed time every instant is in one phase, the first that applies of:

- ``decode``: some streamed request is past its first chunk (tokens are flowing);
- ``first_token``: some streamed request waits for its first chunk (the engine's queue and
  prefill, and the network; a stream that ended before any chunk waited all its time);
- ``unsplit``: some non-streamed request is in flight (the client cannot tell its prefill from
  its decode);
- ``other``: no request is in flight (the runner's own work between requests).

So the four add up to elapsed exactly, however the cell's requests overlap, and a cell of
parallel requests counts an instant once. The governor's wait for admission (``admission``)
comes before the cell starts and is outside elapsed. A runner that grades its answers inside the
cell (an Inspect sample's scorers and log writing) may mark where grading begins: from there to
the cell's end is ``scoring``, whatever requests the grader makes, and the four phases above
split the time before it. A cell with no mark has no ``scoring`` phase. Pure: stamps in, seconds
out.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ._clock import NS_PER_S

__all__ = ["IN_CELL_PHASES", "PHASES", "SCORING", "RequestStamps", "split_elapsed"]

PHASES = ("admission", "first_token", "decode", "unsplit", "other")
"""Every phase of every cell, in the order a cell lives them (and tables and plots show them)."""
IN_CELL_PHASES = PHASES[1:]
"""The phases that add up to the cell's elapsed time (with `SCORING`, in a cell that marked it)."""
SCORING = "scoring"
"""The last phase, in a cell whose runner marked where its grading began (and only there)."""


@dataclass(frozen=True, slots=True)
class RequestStamps:
    """One request as the client timed it, in ns of one monotonic clock; ``first_ns`` 0: no chunk
    arrived (or the request was not streamed)."""

    start_ns: int
    first_ns: int
    end_ns: int
    streaming: bool


def split_elapsed(
    requests: Iterable[RequestStamps],
    cell_start_ns: int,
    cell_end_ns: int,
    *,
    scale: float = 1.0,
    scoring_from_ns: int | None = None,
) -> dict[str, float]:
    """Seconds of the cell's ``[cell_start_ns, cell_end_ns)`` in each of `IN_CELL_PHASES`, times
    ``scale`` (a model clock's speed); requests are clipped to the cell. ``scoring_from_ns``: where
    the runner's grading began; the time from there is ``scoring`` (the key is absent without it)."""
    if scoring_from_ns is not None:
        solved_ns = min(max(scoring_from_ns, cell_start_ns), cell_end_ns)
        split = split_elapsed(requests, cell_start_ns, solved_ns, scale=scale)
        split[SCORING] = (cell_end_ns - solved_ns) * scale / NS_PER_S
        return split
    # (time, phase index, +1/-1): phase 0 decode, 1 first_token, 2 unsplit.
    events: list[tuple[int, int, int]] = []
    for r in requests:
        start, end = max(r.start_ns, cell_start_ns), min(r.end_ns, cell_end_ns)
        if end <= start:
            continue
        if not r.streaming:
            events += [(start, 2, 1), (end, 2, -1)]
        elif r.first_ns and r.first_ns < end:
            first = max(r.first_ns, start)
            events += [(start, 1, 1), (first, 1, -1), (first, 0, 1), (end, 0, -1)]
        else:
            events += [(start, 1, 1), (end, 1, -1)]
    events.sort()
    spent = [0, 0, 0]
    active = [0, 0, 0]
    last = cell_start_ns
    for at, phase, step in events:
        if at > last:
            for k in range(3):
                if active[k]:
                    spent[k] += at - last
                    break
            last = at
        active[phase] += step
    total = max(0, cell_end_ns - cell_start_ns)
    decode, first_token, unsplit = (v * scale / NS_PER_S for v in spent)
    other = max(0.0, total * scale / NS_PER_S - decode - first_token - unsplit)
    return {"first_token": first_token, "decode": decode, "unsplit": unsplit, "other": other}
