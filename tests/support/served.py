"""What a simulated engine served, from its own log of finished requests: the truth a test holds
recorded tokens against."""

from __future__ import annotations

from typing import Any


def served_count(box: Any, engine: str) -> int:
    """How many requests ``engine`` has finished so far (its log keeps the last 4,096)."""
    return len(box.timings(engine))


def served_since(box: Any, engine: str, before: int) -> list[tuple[int, int]]:
    """Prompt and completion tokens of each request ``engine`` finished after the first ``before``,
    in the order it finished them."""
    return [(t.prompt_tokens, t.completion_tokens) for t in box.timings(engine)[before:]]
