"""The context's memory: the attention KV cache and the recurrent state, byte for byte as llama.cpp allocates
them (llama.cpp src/llama-kv-cache.cpp, src/llama-kv-cache-iswa.cpp, src/llama-memory-recurrent.cpp).

Per layer the KV cache holds K as ``[n_embd_k_gqa, cells, n_stream]`` of ``type_k`` and V likewise of
``type_v`` (no V for MLA; without flash attention V is stored transposed and every layer's V row takes the
largest layer's size). A sliding-window layer's cells are the SWA cache's. The recurrent state is two f32
tensors per layer, ``n_embd_r`` and ``n_embd_s`` values per cell, one cell per sequence. A hybrid model
(src/llama-memory-hybrid.cpp) has both, each over its own layers: the KV cache over the attention layers, the
recurrent state over the recurrent ones. Each tensor's bytes are padded to the buffer's alignment, as
``ggml_backend_alloc_ctx_tensors_from_buft`` does.
"""

from __future__ import annotations

from dataclasses import dataclass

from .backends import CPU_RULES, Backend
from .context import ResolvedContext
from .shape import ModelShape, memory_table

__all__ = ["CacheLayer", "kv_cache", "recurrent_state"]


def aligned(nbytes: int) -> int:
    """``nbytes`` padded to the CPU buffer type's alignment (TENSOR_ALIGNMENT)."""
    a = int(memory_table().buffer["alignment"])
    return (nbytes + a - 1) // a * a


@dataclass(frozen=True)
class CacheLayer:
    """One layer's share of the context's memory: KV cache (``k``, ``v``) or recurrent state (``r``, ``s``)."""

    layer: int
    cells: int
    k: int = 0
    v: int = 0
    r: int = 0
    s: int = 0

    @property
    def nbytes(self) -> int:
        return self.k + self.v + self.r + self.s


def kv_cache(shape: ModelShape, ctx: ResolvedContext, backend: Backend = CPU_RULES) -> list[CacheLayer]:
    """The KV cache per attention layer, or [] for a model without one; each tensor sized by ``backend``'s rules."""
    if shape.memory not in ("kv", "hybrid"):
        return []
    v_trans = not ctx.flash_attn
    n_layer = shape.n_layer_cached
    v_max = max((shape.n_embd_v_gqa(il) for il in range(n_layer)), default=0)
    out = []
    for il in range(n_layer):
        if not shape.attention_layers[il]:
            continue
        cells = ctx.n_ctx_swa if shape.swa_layers[il] else ctx.n_ctx_seq
        k = backend.nbytes((shape.n_embd_k_gqa(il), cells, ctx.n_stream), ctx.type_k)
        v = 0
        if not shape.mla:
            width = v_max if v_trans else shape.n_embd_v_gqa(il)
            v = backend.nbytes((width, cells, ctx.n_stream), ctx.type_v)
        out.append(CacheLayer(il, cells * ctx.n_stream, k=k, v=v))
    return out


def recurrent_state(shape: ModelShape, ctx: ResolvedContext, backend: Backend = CPU_RULES) -> list[CacheLayer]:
    """The recurrent state per recurrent layer, or [] for a model without one; each tensor sized by ``backend``'s
    rules."""
    if shape.memory not in ("recurrent", "hybrid"):
        return []
    cells = max(1, ctx.n_seq_max)
    kind = memory_table().recurrent["type"]
    r = backend.nbytes((shape.n_embd_r, cells), kind)
    s = backend.nbytes((shape.n_embd_s, cells), kind)
    return [CacheLayer(il, cells, r=r, s=s) for il in range(shape.n_layer) if shape.recurrent_layers[il]]
