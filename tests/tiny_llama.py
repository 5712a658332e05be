"""A small llama-layout GGUF model with every key llama.cpp requires of it, for tests of writers and quantization."""

from __future__ import annotations

import numpy as np

from gguf_construct.api.gguf_file import GGUFFile, new


def llama_model(
    n_layer: int = 2, n_embd: int = 256, n_ff: int = 512, n_head: int = 4, n_head_kv: int = 4, dtype=np.float16, seed: int = 0
) -> GGUFFile:
    """A small llama-layout model with every key llama.cpp requires of it (the caller saves it)."""
    rng = np.random.default_rng(seed)
    f = new()
    m = f.metadata
    m["general.architecture"] = "llama"
    m["general.file_type"] = 1 if dtype == np.float16 else 0
    for key, value in (
        ("context_length", 64),
        ("embedding_length", n_embd),
        ("block_count", n_layer),
        ("feed_forward_length", n_ff),
        ("rope.dimension_count", n_embd // n_head),
        ("attention.head_count", n_head),
        ("attention.head_count_kv", n_head_kv),
    ):
        m[f"llama.{key}"] = value
    m["llama.attention.layer_norm_rms_epsilon"] = 1e-5
    kv = n_embd // n_head * n_head_kv
    f.tensors.add("token_embd.weight", rng.standard_normal((32, n_embd)).astype(dtype))
    for i in range(n_layer):
        f.tensors.add(f"blk.{i}.attn_norm.weight", np.ones(n_embd, np.float32))
        for name, rows, cols in (
            ("attn_q", n_embd, n_embd),
            ("attn_k", kv, n_embd),
            ("attn_v", kv, n_embd),
            ("attn_output", n_embd, n_embd),
            ("ffn_gate", n_ff, n_embd),
            ("ffn_up", n_ff, n_embd),
            ("ffn_down", n_embd, n_ff),
        ):
            f.tensors.add(f"blk.{i}.{name}.weight", (rng.standard_normal((rows, cols)) * 0.1).astype(dtype))
        f.tensors.add(f"blk.{i}.ffn_norm.weight", np.ones(n_embd, np.float32))
    f.tensors.add("output_norm.weight", np.ones(n_embd, np.float32))
    f.tensors.add("output.weight", (rng.standard_normal((32, n_embd)) * 0.1).astype(dtype))
    return f
