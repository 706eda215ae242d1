"""The metric-name helpers on the old spellings: every alias, with and without a unit bracket.

The captures the other tests read use the old spelling only in the GENERIC layout's bare names;
these pin each of the four renamed metrics through both `canonical_metric` and
`split_metric_name`, and that a name without a bracket has no unit (not a made-up one).
"""

from __future__ import annotations

import pytest

from spark_otel.receivers.nsight import canonical_metric, split_metric_name

# (old full name, current full name, current short name, unit)
RENAMED = [
    ("SM Active [Throughput %]", "SMs Active [Throughput %]", "SMs Active", "%"),
    (
        "Compute Warps In Flight [Avg Warps per Cycle]",
        "Compute Warps in Flight [Avg Warps per Cycle]",
        "Compute Warps in Flight",
        "{warp}",
    ),
    (
        "Async Compute In Flight [Throughput %]",
        "Async Compute in Flight [Throughput %]",
        "Async Compute in Flight",
        "%",
    ),
    (
        "Sync Compute In Flight [Throughput %]",
        "Sync Compute in Flight [Throughput %]",
        "Sync Compute in Flight",
        "%",
    ),
]


@pytest.mark.parametrize(("old", "full", "short", "unit"), RENAMED)
def test_an_old_spelling_with_its_unit_reads_as_the_current_one(
    old: str, full: str, short: str, unit: str
) -> None:
    assert canonical_metric(old) == full
    assert split_metric_name(old) == (short, unit)


@pytest.mark.parametrize(("old", "short"), [(old.split(" [")[0], short) for old, _, short, _ in RENAMED])
def test_an_old_bare_spelling_reads_as_the_current_one_without_a_unit(old: str, short: str) -> None:
    assert canonical_metric(f"  {old} ") == short  # the padding is stripped
    assert split_metric_name(f"  {old} ") == (short, "")


def test_a_current_bare_name_is_kept_and_has_no_unit() -> None:
    assert canonical_metric("GR Active") == "GR Active"
    assert split_metric_name("GR Active") == ("GR Active", "")
