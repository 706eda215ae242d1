"""The line each cut-off cell gets, word for word, from its figures: every branch of the rule
(queued, no baseline, slowed, long, unknown) and the boundaries between them. The kind comes from
the analysis's rule (`analysis.timeouts._kind`, the private piece this test is about), the line
from `views.timeouts.verdict_line`."""

from __future__ import annotations

from typing import Any

import pytest

from spark_otel.analysis.timeouts import Rerun, TimeoutVerdict, _kind
from spark_otel.views.timeouts import verdict_line


def _figures(**kw: Any) -> dict[str, Any]:
    return {
        "eval_name": "g",
        "ceiling_s": 1800.0,
        "admission_s": None,
        "baseline_rate": 10.0,
        "share_of_baseline": None,
        "share_cells": None,
        "loads": [],
        "needed_at_baseline_s": None,
        "rerun": None,
        "completion_tokens": 100,
    } | kw


def _rerun(elapsed_s: float, share: float | None = 0.6) -> Rerun:
    return Rerun(uid="again", elapsed_s=elapsed_s, completion_tokens=9_000, share_of_baseline=share)


CEILING = "ceiling 1,800 s"
NEEDED = "needed at least 2,000 s at baseline, ceiling 1,800 s"
EVAL_SOURCE = "the eval's cells inside the load (n=4)"
UNJUDGED_FIELDS = {
    "uid": "u",
    "cell_id": "c",
    "engine": "q",
    "start_unix_ns": 0,
    "elapsed_s": 1800.0,
    "rate": None,
    "baseline_n": 5,
}


@pytest.mark.parametrize(
    ("figures", "kind", "line"),
    [
        (
            {"admission_s": 180.0, "share_of_baseline": 0.5},
            "queued",
            f"queued 180 s before it started ({CEILING})",
        ),
        (
            {"admission_s": 179.0, "share_of_baseline": 0.5, "loads": ["nemotron run"]},
            "slowed",
            "slowed by nemotron run (ran at 50% of baseline)",
        ),
        (
            {"baseline_rate": None, "share_of_baseline": 0.5},
            "unknown",
            "no verdict: g has no baseline (no cell of it ran alone); run some of its cells with nothing "
            "else on the box, then `spark-otel timeouts --eval g`",
        ),
        (
            {"share_of_baseline": 0.5, "loads": ["a", "b"], "needed_at_baseline_s": 2000.0},
            "slowed",
            f"slowed by a, b (ran at 50% of baseline); {NEEDED}",
        ),
        (
            {"share_of_baseline": 0.8, "share_cells": 4},
            "slowed",
            f"slowed by other load (ran at 80% of baseline, as {EVAL_SOURCE})",
        ),
        (
            {"share_of_baseline": 0.5, "rerun": _rerun(1500.0), "needed_at_baseline_s": 900.0},
            "slowed",
            "slowed by other load (ran at 50% of baseline); its re-run took 1,500 s at 60% of baseline, "
            f"so at 50% it needed about 1,800 s, {CEILING}",
        ),
        (
            {"share_of_baseline": 0.9, "needed_at_baseline_s": 2000.0},  # exactly 90%: not slowed
            "long",
            f"long by itself: {NEEDED}",
        ),
        ({"share_of_baseline": 0.95}, "long", f"long by itself: ran at baseline speed, {CEILING}"),
        (
            {"share_of_baseline": 0.95, "rerun": _rerun(1900.0, None)},
            "long",
            f"long by itself: its re-run took 1,900 s at an unknown rate, {CEILING}",
        ),
        (
            {"rerun": _rerun(1800.0)},  # no rate of its own, but its re-run needed the whole ceiling
            "long",
            f"long by itself: its re-run took 1,800 s at 60% of baseline, {CEILING}",
        ),
        (
            {"rerun": _rerun(1799.0), "completion_tokens": 0},
            "unknown",
            "no verdict: it overlapped no measured load and recorded no tokens; stream it "
            "(spark_otel.stream_with_deadline keeps a cut-off cell's tokens) to judge its next timeout",
        ),
        (
            {"completion_tokens": None},
            "unknown",
            "no verdict: it overlapped no measured load and recorded no tokens; stream it "
            "(spark_otel.stream_with_deadline keeps a cut-off cell's tokens) to judge its next timeout",
        ),
        (
            {},
            "unknown",
            "no verdict: it overlapped no measured load and has no rate; stream it "
            "(spark_otel.stream_with_deadline keeps a cut-off cell's tokens) to judge its next timeout",
        ),
    ],
)
def test_each_cut_off_cell_gets_the_line_its_figures_support(
    figures: dict[str, Any], kind: str, line: str
) -> None:
    values = _figures(**figures)
    values["kind"], values["unjudged"] = _kind(values)
    verdict = TimeoutVerdict(**(UNJUDGED_FIELDS | values))
    assert (verdict.kind, verdict_line(verdict)) == (kind, line)
