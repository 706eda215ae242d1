"""The article's curves, reproduced against the running server, measured two ways.

Each level gets its own box, with the speed chosen so the level's decode lasts at least two
seconds of wall time and the loopback carries at most a few thousand chunks a second: the figures
must hold in model time whatever the speed, and a busy shared CPU must not decide the result.

- The server's own model-time stamps (`Box.timings`, first token to last) must match the article
  within 5%: no handler or client delay reaches them, so only the timing model and its pacing do,
  and pacing that slipped shows as ``dropped_model_s``.
- The probe-style client reading the same streams, first token read to last token read, must come
  within 10%: its reads can come late by whatever a loaded machine makes them, which over a
  two-second decode is a few percent.
"""

from __future__ import annotations

import statistics

import pytest
from tests.support.loopback import probe_level

from spark_otel.sim import DENSE, MOE, Profile, run_box

TOKENS = 256  # per stream, pinned
MAX_CHUNKS_PER_WALL_S = 3000.0
MIN_DECODE_WALL_S = 2.0

# (profile, streams, the article's per-stream tok/s; Appendix A)
ARTICLE_CURVE = [
    (DENSE, 1, 11.1),
    (DENSE, 8, 10.1),
    (DENSE, 16, 8.6),
    (DENSE, 32, 5.8),
    (MOE, 1, 82.4),
    (MOE, 2, 65.0),
    (MOE, 4, 47.0),
    (MOE, 8, 32.8),
    (MOE, 16, 11.3),
]


def _speed_for(profile: Profile, n: int) -> float:
    wall_s = max(MIN_DECODE_WALL_S, n * TOKENS / MAX_CHUNKS_PER_WALL_S)
    return TOKENS / (profile.per_stream_rate(n) * wall_s)


@pytest.mark.parametrize(("profile", "n", "article"), ARTICLE_CURVE, ids=lambda v: getattr(v, "name", v))
def test_probe_reproduces_the_article_per_stream_rate(profile: Profile, n: int, article: float) -> None:
    speed = _speed_for(profile, n)
    with run_box({"e": profile}, speed=speed) as box:
        streams = probe_level(box.port("e"), box.model_id("e"), n, TOKENS)
        stats = box.stats("e")
        timings = box.timings("e")
    assert stats.dropped_model_s == 0, "the process fell behind the wall clock; the measurement is void"
    assert stats.generation_tokens == n * TOKENS
    assert [(t.completion_tokens, t.finish_reason) for t in timings] == [(TOKENS, "length")] * n
    served = statistics.median(t.decode_rate for t in timings if t.decode_rate is not None)
    assert served == pytest.approx(article, rel=0.05)
    probed = statistics.median(s.decode_rate(speed) for s in streams)
    assert probed == pytest.approx(article, rel=0.10)


def test_aggregates_match_the_article_table() -> None:
    # Aggregate = streams x per-stream; the article's 80.5 / 137.4 / 184.4 and MoE's 262 -> 181.
    assert DENSE.aggregate_rate(8) == pytest.approx(80.5, rel=0.01)
    assert DENSE.aggregate_rate(16) == pytest.approx(137.4, rel=0.01)
    assert DENSE.aggregate_rate(32) == pytest.approx(184.4, rel=0.01)
    assert MOE.aggregate_rate(8) == pytest.approx(262, rel=0.01)
    assert MOE.aggregate_rate(16) == pytest.approx(181, rel=0.01)
    assert MOE.aggregate_rate(16) < MOE.aggregate_rate(8)
