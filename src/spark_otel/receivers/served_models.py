"""Is a rule still about the engine it was measured on? The article re-checks every rule "when
either model changes": a rule whose engine now serves another model is stale. It is still
applied (a rule measured on the old model beats none), and `spark-otel rules check` and
`spark-otel lanes` say so, with the command that measures it again."""

from __future__ import annotations

from dataclasses import dataclass

from .._exceptions import ConfigError
from ..analysis.advisor import probe_command
from ..records.rules_file import RulesFile

__all__ = ["EngineCheck", "check_engines", "served_models"]


@dataclass(frozen=True)
class EngineCheck:
    """What an engine the rules name serves now, against what it served when measured."""

    engine: str
    measured_model: str | None
    serving: tuple[str, ...] | None
    """None: the engine could not be asked (no URL in the rules, or no answer)."""
    problem: str | None
    """Why the engine's rules are stale or unchecked, with the command that re-measures; None if current."""

    @property
    def stale(self) -> bool:
        return (
            self.serving is not None
            and self.measured_model is not None
            and self.measured_model not in self.serving
        )


def served_models(url: str, *, timeout_s: float = 2.0) -> tuple[str, ...] | None:
    """The model ids the engine at ``url`` serves: ``/v1/models``, else the ``model_name`` labels
    of its ``/metrics``; None when neither answers."""
    import httpx2

    from .._urls import engine_base_url
    from .prometheus import parse_metrics

    base = engine_base_url(url)
    try:
        response = httpx2.get(f"{base}/v1/models", timeout=timeout_s)
        if response.status_code == 200:
            ids = tuple(
                str(m["id"]) for m in response.json().get("data", []) if isinstance(m, dict) and "id" in m
            )
            if ids:
                return ids
        metrics = httpx2.get(f"{base}/metrics", timeout=timeout_s)
        if metrics.status_code == 200:
            snapshot = parse_metrics(metrics.text, url=base, unix_ns=0)
            return snapshot.model_names or None
    except Exception:  # an engine that cannot be asked is reported as unchecked, not an error
        return None
    return None


def check_engines(rules: RulesFile, *, timeout_s: float = 2.0) -> list[EngineCheck]:
    """Each engine the rules name: current, stale (another model now), or unchecked (and why).
    ``timeout_s`` (per engine) is above 0 and at most an hour: `ConfigError` otherwise, since a
    negative one would report every engine as unchecked for a reason that is not theirs."""
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, int | float) or not 0 < timeout_s <= 3600:
        raise ConfigError(
            f"timeout_s must be a finite number of seconds above 0 and at most 3,600, got {timeout_s!r}"
        )
    out = []
    for engine in sorted(rules.engines_governed()):
        info = rules.engines.get(engine)
        measured = info.model if info else None
        url = info.url if info else None
        if url is None:
            out.append(EngineCheck(engine, measured, None, "no url in [engines]: not checked"))
            continue
        serving = served_models(url, timeout_s=timeout_s)
        problem = None
        if serving is None:
            problem = f"{url} did not say what it serves: not checked"
        elif measured is None:
            problem = "no model recorded in [engines]: not checked"
        elif measured not in serving:
            problem = (
                f"measured on {measured}, now serves {', '.join(serving)}: stale (still applied); "
                f"re-measure with `{probe_command(engine, url, (1, 2, 4, 8))}`, then "
                "`spark-otel advise --write-rules FILE`"
            )
        out.append(EngineCheck(engine, measured, serving, problem))
    return out
