"""The graph llama.cpp builds for lfm2 and lfm2moe (llama.cpp src/models/lfm2.cpp, whose graph lfm2moe shares), in
the planning IR: gated short-convolution layers and attention layers with q/k norms, the attention within a sliding
window when the file sets one (llama_memory_hybrid_iswa), a dense SwiGLU or, past lfm2moe's leading dense layers,
experts."""

from __future__ import annotations

from typing import cast

from .ggml_ir import GgmlTensor
from .hybrid_blocks import HybridShape, RsInput, is_recurrent, key_float, mem_hybrid
from .llama_blocks import GraphBuilder
from .moe import GATING, moe_ffn
from .recurrent import _F32, _Recurrent, _ssm_conv

__all__ = ["build_lfm2"]


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
        b, cur, il, n_expert=n_expert, n_expert_used=n_expert_used, norm_w=True, w_scale=key_float(b, "expert_weights_scale"),
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
        rs_inp, kv = mem_hybrid(b, r)
    pos = b.inp_pos()
    out_ids = b.inp_out_ids()
    for il in range(s.n_layer):
        prev = cur
        cur = b.norm(cur, r.lw(il, "attn_norm.weight"))
        if is_recurrent(b, il):
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
    cur = b.mm(b.output_weight(), cur)
    g.expand(cur, output=True)
