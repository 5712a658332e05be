"""GGUF files of released models' sizes that cost no disk: the header real (every key and tensor info llama.cpp's
loader reads, a byte-level BPE vocabulary of the model's size with its merges and a chat template), the tensor data
a hole in a sparse file, optionally with random bytes written over part of it.

Header-only work (info, validate, plan, diff, scan, a lazy load) must cost the header, whatever the file's size and
whatever its data holds: these files make a 40–400 GB model in well under a second of writing, so tests and
``benchmarks/bench_scale.py`` can hold every such command to that.

:data:`SHAPES` names the shapes (Llama-3-70B-like, DeepSeek-V3-like, Kimi-K2-like); :func:`write_sparse` writes one.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from gguf_construct.api.gguf_file import GGUFFile
from gguf_construct.formats.gguf.schema import GGUF, align_offset, tensor_nbytes
from tests.tiny_models import deepseek2, llama, zero_filled

TEMPLATES = Path(__file__).resolve().parent / "data" / "chat_templates"
FILLS = ("zeros", "random", "mixed")
#: how many bytes of data "random" overwrites (from the start of the data), and "mixed"'s stripe and period
RANDOM_SPAN = 1 << 30
MIXED_STRIPE, MIXED_PERIOD = 16 << 20, 1 << 30


def _bpe_vocabulary(f: GGUFFile, n_vocab: int, n_merges: int, seed: int = 0) -> None:
    """A byte-level BPE vocabulary as llama.cpp's GPT-2-style models carry it: ``n_vocab`` distinct tokens of 1–16
    printable characters (the length mix of a real 200k vocabulary: mean near 7 bytes), their token types, and
    ``n_merges`` merges of two pieces each."""
    rng = np.random.default_rng(seed)
    alphabet = np.frombuffer(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-", dtype=np.uint8)
    lengths = np.clip(rng.poisson(6.0, n_vocab), 1, 16)
    pool = alphabet[rng.integers(0, len(alphabet), int(lengths.sum()))].tobytes().decode()
    ends = np.cumsum(lengths)
    # a running index makes every token distinct whatever the draw
    tokens = [f"{pool[e - n : e]}{i:x}" for i, (e, n) in enumerate(zip(ends.tolist(), lengths.tolist()))]
    tokens[:3] = ["<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>"]
    md = f.metadata
    md.set("tokenizer.ggml.model", "gpt2")
    md.set("tokenizer.ggml.pre", "llama-bpe")
    md.set("tokenizer.ggml.tokens", tokens, type="arr[str]")
    md.set("tokenizer.ggml.token_type", np.array([3, 3, 3] + [1] * (n_vocab - 3), np.int32), type="arr[i32]")
    merges = [f"{tokens[3 + i % (n_vocab - 3)][:4]} {tokens[3 + (7 * i) % (n_vocab - 3)][:4]}" for i in range(n_merges)]
    md.set("tokenizer.ggml.merges", merges, type="arr[str]")
    md.set("tokenizer.ggml.bos_token_id", 0, type="u32")
    md.set("tokenizer.ggml.eos_token_id", 1, type="u32")
    md.set("tokenizer.chat_template", (TEMPLATES / "NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja").read_text())


def _with_vocabulary(builder: Callable[..., GGUFFile], n_vocab: int, n_merges: int, **sizes: Any) -> GGUFFile:
    f = zero_filled(builder, n_vocab=n_vocab, **sizes)
    for key in ("tokenizer.ggml.scores",):
        f.metadata.pop(key, None)
    _bpe_vocabulary(f, n_vocab, n_merges)
    return f


#: name -> (builder of the GGUFFile, a description). Layer counts, widths and vocabularies are the released
#: models'; expert counts are the released ones (the expert stacks are single tensors, so they cost header bytes
#: only per layer).
SHAPES: dict[str, tuple[Callable[[], GGUFFile], str]] = {
    "llama70b": (
        lambda: _with_vocabulary(
            llama, 201088, 50000, n_layer=80, n_embd=8192, n_ff=28672, n_head=64, n_head_kv=8, wtype="q4_0"
        ),
        "Llama-3-70B-like, 80 layers, q4_0, a 201,088-token vocabulary with 50,000 merges (~40 GB)",
    ),
    "llama405b": (
        lambda: _with_vocabulary(
            llama, 201088, 50000, n_layer=126, n_embd=16384, n_ff=53248, n_head=128, n_head_kv=8, wtype="q8_0"
        ),
        "Llama-3.1-405B-like, 126 layers, q8_0, the same 201,088-token vocabulary and 50,000 merges (~430 GB)",
    ),
    "deepseek-v3": (
        lambda: _with_vocabulary(
            deepseek2, 129280, 127741, n_layer=61, n_embd=7168, n_ff=18432, n_head=128, kv_lora_rank=512, q_lora_rank=1536,
            qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128, n_expert=256, n_expert_used=8, n_expert_shared=1,
            n_ff_exp=2048, n_layer_dense_lead=3, expert_groups=(8, 4), probs_bias=True, gating_func=2, wtype="q4_K",
        ),
        "DeepSeek-V3-like, 61 layers of 256 experts with MLA, q4_K, 129,280 tokens, 127,741 merges (~380 GB)",
    ),
    "kimi-k2": (
        lambda: _with_vocabulary(
            deepseek2, 163840, 163328, n_layer=61, n_embd=7168, n_ff=18432, n_head=64, kv_lora_rank=512, q_lora_rank=1536,
            qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128, n_expert=384, n_expert_used=8, n_expert_shared=1,
            n_ff_exp=2048, n_layer_dense_lead=1, probs_bias=True, gating_func=2, wtype="q4_0",
        ),
        "Kimi-K2-like, 61 layers of 384 experts with MLA, q4_0, 163,840 tokens, 163,328 merges (~580 GB)",
    ),
}  # fmt: skip


def header_bytes(f: GGUFFile) -> tuple[bytes, int]:
    """The file's header (through the padding before the data) and the size of its tensor data, built by the
    schema: the offsets are laid out from the tensors' shapes and types, no tensor's bytes are made."""
    obj = f.to_container()
    header = GGUF.build(dict(obj, tensor_data=b""))
    parsed = GGUF.parse(header)  # the schema laid the offsets out: read them back to size the data
    end = max((int(ti.offset) + tensor_nbytes(ti.dimensions, ti.type) for ti in parsed.tensor_infos), default=0)
    return header, align_offset(end, parsed.alignment)


def write_sparse(path: str | os.PathLike[str], f: GGUFFile, fill: str = "zeros", seed: int = 0, random_span: int = RANDOM_SPAN) -> int:
    """Write ``f``'s header and size the file to hold its tensor data as a hole; return the file's size.

    ``fill``: ``zeros`` leaves the whole data a hole (reads as zeros); ``random`` writes random bytes over the first
    ``random_span`` bytes of the data (where a reader that walks past the header lands first); ``mixed`` writes a
    random stripe of :data:`MIXED_STRIPE` bytes at the start of every :data:`MIXED_PERIOD` of data.
    """
    if fill not in FILLS:
        raise ValueError(f"fill: one of {FILLS}")
    header, data_size = header_bytes(f)
    size = len(header) + data_size
    rng = np.random.default_rng(seed)
    with open(path, "wb") as out:
        out.write(header)
        out.truncate(size)
        if fill == "random":
            _random(out, rng, len(header), min(random_span, data_size))
        elif fill == "mixed":
            for start in range(len(header), size, MIXED_PERIOD):
                _random(out, rng, start, min(MIXED_STRIPE, size - start))
    return size


def _random(out: Any, rng: np.random.Generator, start: int, n: int) -> None:
    out.seek(start)
    chunk = 64 << 20
    for done in range(0, n, chunk):
        out.write(rng.integers(0, 256, min(chunk, n - done), dtype=np.uint8).tobytes())
