"""Mixture-of-experts feed-forward blocks and the MoE graphs, as llama.cpp builds them.

:func:`moe_ffn` is ``llm_graph_context::build_moe_ffn`` (llama.cpp src/llama-graph.cpp): the router's
probabilities, the top ``n_expert_used`` experts per token (ggml_argsort_top_k: a full argsort and a view of its
first columns), their weights (normalised and scaled if asked), the experts' SwiGLU through MUL_MAT_ID and the
sum of the weighted expert outputs. The graphs of qwen3moe, qwen2moe, gpt-oss, glm4moe and llama with experts
(Mixtral) are one loop around it, what differs a :class:`MoeRecipe` (llama.cpp src/models/qwen3moe.cpp,
qwen2moe.cpp, openai-moe.cpp, glm4-moe.cpp, llama.cpp).
"""

from __future__ import annotations

from dataclasses import dataclass

from . import builds
from .ggml_ir import GgmlTensor
from .llama_blocks import GraphBuilder, KVInput

__all__ = ["GATING", "MoeRecipe", "build_llama_moe", "build_moe", "has_experts", "moe_ffn"]

#: llama.cpp's llama_expert_gating_func_type (src/llama-hparams.h): the value of {arch}.expert_gating_func
GATING = {1: "softmax", 2: "sigmoid", 3: "softmax_weight"}


def _argsort_top_k(b: GraphBuilder, a: GgmlTensor, k: int) -> GgmlTensor:
    """ggml_argsort_top_k: the indices of the k largest values per row, a view of the row's full argsort."""
    g = b.g
    s = g.argsort(a)
    return g.view(s, k, s.ne[1], s.ne[2], s.ne[3], nb=(s.nb[1], s.nb[2], s.nb[3]))


def _biased(b: GraphBuilder, cur: GgmlTensor, il: int, name: str, selected: GgmlTensor) -> GgmlTensor:
    """ggml_add_id: the chosen experts' biases added, when the file has them (``{name}.bias``)."""
    bias = b.layer(il, f"{name}.bias")
    return b.g.dup("ADD_ID", cur, bias, selected) if bias is not None else cur


def moe_ffn(
    b: GraphBuilder,
    cur: GgmlTensor,
    il: int,
    *,
    n_expert: int,
    n_expert_used: int,
    norm_w: bool,
    w_scale: float,
    gating: str,
    exp_probs_b: GgmlTensor | None = None,
    n_expert_groups: int = 0,
    n_group_used: int = 0,
    act: str = "SILU",
) -> GgmlTensor:
    """build_moe_ffn with gated experts (separate gate/up experts, or one merged ffn_gate_up_exps, with their
    biases where the file has them): ``act`` SILU (a SwiGLU of gate and up), SWIGLU_OAI (gpt-oss's) or RELU_SQR
    (nemotron_h's: up only, a squared ReLU)."""
    g = b.g
    if not 0 < n_expert_used <= n_expert:  # llama_model_base::load_hparams asserts it
        raise ValueError(f"{n_expert_used} experts used of {n_expert}: llama.cpp needs 0 < expert_used_count <= expert_count")
    n_embd, n_tokens = cur.ne[0], cur.ne[1]
    logits = b.mm(b.need(f"blk.{il}.ffn_gate_inp.weight"), cur)
    gate_inp_b = b.layer(il, "ffn_gate_inp.bias")
    if gate_inp_b is not None:
        logits = g.add(logits, gate_inp_b)
    if gating == "softmax":
        probs = g.soft_max_ext(logits)
    elif gating == "sigmoid":
        probs = g.unary("SIGMOID", logits)
    else:
        probs = logits
    selection = g.add(probs, exp_probs_b) if exp_probs_b is not None else probs
    if n_expert_groups > 1 and n_tokens > 0:
        per_group = n_expert // n_expert_groups
        groups = g.reshape(selection, per_group, n_expert_groups, n_tokens)
        scores = _argsort_top_k(b, groups, 2)
        scores = g.get_rows(g.reshape(groups, 1, groups.ne[0], groups.ne[1], groups.ne[2]), scores)
        scores = g.sum_rows(g.reshape(scores, scores.ne[1], scores.ne[2], scores.ne[3]))
        scores = g.reshape(scores, scores.ne[1], scores.ne[2])
        expert_groups = _argsort_top_k(b, scores, n_group_used)
        selection = g.get_rows(groups, expert_groups)
        filled = g.dup("FILL", groups)
        selection = g.set_rows(filled, selection, expert_groups)
        selection = g.reshape(selection, n_expert, n_tokens)
    selected = _argsort_top_k(b, selection, n_expert_used)
    weights = g.get_rows(g.reshape(probs, 1, n_expert, n_tokens), selected)
    if gating == "softmax_weight":
        weights = g.reshape(weights, n_expert_used, n_tokens)
        weights = g.soft_max_ext(weights)
        weights = g.reshape(weights, 1, n_expert_used, n_tokens)
    if norm_w:
        weights = g.reshape(weights, n_expert_used, n_tokens)
        weights_sum = g.clamp(g.sum_rows(weights))
        weights = g.div(weights, weights_sum)
        weights = g.reshape(weights, 1, n_expert_used, n_tokens)
    if w_scale not in (0.0, 1.0):
        weights = g.scale(weights)
    g.expand(weights)
    cur = g.reshape(cur, n_embd, 1, n_tokens)
    gate_up = b.layer(il, "ffn_gate_up_exps.weight")
    if gate_up is not None:
        merged = b.mm_id(gate_up, cur, selected)
        n_ff = merged.ne[0] // 2
        cur = g.view(merged, n_ff, merged.ne[1], merged.ne[2], nb=(merged.nb[1], merged.nb[2]))
        up = g.view(merged, n_ff, merged.ne[1], merged.ne[2], nb=(merged.nb[1], merged.nb[2]), offset=n_ff * merged.nb[0])
    else:
        up = _biased(b, b.mm_id(b.need(f"blk.{il}.ffn_up_exps.weight"), cur, selected), il, "ffn_up_exps", selected)
        gate = b.layer(il, "ffn_gate_exps.weight")
        cur = b.mm_id(gate, cur, selected) if gate is not None else up
        cur = _biased(b, cur, il, "ffn_gate_exps", selected)
    has_gate = gate_up is not None or b.layer(il, "ffn_gate_exps.weight") is not None
    if act == "SWIGLU_OAI":
        cur = g.glu_split("SWIGLU_OAI", cur, up)
    elif act == "RELU_SQR":  # nemotron_h's experts: no gate, a squared ReLU of up
        cur = g.dup("SQR", g.unary("RELU", cur))
    else:
        cur = g.glu_split("SWIGLU", cur, up) if has_gate else g.unary("SILU", cur)
    experts = b.mm_id(b.need(f"blk.{il}.ffn_down_exps.weight"), cur, selected)
    experts = _biased(b, experts, il, "ffn_down_exps", selected)
    experts = g.mul(experts, weights)
    g.expand(experts)
    views = []
    for i in range(n_expert_used):
        v = g.view(experts, n_embd, n_tokens, nb=(experts.nb[2],), offset=i * experts.nb[1])
        g.expand(v)
        views.append(v)
    out = views[0]
    for v in views[1:]:
        out = g.add(out, v)
        g.expand(out)
    return g.cont(out) if n_expert_used == 1 else out


def _shared_expert(b: GraphBuilder, cur: GgmlTensor, il: int) -> GgmlTensor | None:
    """The shared experts: a SwiGLU FFN (glm4moe), scaled per token by silu(g) / g of its own router output g
    where the layer has that router (qwen2moe); None for a layer without them."""
    up_w = b.layer(il, "ffn_up_shexp.weight")
    if up_w is None:
        return None
    g = b.g
    gate_inp = b.layer(il, "ffn_gate_inp_shexp.weight")
    cur_gate = None
    if gate_inp is not None:
        cur_gate_inp = b.mm(gate_inp, cur)
        cur_gate = g.div(g.unary("SILU", cur_gate_inp), cur_gate_inp)
    up = b.mm(up_w, cur)
    gate = b.mm(b.need(f"blk.{il}.ffn_gate_shexp.weight"), cur)
    cur_ffn = b.mm(b.need(f"blk.{il}.ffn_down_shexp.weight"), g.glu_split("SWIGLU", gate, up))
    return g.mul(cur_ffn, cur_gate) if cur_gate is not None else cur_ffn


@dataclass(frozen=True)
class MoeRecipe:
    """What an MoE architecture's graph does (its ``graph`` entry in ``schema/memory.json``): ``norm_w``: the
    chosen experts' weights normalised to sum 1; ``gating``: the router's softmax, sigmoid, or softmax over the
    chosen ones (softmax_weight); ``act``: SILU or SWIGLU_OAI experts; ``iswa``: the sliding-window cache used
    always or never; ``ffn_norm``: the tensor normalising the FFN input; ``rows_after_loop``: the output tokens'
    rows are taken after the layer loop, not in the last layer, whose output is then kept (a graph output);
    ``from_keys``: the file's expert_gating_func and expert_weights_norm keys override ``gating`` and
    ``norm_w`` (the defaults when a key is absent)."""

    norm_w: bool = True
    gating: str = "softmax"
    act: str = "SILU"
    iswa: str = "never"
    ffn_norm: str = "ffn_norm"
    rows_after_loop: bool = False
    from_keys: bool = False


def build_moe(b: GraphBuilder, recipe: MoeRecipe) -> None:
    """The layer loop llama.cpp's llama (with experts), qwen2moe, qwen3moe, gpt-oss and glm4moe graphs share:
    norm, attention (q/k RMS norms before rope when the file has them), residual, norm, experts (plus shared
    experts), residual (llama.cpp src/models/llama.cpp, qwen2moe.cpp, qwen3moe.cpp, openai-moe.cpp,
    glm4-moe.cpp)."""
    g, shape = b.g, b.shape
    md = shape.metadata
    n_expert = int(md.get(f"{shape.arch}.expert_count", 0))
    n_expert_used = int(md.get(f"{shape.arch}.expert_used_count", 0))
    w_scale = float(md.get(f"{shape.arch}.expert_weights_scale", 0.0) or 0.0)
    gating, norm_w = recipe.gating, recipe.norm_w
    if recipe.from_keys:
        gating = GATING.get(int(md.get(f"{shape.arch}.expert_gating_func", 0) or 0), gating)
        norm_w = bool(md.get(f"{shape.arch}.expert_weights_norm", norm_w))
    # next-token-prediction blocks at the end are loaded and skipped (llama.cpp's n_layer() leaves them out)
    n_layer = shape.n_layer - int(md.get(f"{shape.arch}.nextn_predict_layers", 0) or 0)
    iswa = recipe.iswa == "always"
    rows_after_loop = recipe.rows_after_loop and not builds.feature("out_rows_in_last_layer", shape.arch)
    inp_l = b.inp_embd()
    inp_pos = b.inp_pos()
    full: KVInput
    swa: KVInput | None = None
    if iswa:
        full, swa = b.attn_inp_kv_iswa()
    else:
        full = b.attn_inp_kv()
    out_ids = b.inp_out_ids()
    factors = b.w("rope_freqs.weight")  # llama's rope frequency factors (the other files have none)
    for il in range(n_layer):
        residual = inp_l
        cur = b.norm(inp_l, b.need(f"blk.{il}.attn_norm.weight"))
        q, k, v = b.qkv(il, cur)
        q_norm, k_norm = b.layer(il, "attn_q_norm.weight"), b.layer(il, "attn_k_norm.weight")
        q = g.rope(b.norm(q, q_norm) if q_norm is not None else q, inp_pos, factors)
        k = g.rope(b.norm(k, k_norm) if k_norm is not None else k, inp_pos, factors)
        inp = swa if (swa is not None and shape.swa_layers[il]) else full
        cur = b.attn(inp, il, q, k, v, b.need(f"blk.{il}.attn_output.weight"), b.layer(il, "attn_output.bias"), iswa=iswa)
        if il == n_layer - 1 and not rows_after_loop:
            cur = g.get_rows(cur, out_ids)
            residual = g.get_rows(residual, out_ids)
        ffn_inp = g.add(cur, residual)
        cur = b.norm(ffn_inp, b.need(f"blk.{il}.{recipe.ffn_norm}.weight"))
        if b.layer(il, "ffn_gate_inp.weight") is None:  # a dense layer of a llama file with experts elsewhere
            cur = b.ffn(cur, il, "SILU", True)
        else:
            moe_out = moe_ffn(
                b, cur, il, n_expert=n_expert, n_expert_used=n_expert_used, norm_w=norm_w, w_scale=w_scale,
                gating=gating, act=recipe.act, exp_probs_b=b.layer(il, "exp_probs_b.bias"),
            )  # fmt: skip
            shared = _shared_expert(b, cur, il)
            cur = g.add(moe_out, shared) if shared is not None else moe_out
        inp_l = g.add(cur, ffn_inp)
    if rows_after_loop:
        inp_l.output = True
        inp_l = g.get_rows(inp_l, out_ids)
    cur = b.norm(inp_l, b.need("output_norm.weight"))
    cur.output = True
    g.expand(b.mm(b.output_weight(), cur), output=True)


def build_llama_moe(b: GraphBuilder) -> None:
    """llama.cpp src/models/llama.cpp for a file with experts (Mixtral): normalised expert weights."""
    build_moe(b, MoeRecipe())


def has_experts(b: GraphBuilder) -> bool:
    """Whether any layer of the model routes to experts (llama.cpp's llama graph takes its MoE branch there)."""
    return any(b.layer(il, "ffn_gate_inp.weight") is not None for il in range(b.shape.n_layer))
