"""The queue rules in words: each rule as a person reads it and the evidence it rests on (n, the
levels measured, intervals, the curve, the costliest window), written once from the facts the
advisor returns, for the command line, the report, the demo, ``advise --json`` and the rules file."""

from __future__ import annotations

from typing import Any

from ..analysis.advisor import Advice, CellClass, ClassAdvice, QueueRule, RuleKind
from .curves import describe_curve, lane_evidence

__all__ = ["advice_json", "rule_evidence", "rule_text", "rules_table"]


def _pct(value: float) -> str:
    return f"{value:.0%}"


def _pct_interval(interval: tuple[float, float] | None) -> str:
    return "" if interval is None else f" (95% CI {_pct(interval[0])} to {_pct(interval[1])})"


def _x_interval(interval: tuple[float, float] | None) -> str:
    return "" if interval is None else f" (95% CI {interval[0]:.1f}x to {interval[1]:.1f}x)"


def _streams(n: int) -> str:
    return f"{n} stream{'s' if n > 1 else ''}"


def _label(a: ClassAdvice) -> str:
    bound = " ceiling-bound" if a.ceiling_bound else ""
    return f"{a.eval_name} {a.cell_class.value}{bound} cells on {a.engine}"


def rule_text(r: QueueRule) -> str:
    """The rule as a person reads it: "qwen generation-heavy cells batch to 8"."""
    if r.kind is RuleKind.BATCH:
        assert r.advice is not None
        return _batch_text(r.advice)
    if r.kind is RuleKind.CAP:
        assert r.engine is not None
        assert r.workers is not None
        return f"{r.engine} lane at most {_streams(r.workers)}"
    if r.kind is RuleKind.CROSS_ENGINE:
        who = "a ceiling-bound eval" if r.ceiling_bound else r.eval_name
        if r.workers == 1:
            return f"Do not batch {r.engine} while {who} runs on {r.while_engine}"
        return f"{r.engine} yields while {who} runs on {r.while_engine}"
    if r.kind is RuleKind.GAUGE:
        return "Read load from token counts, never from the GPU utilization gauge"
    return _measure_text(r)


def _measure_text(r: QueueRule) -> str:
    if r.missing == "lane still rising":
        assert r.shape is not None
        return f"{r.engine}: no lane cap yet, measure past {_streams(r.shape.streams)}"
    who = f"{r.eval_name} cells on {r.engine}" if r.eval_name else f"{r.engine}"
    return f"Measure {r.engine} first: no worker count for {who} yet"


def _batch_text(a: ClassAdvice) -> str:
    label = _label(a)
    text = (
        f"{label}: stay serial" if a.recommended_workers == 1 else f"{label} batch to {a.recommended_workers}"
    )
    if a.cell_class is not CellClass.GENERATION_HEAVY and a.recommended_workers > 1:
        text += f"; prefill-bound, the gain caps near {a.speedup:.1f}x"
    return text


def rule_evidence(r: QueueRule) -> str:
    """The figures the rule rests on, and where the data cannot decide, the command that would."""
    if r.kind is RuleKind.BATCH:
        return _batch_evidence(r)
    if r.kind is RuleKind.CROSS_ENGINE:
        return _cross_evidence(r)
    if r.kind is RuleKind.GAUGE:
        assert r.gauge is not None
        g = r.gauge
        return (
            f"utilization median {g.utilization_median:.0%} (p10 {g.utilization_p10:.0%}, p90 "
            f"{g.utilization_p90:.0%}) over {g.samples} samples while token rate ranged {g.rate_min:.1f} to "
            f"{g.rate_max:.1f} tok/s ({g.rate_max / g.rate_min:.1f}x)"
        )
    if r.shape is not None:
        assert r.curve is not None
        described = f"{lane_evidence(r.shape)} ({describe_curve(r.curve)})"
        return described if r.kind is RuleKind.CAP else f"{described}; run: {r.command}"
    return _measure_first_evidence(r)


def _measure_first_evidence(r: QueueRule) -> str:
    curve = r.curve
    if curve is None:
        missing = "no rate curve"
    elif r.missing == "no single stream":
        missing = f"no single-stream rate: the curve starts at {curve.streams[0]} streams"
    else:
        missing = f"one level only ({curve.streams[0]} stream): nothing to compare"
    return (
        f"{r.figures.n_cells} cells recorded, {missing}"
        + (f" ({describe_curve(curve)})" if curve is not None else "")
        + f"; run: {r.command}, or run the eval at 1 and N workers"
    )


def _batch_evidence(r: QueueRule) -> str:
    a, curve = r.advice, r.curve
    assert a is not None
    assert curve is not None
    chosen = next(c for c in a.candidates if c.workers == a.recommended_workers)
    over = [c for c in a.candidates if c.workers > a.recommended_workers]
    why_not = ""
    if over:
        nxt = over[0]
        why_not = f"; {nxt.workers} would predict {nxt.timeout_fraction:.0%} timeouts and {nxt.speedup:.1f}x"
    loaded = ""
    if curve.under_load:
        loaded = (
            "; the curve was measured under load and is used because nothing better was measured: "
            f"re-measure on an idle engine with {r.command}"
        )
    return (
        f"n={a.n_cells} cells (p90 output {a.output_tokens_p90 or 0:,.0f} tok, median prompt "
        f"{a.prompt_tokens_median or 0:,.0f} tok); curve: {describe_curve(curve)}; at "
        f"{a.recommended_workers}: {chosen.per_stream_rate:.2f} tok/s per stream, "
        f"{_pct(a.per_stream_cost)} slower{_pct_interval(a.per_stream_cost_interval)}, "
        f"predicted {a.speedup:.1f}x wall"
        f"{_x_interval(a.speedup_interval)}, {a.timeout_fraction:.0%} timeouts vs "
        f"{a.serial_timeout_fraction:.0%} serial{why_not}{loaded}"
    )


def _cross_evidence(r: QueueRule) -> str:
    c = r.cross
    assert c is not None
    assert r.figures.neighbour_cost is not None
    failures = f", {c.failures} failed" if c.failures else ""
    more = ""
    if c.more_windows:
        windows = f"{c.more_windows} more window{'s' if c.more_windows > 1 else ''}"
        more = f"; {windows} on {r.engine} past the threshold"
    if c.cost_at_one is not None:
        limit_why = f"; beside one {r.engine} cell it cost {_pct(c.cost_at_one)}: at most 1 there"
    else:
        limit_why = f"; {r.engine} at one worker beside it was not measured under the threshold: it yields"
    return (
        f"{c.window}: {c.eval_label} decoded {c.rate:.2f} tok/s (n={c.rate_n}) against its "
        f"{c.baseline:.2f} baseline (n={c.baseline_n}), cost {r.figures.neighbour_cost:.0%}"
        f"{_pct_interval(r.figures.neighbour_cost_interval)} > {c.threshold:.0%}; "
        f"{c.timeouts} of {c.n_cells} cells in the window timed out{failures}{more}{limit_why}"
    )


def rules_table(advice: Advice) -> tuple[list[str], list[list[str]]]:
    """One row per rule: the rule, and its evidence."""
    return ["queue rule", "evidence"], [[rule_text(r), rule_evidence(r)] for r in advice.rules]


def advice_json(advice: Advice) -> dict[str, Any]:
    """The advice as ``advise --json`` prints it: its facts, each rule with its words beside them."""
    return advice.model_dump(mode="json") | {
        "rules": [
            r.model_dump(mode="json") | {"rule": rule_text(r), "evidence": rule_evidence(r)}
            for r in advice.rules
        ]
    }
