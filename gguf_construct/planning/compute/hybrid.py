"""The graphs llama.cpp builds for its hybrid architectures (attention and recurrent layers in one stack): jamba,
granitehybrid, lfm2, lfm2moe, qwen3next, qwen35, qwen35moe, falcon-h1, nemotron_h, nemotron_h_moe and plamo2, in the
planning IR.

Each repeats llama.cpp's C++ call for call (llama.cpp src/models/<arch>.cpp and ``build_inp_mem_hybrid`` of
src/llama-graph.cpp), as the installed build makes it where its graph differs from the source of another version:
one hybrid memory input, the recurrent state's copy indices first, then the attention cache's inputs over the
attention layers; each layer attends (the attention blocks of :mod:`.llama_blocks`), runs its recurrent mixer
(:mod:`.recurrent`'s Mamba layers, PLaMo-2's Mamba in heads here, LFM2's gated short convolution in :mod:`.lfm2`,
the gated delta net of Qwen3-Next and Qwen3.5 in :mod:`.delta_net`) over the layer's own state, or both
(falcon-h1); what they share is :mod:`.hybrid_blocks`, experts are :mod:`.moe`'s. ``HYBRID`` maps each
architecture to its builder.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

from . import builds
from .delta_net import build_qwen3next
from .ggml_ir import GgmlTensor
from .hybrid_blocks import HybridShape, RsInput, attends, expansion_of_two, is_recurrent, key_float, mem_hybrid
from .lfm2 import build_lfm2
from .llama_blocks import GraphBuilder
from .moe import moe_ffn
from .recurrent import _F32, _Recurrent, _ssm_conv, _ssm_scan, mamba2_layer, mamba_layer

__all__ = ["HYBRID", "build_falcon_h1", "build_granitehybrid", "build_jamba", "build_nemotron_h", "build_plamo2"]


# -- jamba ---------------------------------------------------------------------------------------------------------
def build_jamba(b: GraphBuilder) -> None:
    """llama.cpp src/models/jamba.cpp: Mamba or attention (no rope), then a SwiGLU or a softmax-gated mixture of
    experts."""
    r = _Recurrent(b)
    g, s = r.g, r.shape
    expansion_of_two(cast(HybridShape, s))
    inp_l = b.inp_embd()
    rs_inp, kv = mem_hybrid(b, r)
    out_ids = b.inp_out_ids()
    n_expert, n_expert_used = (int(s.metadata.get(f"{s.arch}.{k}", 0) or 0) for k in ("expert_count", "expert_used_count"))
    for il in range(s.n_layer):
        cur = b.norm(inp_l, r.lw(il, "attn_norm.weight"))
        if is_recurrent(b, il):
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
            w_scale = key_float(b, "expert_weights_scale")
            cur = moe_ffn(b, cur, il, n_expert=n_expert, n_expert_used=n_expert_used, norm_w=False, w_scale=w_scale, gating="softmax")
        inp_l = g.add(ffn_inp, cur)
    r.output(inp_l, rms=True)


# -- granitehybrid -------------------------------------------------------------------------------------------------
def build_granitehybrid(b: GraphBuilder) -> None:
    """llama.cpp src/models/granite-hybrid.cpp: Mamba-2 or roped attention, a SwiGLU, Granite's embedding,
    residual and logit scales."""
    r = _Recurrent(b)
    g, s = r.g, r.shape
    expansion_of_two(cast(HybridShape, s))
    inp_l = b.inp_embd()
    if key_float(b, "embedding_scale"):
        inp_l = g.scale(inp_l)
    g.expand(inp_l)  # before the Mamba-2 layers' first state copy (no graph split)
    rs_inp, kv = mem_hybrid(b, r)
    out_ids = b.inp_out_ids()
    use_rope = bool(s.metadata.get(f"{s.arch}.rope.scaling.finetuned", True))
    pos = b.inp_pos() if use_rope else None
    residual_scale = key_float(b, "residual_scale")
    for il in range(s.n_layer):
        inp_sa = inp_l
        cur = b.norm(inp_l, r.lw(il, "attn_norm.weight"))
        if is_recurrent(b, il):
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
        cur = b.ffn(cur, il, "SILU", True) if b.layer(il, "ffn_gate_inp.weight") is None else _granite_moe(b, cur, il)
        if residual_scale:
            cur = g.scale(cur)
        inp_l = g.add(cur, ffn_inp)
    cur = b.norm(inp_l, b.need("output_norm.weight"))
    cur.output = True
    cur = b.mm(b.output_weight(), cur)
    if key_float(b, "logit_scale"):
        cur = g.scale(cur)
    g.expand(cur, output=True)


def _granite_moe(b: GraphBuilder, cur: GgmlTensor, il: int) -> GgmlTensor:
    """granite-hybrid's MoE branch: softmax-routed SwiGLU experts, their weights normalised, plus the shared
    expert's SwiGLU where the file has one."""
    s = b.shape
    n_expert, n_expert_used = (int(s.metadata.get(f"{s.arch}.{k}", 0) or 0) for k in ("expert_count", "expert_used_count"))
    moe = moe_ffn(
        b,
        cur,
        il,
        n_expert=n_expert,
        n_expert_used=n_expert_used,
        norm_w=True,
        w_scale=key_float(b, "expert_weights_scale"),
        gating="softmax",
    )
    up_w = b.layer(il, "ffn_up_shexp.weight")
    if up_w is None:
        return moe
    up = b.mm(up_w, cur)
    shared = b.g.glu_split("SWIGLU", b.mm(b.need(f"blk.{il}.ffn_gate_shexp.weight"), cur), up)
    return b.g.add(moe, b.mm(b.need(f"blk.{il}.ffn_down_shexp.weight"), shared))


# -- falcon-h1 ------------------------------------------------------------------------------------------------------
def build_falcon_h1(b: GraphBuilder) -> None:
    """llama.cpp src/models/falcon-h1.cpp: roped attention and a Mamba-2 mixer over the same normed input in every
    layer, their sum added to the residual, then a SwiGLU."""
    r = _Recurrent(b)
    g, s = r.g, r.shape
    inp_l = b.inp_embd()
    pos = b.inp_pos()
    rs_inp, kv = mem_hybrid(b, r)
    out_ids = b.inp_out_ids()
    for il in range(s.n_layer):
        inp_sa = inp_l
        cur = b.norm(inp_l, r.lw(il, "attn_norm.weight"))
        q, k, v = b.qkv(il, cur)
        q, k = g.rope(q, pos), g.rope(k, pos)
        attn_out = b.attn(kv, il, q, k, v, b.need(f"blk.{il}.attn_output.weight"), None)
        cur = b.norm(inp_l, r.lw(il, "attn_norm.weight"))
        cur = g.add(attn_out, mamba2_layer(r, rs_inp, cur, il))
        inp_sa = g.add(cur, inp_sa)
        if il == s.n_layer - 1:
            inp_sa = g.get_rows(inp_sa, out_ids)
        cur = b.norm(inp_sa, b.w(f"blk.{il}.ffn_norm") or r.lw(il, "ffn_norm.weight"))
        inp_l = g.add(b.ffn(cur, il, "SILU", True), inp_sa)
    r.output(inp_l, rms=True)


# -- nemotron_h -----------------------------------------------------------------------------------------------------
def _relu_sqr_ffn(b: GraphBuilder, cur: GgmlTensor, il: int) -> GgmlTensor:
    """build_ffn with LLM_FFN_RELU_SQR and no gate: up (and its bias), relu, square, down (and its bias)."""
    g = b.g
    cur = b.mm(b.need(f"blk.{il}.ffn_up.weight"), cur)
    up_b = b.layer(il, "ffn_up.bias")
    if up_b is not None:
        cur = g.add(cur, up_b)
    cur = g.dup("SQR", g.unary("RELU", cur))
    cur = b.mm(b.need(f"blk.{il}.ffn_down.weight"), cur)
    down_b = b.layer(il, "ffn_down.bias")
    return g.add(cur, down_b) if down_b is not None else cur


def _nemotron_moe(b: GraphBuilder, cur: GgmlTensor, il: int) -> GgmlTensor:
    """nemotron_h_moe's MoE layer: sigmoid-routed squared-ReLU experts with a selection bias, plus a squared-ReLU
    shared expert (the latent projections of larger models are not modelled)."""
    md, arch = b.shape.metadata, b.shape.arch
    if b.layer(il, "ffn_latent_down.weight") is not None:
        raise NotImplementedError("nemotron_h_moe with latent expert projections")
    n_expert, n_expert_used = (int(md.get(f"{arch}.{k}", 0) or 0) for k in ("expert_count", "expert_used_count"))
    moe = moe_ffn(
        b, cur, il, n_expert=n_expert, n_expert_used=n_expert_used, norm_w=bool(md.get(f"{arch}.expert_weights_norm", False)),
        w_scale=key_float(b, "expert_weights_scale"), gating="sigmoid", exp_probs_b=b.layer(il, "exp_probs_b.bias"), act="RELU_SQR",
    )  # fmt: skip
    g = b.g
    shared = g.dup("SQR", g.unary("RELU", b.mm(b.need(f"blk.{il}.ffn_up_shexp.weight"), cur)))
    return g.add(moe, b.mm(b.need(f"blk.{il}.ffn_down_shexp.weight"), shared))


def build_nemotron_h(b: GraphBuilder) -> None:
    """llama.cpp src/models/nemotron-h.cpp (nemotron_h and nemotron_h_moe): each layer a Mamba-2 mixer, attention
    without rope, or a squared-ReLU MLP (or experts), added to the residual; the output rows picked after the final
    norm (llama-cpp-python 0.3.36) or in the last layer (b11549)."""
    r = _Recurrent(b)
    g, s = r.g, r.shape
    inp_l = b.inp_embd()
    g.expand(inp_l)
    rs_inp, kv = mem_hybrid(b, r)
    out_ids = b.inp_out_ids()
    last_rows = builds.feature("out_rows_in_last_layer", s.arch)  # b11549: in the last layer, as llama
    for il in range(s.n_layer):
        inp_sa = inp_l
        cur = b.norm(inp_l, r.lw(il, "attn_norm.weight"))
        if is_recurrent(b, il):
            cur = mamba2_layer(r, rs_inp, cur, il)
        elif attends(b, il):
            q, k, v = b.qkv(il, cur)
            cur = b.attn(kv, il, q, k, v, b.need(f"blk.{il}.attn_output.weight"), b.layer(il, "attn_output.bias"))
        elif b.layer(il, "ffn_gate_inp.weight") is not None:
            cur = _nemotron_moe(b, cur, il)
        else:
            cur = _relu_sqr_ffn(b, cur, il)
        if last_rows and il == s.n_layer - 1:
            cur, inp_sa = g.get_rows(cur, out_ids), g.get_rows(inp_sa, out_ids)
        inp_l = g.add(cur, inp_sa)
    cur = b.norm(inp_l, b.need("output_norm.weight"))  # 0.3.36 picks the output rows after it
    if not last_rows:
        cur.output = True  # res->t_h_nextn
        cur = g.get_rows(cur, out_ids)
    cur.output = True
    g.expand(b.mm(b.output_weight(), cur), output=True)


# -- plamo2 ---------------------------------------------------------------------------------------------------------
def _plamo2_mamba(r: _Recurrent, rs_inp: RsInput, cur: GgmlTensor, il: int) -> GgmlTensor:
    """build_plamo2_mamba_layer of llama.cpp src/models/plamo2.cpp: a Mamba mixer in heads, its input projection
    split per head into z and x, dt, B and C RMS-normed."""
    b, g, s = r.b, r.g, r.shape
    n_seqs, n_seq_tokens = r.n_seqs, r.n_seq_tokens
    d_conv, d_inner, d_state, n_heads, n_group = s.ssm_d_conv, s.ssm_d_inner, s.ssm_d_state, s.ssm_dt_rank, s.ssm_n_group
    if not n_heads or d_inner % n_heads:
        raise ValueError(f"plamo2: d_inner {d_inner} in {n_heads} heads")
    head_dim = d_inner // n_heads
    conv_dim = d_inner + 2 * n_group * d_state
    dt_dim = max(64, r.n_embd // 16)
    conv_states_all, ssm_states_all = r.state("r", il), r.state("s", il)
    conv = g.reshape(r.rs(rs_inp, conv_states_all, conv_states_all.ne[0]), d_conv - 1, conv_dim, n_seqs)
    cur = g.reshape(cur, cur.ne[0], n_seq_tokens, n_seqs)
    zx = g.permute(r.mm(il, "ssm_in", cur), 0, 2, 1, 3)
    zx = g.cont(zx, head_dim * 2, n_heads, n_seq_tokens, n_seqs)
    znb = [zx.nb[1], zx.nb[2], zx.nb[3]]
    x = g.cont(
        g.view(zx, head_dim, n_heads, n_seq_tokens, n_seqs, nb=znb, offset=head_dim * _F32), head_dim * n_heads, n_seq_tokens, n_seqs
    )
    z = g.view(zx, head_dim, n_heads, n_seq_tokens, n_seqs, nb=znb)
    conv_x = g.concat(conv, g.transpose(x), 0)
    last = g.view(conv_x, d_conv - 1, d_inner, n_seqs, nb=[conv_x.nb[1], conv_x.nb[2]], offset=n_seq_tokens * conv_x.nb[0])
    n_conv = (d_conv - 1) * conv_dim
    g.expand(g.cpy(last, g.view(conv_states_all, n_conv * n_seqs, offset=r.rs_head * n_conv * _F32)))
    x = g.unary("SILU", _ssm_conv(g, conv_x, r.lw(il, "ssm_conv1d.weight")))
    x_bcdt = r.mm(il, "ssm_x", x)
    nb = [x_bcdt.nb[1], x_bcdt.nb[2]]
    bb = g.view(x_bcdt, d_state, n_seq_tokens, n_seqs, nb=nb)
    c = g.view(x_bcdt, d_state, n_seq_tokens, n_seqs, nb=nb, offset=d_state * _F32)
    dt = g.view(x_bcdt, dt_dim, n_seq_tokens, n_seqs, nb=nb, offset=2 * d_state * _F32)
    bb = b.norm(bb, b.need(f"blk.{il}.ssm_b_norm"))
    c = b.norm(c, b.need(f"blk.{il}.ssm_c_norm"))
    dt = b.norm(dt, b.need(f"blk.{il}.ssm_dt_norm"))
    dt = g.add(r.mm(il, "ssm_dt", dt), r.lw(il, "ssm_dt.bias"))
    a = g.reshape(r.lw(il, "ssm_a"), 1, n_heads)
    x = g.view(x, head_dim, n_heads, n_seq_tokens, n_seqs, nb=[head_dim * _F32, d_inner * _F32, d_inner * n_seq_tokens * _F32])
    bb = g.view(bb, d_state, 1, n_seq_tokens, n_seqs, nb=[d_state * bb.nb[0], bb.nb[1], bb.nb[2]])
    c = g.view(c, d_state, 1, n_seq_tokens, n_seqs, nb=[d_state * c.nb[0], c.nb[1], c.nb[2]])

    def ssm_rows(states: GgmlTensor, ids: GgmlTensor) -> GgmlTensor:
        return _ssm_scan(g, g.reshape(states, d_state, head_dim, n_heads, r.rs_size), x, dt, a, bb, c, ids)

    y_ssm = r.rs(rs_inp, ssm_states_all, ssm_states_all.ne[0], ssm_rows)
    n_state = d_inner * d_state * n_seqs
    stored = g.view(y_ssm, n_state, offset=d_inner * n_seq_tokens * n_seqs * _F32)
    g.expand(g.cpy(stored, g.view(ssm_states_all, n_state, offset=r.rs_head * n_state * _F32)))
    y = g.view(y_ssm, head_dim, n_heads, n_seq_tokens, n_seqs, nb=[head_dim * _F32, d_inner * _F32, d_inner * n_seq_tokens * _F32])
    y = g.add(y, g.mul(x, g.reshape(r.lw(il, "ssm_d"), 1, n_heads)))
    y = g.glu_split("SWIGLU", g.cont(z), y)
    y = g.view(y, d_inner, n_seq_tokens, n_seqs, nb=[y.nb[2], y.nb[3]])
    cur = r.mm(il, "ssm_out", y)
    return g.reshape(cur, cur.ne[0], n_seq_tokens * n_seqs)


def build_plamo2(b: GraphBuilder) -> None:
    """llama.cpp src/models/plamo2.cpp: a Mamba mixer or attention with a fused QKV and per-head q/k norms, then
    the fused SwiGLU, each between a pre- and a post-norm."""
    r = _Recurrent(b)
    g, s = r.g, r.shape
    inp_l = b.inp_embd()
    pos = b.inp_pos()
    rs_inp, kv = mem_hybrid(b, r)
    out_ids = b.inp_out_ids()
    for il in range(s.n_layer):
        residual = inp_l
        cur = b.norm(inp_l, r.lw(il, "attn_norm.weight"))
        if is_recurrent(b, il):
            cur = _plamo2_mamba(r, rs_inp, cur, il)
        else:
            q, k, v = b.qkv(il, cur)
            q = g.rope(b.norm(q, b.need(f"blk.{il}.attn_q_norm.weight")), pos)
            k = g.rope(b.norm(k, b.need(f"blk.{il}.attn_k_norm.weight")), pos)
            cur = b.attn(kv, il, q, k, v, b.need(f"blk.{il}.attn_output.weight"), None)
        if il == s.n_layer - 1:  # the installed build picks the output rows right after the mixer
            cur = g.get_rows(cur, out_ids)
            residual = g.get_rows(residual, out_ids)
        cur = g.add(b.norm(cur, b.need(f"blk.{il}.post_attention_norm")), residual)
        residual = cur
        cur = b.ffn(b.norm(cur, r.lw(il, "ffn_norm.weight")), il, "SWIGLU", False)
        inp_l = g.add(b.norm(cur, b.need(f"blk.{il}.post_ffw_norm")), residual)
    r.output(inp_l, rms=True)


#: architecture name → the function building its graph into a GraphBuilder
HYBRID: dict[str, Callable[[GraphBuilder], None]] = {
    "jamba": build_jamba,
    "granitehybrid": build_granitehybrid,
    "lfm2": build_lfm2,
    "lfm2moe": build_lfm2,
    "qwen3next": build_qwen3next,
    "qwen35": build_qwen3next,
    "qwen35moe": build_qwen3next,
    "falcon-h1": build_falcon_h1,
    "nemotron_h": build_nemotron_h,
    "nemotron_h_moe": build_nemotron_h,
    "plamo2": build_plamo2,
}
