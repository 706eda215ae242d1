"""An lm-evaluation-harness task written into a test's directory: a YAML task over a local JSON
lines dataset (no Hugging Face download), and the model arguments that point lm-eval's API
models at an engine with no tokenizer to fetch."""

from __future__ import annotations

import json
from pathlib import Path

TASK = "spark_otel_probe_qa"
DOCS = 6
MAX_GEN_TOKS = 8
"""Each answer's token cap: a short generation keeps the run fast."""


def write_task(directory: Path) -> Path:
    """``DOCS`` questions of different lengths (so each request's prompt tokens differ) as a
    ``generate_until`` task; the datasets cache stays in ``directory``. Returns the include path."""
    directory.mkdir(parents=True, exist_ok=True)
    docs = directory / "docs.jsonl"
    docs.write_text(
        "".join(
            json.dumps(
                {"question": f"Question {i}: " + "why " * i + "what is one plus one?", "answer": "two"}
            )
            + "\n"
            for i in range(DOCS)
        )
    )
    (directory / f"{TASK}.yaml").write_text(
        f"task: {TASK}\n"
        "dataset_path: json\n"
        "dataset_kwargs:\n"
        "  data_files:\n"
        f"    test: {json.dumps(str(docs))}\n"
        f"  cache_dir: {json.dumps(str(directory / 'hf-datasets'))}\n"
        "test_split: test\n"
        "output_type: generate_until\n"
        'doc_to_text: "{{question}}"\n'
        'doc_to_target: "{{answer}}"\n'
        "generation_kwargs:\n"
        '  until: ["\\n\\n"]\n'
        f"  max_gen_toks: {MAX_GEN_TOKS}\n"
        "metric_list:\n"
        "  - metric: exact_match\n"
        "    aggregation: mean\n"
        "    higher_is_better: true\n"
    )
    return directory


def model_args(base_url: str, model: str, *, chat: bool, num_concurrent: int) -> str:
    """lm-eval's ``--model_args`` for ``local-completions`` / ``local-chat-completions``: no
    tokenizer (nothing to download), prompts sent as text, one try per request."""
    path = "chat/completions" if chat else "completions"
    return (
        f"model={model},base_url={base_url}/v1/{path},tokenizer_backend=None,tokenized_requests=False,"
        f"num_concurrent={num_concurrent},max_retries=1"
    )
