"""The graphs llama.cpp builds for qwen3next, qwen35 and qwen35moe (llama.cpp src/models/qwen3next.cpp,
qwen35.cpp, qwen35moe.cpp, src/models/delta-net-base.cpp), in the planning IR: gated delta-net layers (a causal
convolution over q, k and v with the layer's conv state, the fused GATED_DELTA_NET over the layer's state) and gated
attention with q/k norms, then experts with a gated shared expert or, qwen35's, a dense SwiGLU."""

from __future__ import annotations

from . import builds
from .ggml_ir import GgmlTensor
from .hybrid_blocks import RsInput, is_recurrent, key_float, mem_hybrid
from .llama_blocks import GraphBuilder, KVInput
from .moe import moe_ffn
from .recurrent import _F32, _Recurrent, _ssm_conv

__all__ = ["build_qwen3next"]

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
    w_scale = key_float(b, "expert_weights_scale")
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
    rs_inp, kv = mem_hybrid(b, r)
    pos = b.inp_pos(4 if s.arch in _QWEN35 else 1)  # qwen35's multi-section rope: four positions per token
    out_ids = b.inp_out_ids()
    n_nextn = int(s.metadata.get(f"{s.arch}.nextn_predict_layers", 0) or 0)  # prediction blocks: not in this graph
    last_rows = builds.feature("out_rows_in_last_layer", s.arch)  # b11549: in the last layer, as llama
    for il in range(s.n_layer - n_nextn):
        inp_sa = inp_l
        cur = b.norm(inp_l, r.lw(il, "attn_norm.weight"))
        g.expand(cur)
        if is_recurrent(b, il):
            cur = _gated_delta_net_layer(r, rs_inp, cur, il)
        else:
            cur = _gated_attention(b, kv, pos, cur, il)
        if last_rows and il == s.n_layer - n_nextn - 1:
            cur, inp_sa = g.get_rows(cur, out_ids), g.get_rows(inp_sa, out_ids)
        cur = g.add(cur, inp_sa)
        post = b.norm(cur, r.lw(il, "post_attention_norm.weight"))
        inp_l = g.add(_qwen3next_ffn(b, post, il), cur)
    cur = b.norm(inp_l, b.need("output_norm.weight"))
    if not last_rows:
        cur.output = True  # res->t_h_nextn, the prediction head's input
        cur = g.get_rows(cur, out_ids)
    cur.output = True
    cur = b.mm(b.output_weight(), cur)
    g.expand(cur, output=True)
