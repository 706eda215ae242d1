"""Every family in the engine's ``/metrics`` carries vLLM's own HELP text, word for word, as a
real vLLM 0.10 scrape has it (tests/data/sim); the inter-token latency family, which 0.11 renamed
from ``time_per_output_token_seconds``, carries 0.11's."""

from __future__ import annotations

import math
from pathlib import Path

from spark_otel.sim import DENSE, BoxModel

REAL_SCRAPE = Path(__file__).parents[1] / "data" / "sim" / "metrics-0.10.x-ngc25.09.txt"


def _help_lines(text: str) -> dict[str, str]:
    """{family: its HELP text}, the ``_created`` series left out."""
    helps = {}
    for line in text.splitlines():
        if line.startswith("# HELP "):
            name, _, words = line.removeprefix("# HELP ").partition(" ")
            if not name.endswith("_created"):
                helps[name] = words
    return helps


def test_every_family_has_vllms_help_text() -> None:
    ours = _help_lines(BoxModel({"a": DENSE}, speed=math.inf).engines["a"].metrics.exposition().decode())
    real = _help_lines(REAL_SCRAPE.read_text())
    assert ours.pop("vllm:inter_token_latency_seconds") == "Histogram of inter-token latency in seconds."
    assert len(ours) == 14
    assert ours == {name: real[name] for name in ours}
