"""Tiny GGUF models of llama.cpp's hybrid architectures (attention layers and recurrent layers in one stack), each
with every key and tensor llama.cpp's loader requires (llama.cpp src/models/<arch>.cpp: load_arch_hparams,
load_arch_tensors): :func:`jamba` (Mamba and attention, dense or expert FFNs), :func:`granitehybrid` (Mamba-2 and
attention, dense or with experts), :func:`lfm2` and :func:`lfm2moe` (short convolutions and attention),
:func:`qwen3next` and :func:`qwen35` (gated delta nets and gated attention; qwen35moe with experts),
:func:`falcon_h1` (attention and Mamba-2 side by side in every layer), :func:`nemotron_h` (Mamba-2, attention and
MLP or expert layers) and :func:`plamo2`. :data:`HYBRID_BUILDERS` maps the architecture name to its builder.

The layer pattern is a parameter: ``attention`` lists the layers that attend (the others are recurrent), written
as llama.cpp's converters write it (a per-layer ``attention.head_count_kv`` array with 0 for the recurrent layers;
qwen3next: ``full_attention_interval``). Sizes and the weight type are parameters as in tests/tiny_models.py,
whose model writer these builders use. :data:`RELEASED_WIDTHS` makes each at a released model's widths (few
layers, zero-filled tensors), for the tests and ``benchmarks/bench_plan_hybrid.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from gguf_construct.api.gguf_file import GGUFFile
from tests.tiny_models import _Model, _qkvo, _swiglu, zero_filled

__all__ = [
    "HYBRID_BUILDERS",
    "RELEASED_WIDTHS",
    "falcon_h1",
    "granitehybrid",
    "jamba",
    "lfm2",
    "lfm2moe",
    "nemotron_h",
    "plamo2",
    "qwen35",
    "qwen3next",
]


def _head_counts(m: _Model, n_layer: int, n_embd: int, n_head: int, n_head_kv: int, attention: Sequence[int]) -> None:
    """block_count, the widths and the per-layer KV head counts: 0 marks a recurrent layer."""
    if not set(attention) <= set(range(n_layer)):
        raise ValueError(f"attention layers {attention} outside 0 .. {n_layer - 1}")
    m.key("embedding_length", n_embd)
    m.key("block_count", n_layer)
    m.key("attention.head_count", n_head)
    m.key("attention.head_count_kv", [n_head_kv if il in attention else 0 for il in range(n_layer)], "arr[u32]")
    m.key("attention.layer_norm_rms_epsilon", 1e-5, "f32")


def _mamba_keys(m: _Model, d_conv: int, d_inner: int, d_state: int, dt_rank: int, n_group: int | None = None) -> None:
    m.key("ssm.conv_kernel", d_conv)
    m.key("ssm.inner_size", d_inner)
    m.key("ssm.state_size", d_state)
    m.key("ssm.time_step_rank", dt_rank)
    if n_group is not None:
        m.key("ssm.group_count", n_group)


def jamba(
    *,
    n_layer: int = 4,
    n_embd: int = 128,
    n_ff: int = 256,
    n_head: int = 4,
    n_head_kv: int = 2,
    attention: Sequence[int] = (2,),
    expert_layers: Sequence[int] = (),
    n_expert: int = 4,
    n_expert_used: int = 2,
    d_state: int = 16,
    d_conv: int = 4,
    dt_rank: int = 8,
    n_vocab: int = 64,
    wtype: str = "f16",
    seed: int = 0,
    context_length: int = 4096,
) -> GGUFFile:
    """jamba: Mamba layers (d_inner = 2 * n_embd, with dt/B/C norms) and attention layers without rope; the
    ``expert_layers`` have a softmax-gated mixture of ``n_expert`` SwiGLU experts of ``n_ff``, the others a dense
    SwiGLU (llama.cpp src/models/jamba.cpp)."""
    m = _Model("jamba", wtype, seed, n_vocab, context_length)
    d_inner = 2 * n_embd
    _head_counts(m, n_layer, n_embd, n_head, n_head_kv, attention)
    m.key("feed_forward_length", n_ff)
    _mamba_keys(m, d_conv, d_inner, d_state, dt_rank)
    if expert_layers:
        m.key("expert_count", n_expert)
        m.key("expert_used_count", n_expert_used)
    hd = n_embd // n_head
    m.embeddings(n_embd)
    for i in range(n_layer):
        b = f"blk.{i}"
        m.norm(f"{b}.attn_norm", n_embd)
        if i in attention:
            _qkvo(m, i, n_embd, n_embd, hd * n_head_kv)
        else:
            m.weight(f"{b}.ssm_in.weight", n_embd, 2 * d_inner)
            m.f32(f"{b}.ssm_conv1d.weight", d_conv, d_inner, scale=0.2)
            m.f32(f"{b}.ssm_conv1d.bias", d_inner)
            m.weight(f"{b}.ssm_x.weight", d_inner, dt_rank + 2 * d_state)
            m.norm(f"{b}.ssm_dt_norm", dt_rank)
            m.weight(f"{b}.ssm_dt.weight", dt_rank, d_inner)
            m.f32(f"{b}.ssm_dt.bias", d_inner)
            m.norm(f"{b}.ssm_b_norm", d_state)
            m.norm(f"{b}.ssm_c_norm", d_state)
            m.f32(f"{b}.ssm_a", d_state, d_inner, values=-np.tile(np.arange(1, d_state + 1, dtype=np.float32), d_inner))
            m.f32(f"{b}.ssm_d", d_inner, values=np.ones(d_inner))
            m.weight(f"{b}.ssm_out.weight", d_inner, n_embd)
        m.norm(f"{b}.ffn_norm", n_embd)
        if i in expert_layers:
            m.f32(f"{b}.ffn_gate_inp.weight", n_embd, n_expert)
            m.weight(f"{b}.ffn_gate_exps.weight", n_embd, n_ff, n_expert)
            m.weight(f"{b}.ffn_down_exps.weight", n_ff, n_embd, n_expert)
            m.weight(f"{b}.ffn_up_exps.weight", n_embd, n_ff, n_expert)
        else:
            _swiglu(m, i, n_embd, n_ff)
    m.output_norm(n_embd)
    return m.f


def granitehybrid(
    *,
    n_layer: int = 4,
    n_embd: int = 128,
    n_ff: int = 256,
    n_head: int = 4,
    n_head_kv: int = 2,
    attention: Sequence[int] = (1,),
    d_state: int = 32,
    d_conv: int = 4,
    head_dim: int = 32,
    n_group: int = 1,
    n_vocab: int = 64,
    wtype: str = "f16",
    seed: int = 0,
    context_length: int = 4096,
    scales: bool = True,
    n_expert: int = 0,
    n_expert_used: int = 2,
    n_ff_shexp: int = 0,
) -> GGUFFile:
    """granitehybrid (Granite 4.0 H): Mamba-2 layers (d_inner = 2 * n_embd in heads of ``head_dim``, B and C in
    ``n_group`` groups) and roped attention layers, each with a dense SwiGLU, or with ``n_expert`` a mixture of
    SwiGLU experts of ``n_ff`` and a shared expert of ``n_ff_shexp`` (the -tiny and -small models); ``scales``
    writes Granite's logit, residual, embedding and attention scales as its converter does (llama.cpp
    src/models/granite-hybrid.cpp)."""
    m = _Model("granitehybrid", wtype, seed, n_vocab, context_length)
    d_inner = 2 * n_embd
    n_ssm_head = d_inner // head_dim
    hd = n_embd // n_head
    _head_counts(m, n_layer, n_embd, n_head, n_head_kv, attention)
    m.key("feed_forward_length", n_ff)
    m.key("rope.dimension_count", hd)
    _mamba_keys(m, d_conv, d_inner, d_state, n_ssm_head, n_group)
    if n_expert:
        m.key("expert_count", n_expert)
        m.key("expert_used_count", n_expert_used)
        m.key("expert_shared_feed_forward_length", n_ff_shexp)
    if scales:
        m.key("logit_scale", 8.0, "f32")
        m.key("residual_scale", 0.22, "f32")
        m.key("embedding_scale", 12.0, "f32")
        m.key("attention.scale", 0.0078125, "f32")
    m.embeddings(n_embd)
    conv = d_inner + 2 * n_group * d_state
    for i in range(n_layer):
        b = f"blk.{i}"
        m.norm(f"{b}.attn_norm", n_embd)
        if i in attention:
            _qkvo(m, i, n_embd, n_embd, hd * n_head_kv)
        else:
            m.weight(f"{b}.ssm_in.weight", n_embd, 2 * d_inner + 2 * n_group * d_state + n_ssm_head)
            m.f32(f"{b}.ssm_conv1d.weight", d_conv, conv, scale=0.2)
            m.f32(f"{b}.ssm_conv1d.bias", conv)
            m.f32(f"{b}.ssm_dt.bias", n_ssm_head)
            m.f32(f"{b}.ssm_a", 1, n_ssm_head, values=-np.arange(1, n_ssm_head + 1, dtype=np.float32))
            m.f32(f"{b}.ssm_d", 1, n_ssm_head, values=np.ones(n_ssm_head))
            m.f32(f"{b}.ssm_norm.weight", d_inner // n_group, n_group, values=np.ones(d_inner))
            m.weight(f"{b}.ssm_out.weight", d_inner, n_embd)
        m.norm(f"{b}.ffn_norm", n_embd)
        if not n_expert:
            _swiglu(m, i, n_embd, n_ff)
            continue
        m.f32(f"{b}.ffn_gate_inp.weight", n_embd, n_expert)
        m.weight(f"{b}.ffn_gate_exps.weight", n_embd, n_ff, n_expert)
        m.weight(f"{b}.ffn_down_exps.weight", n_ff, n_embd, n_expert)
        m.weight(f"{b}.ffn_up_exps.weight", n_embd, n_ff, n_expert)
        if n_ff_shexp:
            m.weight(f"{b}.ffn_gate_shexp.weight", n_embd, n_ff_shexp)
            m.weight(f"{b}.ffn_up_shexp.weight", n_embd, n_ff_shexp)
            m.weight(f"{b}.ffn_down_shexp.weight", n_ff_shexp, n_embd)
    m.output_norm(n_embd)
    return m.f


def lfm2(
    *,
    n_layer: int = 4,
    n_embd: int = 128,
    n_ff: int = 256,
    n_head: int = 4,
    n_head_kv: int = 2,
    attention: Sequence[int] = (1, 3),
    l_cache: int = 3,
    sliding_window: int = 0,
    n_vocab: int = 64,
    wtype: str = "f16",
    seed: int = 0,
    context_length: int = 4096,
) -> GGUFFile:
    """lfm2: gated short-convolution layers (a window of ``l_cache``) and attention layers with q/k norms, each
    with a dense SwiGLU; the final norm is called token_embd_norm (llama.cpp src/models/lfm2.cpp). A
    ``sliding_window`` makes every attention layer attend within it."""
    m = _Model("lfm2", wtype, seed, n_vocab, context_length)
    if sliding_window:
        m.key("attention.sliding_window", sliding_window)
    _lfm2_layers(m, n_layer, n_embd, n_ff, n_head, n_head_kv, attention, l_cache, dense_lead=n_layer)
    return m.f


def lfm2moe(
    *,
    n_layer: int = 4,
    n_embd: int = 128,
    n_ff: int = 256,
    n_head: int = 4,
    n_head_kv: int = 2,
    attention: Sequence[int] = (1, 3),
    l_cache: int = 3,
    n_dense_lead: int = 1,
    n_expert: int = 4,
    n_expert_used: int = 2,
    n_ff_exp: int = 64,
    gating_func: int = 2,
    n_vocab: int = 64,
    wtype: str = "f16",
    seed: int = 0,
    context_length: int = 4096,
) -> GGUFFile:
    """lfm2moe: lfm2's layers, the first ``n_dense_lead`` with a dense SwiGLU, the others with experts routed by
    ``gating_func`` (llama.cpp's llama_expert_gating_func_type: 2 sigmoid) with a selection bias
    (llama.cpp src/models/lfm2moe.cpp, its graph lfm2.cpp's)."""
    m = _Model("lfm2moe", wtype, seed, n_vocab, context_length)
    m.key("leading_dense_block_count", n_dense_lead)
    m.key("expert_count", n_expert)
    m.key("expert_used_count", n_expert_used)
    m.key("expert_feed_forward_length", n_ff_exp)
    m.key("expert_gating_func", gating_func)
    m.key("expert_weights_norm", True, "bool")
    _lfm2_layers(m, n_layer, n_embd, n_ff, n_head, n_head_kv, attention, l_cache, dense_lead=n_dense_lead, experts=(n_expert, n_ff_exp))
    return m.f


def _lfm2_layers(
    m: _Model,
    n_layer: int,
    n_embd: int,
    n_ff: int,
    n_head: int,
    n_head_kv: int,
    attention: Sequence[int],
    l_cache: int,
    *,
    dense_lead: int,
    experts: tuple[int, int] = (0, 0),
) -> None:
    """The keys and tensors lfm2 and lfm2moe share: their first ``dense_lead`` layers have a dense SwiGLU, the
    others ``experts`` (count, width) with a selection bias."""
    hd = n_embd // n_head
    _head_counts(m, n_layer, n_embd, n_head, n_head_kv, attention)
    m.key("feed_forward_length", n_ff)
    m.key("rope.dimension_count", hd)
    m.key("shortconv.l_cache", l_cache)
    m.embeddings(n_embd, output=False)
    for i in range(n_layer):
        b = f"blk.{i}"
        m.norm(f"{b}.ffn_norm", n_embd)
        if i < dense_lead:
            _swiglu(m, i, n_embd, n_ff)
        else:
            n_expert, n_ff_exp = experts
            m.f32(f"{b}.ffn_gate_inp.weight", n_embd, n_expert)
            m.weight(f"{b}.ffn_gate_exps.weight", n_embd, n_ff_exp, n_expert)
            m.weight(f"{b}.ffn_down_exps.weight", n_ff_exp, n_embd, n_expert)
            m.weight(f"{b}.ffn_up_exps.weight", n_embd, n_ff_exp, n_expert)
            m.f32(f"{b}.exp_probs_b.bias", n_expert)
        m.norm(f"{b}.attn_norm", n_embd)
        if i in attention:
            m.norm(f"{b}.attn_q_norm", hd)
            m.norm(f"{b}.attn_k_norm", hd)
            _qkvo(m, i, n_embd, n_embd, hd * n_head_kv)
        else:
            m.f32(f"{b}.shortconv.conv.weight", l_cache, n_embd, scale=0.2)
            m.weight(f"{b}.shortconv.in_proj.weight", n_embd, 3 * n_embd)
            m.weight(f"{b}.shortconv.out_proj.weight", n_embd, n_embd)
    m.norm("token_embd_norm", n_embd)


def qwen3next(
    *,
    n_layer: int = 4,
    n_embd: int = 128,
    n_head: int = 4,
    n_head_kv: int = 2,
    head_dim: int = 64,
    full_attention_interval: int = 4,
    n_k_heads: int = 2,
    n_v_heads: int = 4,
    head_k_dim: int = 32,
    d_conv: int = 4,
    n_expert: int = 4,
    n_expert_used: int = 2,
    n_ff_exp: int = 64,
    n_ff_shexp: int = 128,
    n_vocab: int = 64,
    wtype: str = "f16",
    seed: int = 0,
    context_length: int = 4096,
) -> GGUFFile:
    """qwen3next: gated delta-net layers (``n_k_heads`` key heads, ``n_v_heads`` value heads, both of
    ``head_k_dim``) and, every ``full_attention_interval``-th layer, gated attention with q/k norms; every layer
    has experts and a sigmoid-gated shared expert (llama.cpp src/models/qwen3next.cpp), in the layout its
    converter writes now (attn_qkv and attn_gate, not the older fused ssm_in)."""
    m = _Model("qwen3next", wtype, seed, n_vocab, context_length)
    m.key("embedding_length", n_embd)
    m.key("block_count", n_layer)
    m.key("attention.head_count", n_head)
    m.key("attention.head_count_kv", n_head_kv)
    m.key("attention.key_length", head_dim)
    m.key("attention.value_length", head_dim)
    m.key("attention.layer_norm_rms_epsilon", 1e-6, "f32")
    m.key("rope.dimension_count", head_dim // 4)
    m.key("rope.freq_base", 10000000.0, "f32")
    m.key("feed_forward_length", n_ff_exp * n_expert_used)
    m.key("expert_count", n_expert)
    m.key("expert_used_count", n_expert_used)
    m.key("expert_feed_forward_length", n_ff_exp)
    m.key("expert_shared_feed_forward_length", n_ff_shexp)
    m.key("full_attention_interval", full_attention_interval)
    value_dim, key_dim = head_k_dim * n_v_heads, head_k_dim * n_k_heads
    _mamba_keys(m, d_conv, value_dim, head_k_dim, n_v_heads, n_k_heads)
    m.embeddings(n_embd)
    for i in range(n_layer):
        b = f"blk.{i}"
        m.norm(f"{b}.attn_norm", n_embd)
        m.norm(f"{b}.post_attention_norm", n_embd)
        if (i + 1) % full_attention_interval == 0:
            m.weight(f"{b}.attn_q.weight", n_embd, head_dim * n_head * 2)
            m.weight(f"{b}.attn_k.weight", n_embd, head_dim * n_head_kv)
            m.weight(f"{b}.attn_v.weight", n_embd, head_dim * n_head_kv)
            m.weight(f"{b}.attn_output.weight", head_dim * n_head, n_embd)
            m.norm(f"{b}.attn_q_norm", head_dim)
            m.norm(f"{b}.attn_k_norm", head_dim)
        else:
            m.weight(f"{b}.attn_qkv.weight", n_embd, 2 * key_dim + value_dim)
            m.weight(f"{b}.attn_gate.weight", n_embd, value_dim)
            m.f32(f"{b}.ssm_conv1d.weight", d_conv, 2 * key_dim + value_dim, scale=0.2)
            m.f32(f"{b}.ssm_dt.bias", n_v_heads)
            m.f32(f"{b}.ssm_a", n_v_heads, values=-np.arange(1, n_v_heads + 1, dtype=np.float32))
            m.weight(f"{b}.ssm_ba.weight", n_embd, 2 * n_v_heads)
            m.norm(f"{b}.ssm_norm", head_k_dim)
            m.weight(f"{b}.ssm_out.weight", value_dim, n_embd)
        m.f32(f"{b}.ffn_gate_inp.weight", n_embd, n_expert)
        m.weight(f"{b}.ffn_gate_exps.weight", n_embd, n_ff_exp, n_expert)
        m.weight(f"{b}.ffn_up_exps.weight", n_embd, n_ff_exp, n_expert)
        m.weight(f"{b}.ffn_down_exps.weight", n_ff_exp, n_embd, n_expert)
        m.f32(f"{b}.ffn_gate_inp_shexp.weight", n_embd)
        m.weight(f"{b}.ffn_gate_shexp.weight", n_embd, n_ff_shexp)
        m.weight(f"{b}.ffn_up_shexp.weight", n_embd, n_ff_shexp)
        m.weight(f"{b}.ffn_down_shexp.weight", n_ff_shexp, n_embd)
    m.output_norm(n_embd)
    return m.f


def _mamba2_mixer(m: _Model, b: str, n_embd: int, d_inner: int, d_state: int, d_conv: int, n_ssm_head: int, n_group: int) -> None:
    """One Mamba-2 mixer's tensors (llama.cpp's mamba2 layout)."""
    conv = d_inner + 2 * n_group * d_state
    m.weight(f"{b}.ssm_in.weight", n_embd, 2 * d_inner + 2 * n_group * d_state + n_ssm_head)
    m.f32(f"{b}.ssm_conv1d.weight", d_conv, conv, scale=0.2)
    m.f32(f"{b}.ssm_conv1d.bias", conv)
    m.f32(f"{b}.ssm_dt.bias", n_ssm_head)
    m.f32(f"{b}.ssm_a", 1, n_ssm_head, values=-np.arange(1, n_ssm_head + 1, dtype=np.float32))
    m.f32(f"{b}.ssm_d", 1, n_ssm_head, values=np.ones(n_ssm_head))
    m.f32(f"{b}.ssm_norm.weight", d_inner // n_group, n_group, values=np.ones(d_inner))
    m.weight(f"{b}.ssm_out.weight", d_inner, n_embd)


def qwen35(
    *,
    n_layer: int = 4,
    n_embd: int = 128,
    n_ff: int = 256,
    n_head: int = 4,
    n_head_kv: int = 2,
    head_dim: int = 64,
    full_attention_interval: int = 4,
    n_k_heads: int = 2,
    n_v_heads: int = 4,
    head_k_dim: int = 32,
    d_conv: int = 4,
    n_expert: int = 0,
    n_expert_used: int = 2,
    n_ff_exp: int = 64,
    n_ff_shexp: int = 128,
    n_vocab: int = 64,
    wtype: str = "f16",
    seed: int = 0,
    context_length: int = 4096,
) -> GGUFFile:
    """qwen35 (Qwen3.5): qwen3next's gated delta nets and gated attention with the multi-section rope
    (rope.dimension_sections), separate beta and alpha projections, and a dense SwiGLU (llama.cpp
    src/models/qwen35.cpp); with ``n_expert``, qwen35moe: experts and a gated shared expert instead."""
    arch = "qwen35moe" if n_expert else "qwen35"
    m = _Model(arch, wtype, seed, n_vocab, context_length)
    m.key("embedding_length", n_embd)
    m.key("block_count", n_layer)
    m.key("attention.head_count", n_head)
    m.key("attention.head_count_kv", n_head_kv)
    m.key("attention.key_length", head_dim)
    m.key("attention.value_length", head_dim)
    m.key("attention.layer_norm_rms_epsilon", 1e-6, "f32")
    m.key("rope.dimension_count", head_dim // 4)
    m.key("rope.dimension_sections", [head_dim // 16, head_dim // 32, head_dim // 32, 0], "arr[i32]")
    m.key("rope.freq_base", 10000000.0, "f32")
    m.key("feed_forward_length", n_ff)
    m.key("full_attention_interval", full_attention_interval)
    if n_expert:
        m.key("expert_count", n_expert)
        m.key("expert_used_count", n_expert_used)
        m.key("expert_feed_forward_length", n_ff_exp)
        m.key("expert_shared_feed_forward_length", n_ff_shexp)
    value_dim, key_dim = head_k_dim * n_v_heads, head_k_dim * n_k_heads
    _mamba_keys(m, d_conv, value_dim, head_k_dim, n_v_heads, n_k_heads)
    m.embeddings(n_embd)
    for i in range(n_layer):
        b = f"blk.{i}"
        m.norm(f"{b}.attn_norm", n_embd)
        m.norm(f"{b}.post_attention_norm", n_embd)
        if (i + 1) % full_attention_interval == 0:
            m.weight(f"{b}.attn_q.weight", n_embd, head_dim * n_head * 2)
            m.weight(f"{b}.attn_k.weight", n_embd, head_dim * n_head_kv)
            m.weight(f"{b}.attn_v.weight", n_embd, head_dim * n_head_kv)
            m.weight(f"{b}.attn_output.weight", head_dim * n_head, n_embd)
            m.norm(f"{b}.attn_q_norm", head_dim)
            m.norm(f"{b}.attn_k_norm", head_dim)
        else:
            m.weight(f"{b}.attn_qkv.weight", n_embd, 2 * key_dim + value_dim)
            m.weight(f"{b}.attn_gate.weight", n_embd, value_dim)
            m.f32(f"{b}.ssm_conv1d.weight", d_conv, 2 * key_dim + value_dim, scale=0.2)
            m.f32(f"{b}.ssm_dt.bias", n_v_heads)
            m.f32(f"{b}.ssm_a", n_v_heads, values=-np.arange(1, n_v_heads + 1, dtype=np.float32))
            m.weight(f"{b}.ssm_beta.weight", n_embd, n_v_heads)
            m.weight(f"{b}.ssm_alpha.weight", n_embd, n_v_heads)
            m.norm(f"{b}.ssm_norm", head_k_dim)
            m.weight(f"{b}.ssm_out.weight", value_dim, n_embd)
        if not n_expert:
            _swiglu(m, i, n_embd, n_ff)
            continue
        m.f32(f"{b}.ffn_gate_inp.weight", n_embd, n_expert)
        m.weight(f"{b}.ffn_gate_exps.weight", n_embd, n_ff_exp, n_expert)
        m.weight(f"{b}.ffn_up_exps.weight", n_embd, n_ff_exp, n_expert)
        m.weight(f"{b}.ffn_down_exps.weight", n_ff_exp, n_embd, n_expert)
        m.f32(f"{b}.ffn_gate_inp_shexp.weight", n_embd)
        m.weight(f"{b}.ffn_gate_shexp.weight", n_embd, n_ff_shexp)
        m.weight(f"{b}.ffn_up_shexp.weight", n_embd, n_ff_shexp)
        m.weight(f"{b}.ffn_down_shexp.weight", n_ff_shexp, n_embd)
    m.output_norm(n_embd)
    return m.f


def falcon_h1(
    *,
    n_layer: int = 2,
    n_embd: int = 128,
    n_ff: int = 256,
    n_head: int = 4,
    n_head_kv: int = 2,
    head_dim: int = 32,
    d_inner: int = 192,
    d_state: int = 16,
    d_conv: int = 4,
    ssm_head_dim: int = 32,
    n_group: int = 1,
    n_vocab: int = 64,
    wtype: str = "f16",
    seed: int = 0,
    context_length: int = 4096,
) -> GGUFFile:
    """falcon-h1: every layer runs roped attention and a Mamba-2 mixer side by side on the same normed input, their
    sum added to the residual, then a SwiGLU (llama.cpp src/models/falcon-h1.cpp); ``d_inner`` is free (no
    expansion factor); the feed-forward norm has no ``.weight`` suffix, as its loader names it."""
    m = _Model("falcon-h1", wtype, seed, n_vocab, context_length)
    n_ssm_head = d_inner // ssm_head_dim
    m.key("embedding_length", n_embd)
    m.key("block_count", n_layer)
    m.key("attention.head_count", n_head)
    m.key("attention.head_count_kv", n_head_kv)
    m.key("attention.key_length", head_dim)
    m.key("attention.value_length", head_dim)
    m.key("attention.layer_norm_rms_epsilon", 1e-5, "f32")
    m.key("feed_forward_length", n_ff)
    m.key("rope.dimension_count", head_dim)
    _mamba_keys(m, d_conv, d_inner, d_state, n_ssm_head, n_group)
    m.embeddings(n_embd)
    for i in range(n_layer):
        b = f"blk.{i}"
        _mamba2_mixer(m, b, n_embd, d_inner, d_state, d_conv, n_ssm_head, n_group)
        _qkvo(m, i, n_embd, head_dim * n_head, head_dim * n_head_kv)
        m.norm(f"{b}.attn_norm", n_embd)
        m.f32(f"{b}.ffn_norm", n_embd, values=np.ones(n_embd))
        _swiglu(m, i, n_embd, n_ff)
    m.output_norm(n_embd)
    return m.f


def nemotron_h(
    *,
    n_layer: int = 5,
    n_embd: int = 128,
    n_ff: int = 256,
    n_head: int = 4,
    n_head_kv: int = 2,
    attention: Sequence[int] = (2,),
    mlp: Sequence[int] = (1, 4),
    d_state: int = 32,
    d_conv: int = 4,
    head_dim: int = 32,
    n_group: int = 2,
    n_vocab: int = 64,
    wtype: str = "f16",
    seed: int = 0,
    context_length: int = 4096,
    n_expert: int = 0,
    n_expert_used: int = 2,
    n_ff_shexp: int = 128,
    head_size: int = 0,
) -> GGUFFile:
    """nemotron_h: each layer one of a Mamba-2 mixer, attention (no rope) or a squared-ReLU MLP, chosen by the
    per-layer head_count_kv and feed_forward_length (both 0: Mamba-2); d_inner = 2 * n_embd
    (llama.cpp src/models/nemotron-h.cpp). With ``n_expert``, nemotron_h_moe: the MLP layers are sigmoid-routed
    squared-ReLU experts of ``n_ff`` with a selection bias, and a shared expert of ``n_ff_shexp``. ``head_size``:
    attention heads of their own size (attention.key_length), else n_embd / n_head."""
    if set(attention) & set(mlp):
        raise ValueError("a layer is attention or MLP, not both")
    m = _Model("nemotron_h_moe" if n_expert else "nemotron_h", wtype, seed, n_vocab, context_length)
    if n_expert:
        m.key("expert_count", n_expert)
        m.key("expert_used_count", n_expert_used)
        m.key("expert_feed_forward_length", n_ff)
        m.key("expert_shared_feed_forward_length", n_ff_shexp)
        m.key("expert_weights_norm", True, "bool")
        m.key("expert_weights_scale", 2.5, "f32")
    d_inner = 2 * n_embd
    n_ssm_head = d_inner // head_dim
    hd = head_size or n_embd // n_head
    _head_counts(m, n_layer, n_embd, n_head, n_head_kv, attention)
    if head_size:
        m.key("attention.key_length", head_size)
        m.key("attention.value_length", head_size)
    m.key("feed_forward_length", [n_ff if il in mlp else 0 for il in range(n_layer)], "arr[u32]")
    m.key("attention.layer_norm_epsilon", 1e-5, "f32")  # read besides the RMS epsilon
    _mamba_keys(m, d_conv, d_inner, d_state, n_ssm_head, n_group)
    m.embeddings(n_embd)
    for i in range(n_layer):
        b = f"blk.{i}"
        m.norm(f"{b}.attn_norm", n_embd)
        if i in attention:
            _qkvo(m, i, n_embd, hd * n_head, hd * n_head_kv)
        elif i in mlp and n_expert:
            m.f32(f"{b}.ffn_gate_inp.weight", n_embd, n_expert)
            m.f32(f"{b}.exp_probs_b.bias", n_expert)
            m.weight(f"{b}.ffn_down_exps.weight", n_ff, n_embd, n_expert)
            m.weight(f"{b}.ffn_up_exps.weight", n_embd, n_ff, n_expert)
            m.weight(f"{b}.ffn_down_shexp.weight", n_ff_shexp, n_embd)
            m.weight(f"{b}.ffn_up_shexp.weight", n_embd, n_ff_shexp)
        elif i in mlp:
            m.weight(f"{b}.ffn_up.weight", n_embd, n_ff)
            m.weight(f"{b}.ffn_down.weight", n_ff, n_embd)
        else:
            _mamba2_mixer(m, b, n_embd, d_inner, d_state, d_conv, n_ssm_head, n_group)
    m.output_norm(n_embd)
    return m.f


def plamo2(
    *,
    n_layer: int = 4,
    n_embd: int = 128,
    n_ff: int = 256,
    n_head: int = 4,
    n_head_kv: int = 2,
    head_dim: int = 32,
    attention: Sequence[int] = (1, 3),
    d_inner: int = 256,
    d_state: int = 16,
    d_conv: int = 4,
    n_ssm_head: int = 8,
    n_vocab: int = 64,
    wtype: str = "f16",
    seed: int = 0,
    context_length: int = 4096,
) -> GGUFFile:
    """plamo2: Mamba layers in heads (dt, B and C normed) and attention layers with a fused QKV and per-head q/k
    norms, each mixer and the fused SwiGLU between pre- and post-norms (llama.cpp src/models/plamo2.cpp)."""
    m = _Model("plamo2", wtype, seed, n_vocab, context_length)
    dt_dim = max(64, n_embd // 16)
    _head_counts(m, n_layer, n_embd, n_head, n_head_kv, attention)
    m.key("attention.key_length", head_dim)
    m.key("attention.value_length", head_dim)
    m.key("feed_forward_length", n_ff)
    m.key("rope.dimension_count", head_dim)
    _mamba_keys(m, d_conv, d_inner, d_state, n_ssm_head, 0)
    m.embeddings(n_embd)
    for i in range(n_layer):
        b = f"blk.{i}"
        m.norm(f"{b}.attn_norm", n_embd)
        if i in attention:
            m.weight(f"{b}.attn_qkv.weight", n_embd, head_dim * (n_head + 2 * n_head_kv))
            m.f32(f"{b}.attn_q_norm.weight", head_dim, n_head, values=np.ones(head_dim * n_head))
            m.f32(f"{b}.attn_k_norm.weight", head_dim, n_head_kv, values=np.ones(head_dim * n_head_kv))
            m.weight(f"{b}.attn_output.weight", head_dim * n_head, n_embd)
        else:
            m.weight(f"{b}.ssm_in.weight", n_embd, 2 * d_inner)
            m.f32(f"{b}.ssm_conv1d.weight", d_conv, d_inner, scale=0.2)
            m.weight(f"{b}.ssm_x.weight", d_inner, dt_dim + 2 * d_state)
            m.weight(f"{b}.ssm_dt.weight", dt_dim, n_ssm_head)
            m.f32(f"{b}.ssm_dt.bias", n_ssm_head)
            m.f32(f"{b}.ssm_a", n_ssm_head, values=-np.arange(1, n_ssm_head + 1, dtype=np.float32))
            m.f32(f"{b}.ssm_d", n_ssm_head, values=np.ones(n_ssm_head))
            for name, n in (("ssm_dt_norm", dt_dim), ("ssm_b_norm", d_state), ("ssm_c_norm", d_state)):
                m.f32(f"{b}.{name}", n, values=np.ones(n))  # no .weight suffix, as the loader names them
            m.weight(f"{b}.ssm_out.weight", d_inner, n_embd)
        m.f32(f"{b}.post_attention_norm", n_embd, values=np.ones(n_embd))
        m.norm(f"{b}.ffn_norm", n_embd)
        m.weight(f"{b}.ffn_up.weight", n_embd, 2 * n_ff)
        m.weight(f"{b}.ffn_down.weight", n_ff, n_embd)
        m.f32(f"{b}.post_ffw_norm", n_embd, values=np.ones(n_embd))
    m.output_norm(n_embd)
    return m.f


HYBRID_BUILDERS: dict[str, Callable[..., GGUFFile]] = {
    "jamba": jamba,
    "granitehybrid": granitehybrid,
    "lfm2": lfm2,
    "lfm2moe": lfm2moe,
    "qwen3next": qwen3next,
    "qwen35": qwen35,
    "qwen35moe": lambda **kw: qwen35(**{"n_expert": 4, **kw}),
    "falcon-h1": falcon_h1,
    "nemotron_h": nemotron_h,
    "nemotron_h_moe": lambda **kw: nemotron_h(**{"n_expert": 4, **kw}),
    "plamo2": plamo2,
}


#: the widths, heads, state sizes and vocabularies of released hybrids, few layers (each layer kind at least once)
#: and fewer experts, tensors of zero bytes (tests/tiny_models.zero_filled)
RELEASED_WIDTHS: dict[str, Callable[[], GGUFFile]] = {
    "jamba (Jamba-v0.1 widths, 2 of 16 experts)": lambda: zero_filled(
        jamba, n_layer=4, attention=(2,), expert_layers=(1,), n_expert=2, n_expert_used=2, n_embd=4096, n_ff=14336,
        n_head=32, n_head_kv=8, d_state=16, dt_rank=256, n_vocab=65536, wtype="q4_0",
    ),
    "granitehybrid (Granite-4.0-H-Micro widths)": lambda: zero_filled(
        granitehybrid, n_layer=2, attention=(1,), n_embd=2048, n_ff=8192, n_head=32, n_head_kv=8, d_state=128,
        head_dim=64, n_group=1, n_vocab=100352, wtype="q4_0",
    ),
    "granitehybrid (Granite-4.0-H-Tiny widths, 16 of 64 experts)": lambda: zero_filled(
        granitehybrid, n_layer=2, attention=(1,), n_embd=1536, n_ff=512, n_head=12, n_head_kv=4, d_state=128,
        head_dim=64, n_group=1, n_expert=16, n_expert_used=6, n_ff_shexp=1024, n_vocab=100352, wtype="q4_0",
    ),
    "lfm2 (LFM2-1.2B widths)": lambda: zero_filled(
        lfm2, n_layer=2, attention=(1,), n_embd=2048, n_ff=8192, n_head=32, n_head_kv=8, l_cache=3, n_vocab=65536, wtype="q4_0"
    ),
    "lfm2moe (LFM2-8B-A1B widths, 8 of 32 experts)": lambda: zero_filled(
        lfm2moe, n_layer=2, attention=(1,), n_embd=2048, n_ff=7168, n_head=32, n_head_kv=8, n_dense_lead=1, n_expert=8,
        n_expert_used=4, n_ff_exp=1792, n_vocab=65536, wtype="q4_0",
    ),
    "qwen3next (Qwen3-Next-80B-A3B widths, 16 of 512 experts)": lambda: zero_filled(
        qwen3next, n_layer=4, n_embd=2048, n_head=16, n_head_kv=2, head_dim=256, n_k_heads=16, n_v_heads=32,
        head_k_dim=128, n_expert=16, n_expert_used=10, n_ff_exp=512, n_ff_shexp=512, n_vocab=151936, wtype="q4_0",
    ),
    "qwen35 (Qwen3.5-9B-like widths)": lambda: zero_filled(
        qwen35, n_layer=4, n_embd=4096, n_ff=12288, n_head=16, n_head_kv=4, head_dim=256, n_k_heads=16, n_v_heads=32,
        head_k_dim=128, n_vocab=248320, wtype="q4_0",
    ),
    "qwen35moe (Qwen3.5-35B-A3B-like widths, 16 of 256 experts)": lambda: zero_filled(
        qwen35, n_layer=4, n_embd=2048, n_head=16, n_head_kv=2, head_dim=256, n_k_heads=16, n_v_heads=32, head_k_dim=128,
        n_expert=16, n_expert_used=8, n_ff_exp=512, n_ff_shexp=512, n_vocab=248320, wtype="q4_0",
    ),
    "falcon-h1 (Falcon-H1-1.5B-like widths)": lambda: zero_filled(
        falcon_h1, n_layer=2, n_embd=2048, n_ff=4096, n_head=8, n_head_kv=2, head_dim=128, d_inner=3072, d_state=256,
        ssm_head_dim=128, n_group=1, n_vocab=65536, wtype="q4_0",
    ),
    "nemotron_h (Nemotron-H-8B widths)": lambda: zero_filled(
        nemotron_h, n_layer=3, attention=(1,), mlp=(2,), n_embd=4096, n_ff=21504, n_head=32, n_head_kv=8, d_state=128,
        head_dim=64, n_group=8, n_vocab=131072, wtype="q4_0",
    ),
    "nemotron_h_moe (Nemotron-3-Nano-30B-A3B-like widths, 16 of 128 experts)": lambda: zero_filled(
        nemotron_h, n_layer=3, attention=(1,), mlp=(2,), n_embd=2688, n_ff=1856, n_head=32, n_head_kv=2, head_size=128,
        d_state=128, head_dim=64, n_group=8, n_expert=16, n_expert_used=6, n_ff_shexp=3712, n_vocab=131072, wtype="q4_0",
    ),
    "plamo2 (PLaMo-2-1B widths)": lambda: zero_filled(
        plamo2, n_layer=2, attention=(1,), n_embd=2048, n_ff=8192, n_head=16, n_head_kv=1, head_dim=128, d_inner=4096,
        d_state=64, n_ssm_head=32, n_vocab=100000, wtype="q4_0",
    ),
}  # fmt: skip
