"""The building blocks llama.cpp's graphs share (llama.cpp src/llama-graph.cpp ``llm_graph_context::build_*``
and the KV cache's views, src/llama-kv-cache.cpp), over the planning IR.

A :class:`GraphBuilder` is one ``llm_graph_context``: a model shape, a resolved context and one reserved batch
(``n_tokens`` tokens in ``n_seqs`` sequences, ``n_outputs`` of them output). Architecture modules call its
methods in the order llama.cpp's ``src/models/<arch>.cpp`` calls the C++ ones.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

from ...core.tables import GGML_TYPES
from . import builds, lora
from .ggml_ir import Ggml, GgmlTensor, refuse, row_size

__all__ = ["Batch", "ContextLike", "GraphBuilder", "KVInput", "ShapeLike"]

_BLOCK = re.compile(r"blk\.(\d+)\.")


class _Span(Protocol):
    @property
    def type(self) -> str: ...

    @property
    def shape(self) -> tuple[int, ...]: ...


class ShapeLike(Protocol):
    """What the graphs read of a model (planning.shape.ModelShape provides it), read-only."""

    @property
    def arch(self) -> str: ...

    @property
    def n_layer(self) -> int: ...

    @property
    def n_embd(self) -> int: ...

    @property
    def n_vocab(self) -> int: ...

    @property
    def n_head(self) -> tuple[int, ...]: ...

    @property
    def n_head_kv(self) -> tuple[int, ...]: ...

    @property
    def n_ff(self) -> tuple[int, ...]: ...

    @property
    def head_k(self) -> tuple[int, ...]: ...

    @property
    def head_v(self) -> tuple[int, ...]: ...

    @property
    def n_rot(self) -> int: ...

    @property
    def swa_layers(self) -> tuple[bool, ...]: ...

    @property
    def metadata(self) -> Mapping[str, Any]: ...

    def tensor(self, name: str) -> _Span | None: ...


class ContextLike(Protocol):
    """What the graphs read of the context llama.cpp resolved (planning.context.ResolvedContext provides it)."""

    @property
    def n_ctx_seq(self) -> int: ...

    @property
    def n_stream(self) -> int: ...

    @property
    def n_ubatch(self) -> int: ...

    @property
    def n_seq_max(self) -> int: ...

    @property
    def n_outputs_max(self) -> int: ...

    @property
    def flash_attn(self) -> bool: ...

    @property
    def type_k(self) -> str: ...

    @property
    def type_v(self) -> str: ...

    @property
    def kv_unified(self) -> bool: ...

    @property
    def n_ctx_swa(self) -> int: ...


@dataclass(frozen=True)
class Batch:
    """One reserved batch (``llama_context::graph_reserve``): ``n_tokens`` is a multiple of ``n_seqs``."""

    n_tokens: int
    n_seqs: int
    n_outputs: int


@dataclass
class KVInput:
    """One KV cache's graph inputs (llm_graph_input_attn_kv): where new K/V rows go, the mask, the rotations;
    ``n_kv`` cells per stream and the cache's layers' head sizes."""

    n_kv: int
    k_idxs: GgmlTensor
    v_idxs: GgmlTensor
    kq_mask: GgmlTensor
    k_rot: GgmlTensor | None
    v_rot: GgmlTensor | None


def _is_quantized(ggml_type: str) -> bool:
    """ggml_is_quantized: a block type (more than one value per block)."""
    return GGML_TYPES.lookup(ggml_type).block_size > 1


class GraphBuilder:
    """llm_graph_context for one batch: the shared inputs and blocks, building into ``self.g``."""

    def __init__(self, shape: ShapeLike, ctx: ContextLike, batch: Batch) -> None:
        self.shape, self.ctx, self.batch = shape, ctx, batch
        self.g = Ggml()
        self.n_tokens = batch.n_tokens
        self._weights: dict[str, GgmlTensor] = {}
        self._tied_output: GgmlTensor | None = None  # the output head made of token_embd.weight (output_weight)
        #: hparams.attn_soft_cap: attention logits soft-capped (three more ops without flash attention)
        self.attn_soft_cap = False

    # -- the model's tensors ---------------------------------------------------------------------------
    def w(self, name: str) -> GgmlTensor | None:
        """The model tensor ``name`` (one per name), or None when the file does not have it."""
        t = self._weights.get(name)
        if t is None:
            span = self.shape.tensor(name)
            if span is None:
                return None
            t = self._weights[name] = self.g.external(span.type, *span.shape, name=name)
        return t

    def output_weight(self) -> GgmlTensor:
        """The output head: ``output.weight``, or, when the file has none, the loader's duplicate of
        ``token_embd.weight`` (a tensor of its own: the output layer may be on another device than the input's)."""
        t = self.w("output.weight")
        if t is None:
            t = self._weights["output.weight"] = replace(self.need("token_embd.weight"), name="output.weight")
            self._tied_output = t
        return t

    def _weight_name(self, w: GgmlTensor) -> str:
        """The name llama.cpp finds a weight's LoRA pairs by: the tied output head is ``token_embd.weight``'s
        duplicate and keeps its name."""
        return "token_embd.weight" if w is self._tied_output else w.name

    def need(self, name: str) -> GgmlTensor:
        t = self.w(name)
        if t is None:
            raise refuse(f"the model has no tensor {name}")
        return t

    def layer(self, il: int, name: str) -> GgmlTensor | None:
        return self.w(f"blk.{il}.{name}")

    # -- inputs (llm_graph_context::build_inp_*) ---------------------------------------------------------
    def inp_embd(self) -> GgmlTensor:
        """build_inp_embd: token rows of token_embd; the embeddings input is built too (and allocated) though
        the token path is the one selected (ggml_build_forward_select)."""
        g = self.g
        tokens = g.input("i32", self.n_tokens, name="inp_tokens")
        embd = g.input("f32", self.shape.n_embd, self.n_tokens, name="inp_embd")
        cur = g.get_rows(self.need("token_embd.weight"), tokens)
        for pair in lora.pairs_for("token_embd.weight"):  # the embeddings' A and B are flipped: rows of A
            a, b = self._lora_tensors("token_embd.weight", pair)
            cur = g.add(cur, g.scale(g.mul_mat(b, g.get_rows(a, tokens))))
        g.expand(cur)
        if not builds.feature("embd_copy"):
            g.expand(embd)
            return cur
        # newer builds: token rows (inp_mixed_tokens) written into a copy of a second embeddings input
        # (inp_mixed_embd) at inp_mixed_slots; the embeddings input is expanded between the two row lookups, which
        # orders the inputs in the buffer
        rows = g.get_rows(self.need("token_embd.weight"), g.input("i32", self.n_tokens, name="inp_mixed_tokens"))
        g.expand(rows)
        g.expand(embd)
        slots = g.input("i64", self.n_tokens, name="inp_mixed_slots")
        copy = g.dup("DUP", g.input("f32", self.shape.n_embd, self.n_tokens, name="inp_mixed_embd"))
        g.expand(g.set_rows(copy, rows, slots))
        return cur

    def inp_pos(self, n_pos_per_embd: int = 1) -> GgmlTensor:
        """build_inp_pos: a position per token (four with the multi-section rope)."""
        return self.g.input("i32", self.n_tokens * n_pos_per_embd, name="inp_pos")

    def inp_out_ids(self) -> GgmlTensor:
        return self.g.input("i32", self.batch.n_outputs, name="inp_out_ids")

    def _kv_input(self, n_kv: int, layers: Sequence[int]) -> KVInput:
        """build_input_k_idxs / v_idxs, build_attn_inp_kq_mask and the rotations of one cache (its layers)."""
        g, ctx = self.g, self.ctx
        n_stream = 1 if ctx.kv_unified else self.batch.n_seqs
        k_idxs = g.input("i64", self.n_tokens, name="attn_inp_k_idxs")
        if ctx.flash_attn:
            v_idxs = g.input("i64", self.n_tokens, name="attn_inp_v_idxs")
        else:  # the transposed V cache takes one index per value
            v_max = max((self.shape.head_v[il] * self.shape.n_head_kv[il] for il in range(self.shape.n_layer)), default=0)
            v_idxs = g.input("i64", self.n_tokens * v_max, name="attn_inp_v_idxs")
        mask_type = "f16" if ctx.flash_attn else "f32"
        kq_mask = g.input(mask_type, n_kv, self.n_tokens // n_stream, 1, n_stream, name="attn_inp_kq_mask")
        k_rot, v_rot = self._rotations(layers)
        return KVInput(n_kv, k_idxs, v_idxs, kq_mask, k_rot, v_rot)

    def _rotations(self, layers: Sequence[int]) -> tuple[GgmlTensor | None, GgmlTensor | None]:
        """The Hadamard rotations llama.cpp applies around a quantized KV cache (llama_kv_cache's attn_rot_k /
        attn_rot_v, src/llama-kv-cache.cpp): when every layer of the cache has one head size that is a multiple
        of 64; K's matrix is the largest power of two dividing the head size, V's is 64."""
        ctx, shape = self.ctx, self.shape
        heads_k = {shape.head_k[il] for il in layers}
        heads_v = {shape.head_v[il] for il in layers}
        head_k = heads_k.pop() if len(heads_k) == 1 else 0
        head_v = heads_v.pop() if len(heads_v) == 1 else 0
        k_rot = v_rot = None
        if head_k > 0 and _is_quantized(ctx.type_k) and shape.head_k[0] % 64 == 0:
            n = 64
            while head_k % (n * 2) == 0:
                n *= 2
            k_rot = self.g.input("f32", n, n, name="attn_inp_k_rot")
        if head_v > 0 and _is_quantized(ctx.type_v) and shape.head_v[0] % 64 == 0:
            v_rot = self.g.input("f32", 64, 64, name="attn_inp_v_rot")
        return k_rot, v_rot

    def attn_inp_kv(self) -> KVInput:
        """build_attn_inp_kv: the single cache of a model without sliding-window layers."""
        return self._kv_input(self.ctx.n_ctx_seq, range(self.shape.n_layer))

    def attn_inp_kv_iswa(self) -> tuple[KVInput, KVInput]:
        """build_attn_inp_kv_iswa: the inputs of the full cache and of the sliding-window cache."""
        shape = self.shape
        full = [il for il in range(shape.n_layer) if not shape.swa_layers[il]]
        swa = [il for il in range(shape.n_layer) if shape.swa_layers[il]]
        return self._kv_input(self.ctx.n_ctx_seq, full), self._kv_input(self.ctx.n_ctx_swa, swa)

    # -- blocks ------------------------------------------------------------------------------------------
    def norm(self, cur: GgmlTensor, weight: GgmlTensor | None, bias: GgmlTensor | None = None, *, rms: bool = True) -> GgmlTensor:
        """build_norm (LLM_NORM_RMS or LLM_NORM), then the weight and bias."""
        g = self.g
        cur = g.rms_norm(cur) if rms else g.norm(cur)
        named = weight if weight is not None else bias
        if named is not None and (m := _BLOCK.match(named.name)):
            cur.norm_of_layer = int(m.group(1))  # build_norm's cb(cur, "norm", il): il is the weights' layer
        if weight is not None:
            cur = g.mul(cur, weight)
        if bias is not None:
            cur = g.add(cur, bias)
        return cur

    def mm(self, w: GgmlTensor, cur: GgmlTensor, scale: GgmlTensor | None = None) -> GgmlTensor:
        """build_lora_mm: the product, times the weight's scale tensor if it has one, then each applied LoRA
        adapter's scaled B x (A x cur) added (``.lora``)."""
        g = self.g
        res = g.mul_mat(w, cur)
        if scale is not None:
            res = g.mul(res, scale)
        for pair in lora.pairs_for(self._weight_name(w)):
            a, b = self._lora_tensors(self._weight_name(w), pair)
            res = g.add(res, g.scale(g.mul_mat(b, g.mul_mat(a, cur))))
        return res

    def mm_id(self, w: GgmlTensor, cur: GgmlTensor, ids: GgmlTensor) -> GgmlTensor:
        """build_lora_mm_id: the experts' product, each applied LoRA adapter's scaled B x (A x cur) added."""
        g = self.g
        res = g.mul_mat_id(w, cur, ids)
        for pair in lora.pairs_for(w.name):
            a, b = self._lora_tensors(w.name, pair)
            res = g.add(res, g.scale(g.mul_mat_id(b, g.mul_mat_id(a, cur, ids), ids)))
        return res

    def _lora_tensors(self, name: str, pair: lora.LoraPair) -> tuple[GgmlTensor, GgmlTensor]:
        """An adapter's A and B for the weight ``name``, as tensors of the adapter's buffers."""
        a = self.g.external(pair.a_type, *pair.a_shape, name=f"{name}.lora_a")
        b = self.g.external(pair.b_type, *pair.b_shape, name=f"{name}.lora_b")
        return a, b

    def qkv(
        self, il: int, cur: GgmlTensor, full_norms: tuple[GgmlTensor, GgmlTensor | None] | None = None
    ) -> tuple[GgmlTensor, GgmlTensor, GgmlTensor]:
        """build_qkv: Q, K, V as [head, heads, tokens], from attn_qkv (views of one product) or attn_q/k/v
        (each with its optional bias); ``full_norms``: RMS norms of Q and K over all heads, before the split
        (olmo2)."""
        g, s = self.g, self.shape
        head, n_head, n_head_kv = s.head_k[il], s.n_head[il], s.n_head_kv[il]
        n_q, n_kv = head * n_head, head * n_head_kv
        wqkv = self.layer(il, "attn_qkv.weight")
        if wqkv is not None:
            qkv = self.mm(wqkv, cur, self.layer(il, "attn_qkv.scale"))
            b = self.layer(il, "attn_qkv.bias")
            if b is not None:
                qkv = g.add(qkv, b)
            rs = row_size(qkv.type, head)
            q = g.view(qkv, head, n_head, self.n_tokens, nb=(rs, qkv.nb[1]), offset=0)
            k = g.view(qkv, head, n_head_kv, self.n_tokens, nb=(rs, qkv.nb[1]), offset=row_size(qkv.type, n_q))
            v = g.view(qkv, head, n_head_kv, self.n_tokens, nb=(rs, qkv.nb[1]), offset=row_size(qkv.type, n_q + n_kv))
            return q, k, v
        out = []
        for name in ("attn_q", "attn_k", "attn_v"):
            t = self.mm(self.need(f"blk.{il}.{name}.weight"), cur, self.layer(il, f"{name}.scale"))
            b = self.layer(il, f"{name}.bias")
            out.append(g.add(t, b) if b is not None else t)
        if full_norms is not None:
            out[0] = self.norm(out[0], full_norms[0])
            out[1] = self.norm(out[1], full_norms[1])
        q = g.reshape(out[0], head, n_head, self.n_tokens)
        k = g.reshape(out[1], head, n_head_kv, self.n_tokens)
        v = g.reshape(out[2], s.head_v[il], n_head_kv, self.n_tokens)
        return q, k, v

    def _mul_mat_aux(self, cur: GgmlTensor, rot: GgmlTensor) -> GgmlTensor:
        """ggml_mul_mat_aux (src/llama-graph.cpp): ``cur`` times a rotation, in rows of its size."""
        g = self.g
        n = rot.ne[0]
        total = cur.ne[0] * cur.ne[1] * cur.ne[2] * cur.ne[3]
        res = g.reshape(cur, n, total // n) if cur.contiguous else g.cont(cur, n, total // n)
        res = g.mul_mat(rot, res)
        return g.reshape(res, *cur.ne)

    def _cache(self, il: int, n_kv: int) -> tuple[GgmlTensor, GgmlTensor]:
        """Layer ``il``'s K and V cache tensors (llama_kv_cache: [n_embd_k_gqa, kv_size, n_stream]; without
        flash attention V is stored transposed, every layer's row as wide as the widest layer's)."""
        s, ctx = self.shape, self.ctx
        key = f"cache_l{il}"
        if key not in self._weights:
            n_stream = ctx.n_stream
            k = self.g.external(ctx.type_k, s.head_k[il] * s.n_head_kv[il], n_kv, n_stream, name=f"cache_k_l{il}")
            v_width = s.head_v[il] * s.n_head_kv[il]
            if not ctx.flash_attn:
                v_width = max(s.head_v[j] * s.n_head_kv[j] for j in range(s.n_layer))
            v = self.g.external(ctx.type_v, v_width, n_kv, n_stream, name=f"cache_v_l{il}")
            self._weights[key] = k
            self._weights[key + "v"] = v
        return self._weights[key], self._weights[key + "v"]

    def _cpy_k(self, k_cache: GgmlTensor, k_cur: GgmlTensor, k_idxs: GgmlTensor) -> GgmlTensor:
        g = self.g
        n_embd_gqa = k_cur.ne[0] * k_cur.ne[1]
        cur = g.view(k_cur, n_embd_gqa, k_cur.ne[2], nb=(k_cur.nb[2],))
        if k_cache.ne[2] > 1:  # the streams merged: the indices are global
            k_cache = g.reshape(k_cache, k_cache.ne[0], k_cache.ne[1] * k_cache.ne[2])
        return g.set_rows(k_cache, cur, k_idxs)

    def _cpy_v(self, v_cache: GgmlTensor, v_cur: GgmlTensor, v_idxs: GgmlTensor) -> GgmlTensor:
        g = self.g
        n_embd_gqa = v_cur.ne[0] * v_cur.ne[1]
        n_tokens = v_cur.ne[2]
        if self.ctx.flash_attn:
            cur = g.view(v_cur, n_embd_gqa, n_tokens, nb=(v_cur.nb[2],))
            if v_cache.ne[2] > 1:
                v_cache = g.reshape(v_cache, v_cache.ne[0], v_cache.ne[1] * v_cache.ne[2])
            return g.set_rows(v_cache, cur, v_idxs)
        if row_size(v_cur.type, n_embd_gqa) == v_cur.nb[2]:
            cur = g.reshape(v_cur, n_embd_gqa, n_tokens)
        else:
            cur = g.cont(v_cur, n_embd_gqa, n_tokens)
        if n_embd_gqa < v_cache.ne[0]:
            cur = g.pad(cur, v_cache.ne[0] - n_embd_gqa)
        n_v = v_cache.ne[0] * v_cache.ne[1] * v_cache.ne[2] * v_cache.ne[3]
        view = g.reshape(v_cache, 1, n_v)
        cur = g.reshape(cur, 1, cur.ne[0] * cur.ne[1] * cur.ne[2] * cur.ne[3])
        return g.set_rows(view, cur, v_idxs)

    def _get_k(self, k_cache: GgmlTensor, il: int, n_kv: int) -> GgmlTensor:
        s = self.shape
        head, n_head_kv, n_embd_gqa = s.head_k[il], s.n_head_kv[il], k_cache.ne[0]
        t = k_cache.type
        return self.g.view(
            k_cache, head, n_head_kv, n_kv, k_cache.ne[2],
            nb=(row_size(t, head), row_size(t, n_embd_gqa), row_size(t, n_embd_gqa * n_kv)),
        )  # fmt: skip

    def _get_v(self, v_cache: GgmlTensor, il: int, n_kv: int) -> GgmlTensor:
        s = self.shape
        head, n_head_kv, n_embd_gqa = s.head_v[il], s.n_head_kv[il], v_cache.ne[0]
        t = v_cache.type
        if self.ctx.flash_attn:
            return self.g.view(
                v_cache, head, n_head_kv, n_kv, v_cache.ne[2],
                nb=(row_size(t, head), row_size(t, n_embd_gqa), row_size(t, n_embd_gqa * n_kv)),
            )  # fmt: skip
        return self.g.view(
            v_cache, n_kv, n_head_kv, head, v_cache.ne[2],
            nb=(row_size(t, n_kv * head), row_size(t, n_kv), row_size(t, n_kv * n_embd_gqa)),
        )  # fmt: skip

    def attn_mha(self, q: GgmlTensor, k: GgmlTensor, v: GgmlTensor, kq_mask: GgmlTensor, v_mla: GgmlTensor | None = None) -> GgmlTensor:
        """build_attn_mha: flash attention, or KQ, softmax and KQV; with ``v_mla`` (DeepSeek's latent attention)
        the result decompressed through it; the heads merged back into rows."""
        g, ctx = self.g, self.ctx
        v_trans = v.nb[1] > v.nb[2]
        n_stream = k.ne[3]
        q = g.view(q, q.ne[0], q.ne[1], q.ne[2] // n_stream, n_stream, nb=(q.nb[1], q.nb[2], q.nb[3] // n_stream))
        q = g.permute(q, 0, 2, 1, 3)
        k = g.permute(k, 0, 2, 1, 3)
        v = g.permute(v, 0, 2, 1, 3)
        if ctx.flash_attn:
            if v_trans:
                v = g.transpose(v)
            if k.type == "f32":
                k = g.cast(k, "f16")
            if v.type == "f32":
                v = g.cast(v, "f16")
            cur = g.flash_attn_ext(q, k, v, kq_mask)
            if v_mla is not None:
                cur = g.permute(cur, 0, 2, 1, 3)
                cur = g.mul_mat(v_mla, cur)
                cur = g.permute(cur, 0, 2, 1, 3)
                cur = g.cont(cur)
            cur = g.reshape(cur, cur.ne[0] * cur.ne[1], cur.ne[2] * cur.ne[3])
        else:
            kq = g.mul_mat(k, q)
            if self.attn_soft_cap:
                kq = g.scale(kq)
                kq = g.unary("TANH", kq)
                kq = g.scale(kq)
            kq = g.soft_max_ext(kq, kq_mask)
            if not v_trans:
                v = g.cont(g.transpose(v))
            kqv = g.mul_mat(v, kq)
            if v_mla is not None:
                kqv = g.mul_mat(v_mla, kqv)
            cur = g.permute(kqv, 0, 2, 1, 3)
            cur = g.cont(cur, cur.ne[0] * cur.ne[1], cur.ne[2] * cur.ne[3])
        g.expand(cur)
        return cur

    def attn(self, inp: KVInput, il: int, q: GgmlTensor, k: GgmlTensor, v: GgmlTensor, wo: GgmlTensor | None, wo_b: GgmlTensor | None,
             *, iswa: bool = False) -> GgmlTensor:  # fmt: skip
        """build_attn with a KV cache: rotate, store K and V into the cache, attend over the cache's view,
        project with ``wo``. ``iswa``: llama_kv_cache_iswa's variant (Q, K, V expanded in that order)."""
        g = self.g
        if inp.k_rot is not None:
            q = self._mul_mat_aux(q, inp.k_rot)
            k = self._mul_mat_aux(k, inp.k_rot)
        if inp.v_rot is not None:
            v = self._mul_mat_aux(v, inp.v_rot)
        order = (q, k, v) if iswa else (q, v, k)
        for t in order:
            g.expand(t)
        k_cache, v_cache = self._cache(il, inp.n_kv)
        g.expand(self._cpy_k(k_cache, k, inp.k_idxs))
        g.expand(self._cpy_v(v_cache, v, inp.v_idxs))
        cur = self.attn_mha(q, self._get_k(k_cache, il, inp.n_kv), self._get_v(v_cache, il, inp.n_kv), inp.kq_mask)
        if inp.v_rot is not None:
            cur = self._mul_mat_aux(cur, inp.v_rot)
        if wo is not None:
            cur = self.mm(wo, cur, self.layer(il, "attn_output.scale"))
        if wo_b is not None:
            cur = g.add(cur, wo_b)
        return cur

    def ffn(self, cur: GgmlTensor, il: int, act: str, par: bool) -> GgmlTensor:
        """build_ffn with the layer's ffn_up / ffn_gate / ffn_down (and their optional biases): ``act`` is
        SILU or GELU (a SWIGLU/GEGLU of gate and up when ``par``) or SWIGLU/GEGLU of one fused up."""
        g = self.g
        up, gate, down = (self.layer(il, f"ffn_{n}.weight") for n in ("up", "gate", "down"))
        tmp = self.mm(up, cur) if up is not None else cur
        b = self.layer(il, "ffn_up.bias")
        if b is not None:
            tmp = g.add(tmp, b)
        if gate is not None:
            cur = self.mm(gate, tmp if not par else cur)
            b = self.layer(il, "ffn_gate.bias")
            if b is not None:
                cur = g.add(cur, b)
        else:
            cur = tmp
        glu = {"SILU": "SWIGLU", "GELU": "GEGLU", "RELU": "REGLU"}
        if act in glu and gate is not None and par:
            cur = g.glu_split(glu[act], cur, tmp)
        elif act in glu:
            cur = g.unary(act, cur)
        else:  # one fused tensor holding gate and up (LLM_FFN_SWIGLU, LLM_FFN_GEGLU)
            cur = g.glu(act, cur)
        if down is not None:
            cur = self.mm(down, cur)
        b = self.layer(il, "ffn_down.bias")
        if b is not None:
            cur = g.add(cur, b)
        return cur
