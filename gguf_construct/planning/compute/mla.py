"""The deepseek2 graph with multi-head latent attention, as llama.cpp builds it (llama.cpp src/models/deepseek2.cpp).

With the MLA layout (attn_k_b / attn_v_b, ``attention.key_length_mla`` set) llama.cpp caches one latent "head"
per token: the compressed KV (``kv_lora_rank``) and the roped key part, ``key_length`` values, and no V
(``build_attn_inp_k``, one K cache; V is a view of its first ``kv_lora_rank`` columns). Q's no-rope part is
absorbed through attn_k_b, and the attention output is decompressed through attn_v_b (``v_mla`` in
``build_attn_mha``). Files in the older layout (one attn_kv_b) decompress K and V before a regular K/V cache.
The feed-forward is dense for the first ``leading_dense_block_count`` layers, then experts plus shared experts.
"""

from __future__ import annotations

from typing import Protocol, cast

from .ggml_ir import GgmlTensor, row_size
from .llama_blocks import GraphBuilder, KVInput, ShapeLike
from .moe import GATING, moe_ffn

__all__ = ["MlaShape", "build_deepseek2"]


class MlaShape(ShapeLike, Protocol):
    """What the deepseek2 graph reads of a model beyond ShapeLike (planning.shape.ModelShape provides it)."""

    mla: bool
    head_k_mla: int
    head_v_mla: int
    n_lora_kv: int


def _attn_k(
    b: GraphBuilder, inp: KVInput, il: int, q: GgmlTensor, k: GgmlTensor, v: GgmlTensor, wo: GgmlTensor, v_mla: GgmlTensor
) -> GgmlTensor:
    """build_attn over a K-only cache (llm_graph_input_attn_k): Q, V, K expanded in that order, K stored, V a
    view of the cached K."""
    g = b.g
    for t in (q, v, k):
        g.expand(t)
    k_cache, _ = b._cache(il, inp.n_kv)
    g.expand(b._cpy_k(k_cache, k, inp.k_idxs))
    kv = b._get_k(k_cache, il, inp.n_kv)
    vv = g.view(kv, v.ne[0], kv.ne[1], kv.ne[2], kv.ne[3], nb=(kv.nb[1], kv.nb[2], kv.nb[3]))
    cur = b.attn_mha(q, kv, vv, inp.kq_mask, v_mla)
    return b.mm(wo, cur, b.layer(il, "attn_output.scale"))


def _shared_ffn(b: GraphBuilder, cur: GgmlTensor, il: int) -> GgmlTensor:
    """build_ffn of the shared experts (SiLU, gate and up in parallel)."""
    g = b.g
    up = b.mm(b.need(f"blk.{il}.ffn_up_shexp.weight"), cur)
    gate = b.mm(b.need(f"blk.{il}.ffn_gate_shexp.weight"), cur)
    return b.mm(b.need(f"blk.{il}.ffn_down_shexp.weight"), g.glu_split("SWIGLU", gate, up))


def _gating(b: GraphBuilder) -> str:
    """llama_model_deepseek2::load_arch_hparams: the gating function, softmax for files without the key
    (sigmoid for GLM 4.7 Lite, told apart by its layer count and vocabulary)."""
    shape = b.shape
    value = int(shape.metadata.get(f"{shape.arch}.expert_gating_func", 0) or 0)
    if value == 0:
        glm_lite = shape.n_layer in (47, 48) and shape.n_vocab == 154880
        return "sigmoid" if glm_lite else "softmax"
    return GATING[value]


def build_deepseek2(b: GraphBuilder) -> None:
    """llama.cpp src/models/deepseek2.cpp (the deepseek2 architecture; not its OCR variant)."""
    g, s = b.g, cast(MlaShape, b.shape)
    md, arch = s.metadata, s.arch
    mla = bool(s.mla)
    head_k = s.head_k_mla if mla else s.head_k[0]
    head_v = s.head_v_mla if mla else s.head_v[0]
    n_rot, kv_lora_rank = s.n_rot, s.n_lora_kv
    nope = head_k - n_rot
    n_tokens = b.n_tokens
    n_expert = int(md.get(f"{arch}.expert_count", 0))
    n_expert_used = int(md.get(f"{arch}.expert_used_count", 0))
    norm_w = bool(md.get(f"{arch}.expert_weights_norm", False))
    w_scale = float(md.get(f"{arch}.expert_weights_scale", 0.0) or 0.0)
    gating = _gating(b)
    n_groups = int(md.get(f"{arch}.expert_group_count", 0) or 0)
    n_group_used = int(md.get(f"{arch}.expert_group_used_count", 0) or 0)
    n_dense_lead = int(md.get(f"{arch}.leading_dense_block_count", 0) or 0)

    inp_l = b.inp_embd()
    attn_scale = None
    if float(md.get(f"{arch}.attention.temperature_scale", 0.0) or 0.0) != 0.0:
        attn_scale = g.input("f32", 1, 1, n_tokens, name="attn_scale")
    inp_pos = b.inp_pos()
    inp = b.attn_inp_kv()  # with MLA only its K indices and mask are used (build_attn_inp_k)
    out_ids = b.inp_out_ids()
    for il in range(s.n_layer):
        residual = inp_l
        cur = b.norm(inp_l, b.need(f"blk.{il}.attn_norm.weight"))
        wq = b.layer(il, "attn_q.weight")
        if wq is None:
            q = g.mul_mat(b.need(f"blk.{il}.attn_q_a.weight"), cur)
            q = b.norm(q, b.need(f"blk.{il}.attn_q_a_norm.weight"))
            q = g.mul_mat(b.need(f"blk.{il}.attn_q_b.weight"), q)
        else:
            q = g.mul_mat(wq, cur)
        q = g.reshape(q, head_k, q.ne[0] // head_k, n_tokens)
        q_nope = g.view(q, nope, q.ne[1], n_tokens, nb=(q.nb[1], q.nb[2]))
        q_pe = g.view(q, n_rot, q.ne[1], n_tokens, nb=(q.nb[1], q.nb[2]), offset=row_size(q.type, nope))
        kv_cmpr_pe = g.mul_mat(b.need(f"blk.{il}.attn_kv_a_mqa.weight"), cur)
        row = row_size(kv_cmpr_pe.type, kv_lora_rank + n_rot)
        kv_cmpr = g.view(kv_cmpr_pe, kv_lora_rank, n_tokens, nb=(row,))
        k_pe = g.view(kv_cmpr_pe, n_rot, 1, n_tokens, nb=(row, row), offset=row_size(kv_cmpr_pe.type, kv_lora_rank))
        q_pe = g.rope(q_pe, inp_pos)
        k_pe = g.rope(k_pe, inp_pos)
        kv_cmpr = b.norm(kv_cmpr, b.need(f"blk.{il}.attn_kv_a_norm.weight"))
        if mla:
            q_nope = g.permute(q_nope, 0, 2, 1, 3)
            q_nope_absorbed = g.mul_mat(b.need(f"blk.{il}.attn_k_b.weight"), q_nope)
            q_nope_absorbed = g.permute(q_nope_absorbed, 0, 2, 1, 3)
            q_cur = g.concat(q_nope_absorbed, q_pe, 0)
            kv_cmpr = g.reshape(kv_cmpr, kv_lora_rank, 1, n_tokens)
            k_cur = g.concat(kv_cmpr, k_pe, 0)
            if attn_scale is not None:
                q_cur = g.mul(q_cur, attn_scale)
            cur = _attn_k(b, inp, il, q_cur, k_cur, kv_cmpr, b.need(f"blk.{il}.attn_output.weight"), b.need(f"blk.{il}.attn_v_b.weight"))
        else:
            # the installed llama.cpp ropes the whole Q head here (its graph has no Q views or concat)
            q_cur = g.rope(q, inp_pos)
            kv = g.mul_mat(b.need(f"blk.{il}.attn_kv_b.weight"), kv_cmpr)
            kv_row = row_size(kv.type, nope + head_v)
            n_head = q.ne[1]
            k_nope = g.view(kv, nope, n_head, n_tokens, nb=(kv_row, kv_row * n_head))
            v_cur = g.view(kv, head_v, n_head, n_tokens, nb=(kv_row, kv_row * n_head), offset=row_size(kv.type, nope))
            v_cur = g.cont(v_cur)
            k_cur = g.concat(k_nope, g.repeat(k_pe, g.new_tensor("f32", n_rot, n_head, n_tokens)), 0)
            if attn_scale is not None:
                q_cur = g.mul(q_cur, attn_scale)
            cur = b.attn(inp, il, q_cur, k_cur, v_cur, b.need(f"blk.{il}.attn_output.weight"), None)
        if il == s.n_layer - 1:
            cur = g.get_rows(cur, out_ids)
            residual = g.get_rows(residual, out_ids)
        ffn_inp = g.add(cur, residual)
        cur = b.norm(ffn_inp, b.need(f"blk.{il}.ffn_norm.weight"))
        if il < n_dense_lead:
            cur = b.ffn(cur, il, "SILU", True)
        else:
            moe_out = moe_ffn(
                b, cur, il, n_expert=n_expert, n_expert_used=n_expert_used, norm_w=norm_w, w_scale=w_scale,
                gating=gating, exp_probs_b=b.layer(il, "exp_probs_b.bias"), n_expert_groups=n_groups,
                n_group_used=n_group_used,
            )  # fmt: skip
            cur = g.add(moe_out, _shared_ffn(b, cur, il))
        inp_l = g.add(cur, ffn_inp)
    cur = b.norm(inp_l, b.need("output_norm.weight"))
    cur.output = True
    g.expand(g.mul_mat(b.output_weight(), cur), output=True)
