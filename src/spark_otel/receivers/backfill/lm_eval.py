"""lm-evaluation-harness's ``--log_samples`` files, recognised so they are refused with what they
lack: each record keeps the document, the arguments and the answers, but no token count and no
time, so no cell (and no rate) can be made from them. The next run is recorded live instead."""

from __future__ import annotations

from typing import Any

__all__ = ["LM_EVAL_SAMPLES", "is_lm_eval_sample"]

_KEYS = frozenset({"doc_id", "arguments", "resps", "filtered_resps"})
"""Keys every lm-eval sample record has (lm-eval 0.4's ``samples_<task>_<time>.jsonl``)."""

LM_EVAL_SAMPLES = (
    "lm-evaluation-harness --log_samples records hold no token counts and no times (only each "
    "document, its prompts and the answers), so no cell can be made from them. To record the next "
    "run, call spark_otel.instrument() before lm_eval.simple_evaluate(...) (or run lm_eval's "
    "command line from such a script): the requests its API models (local-completions, "
    "local-chat-completions) make through requests or aiohttp are recorded with exact tokens and times"
)


def is_lm_eval_sample(record: Any) -> bool:
    """Whether ``record`` is one of lm-eval's logged samples."""
    return isinstance(record, dict) and record.keys() >= _KEYS
