"""How an OpenTelemetry metric is named once the collector remote-writes it to Prometheus.

The collector's ``prometheus_remote_write`` exporter (contrib v0.161.0, default translation
strategy ``UnderscoreEscapingWithSuffixes``) turns dots into underscores and appends a unit
suffix and, for monotonic sums, ``_total``. The table below was read off a real Prometheus
fed by the real collector (tests/collector/test_e2e.py checks it against every name the
end-to-end run produces): ``{token}/s`` -> ``_per_second``, ``W`` -> ``_watts``, ``1`` (gauge)
-> ``_ratio``, ``By`` -> ``_bytes``, ``J`` -> ``_joules``, ``s`` -> ``_seconds``, ``%`` ->
``_percent``; annotations in braces (``{token}``, ``{cell}``) add nothing; ``MHz`` stays
``_MHz``. Histograms add ``_bucket``, ``_sum`` and ``_count``.
"""

from __future__ import annotations

import re
from enum import Enum

__all__ = ["Kind", "base_names", "prometheus_name"]


class Kind(Enum):
    GAUGE = "gauge"
    COUNTER = "counter"  # monotonic sum
    UP_DOWN = "up_down"  # non-monotonic sum: a gauge in Prometheus
    HISTOGRAM = "histogram"


_UNIT_WORDS = {
    "s": "seconds",
    "ms": "milliseconds",
    "W": "watts",
    "J": "joules",
    "By": "bytes",
    "%": "percent",
    "MHz": "MHz",
}
_PER_WORDS = {"s": "second", "m": "minute", "h": "hour"}
_SUFFIXES = ("_bucket", "_count", "_sum", "_total")
_UNIT_SUFFIXES = tuple(f"_{w}" for w in (*_UNIT_WORDS.values(), "ratio", "per_second"))
_BRACES = re.compile(r"\{[^}]*\}")


def _unit_suffix(unit: str, kind: Kind) -> str:
    if unit == "1":
        return "ratio" if kind is Kind.GAUGE else ""
    main, _, per = unit.partition("/")
    words = []
    main = _BRACES.sub("", main)
    if main:
        words.append(_UNIT_WORDS.get(main, main))
    if per:
        per = _BRACES.sub("", per)
        if per:
            words.append(f"per_{_PER_WORDS.get(per, per)}")
    return "_".join(words)


def prometheus_name(otel_name: str, unit: str, kind: Kind) -> str:
    """The series name Prometheus stores for an OpenTelemetry metric (histograms: the stem)."""
    name = re.sub(r"[^a-zA-Z0-9_:]", "_", otel_name)
    suffix = _unit_suffix(unit, kind)
    if suffix and not name.endswith(f"_{suffix}"):
        name = f"{name}_{suffix}"
    if kind is Kind.COUNTER and not name.endswith("_total"):
        name = f"{name}_total"
    return name


def base_names(prom_name: str) -> set[str]:
    """Every OpenTelemetry-style name (dots for underscores) ``prom_name`` may have come from.

    Strips the histogram/counter suffix, then at most one unit suffix; a semconv name is
    matched when its dotted form, with dots as underscores, equals one of the stems.
    """
    stems = {prom_name}
    for suffix in _SUFFIXES:
        if prom_name.endswith(suffix):
            stems.add(prom_name[: -len(suffix)])
    for stem in list(stems):
        for suffix in _UNIT_SUFFIXES:
            if stem.endswith(suffix):
                stems.add(stem[: -len(suffix)])
    return stems
