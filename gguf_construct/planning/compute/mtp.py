"""The graph of a next-token-prediction (MTP) context: llama-server's ``--spec-type draft-mtp`` makes a second
context over the model (``LLAMA_CONTEXT_TYPE_MTP``) whose graph runs the model's MTP block alone (llama.cpp
src/models/glm4-moe.cpp ``graph_mtp``): the token's embedding and the main model's hidden state, each
RMS-normed, concatenated and projected (``nextn.eh_proj``), then one attention and MoE block (with its shared
experts) over the MTP context's own KV cache, the head's norm and the output head.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from .alloc import reserve_bytes
from .ggml_ir import Graph
from .llama_blocks import ContextLike, GraphBuilder, ShapeLike
from .moe import GATING, _shared_expert, moe_ffn

__all__ = ["MTP_ARCHITECTURES", "build_glm4moe_mtp", "mtp_compute_bytes"]


def build_glm4moe_mtp(b: GraphBuilder) -> None:
    """glm4moe's ``graph_mtp`` for its first (and only supported) MTP block."""
    g, shape = b.g, b.shape
    md = shape.metadata
    arch = shape.arch
    n_nextn = int(md.get(f"{arch}.nextn_predict_layers", 0) or 0)
    if n_nextn != 1:  # llama.cpp asserts a single MTP block
        raise ValueError(f"{arch}: {n_nextn} next-token-prediction layers; llama.cpp's MTP graph takes exactly one")
    il = shape.n_layer - n_nextn
    tokens = g.input("i32", b.n_tokens, name="inp_tokens")
    g.input("f32", shape.n_embd, b.n_tokens, name="inp_embd")
    tok_embd = g.get_rows(b.layer(il, "nextn.embed_tokens.weight") or b.need("token_embd.weight"), tokens)
    h = g.input("f32", shape.n_embd, b.n_tokens, name="mtp_h_input")
    inp_pos = b.inp_pos()
    out_ids = b.inp_out_ids()
    inp = b.attn_inp_kv()
    h_norm = b.norm(h, b.need(f"blk.{il}.nextn.hnorm.weight"))
    e_norm = b.norm(tok_embd, b.need(f"blk.{il}.nextn.enorm.weight"))
    cur = b.mm(b.need(f"blk.{il}.nextn.eh_proj.weight"), g.concat(e_norm, h_norm, 0))
    residual = cur
    cur = b.norm(cur, b.need(f"blk.{il}.attn_norm.weight"))
    q, k, v = b.qkv(il, cur)
    q_norm, k_norm = b.layer(il, "attn_q_norm.weight"), b.layer(il, "attn_k_norm.weight")
    q = g.rope(b.norm(q, q_norm) if q_norm is not None else q, inp_pos)
    k = g.rope(b.norm(k, k_norm) if k_norm is not None else k, inp_pos)
    cur = b.attn(inp, il, q, k, v, b.need(f"blk.{il}.attn_output.weight"), None)
    ffn_inp = g.add(cur, residual)
    cur = b.norm(ffn_inp, b.layer(il, "post_attention_norm.weight"))
    moe_out = moe_ffn(
        b, cur, il,
        n_expert=int(md.get(f"{arch}.expert_count", 0)),
        n_expert_used=int(md.get(f"{arch}.expert_used_count", 0)),
        norm_w=bool(md.get(f"{arch}.expert_weights_norm", True)),
        w_scale=float(md.get(f"{arch}.expert_weights_scale", 0.0) or 0.0),
        gating=GATING.get(int(md.get(f"{arch}.expert_gating_func", 0) or 0), "sigmoid"),
        exp_probs_b=b.layer(il, "exp_probs_b.bias"),
    )  # fmt: skip
    shared = _shared_expert(b, cur, il)
    cur = g.add(moe_out, shared) if shared is not None else moe_out
    cur = g.add(cur, ffn_inp)
    cur = b.norm(cur, b.layer(il, "nextn.shared_head_norm.weight") or b.need("output_norm.weight"))
    cur.output = True  # the hidden state the next MTP step reads (t_h_nextn)
    cur = g.get_rows(cur, out_ids)
    head = b.layer(il, "nextn.shared_head_head.weight") or b.w("output.weight") or b.need("token_embd.weight")
    g.expand(b.mm(head, cur), output=True)


#: the architectures whose MTP graph is modelled
MTP_ARCHITECTURES: dict[str, Callable[[GraphBuilder], None]] = {"glm4moe": build_glm4moe_mtp}


def mtp_compute_bytes(shape: ShapeLike, ctx: ContextLike, checkpoint: Callable[[], None] = lambda: None) -> int:
    """The MTP context's CPU compute buffer: its graph reserved for the batches every context reserves."""
    from . import reserved_batches

    if shape.arch not in MTP_ARCHITECTURES:
        raise NotImplementedError(f"no MTP graph of {shape.arch!r} is modelled")
    build = MTP_ARCHITECTURES[shape.arch]

    def graphs() -> Iterator[Graph]:
        for batch in reserved_batches(ctx, getattr(ctx, "n_ctx", ctx.n_ctx_seq * ctx.n_stream)):
            checkpoint()
            builder = GraphBuilder(shape, ctx, batch)
            build(builder)
            yield builder.g.graph

    return reserve_bytes(graphs())
