"""The probe against llama.cpp's server: every stream gets exactly the pinned tokens, and the
engine's own generation counter agrees with what the probe read, at 1, 2 and 4 streams."""

from __future__ import annotations

import pytest
from tests.support.llama_server import LlamaServer

from spark_otel.probe import ProbeSettings, run_probe
from spark_otel.store import Store

TOKENS = 48


@pytest.mark.parametrize("mode", ["stream", "plain"])
def test_the_probe_reads_exact_tokens_and_the_engines_counter_agrees(
    llama: LlamaServer, store: Store, mode: str
) -> None:
    report = run_probe(
        llama.url,
        ProbeSettings(streams=[1, 2, 4], tokens=TOKENS, prompt_chars=120, mode=mode, gpu="none"),  # type: ignore[arg-type]
        store=store,
    )
    assert report.metadata.model == llama.model
    assert report.metadata.time_scale == 1.0  # a real engine: no /sim/info, wall time
    assert [lv.streams for lv in report.levels] == [1, 2, 4]
    for level in report.levels:
        assert level.errors == 0, level.error_messages
        assert level.token_mismatches == 0, level.mismatched_counts
        assert level.probe_tokens == TOKENS * level.streams
        assert level.quiescent
        assert level.requests_running_before == 0
        assert level.requests_running_after == 0
        # The engine's counter over the same quiescent window: the probe's work and nothing else.
        assert level.engine_generation_tokens is not None
        assert level.engine_probe_ratio == pytest.approx(1.0, abs=0.05)
        assert level.engine_generation_tokens == level.probe_tokens
    assert [w.streams for w in store.windows()] == [1, 2, 4]
