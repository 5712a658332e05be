"""A small GGUF file shipped with the package, for the quick start and for tests.

``gguf-construct-example-21K-v1.0-F16.gguf`` is a two-layer toy model in llama's layout (random weights, a
16-token vocabulary) written by ``build_example``, with every tensor llama.cpp's loader requires of a llama model:
llama.cpp loads it and evaluates tokens with it (a test checks both). A test rebuilds it and checks that the
shipped bytes are identical. Its name follows the GGUF naming convention (``naming``) and agrees with its
metadata: BaseName ``general.basename``, SizeLabel ``general.size_label`` (its 21,152 parameters), Version
``general.version``, Encoding ``general.file_type`` (MOSTLY_F16).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

#: ``general.size_label``: the example's 21,152 parameters as the naming convention writes them
SIZE_LABEL = "21K"
EXAMPLE = Path(__file__).resolve().parent / f"gguf-construct-example-{SIZE_LABEL}-v1.0-F16.gguf"


def example_path() -> Path:
    """Where the shipped example file is."""
    return EXAMPLE


def build_example(path: str | Path) -> None:
    """Write the example model to ``path`` (deterministic: the same bytes every time)."""
    from ..api.gguf_file import new

    rng = np.random.default_rng(20261121)
    n_embd, n_vocab, n_layer, n_ff, n_head = 32, 16, 2, 64, 4
    f = new()
    meta = f.metadata
    meta["general.architecture"] = "llama"
    meta["general.name"] = "gguf-construct example"
    meta["general.basename"] = "gguf-construct-example"
    meta["general.size_label"] = SIZE_LABEL
    meta["general.version"] = "v1.0"
    meta["general.file_type"] = 1
    meta["llama.context_length"] = 256
    meta["llama.embedding_length"] = n_embd
    meta["llama.block_count"] = n_layer
    meta["llama.feed_forward_length"] = n_ff
    meta["llama.rope.dimension_count"] = n_embd // n_head
    meta["llama.attention.head_count"] = n_head
    meta["llama.attention.head_count_kv"] = n_head
    meta["llama.attention.layer_norm_rms_epsilon"] = 1e-5
    meta["tokenizer.ggml.model"] = "llama"
    tokens = ["<unk>", "<s>", "</s>", "▁the", "▁a", "▁model", "▁file", "▁in", "▁GGUF", "s", "e", "▁is", "▁small", ".", "\n", "▁é"]
    meta["tokenizer.ggml.tokens"] = tokens
    meta["tokenizer.ggml.scores"] = np.linspace(0, -15, n_vocab, dtype=np.float32)
    meta["tokenizer.ggml.token_type"] = np.array([2, 3, 3] + [1] * (n_vocab - 3), dtype=np.int32)
    meta["tokenizer.ggml.bos_token_id"] = 1
    meta["tokenizer.ggml.eos_token_id"] = 2

    def weight(rows: int, cols: int) -> np.ndarray:
        return (rng.standard_normal((rows, cols)) * 0.1).astype(np.float16)

    f.tensors.add("token_embd.weight", rng.standard_normal((n_vocab, n_embd)).astype(np.float16))
    for i in range(n_layer):  # llama's layer as llama.cpp's loader requires it (schema/arch_tensors.json)
        f.tensors.add(f"blk.{i}.attn_norm.weight", np.ones(n_embd, dtype=np.float32))
        for part in ("attn_q", "attn_k", "attn_v", "attn_output"):
            f.tensors.add(f"blk.{i}.{part}.weight", weight(n_embd, n_embd))
        f.tensors.add(f"blk.{i}.ffn_norm.weight", np.ones(n_embd, dtype=np.float32))
        f.tensors.add(f"blk.{i}.ffn_gate.weight", weight(n_ff, n_embd))
        f.tensors.add(f"blk.{i}.ffn_down.weight", weight(n_embd, n_ff))
        f.tensors.add(f"blk.{i}.ffn_up.weight", weight(n_ff, n_embd))
    f.tensors.add("output_norm.weight", np.ones(n_embd, dtype=np.float32))
    f.save(path)
