"""The graph of the dense transformers of the llama layout, as llama.cpp builds them (llama.cpp
src/models/<arch>.cpp): llama, qwen2, qwen3, phi3, gemma, gemma2, gemma3, mistral3, smollm3, glm4, olmo2,
command-r, cohere2, granite, starcoder2 and the others with a dense ``graph`` entry in ``schema/memory.json``.

These graphs are one loop over layers (norm, attention over the KV cache, residual, norm, feed-forward,
residual) differing in details: what each architecture does differently is a :class:`Recipe`; what a file has
or lacks (biases, q/k norms, post-norms, a fused q/k/v, an output tied to the embeddings) is read from its
tensors, as llama.cpp's loader makes those optional. The recipes are data: the ``graph`` entries of
``schema/memory.json``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from . import builds
from .ggml_ir import GgmlTensor
from .llama_blocks import GraphBuilder, KVInput

__all__ = ["RECIPES", "Recipe", "build_dense"]


@dataclass(frozen=True)
class Recipe:
    """What an architecture's graph does beyond the llama layout: the ``graph`` entry of ``schema/memory.json``.
    q/k norms as wide as all heads (olmo2) apply before Q and K are split into heads whatever the recipe."""

    #: the embeddings are scaled (gemma: by sqrt(n_embd))
    embd_scale: bool = False
    #: Q is scaled after rope
    q_scale: bool = False
    #: the feed-forward's activation: SILU or GELU of gate and up, or SWIGLU of one fused up tensor
    ffn: str = "SILU"
    #: gate and up read the same input in parallel (else gate reads up's output)
    ffn_par: bool = True
    #: the sliding-window cache is used 'always', 'never', or when the file sets a window ('if_swa')
    iswa: str = "never"
    #: attention logits are soft-capped (three more ops without flash attention)
    attn_softcap: bool = False
    #: output logits are soft-capped 'always', 'never', or when the file's key is set and non-zero ('if_set')
    final_softcap: str = "never"
    #: the second residual sum takes the residual as its first source (it decides which one ggml-alloc may overwrite)
    ffn_residual_first: bool = False
    #: Q times a per-token scale (an input) when the file sets ``attention.temperature_scale``
    attn_temp: bool = False
    #: every this many layers one is without rope (0: rope in every layer)
    no_rope_layer_step: int = 0
    #: the name of the norm before the feed-forward (seed_oss: post_attention_norm, not a norm of the attention's output)
    ffn_norm: str = "ffn_norm"
    #: positions per token (4 with qwen2vl's multi-section rope)
    n_pos_per_embd: int = 1
    #: the attention and the feed-forward read normed inputs (olmo2 norms their outputs only)
    pre_norms: bool = True
    #: 'rms' (RMS norms) or 'layer' (LayerNorm, LLM_NORM)
    norm: str = "rms"
    #: attention and feed-forward both read the layer's normed input, their outputs added to the residual (command-r)
    parallel: bool = False
    #: only the sliding-window layers use rope (cohere2)
    rope_swa_only: bool = False
    #: the logits are scaled 'never', 'always', or when the file's ``logit_scale`` is non-zero ('if_set')
    logit_scale: str = "never"
    #: the embeddings are scaled when the file's ``embedding_scale`` is non-zero (granite)
    embedding_scale: bool = False
    #: each block's output is scaled before its residual sum when the file's ``residual_scale`` is non-zero (granite)
    residual_scale: bool = False


def _recipes() -> dict[str, Recipe]:
    """The dense architectures of ``schema/memory.json`` (their ``graph`` entries) as recipes."""
    from ..shape import memory_table

    out = {}
    for arch, entry in memory_table().architectures.items():
        graph = entry.get("graph") if isinstance(entry, Mapping) else None
        if graph and graph.get("family") == "dense":
            out[arch] = Recipe(**{k: v for k, v in graph.items() if k not in ("family", "source")})
    return out


#: architecture → its recipe, for every dense architecture the schema describes
RECIPES: dict[str, Recipe] = _recipes()


@dataclass
class _Inputs:
    """The graph inputs every layer reads: positions, the KV caches' inputs, the output rows."""

    pos: GgmlTensor
    attn_scale: GgmlTensor | None
    full: KVInput
    swa: KVInput | None
    out_ids: GgmlTensor
    rope_factors: GgmlTensor | None
    iswa: bool
    residual_scale: bool


def build_dense(b: GraphBuilder, recipe: Recipe) -> None:
    """Build the architecture's graph for ``b``'s batch into ``b.g``."""
    g, shape = b.g, b.shape
    if shape.metadata.get(f"{shape.arch}.nextn_predict_layers"):
        raise NotImplementedError("the multi-token-prediction layers (nextn_predict_layers) are not modelled")
    if any(b.layer(il, "ffn_gate_inp.weight") is not None for il in range(shape.n_layer)):
        raise NotImplementedError(f"{shape.arch} with experts (a router in its layers) is not modelled")
    if recipe.embedding_scale and shape.metadata.get(f"{shape.arch}.deepstack_mapping"):
        raise NotImplementedError("the deepstack layers of a vision model are not modelled")
    b.attn_soft_cap = recipe.attn_softcap

    inp_l = b.inp_embd()
    if recipe.embd_scale or (recipe.embedding_scale and shape.metadata.get(f"{shape.arch}.embedding_scale")):
        if builds.feature("embd_scale_input", shape.arch):  # a per-token scale, an input (newer builds' gemma3)
            inp_l = g.mul(inp_l, g.input("f32", 1, b.n_tokens, name="inp_embd_scale"))
        else:
            inp_l = g.scale(inp_l)  # build_inp_embd's f_embedding_scale: the rows are contiguous, no ggml_cont
    inputs = _inputs(b, recipe)
    for il in range(shape.n_layer):
        inp_l = _layer(b, recipe, inputs, il, inp_l)
    _output(b, recipe, inp_l)


def _inputs(b: GraphBuilder, recipe: Recipe) -> _Inputs:
    g, shape = b.g, b.shape
    iswa = recipe.iswa == "always" or (recipe.iswa == "if_swa" and any(shape.swa_layers))
    pos = b.inp_pos(recipe.n_pos_per_embd)
    attn_scale = None
    if recipe.attn_temp and shape.metadata.get(f"{shape.arch}.attention.temperature_scale"):
        attn_scale = g.input("f32", 1, 1, b.n_tokens, name="attn_scale")  # build_inp_attn_scale
    full, swa = b.attn_inp_kv_iswa() if iswa else (b.attn_inp_kv(), None)
    residual_scale = recipe.residual_scale and bool(shape.metadata.get(f"{shape.arch}.residual_scale"))
    return _Inputs(pos, attn_scale, full, swa, b.inp_out_ids(), b.w("rope_freqs.weight"), iswa, residual_scale)


def _layer(b: GraphBuilder, recipe: Recipe, inputs: _Inputs, il: int, inp_l: GgmlTensor) -> GgmlTensor:
    """One layer: attention over the cache, then the feed-forward, each with its residual sum."""
    g, shape = b.g, b.shape
    rms = recipe.norm == "rms"
    residual = cur = inp_l
    if recipe.pre_norms:
        cur = b.norm(inp_l, b.layer(il, "attn_norm.weight"), b.layer(il, "attn_norm.bias"), rms=rms)
    q_norm, k_norm = b.layer(il, "attn_q_norm.weight"), b.layer(il, "attn_k_norm.weight")
    if q_norm is not None and q_norm.ne[0] != shape.head_k[il]:  # over all heads at once, before the reshape
        q, k, v = b.qkv(il, cur, full_norms=(q_norm, k_norm))
        q_norm = k_norm = None
    else:
        q, k, v = b.qkv(il, cur)
    ffn_src = cur  # the parallel feed-forward's input
    use_rope = not recipe.no_rope_layer_step or (il + 1) % recipe.no_rope_layer_step != 0
    if recipe.rope_swa_only:
        use_rope = shape.swa_layers[il]
    if q_norm is not None:
        q = b.norm(q, q_norm, rms=rms)
    if use_rope:
        q = g.rope(q, inputs.pos, inputs.rope_factors)
    if k_norm is not None:
        k = b.norm(k, k_norm, rms=rms)
    if use_rope:
        k = g.rope(k, inputs.pos, inputs.rope_factors)
    if recipe.q_scale:
        q = g.scale(q)
    if inputs.attn_scale is not None:
        q = g.mul(q, inputs.attn_scale)
    kv = inputs.swa if (inputs.swa is not None and shape.swa_layers[il]) else inputs.full
    wo, wo_b = b.layer(il, "attn_output.weight"), b.layer(il, "attn_output.bias")
    cur = b.attn(kv, il, q, k, v, wo, wo_b, iswa=inputs.iswa)
    if il == shape.n_layer - 1:  # only the output rows go on
        cur = g.get_rows(cur, inputs.out_ids)
        residual = g.get_rows(residual, inputs.out_ids)
        if recipe.parallel:
            ffn_src = g.get_rows(ffn_src, inputs.out_ids)
    if recipe.parallel:
        attn_out = cur
        cur = b.ffn(ffn_src, il, recipe.ffn, recipe.ffn_par)
        return g.add(g.add(cur, residual), attn_out)

    post = b.layer(il, "post_attention_norm.weight") if recipe.ffn_norm != "post_attention_norm" else None
    if post is not None:
        cur = b.norm(cur, post, rms=rms)
    if inputs.residual_scale:
        cur = g.scale(cur)
    ffn_inp = cur = g.add(cur, residual)
    if recipe.pre_norms:
        cur = b.norm(ffn_inp, b.layer(il, f"{recipe.ffn_norm}.weight"), b.layer(il, f"{recipe.ffn_norm}.bias"), rms=rms)
    cur = b.ffn(cur, il, recipe.ffn, recipe.ffn_par)
    post = b.layer(il, "post_ffw_norm.weight")
    if post is not None:
        cur = b.norm(cur, post, rms=rms)
    if inputs.residual_scale:
        cur = g.scale(cur)
    return g.add(ffn_inp, cur) if recipe.ffn_residual_first else g.add(cur, ffn_inp)


def _output(b: GraphBuilder, recipe: Recipe, inp_l: GgmlTensor) -> None:
    """The output norm (t_embd) and the logits (t_logits), both graph outputs."""
    g, shape = b.g, b.shape
    cur = b.norm(inp_l, b.need("output_norm.weight"), b.w("output_norm.bias"), rms=recipe.norm == "rms")
    cur.output = True  # res->t_embd
    out = b.output_weight()
    cur = b.mm(out, cur)
    bias = b.w("output.bias")
    if bias is not None:
        cur = g.add(cur, bias)
    if recipe.logit_scale == "always" or (recipe.logit_scale == "if_set" and shape.metadata.get(f"{shape.arch}.logit_scale")):
        cur = g.scale(cur)
    softcap = shape.metadata.get(f"{shape.arch}.final_logit_softcapping")
    if recipe.final_softcap == "always" or (recipe.final_softcap == "if_set" and softcap):
        cur = g.scale(cur)
        cur = g.unary("TANH", cur)
        cur = g.scale(cur)
    g.expand(cur, output=True)  # res->t_logits
