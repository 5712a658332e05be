"""A stand-in for planning.shape / planning.context while they are not on this branch: the few hyperparameters
and context values the compute graphs read, from a GGUF file and llama_context_params-like settings."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gguf_construct.api.gguf_file import load_gguf


@dataclass(frozen=True)
class Span:
    type: str
    shape: tuple[int, ...]


@dataclass
class Shape:
    arch: str
    n_layer: int
    n_embd: int
    n_vocab: int
    n_head: tuple[int, ...]
    n_head_kv: tuple[int, ...]
    n_ff: tuple[int, ...]
    head_k: tuple[int, ...]
    head_v: tuple[int, ...]
    n_rot: int
    swa_layers: tuple[bool, ...]
    n_swa: int
    metadata: dict[str, Any]
    tensors: dict[str, Span] = field(default_factory=dict)

    def tensor(self, name: str) -> Span | None:
        return self.tensors.get(name)


_SWA = {"gemma2": (2, 4096), "gemma3": (6, None)}  # default period, default window (phi3 ignores its window)


def shape_of(path) -> Shape:
    f = load_gguf(path)
    md = {k: f.metadata[k] for k in f.metadata}
    arch = md["general.architecture"]

    def key(name, default=None):
        return md.get(f"{arch}.{name}", default)

    n_layer = int(key("block_count"))
    n_embd = int(key("embedding_length"))

    def per_layer(v, default):
        if v is None:
            return (default,) * n_layer
        return tuple(int(x) for x in v) if isinstance(v, (list, tuple)) else (int(v),) * n_layer

    n_head = per_layer(key("attention.head_count"), 0)
    n_head_kv = per_layer(key("attention.head_count_kv"), n_head[0])
    hk = int(key("attention.key_length", n_embd // n_head[0]))
    hv = int(key("attention.value_length", n_embd // n_head[0]))
    period, window = _SWA.get(arch, (None, None))
    window = key("attention.sliding_window", window)
    swa = (False,) * n_layer
    if window and arch in _SWA:
        p = int(key("attention.sliding_window_pattern", period or 0) or 0)
        swa = tuple(p == 0 or il % p < p - 1 for il in range(n_layer)) if p else (True,) * n_layer
    tensors = {name: Span(f.tensors[name].type.name, tuple(int(d) for d in f.tensors[name].shape)) for name in f.tensors}
    return Shape(
        arch, n_layer, n_embd, tensors["token_embd.weight"].shape[1], n_head, n_head_kv, per_layer(key("feed_forward_length"), 0),
        (hk,) * n_layer, (hv,) * n_layer, int(key("rope.dimension_count", hk)), swa, int(window or 0), md, tensors,
    )  # fmt: skip


@dataclass
class Context:
    n_ctx: int
    n_ctx_seq: int
    n_stream: int
    n_batch: int
    n_ubatch: int
    n_seq_max: int
    n_outputs_max: int
    flash_attn: bool
    type_k: str
    type_v: str
    kv_unified: bool
    swa_full: bool
    n_ctx_swa: int


def _pad(n: int, to: int) -> int:
    return (n + to - 1) // to * to


def context_of(shape: Shape, n_ctx=512, n_batch=2048, n_ubatch=512, n_seq_max=1, type_k="f16", type_v="f16",
               flash_attn="auto", kv_unified=False, swa_full=False) -> Context:  # fmt: skip
    """llama_context's constructor (llama.cpp src/llama-context.cpp) as the installed build behaves: the batch
    sizes are bounded by the n_ctx asked for, before it is padded to 256."""
    n_batch = min(n_ctx, n_batch)
    n_ubatch = min(n_batch, n_ubatch)
    padded = _pad(n_ctx, 256)
    if kv_unified:
        n_ctx_seq = padded
    else:
        n_ctx_seq = _pad(padded // n_seq_max, 256)
        padded = n_ctx_seq * n_seq_max
    n_ctx_swa = 0
    if any(shape.swa_layers):
        n_ctx_swa = n_ctx_seq if swa_full else min(n_ctx_seq, _pad(shape.n_swa * (n_seq_max if kv_unified else 1) + n_ubatch, 256))
    return Context(padded, n_ctx_seq, 1 if kv_unified else n_seq_max, n_batch, n_ubatch, n_seq_max, n_batch,
                   flash_attn != "off", type_k, type_v, kv_unified, swa_full, n_ctx_swa)  # fmt: skip
