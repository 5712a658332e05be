"""The graphs llama.cpp builds for its hybrid architectures (attention and recurrent layers in one stack): jamba,
granitehybrid and lfm2, in the planning IR.

Each repeats llama.cpp's C++ call for call (llama.cpp src/models/jamba.cpp, granite-hybrid.cpp, lfm2.cpp and
``build_inp_mem_hybrid`` of src/llama-graph.cpp): one hybrid memory input, the recurrent state's copy indices
first, then the attention cache's inputs over the attention layers; each layer either attends (the attention
blocks of :mod:`.llama_blocks`) or runs its recurrent mixer (:mod:`.recurrent`'s Mamba layers, or LFM2's gated
short convolution here) over the layer's own state.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, cast

from .ggml_ir import GgmlTensor
from .llama_blocks import GraphBuilder, KVInput
from .moe import moe_ffn
from .recurrent import _F32, RecurrentShape, _Recurrent, _ssm_conv, mamba2_layer, mamba_layer

__all__ = ["HYBRID", "build_granitehybrid", "build_jamba", "build_lfm2"]

RsInput = tuple[GgmlTensor, GgmlTensor]


class HybridShape(RecurrentShape, Protocol):
    """What the hybrid graphs read of a model beyond RecurrentShape (planning.shape.ModelShape provides it)."""

    @property
    def recurrent_layers(self) -> tuple[bool, ...]: ...

    @property
    def shortconv_l_cache(self) -> int: ...


def _recurrent(b: GraphBuilder, il: int) -> bool:
    return bool(cast(HybridShape, b.shape).recurrent_layers[il])


def _mem_hybrid(b: GraphBuilder, r: _Recurrent) -> tuple[RsInput, KVInput]:
    """build_inp_mem_hybrid: the recurrent state's inputs, then the KV cache's (its layers: the attention ones)."""
    rs_inp = r.rs_inp()
    attending = [il for il in range(b.shape.n_layer) if not _recurrent(b, il)]
    return rs_inp, b._kv_input(b.ctx.n_ctx_seq, attending)


def _key_float(b: GraphBuilder, name: str) -> float:
    return float(b.shape.metadata.get(f"{b.shape.arch}.{name}", 0.0) or 0.0)


# -- jamba ---------------------------------------------------------------------------------------------------------
def build_jamba(b: GraphBuilder) -> None:
    """llama.cpp src/models/jamba.cpp: Mamba or attention (no rope), then a SwiGLU or a softmax-gated mixture of
    experts."""
    r = _Recurrent(b)
    g, s = r.g, r.shape
    inp_l = b.inp_embd()
    rs_inp, kv = _mem_hybrid(b, r)
    out_ids = b.inp_out_ids()
    n_expert, n_expert_used = s.key_int("expert_count"), s.key_int("expert_used_count")  # type: ignore[attr-defined]
    for il in range(s.n_layer):
        cur = b.norm(inp_l, r.lw(il, "attn_norm.weight"))
        if _recurrent(b, il):
            cur = mamba_layer(r, rs_inp, cur, il)
        else:
            q, k, v = b.qkv(il, cur)
            cur = b.attn(kv, il, q, k, v, b.need(f"blk.{il}.attn_output.weight"), None)
        if il == s.n_layer - 1:
            cur = g.get_rows(cur, out_ids)
            inp_l = g.get_rows(inp_l, out_ids)
        ffn_inp = g.add(inp_l, cur)
        cur = b.norm(ffn_inp, r.lw(il, "ffn_norm.weight"))
        if b.layer(il, "ffn_gate_inp.weight") is None:
            cur = b.ffn(cur, il, "SILU", True)
        else:
            w_scale = _key_float(b, "expert_weights_scale")
            cur = moe_ffn(b, cur, il, n_expert=n_expert, n_expert_used=n_expert_used, norm_w=False, w_scale=w_scale, gating="softmax")
        inp_l = g.add(ffn_inp, cur)
    r.output(inp_l, rms=True)


# -- granitehybrid -------------------------------------------------------------------------------------------------
def build_granitehybrid(b: GraphBuilder) -> None:
    """llama.cpp src/models/granite-hybrid.cpp: Mamba-2 or roped attention, a SwiGLU, Granite's embedding,
    residual and logit scales."""
    r = _Recurrent(b)
    g, s = r.g, r.shape
    inp_l = b.inp_embd()
    if _key_float(b, "embedding_scale"):
        inp_l = g.scale(inp_l)
    g.expand(inp_l)  # before the Mamba-2 layers' first state copy (no graph split)
    rs_inp, kv = _mem_hybrid(b, r)
    out_ids = b.inp_out_ids()
    use_rope = bool(s.metadata.get(f"{s.arch}.rope.scaling.finetuned", True))
    pos = b.inp_pos() if use_rope else None
    residual_scale = _key_float(b, "residual_scale")
    for il in range(s.n_layer):
        inp_sa = inp_l
        cur = b.norm(inp_l, r.lw(il, "attn_norm.weight"))
        if _recurrent(b, il):
            cur = mamba2_layer(r, rs_inp, cur, il)
        else:
            q, k, v = b.qkv(il, cur)
            if pos is not None:
                factors = b.w("rope_freqs.weight")
                q = g.rope(q, pos, factors)
                k = g.rope(k, pos, factors)
            cur = b.attn(kv, il, q, k, v, b.need(f"blk.{il}.attn_output.weight"), b.layer(il, "attn_output.bias"))
        if il == s.n_layer - 1:
            cur = g.get_rows(cur, out_ids)
            inp_sa = g.get_rows(inp_sa, out_ids)
        if residual_scale:
            cur = g.scale(cur)
        ffn_inp = g.add(cur, inp_sa)
        cur = b.norm(ffn_inp, r.lw(il, "ffn_norm.weight"))
        cur = b.ffn(cur, il, "SILU", True)
        if residual_scale:
            cur = g.scale(cur)
        inp_l = g.add(cur, ffn_inp)
    cur = b.norm(inp_l, b.need("output_norm.weight"))
    cur.output = True
    cur = b.mm(b.w("output.weight") or b.need("token_embd.weight"), cur)
    if _key_float(b, "logit_scale"):
        cur = g.scale(cur)
    g.expand(cur, output=True)


# -- lfm2 ----------------------------------------------------------------------------------------------------------
def _shortconv(r: _Recurrent, rs_inp: RsInput, cur: GgmlTensor, il: int) -> GgmlTensor:
    """build_shortconv_block of llama.cpp src/models/lfm2.cpp: B, C and x of one projection, B*x convolved
    over the window with the layer's conv state before it, C times that, projected out."""
    g = r.g
    n_seqs, n_seq_tokens, n_embd = r.n_seqs, r.n_seq_tokens, r.n_embd
    l_cache = cast(HybridShape, r.shape).shortconv_l_cache
    if l_cache < 2:  # GGML_ASSERT(hparams.n_shortconv_l_cache > 1)
        raise ValueError(f"lfm2: shortconv.l_cache {l_cache} is not above 1")
    d_conv = l_cache - 1
    cur = g.reshape(cur, cur.ne[0], n_seq_tokens, n_seqs)
    bcx = r.mm(il, "shortconv.in_proj", cur)
    if bcx.ne[0] % 3:
        raise ValueError(f"lfm2: shortconv.in_proj gives {bcx.ne[0]} values, not three chunks")
    chunk = bcx.ne[0] // 3
    nb = [bcx.nb[1], bcx.nb[2]]
    bb, c, x = (g.view(bcx, chunk, bcx.ne[1], bcx.ne[2], nb=nb, offset=i * chunk * _F32) for i in range(3))
    bx = g.transpose(g.mul(bb, x))
    conv_state = r.state("r", il)
    conv = r.rs(rs_inp, conv_state, conv_state.ne[0])
    conv = g.reshape(conv, d_conv, n_embd, n_seqs)
    bx = g.concat(conv, bx, 0)
    new_conv = g.view(bx, conv.ne[0], bx.ne[1], bx.ne[2], nb=[bx.nb[1], bx.nb[2]], offset=(bx.ne[0] - conv.ne[0]) * _F32)
    n_r = conv_state.ne[0]
    g.expand(g.cpy(new_conv, g.view(conv_state, n_r, n_seqs, nb=[conv_state.nb[1]], offset=r.rs_head * n_r * _F32)))
    conv_out = _ssm_conv(g, bx, r.lw(il, "shortconv.conv.weight"))
    y = g.mul(c, conv_out)
    y = r.mm(il, "shortconv.out_proj", y)
    return g.reshape(y, y.ne[0], n_seq_tokens * n_seqs)


def build_lfm2(b: GraphBuilder) -> None:
    """llama.cpp src/models/lfm2.cpp (without a sliding window): a short convolution or attention with q/k norms
    and rope, then a SwiGLU; the final norm is token_embd_norm."""
    r = _Recurrent(b)
    g, s = r.g, r.shape
    if s.metadata.get(f"{s.arch}.attention.sliding_window"):
        raise NotImplementedError("lfm2 with a sliding window (llama_memory_hybrid_iswa)")
    cur = b.inp_embd()
    g.expand(cur)
    rs_inp, kv = _mem_hybrid(b, r)
    pos = b.inp_pos()
    out_ids = b.inp_out_ids()
    for il in range(s.n_layer):
        prev = cur
        cur = b.norm(cur, r.lw(il, "attn_norm.weight"))
        if _recurrent(b, il):
            cur = _shortconv(r, rs_inp, cur, il)
        else:
            q, k, v = b.qkv(il, cur)
            q = b.norm(q, b.need(f"blk.{il}.attn_q_norm.weight"))
            k = b.norm(k, b.need(f"blk.{il}.attn_k_norm.weight"))
            q = g.rope(q, pos)
            k = g.rope(k, pos)
            cur = b.attn(kv, il, q, k, v, b.need(f"blk.{il}.attn_output.weight"), None)
        if il == s.n_layer - 1:
            cur = g.get_rows(cur, out_ids)
            prev = g.get_rows(prev, out_ids)
        cur = g.add(prev, cur)
        ffn_out = b.ffn(b.norm(cur, r.lw(il, "ffn_norm.weight")), il, "SILU", True)
        cur = g.add(cur, ffn_out)
    cur = b.norm(cur, b.need("token_embd_norm.weight"))
    cur.output = True
    cur = b.mm(b.w("output.weight") or b.need("token_embd.weight"), cur)
    g.expand(cur, output=True)


#: architecture name → the function building its graph into a GraphBuilder
HYBRID: dict[str, Callable[[GraphBuilder], None]] = {
    "jamba": build_jamba,
    "granitehybrid": build_granitehybrid,
    "lfm2": build_lfm2,
}
