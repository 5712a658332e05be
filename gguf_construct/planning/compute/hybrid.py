"""The graphs llama.cpp builds for its hybrid architectures (attention and recurrent layers in one stack): jamba,
granitehybrid, lfm2, lfm2moe, qwen3next, falcon-h1, nemotron_h and plamo2, in the planning IR.

Each repeats llama.cpp's C++ call for call (llama.cpp src/models/jamba.cpp, granite-hybrid.cpp, lfm2.cpp and
``build_inp_mem_hybrid`` of src/llama-graph.cpp): one hybrid memory input, the recurrent state's copy indices
first, then the attention cache's inputs over the attention layers; each layer either attends (the attention
blocks of :mod:`.llama_blocks`) or runs its recurrent mixer (:mod:`.recurrent`'s Mamba layers, or here LFM2's gated
short convolution and Qwen3-Next's gated delta net) over the layer's own state.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, cast

from .ggml_ir import GgmlTensor
from .llama_blocks import GraphBuilder, KVInput
from .moe import GATING, moe_ffn
from .recurrent import _F32, RecurrentShape, _Recurrent, _ssm_conv, _ssm_scan, mamba2_layer, mamba_layer

__all__ = [
    "HYBRID",
    "build_falcon_h1",
    "build_granitehybrid",
    "build_jamba",
    "build_lfm2",
    "build_nemotron_h",
    "build_plamo2",
    "build_qwen3next",
]

RsInput = tuple[GgmlTensor, GgmlTensor]


class HybridShape(RecurrentShape, Protocol):
    """What the hybrid graphs read of a model beyond RecurrentShape (planning.shape.ModelShape provides it)."""

    @property
    def attention_layers(self) -> tuple[bool, ...]: ...

    @property
    def recurrent_layers(self) -> tuple[bool, ...]: ...

    @property
    def shortconv_l_cache(self) -> int: ...


def _recurrent(b: GraphBuilder, il: int) -> bool:
    """Whether layer ``il`` keeps a recurrent state (runs a recurrent mixer)."""
    return bool(cast(HybridShape, b.shape).recurrent_layers[il])


def _attends(b: GraphBuilder, il: int) -> bool:
    """Whether layer ``il`` has a KV cache (runs attention)."""
    return bool(cast(HybridShape, b.shape).attention_layers[il])


def _mem_hybrid(b: GraphBuilder, r: _Recurrent) -> tuple[RsInput, KVInput]:
    """build_inp_mem_hybrid: the recurrent state's inputs, then the KV cache's (its layers: the attention ones)."""
    rs_inp = r.rs_inp()
    attending = [il for il in range(b.shape.n_layer) if _attends(b, il)]
    return rs_inp, b._kv_input(b.ctx.n_ctx_seq, attending)


def _expansion_of_two(s: HybridShape) -> None:
    """load_arch_tensors' GGML_ASSERT(2 * n_embd == d_inner) (jamba, granitehybrid): llama.cpp aborts otherwise."""
    if s.ssm_d_inner != 2 * s.n_embd:
        raise ValueError(f"{s.arch}: ssm.inner_size {s.ssm_d_inner} is not twice embedding_length {s.n_embd}")


def _key_float(b: GraphBuilder, name: str) -> float:
    return float(b.shape.metadata.get(f"{b.shape.arch}.{name}", 0.0) or 0.0)


# -- jamba ---------------------------------------------------------------------------------------------------------
def build_jamba(b: GraphBuilder) -> None:
    """llama.cpp src/models/jamba.cpp: Mamba or attention (no rope), then a SwiGLU or a softmax-gated mixture of
    experts."""
    r = _Recurrent(b)
    g, s = r.g, r.shape
    _expansion_of_two(cast(HybridShape, s))
    inp_l = b.inp_embd()
    rs_inp, kv = _mem_hybrid(b, r)
    out_ids = b.inp_out_ids()
    n_expert, n_expert_used = (int(s.metadata.get(f"{s.arch}.{k}", 0) or 0) for k in ("expert_count", "expert_used_count"))
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
    _expansion_of_two(cast(HybridShape, s))
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
        cur = b.ffn(cur, il, "SILU", True) if b.layer(il, "ffn_gate_inp.weight") is None else _granite_moe(b, cur, il)
        if residual_scale:
            cur = g.scale(cur)
        inp_l = g.add(cur, ffn_inp)
    cur = b.norm(inp_l, b.need("output_norm.weight"))
    cur.output = True
    cur = b.mm(b.w("output.weight") or b.need("token_embd.weight"), cur)
    if _key_float(b, "logit_scale"):
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
        w_scale=_key_float(b, "expert_weights_scale"),
        gating="softmax",
    )
    up_w = b.layer(il, "ffn_up_shexp.weight")
    if up_w is None:
        return moe
    up = b.mm(up_w, cur)
    shared = b.g.glu_split("SWIGLU", b.mm(b.need(f"blk.{il}.ffn_gate_shexp.weight"), cur), up)
    return b.g.add(moe, b.mm(b.need(f"blk.{il}.ffn_down_shexp.weight"), shared))


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


def _lfm2_moe(b: GraphBuilder, cur: GgmlTensor, il: int) -> GgmlTensor:
    """lfm2moe's experts: routed by the file's gating function with a selection bias, their weights normalised."""
    md, arch = b.shape.metadata, b.shape.arch
    n_expert, n_expert_used = (int(md.get(f"{arch}.{k}", 0) or 0) for k in ("expert_count", "expert_used_count"))
    gating = GATING.get(int(md.get(f"{arch}.expert_gating_func", 0) or 0), "softmax")
    return moe_ffn(
        b, cur, il, n_expert=n_expert, n_expert_used=n_expert_used, norm_w=True, w_scale=_key_float(b, "expert_weights_scale"),
        gating=gating, exp_probs_b=b.layer(il, "exp_probs_b.bias"),
    )  # fmt: skip


def build_lfm2(b: GraphBuilder) -> None:
    """llama.cpp src/models/lfm2.cpp (lfm2 and lfm2moe): a short convolution or attention with q/k norms and rope
    (within the sliding window when the file sets one: graph<true>), then a SwiGLU or, past lfm2moe's leading dense
    layers, experts; the final norm is token_embd_norm."""
    r = _Recurrent(b)
    g, s = r.g, r.shape
    iswa = any(s.swa_layers)
    md = s.metadata
    # lfm2: every layer dense; lfm2moe: the leading dense layers, then experts
    dense_lead = s.n_layer if s.arch == "lfm2" else int(md.get(f"{s.arch}.leading_dense_block_count", 0) or 0)
    cur = b.inp_embd()
    g.expand(cur)
    if iswa:  # build_inp_mem_hybrid_iswa: the state's inputs, the full cache's (no layers), the window's
        rs_inp = r.rs_inp()
        b._kv_input(b.ctx.n_ctx_seq, [])
        kv = b._kv_input(b.ctx.n_ctx_swa, [il for il in range(s.n_layer) if s.swa_layers[il]])
    else:
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
            cur = b.attn(kv, il, q, k, v, b.need(f"blk.{il}.attn_output.weight"), None, iswa=iswa)
        if il == s.n_layer - 1:
            cur = g.get_rows(cur, out_ids)
            prev = g.get_rows(prev, out_ids)
        cur = g.add(prev, cur)
        ffn_norm = b.norm(cur, r.lw(il, "ffn_norm.weight"))
        ffn_out = b.ffn(ffn_norm, il, "SILU", True) if il < dense_lead else _lfm2_moe(b, ffn_norm, il)
        cur = g.add(cur, ffn_out)
    cur = b.norm(cur, b.need("token_embd_norm.weight"))
    cur.output = True
    cur = b.mm(b.w("output.weight") or b.need("token_embd.weight"), cur)
    g.expand(cur, output=True)


# -- qwen3next, qwen35, qwen35moe ---------------------------------------------------------------------------------
#: the Qwen3.5 architectures: qwen3next's layers with the multi-section rope and beta and alpha projected apart
_QWEN35 = ("qwen35", "qwen35moe")


def _l2_norm(r: _Recurrent, t: GgmlTensor) -> GgmlTensor:
    """ggml_l2_norm as the installed llama.cpp's graph has it: an RMS norm, then a scale."""
    return r.g.scale(r.g.rms_norm(t))


def _repeat_heads(r: _Recurrent, t: GgmlTensor, n_k_heads: int, factor: int) -> GgmlTensor:
    """The key heads repeated, interleaved, to as many as the value heads (ggml_repeat_4d between reshapes)."""
    g = r.g
    head, n_seq_tokens, n_seqs = t.ne[0], r.n_seq_tokens, r.n_seqs
    t = g.reshape(t, head, 1, n_k_heads, n_seq_tokens * n_seqs)
    t = g.repeat(t, g.new_tensor("f32", head, factor, n_k_heads, n_seq_tokens * n_seqs))
    return g.reshape(t, head, n_k_heads * factor, n_seq_tokens, n_seqs)


def _gated_delta_net_layer(r: _Recurrent, rs_inp: RsInput, cur: GgmlTensor, il: int) -> GgmlTensor:
    """build_layer_attn_linear of llama.cpp src/models/qwen3next.cpp (with build_conv_state and
    build_recurrent_attn of src/models/delta-net-base.cpp) as the installed build makes it: the convolved q, k, v,
    the fused GATED_DELTA_NET over the layer's state, the gated norm, the output projection."""
    b, g, s = r.b, r.g, r.shape
    n_seqs, n_seq_tokens = r.n_seqs, r.n_seq_tokens
    d_inner, head_k, n_k_heads, n_v_heads = s.ssm_d_inner, s.ssm_d_state, s.ssm_n_group, s.ssm_dt_rank
    if not n_k_heads or not n_v_heads or d_inner % n_v_heads or n_v_heads % n_k_heads:
        raise ValueError(f"qwen3next: d_inner {d_inner} in {n_v_heads} value heads and {n_k_heads} key heads")
    head_v = d_inner // n_v_heads
    conv_channels = d_inner + 2 * n_k_heads * head_k
    # the conv state: the previous window before the new q, k, v, whose last columns are stored back
    conv_states_all = r.state("r", il)
    conv_states = r.rs(rs_inp, conv_states_all, conv_states_all.ne[0])
    wqkv = b.layer(il, "attn_qkv.weight")
    if wqkv is None:
        raise NotImplementedError("qwen3next in the older layout (one fused ssm_in)")
    conv_states = g.reshape(conv_states, s.ssm_d_conv - 1, conv_channels, n_seqs)
    qkv = r.mm(il, "attn_qkv", cur)
    qkv = g.reshape(qkv, qkv.ne[0], n_seq_tokens, n_seqs)
    conv_input = g.concat(conv_states, g.transpose(qkv), 0)
    last = g.view(conv_input, conv_states.ne[0], conv_channels, n_seqs, nb=[conv_input.nb[1], conv_input.nb[2]],
                  offset=(conv_input.ne[0] - conv_states.ne[0]) * _F32)  # fmt: skip
    n_r = conv_states_all.ne[0]
    g.expand(g.cpy(last, g.view(conv_states_all, n_r, n_seqs, nb=[conv_states_all.nb[1]], offset=r.rs_head * n_r * _F32)))
    ssm_states_all = r.state("s", il)
    state = r.rs(rs_inp, ssm_states_all, ssm_states_all.ne[0])
    conv = g.unary("SILU", _ssm_conv(g, conv_input, r.lw(il, "ssm_conv1d.weight")))
    nb1 = conv.nb[1]
    nb = [head_k * _F32, nb1, nb1 * n_seq_tokens]
    q = g.view(conv, head_k, n_k_heads, n_seq_tokens, n_seqs, nb=nb)
    k = g.view(conv, head_k, n_k_heads, n_seq_tokens, n_seqs, nb=nb, offset=head_k * n_k_heads * _F32)
    v = g.view(conv, head_v, n_v_heads, n_seq_tokens, n_seqs, nb=[head_v * _F32, nb1, nb1 * n_seq_tokens],
               offset=2 * head_k * n_k_heads * _F32)  # fmt: skip
    q, k = _l2_norm(r, q), _l2_norm(r, k)
    fused_heads = s.arch in _QWEN35  # qwen35's GATED_DELTA_NET broadcasts the key heads itself
    if n_k_heads != n_v_heads and not fused_heads:
        factor = n_v_heads // n_k_heads
        q, k = _repeat_heads(r, q, n_k_heads, factor), _repeat_heads(r, k, n_k_heads, factor)
    if b.layer(il, "ssm_beta.weight") is not None:  # qwen35: beta and alpha projected apart
        beta = g.unary("SIGMOID", g.reshape(r.mm(il, "ssm_beta", cur), 1, n_v_heads, n_seq_tokens, n_seqs))
        alpha = g.reshape(r.mm(il, "ssm_alpha", cur), n_v_heads, n_seq_tokens, n_seqs)
    else:  # qwen3next: one projection, split per key head
        ba = r.mm(il, "ssm_ba", cur)
        per_k = n_v_heads // n_k_heads
        ba = g.reshape(ba, 2 * per_k, n_k_heads, n_seq_tokens, n_seqs)
        bnb = [ba.nb[1], ba.nb[2], ba.nb[3]]
        beta = g.unary("SIGMOID", g.cont(g.view(ba, per_k, n_k_heads, n_seq_tokens, n_seqs, nb=bnb)))
        beta = g.reshape(beta, 1, n_v_heads, n_seq_tokens, n_seqs)
        alpha = g.cont(g.view(ba, per_k, n_k_heads, n_seq_tokens, n_seqs, nb=bnb, offset=per_k * _F32), n_v_heads, n_seq_tokens, n_seqs)
    gate = g.mul(g.unary("SOFTPLUS", g.add(alpha, r.lw(il, "ssm_dt.bias"))), r.lw(il, "ssm_a"))
    gate = g.reshape(gate, 1, n_v_heads, n_seq_tokens, n_seqs)
    state = g.reshape(state, head_v, head_v, n_v_heads, n_seqs)
    out = g.new_tensor("f32", head_v * n_v_heads, r.n_tokens + head_v * n_seqs, op="GATED_DELTA_NET", src=(q, k, v, gate, beta, state))
    state_nb = [head_v * _F32, head_v * head_v * _F32, head_v * head_v * n_v_heads * _F32]
    new_state = g.view(out, head_v, head_v, n_v_heads, n_seqs, nb=state_nb, offset=head_v * n_v_heads * r.n_tokens * _F32)
    n_s = ssm_states_all.ne[0]
    g.expand(g.cpy(new_state, g.view(ssm_states_all, n_s, n_seqs, nb=[ssm_states_all.nb[1]], offset=r.rs_head * n_s * _F32)))
    out = g.view(
        out,
        head_v,
        n_v_heads,
        n_seq_tokens,
        n_seqs,
        nb=[head_v * _F32, head_v * n_v_heads * _F32, head_v * n_v_heads * n_seq_tokens * _F32],
    )
    out = b.norm(out, r.lw(il, "ssm_norm.weight"))
    z = g.reshape(r.mm(il, "attn_gate", cur), head_v, n_v_heads, n_seq_tokens, n_seqs)
    out = g.mul(out, g.unary("SILU", z))
    out = g.reshape(out, head_v * n_v_heads, n_seq_tokens, n_seqs)
    out = r.mm(il, "ssm_out", out)
    return g.reshape(out, r.n_embd, n_seq_tokens * n_seqs)


def _gated_attention(b: GraphBuilder, kv: KVInput, pos: GgmlTensor, cur: GgmlTensor, il: int) -> GgmlTensor:
    """build_layer_attn of llama.cpp src/models/qwen3next.cpp: Q and its gate from one projection, q/k norms,
    rope, attention, the output times sigmoid(gate), projected."""
    g, s = b.g, b.shape
    head, n_head, n_head_kv, n_tokens = s.head_k[il], s.n_head[il], s.n_head_kv[il], b.n_tokens
    q_full = b.mm(b.need(f"blk.{il}.attn_q.weight"), cur, b.layer(il, "attn_q.scale"))
    if s.arch in _QWEN35:  # views of the projection as it is
        qnb = [head * 2 * _F32, head * 2 * n_head * _F32]
        q = g.view(q_full, head, n_head, n_tokens, nb=qnb)
        gate = g.view(q_full, head, n_head, n_tokens, nb=qnb, offset=head * _F32)
    else:
        q_full = g.reshape(q_full, head * 2, n_head, n_tokens, 1)
        qnb = [q_full.nb[1], q_full.nb[2], q_full.nb[3]]
        q = g.view(q_full, head, n_head, n_tokens, 1, nb=qnb)
        gate = g.view(q_full, head, n_head, n_tokens, 1, nb=qnb, offset=head * _F32)
    k = g.reshape(b.mm(b.need(f"blk.{il}.attn_k.weight"), cur, b.layer(il, "attn_k.scale")), head, n_head_kv, n_tokens)
    v = g.reshape(b.mm(b.need(f"blk.{il}.attn_v.weight"), cur, b.layer(il, "attn_v.scale")), head, n_head_kv, n_tokens)
    q = g.rope(b.norm(q, b.need(f"blk.{il}.attn_q_norm.weight")), pos)
    k = g.rope(b.norm(k, b.need(f"blk.{il}.attn_k_norm.weight")), pos)
    cur = b.attn(kv, il, q, k, v, None, None)
    gate = g.unary("SIGMOID", g.cont(gate, head * n_head, n_tokens))
    cur = g.mul(cur, gate)
    return b.mm(b.need(f"blk.{il}.attn_output.weight"), cur, b.layer(il, "attn_output.scale"))


def _qwen3next_ffn(b: GraphBuilder, cur: GgmlTensor, il: int) -> GgmlTensor:
    """build_layer_ffn of llama.cpp src/models/qwen3next.cpp and qwen35moe.cpp: experts, plus the shared expert
    times the sigmoid of its own gate; qwen35's a dense SwiGLU."""
    g, s = b.g, b.shape
    if b.layer(il, "ffn_gate_inp.weight") is None:
        return b.ffn(cur, il, "SILU", True)
    n_expert, n_expert_used = int(s.metadata.get(f"{s.arch}.expert_count", 0)), int(s.metadata.get(f"{s.arch}.expert_used_count", 0))
    w_scale = _key_float(b, "expert_weights_scale")
    moe = moe_ffn(b, cur, il, n_expert=n_expert, n_expert_used=n_expert_used, norm_w=True, w_scale=w_scale, gating="softmax")
    up_w = b.layer(il, "ffn_up_shexp.weight")
    if up_w is None:
        return moe
    up = b.mm(up_w, cur)
    shared = g.glu_split("SWIGLU", b.mm(b.need(f"blk.{il}.ffn_gate_shexp.weight"), cur), up)
    shared = b.mm(b.need(f"blk.{il}.ffn_down_shexp.weight"), shared)
    shared_gate = g.unary("SIGMOID", b.mm(b.need(f"blk.{il}.ffn_gate_inp_shexp.weight"), cur))
    return g.add(moe, g.mul(shared, shared_gate))


def build_qwen3next(b: GraphBuilder) -> None:
    """llama.cpp src/models/qwen3next.cpp: a gated delta net or gated attention, a post-attention norm, experts
    with a shared expert; the output rows picked after the final norm."""
    r = _Recurrent(b)
    g, s = r.g, r.shape
    inp_l = b.inp_embd()
    rs_inp, kv = _mem_hybrid(b, r)
    pos = b.inp_pos(4 if s.arch in _QWEN35 else 1)  # qwen35's multi-section rope: four positions per token
    out_ids = b.inp_out_ids()
    n_nextn = int(s.metadata.get(f"{s.arch}.nextn_predict_layers", 0) or 0)  # prediction blocks: not in this graph
    for il in range(s.n_layer - n_nextn):
        inp_sa = inp_l
        cur = b.norm(inp_l, r.lw(il, "attn_norm.weight"))
        g.expand(cur)
        if _recurrent(b, il):
            cur = _gated_delta_net_layer(r, rs_inp, cur, il)
        else:
            cur = _gated_attention(b, kv, pos, cur, il)
        cur = g.add(cur, inp_sa)
        post = b.norm(cur, r.lw(il, "post_attention_norm.weight"))
        inp_l = g.add(_qwen3next_ffn(b, post, il), cur)
    cur = b.norm(inp_l, b.need("output_norm.weight"))
    cur.output = True  # res->t_h_nextn, the prediction head's input
    cur = g.get_rows(cur, out_ids)
    cur.output = True
    cur = b.mm(b.w("output.weight") or b.need("token_embd.weight"), cur)
    g.expand(cur, output=True)


# -- falcon-h1 ------------------------------------------------------------------------------------------------------
def build_falcon_h1(b: GraphBuilder) -> None:
    """llama.cpp src/models/falcon-h1.cpp: roped attention and a Mamba-2 mixer over the same normed input in every
    layer, their sum added to the residual, then a SwiGLU."""
    r = _Recurrent(b)
    g, s = r.g, r.shape
    inp_l = b.inp_embd()
    pos = b.inp_pos()
    rs_inp, kv = _mem_hybrid(b, r)
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
        w_scale=_key_float(b, "expert_weights_scale"), gating="sigmoid", exp_probs_b=b.layer(il, "exp_probs_b.bias"), act="RELU_SQR",
    )  # fmt: skip
    g = b.g
    shared = g.dup("SQR", g.unary("RELU", b.mm(b.need(f"blk.{il}.ffn_up_shexp.weight"), cur)))
    return g.add(moe, b.mm(b.need(f"blk.{il}.ffn_down_shexp.weight"), shared))


def build_nemotron_h(b: GraphBuilder) -> None:
    """llama.cpp src/models/nemotron-h.cpp (nemotron_h and nemotron_h_moe): each layer a Mamba-2 mixer, attention
    without rope, or a squared-ReLU MLP (or experts), added to the residual; as the installed build makes it, the
    output rows picked after the final norm."""
    r = _Recurrent(b)
    g, s = r.g, r.shape
    inp_l = b.inp_embd()
    g.expand(inp_l)
    rs_inp, kv = _mem_hybrid(b, r)
    out_ids = b.inp_out_ids()
    for il in range(s.n_layer):
        inp_sa = inp_l
        cur = b.norm(inp_l, r.lw(il, "attn_norm.weight"))
        if _recurrent(b, il):
            cur = mamba2_layer(r, rs_inp, cur, il)
        elif _attends(b, il):
            q, k, v = b.qkv(il, cur)
            cur = b.attn(kv, il, q, k, v, b.need(f"blk.{il}.attn_output.weight"), b.layer(il, "attn_output.bias"))
        elif b.layer(il, "ffn_gate_inp.weight") is not None:
            cur = _nemotron_moe(b, cur, il)
        else:
            cur = _relu_sqr_ffn(b, cur, il)
        inp_l = g.add(cur, inp_sa)
    cur = b.norm(inp_l, b.need("output_norm.weight"))  # the installed build picks the output rows after it
    cur.output = True  # res->t_h_nextn
    cur = g.get_rows(cur, out_ids)
    cur.output = True
    g.expand(b.mm(b.w("output.weight") or b.need("token_embd.weight"), cur), output=True)


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
    rs_inp, kv = _mem_hybrid(b, r)
    out_ids = b.inp_out_ids()
    for il in range(s.n_layer):
        residual = inp_l
        cur = b.norm(inp_l, r.lw(il, "attn_norm.weight"))
        if _recurrent(b, il):
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
