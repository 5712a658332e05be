"""What the hybrid graphs share (llama.cpp src/llama-graph.cpp ``build_inp_mem_hybrid`` and the layer kinds of
``llama_hparams``): which layer attends and which keeps a recurrent state, the hybrid memory's inputs, the keys the
graphs read."""

from __future__ import annotations

from typing import Protocol, cast

from .ggml_ir import GgmlTensor
from .llama_blocks import GraphBuilder, KVInput
from .recurrent import RecurrentShape, _Recurrent

__all__ = ["HybridShape", "RsInput", "attends", "expansion_of_two", "is_recurrent", "key_float", "mem_hybrid"]

RsInput = tuple[GgmlTensor, GgmlTensor]


class HybridShape(RecurrentShape, Protocol):
    """What the hybrid graphs read of a model beyond RecurrentShape (planning.shape.ModelShape provides it)."""

    @property
    def attention_layers(self) -> tuple[bool, ...]: ...

    @property
    def recurrent_layers(self) -> tuple[bool, ...]: ...

    @property
    def shortconv_l_cache(self) -> int: ...


def is_recurrent(b: GraphBuilder, il: int) -> bool:
    """Whether layer ``il`` keeps a recurrent state (runs a recurrent mixer)."""
    return bool(cast(HybridShape, b.shape).recurrent_layers[il])


def attends(b: GraphBuilder, il: int) -> bool:
    """Whether layer ``il`` has a KV cache (runs attention)."""
    return bool(cast(HybridShape, b.shape).attention_layers[il])


def mem_hybrid(b: GraphBuilder, r: _Recurrent) -> tuple[RsInput, KVInput]:
    """build_inp_mem_hybrid: the recurrent state's inputs, then the KV cache's (its layers: the attention ones)."""
    rs_inp = r.rs_inp()
    attending = [il for il in range(b.shape.n_layer) if attends(b, il)]
    return rs_inp, b._kv_input(b.ctx.n_ctx_seq, attending)


def expansion_of_two(s: HybridShape) -> None:
    """load_arch_tensors' GGML_ASSERT(2 * n_embd == d_inner) (jamba, granitehybrid): llama.cpp aborts otherwise."""
    if s.ssm_d_inner != 2 * s.n_embd:
        raise ValueError(f"{s.arch}: ssm.inner_size {s.ssm_d_inner} is not twice embedding_length {s.n_embd}")


def key_float(b: GraphBuilder, name: str) -> float:
    """The float key ``{arch}.name`` (checked once in planning.shape.KEYS), 0.0 when absent."""
    return float(b.shape.metadata.get(f"{b.shape.arch}.{name}", 0.0) or 0.0)
