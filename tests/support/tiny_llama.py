"""A tiny random-weight Llama model in GGUF, for the real llama.cpp server the tests start.

The tokenizer is llama.cpp's own Llama test vocabulary (``ggml-vocab-llama-spm.gguf``, which
``scripts/build-llama-server.sh`` keeps beside the binary); the weights are random (seeded), so
the text is noise but every token is really computed: token counts, usage and timings are the
server's own. Tied embeddings (no ``output.weight``) keep the file near 44 MB.

Written by gguf-py from the same llama.cpp tree as the binary, in a child process with that
tree on its path (`write_tiny_model`), so no installed ``gguf`` is needed or shadowed.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

# The model's shape: small enough to decode hundreds of tokens a second on one core.
EMBEDDING = 512
LAYERS = 2
HEADS = 8
FEED_FORWARD = 1024
CONTEXT = 2048
SEED = 39


def write_tiny_model(gguf_py: Path, vocab: Path, out: Path, timeout_s: float = 300) -> Path:
    """Write the model to ``out`` with gguf-py from ``gguf_py`` (a child process); return ``out``."""
    env = {**os.environ, "PYTHONPATH": str(gguf_py)}
    proc = subprocess.run(
        [sys.executable, __file__, str(vocab), str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )
    if proc.returncode != 0 or not out.is_file():
        raise RuntimeError(f"writing the tiny model failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    return out


def _write(vocab_path: str, out_path: str) -> None:
    import gguf  # gguf-py, from PYTHONPATH (write_tiny_model)
    import numpy as np

    vocab = gguf.GGUFReader(vocab_path)
    tokens = vocab.fields["tokenizer.ggml.tokens"].contents()
    writer = gguf.GGUFWriter(out_path, "llama")
    writer.add_name("spark-otel tiny llama")
    writer.add_context_length(CONTEXT)
    writer.add_embedding_length(EMBEDDING)
    writer.add_block_count(LAYERS)
    writer.add_feed_forward_length(FEED_FORWARD)
    writer.add_head_count(HEADS)
    writer.add_head_count_kv(HEADS)
    writer.add_rope_dimension_count(EMBEDDING // HEADS)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_vocab_size(len(tokens))
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    for name, field in vocab.fields.items():
        if name.startswith("tokenizer."):
            value_type = field.types[0]
            sub_type = field.types[-1] if value_type == gguf.GGUFValueType.ARRAY else None
            writer.add_key_value(name, field.contents(), value_type, sub_type=sub_type)
    rng = np.random.default_rng(SEED)

    def weights(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape, dtype=np.float32) * 0.02).astype(np.float16)

    writer.add_tensor("token_embd.weight", weights(len(tokens), EMBEDDING))
    writer.add_tensor("output_norm.weight", np.ones(EMBEDDING, dtype=np.float32))
    for layer in range(LAYERS):
        block = f"blk.{layer}"
        writer.add_tensor(f"{block}.attn_norm.weight", np.ones(EMBEDDING, dtype=np.float32))
        for part in ("attn_q", "attn_k", "attn_v", "attn_output"):
            writer.add_tensor(f"{block}.{part}.weight", weights(EMBEDDING, EMBEDDING))
        writer.add_tensor(f"{block}.ffn_norm.weight", np.ones(EMBEDDING, dtype=np.float32))
        writer.add_tensor(f"{block}.ffn_gate.weight", weights(FEED_FORWARD, EMBEDDING))
        writer.add_tensor(f"{block}.ffn_up.weight", weights(FEED_FORWARD, EMBEDDING))
        writer.add_tensor(f"{block}.ffn_down.weight", weights(EMBEDDING, FEED_FORWARD))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


if __name__ == "__main__":
    _write(sys.argv[1], sys.argv[2])
