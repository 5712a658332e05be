"""Tiny GGUF models of the architectures the memory plan covers, each with every key and tensor llama.cpp's loader
requires (llama.cpp src/models/<arch>.cpp: load_arch_hparams, load_arch_tensors) and a small SPM vocabulary.

One builder per architecture returns a :class:`GGUFFile` (the caller saves it): :func:`llama` (with experts:
Mixtral's layout), :func:`qwen2`, :func:`qwen3`, :func:`qwen3moe`, :func:`qwen2moe`, :func:`gpt_oss`,
:func:`glm4moe`, :func:`gemma2`, :func:`gemma3`, :func:`phi3`, :func:`deepseek2`, :func:`mamba`, :func:`mamba2`,
:func:`rwkv6`, :func:`rwkv7`; :data:`BUILDERS` maps the architecture name to its builder, :func:`zero_filled`
makes any of them at a real model's size in a second. Sizes are parameters;
``wtype`` is the type of the weight matrices (the tensors llama.cpp's quantizer quantizes: llama.cpp
src/llama-quant.cpp), one of :data:`WEIGHT_TYPES`. A matrix whose rows do not fill whole blocks of ``wtype`` is
written as f16, as llama.cpp's quantizer falls back to another type for such rows. Norms are ones; other weights
are 0.02 * normal, so that a model also runs (finite logits), not just loads.

Quantized weights come from the library's own quantizer (byte for byte ggml_quantize_chunk's), not ggml-python,
whose ggml is a second, older one in the process (tests/conftest.py keeps llama.cpp bound to its own).
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
from typing import Any

import numpy as np

from gguf_construct.api.gguf_file import GGUFFile, new
from gguf_construct.core.tables import GGML_TYPES
from gguf_construct.quants.quantize import quantize

WEIGHT_TYPES = ("f32", "f16", "q8_0", "q4_0", "q4_K")
_BLOCK = {"f32": 1, "f16": 1, "q8_0": 32, "q4_0": 32, "q4_K": 256}
_FILE_TYPE = {"f32": 0, "f16": 1, "q4_0": 2, "q8_0": 7, "q4_K": 15}  # llama.cpp's llama_ftype (q4_K: Q4_K_M)


_ZERO_FILLED: ContextVar[bool] = ContextVar("tiny_models_zero_filled", default=False)


def zero_filled(builder: Callable[..., GGUFFile], **sizes: Any) -> GGUFFile:
    """``builder(**sizes)`` with every tensor's data zero bytes, produced as the file is written: a model of a
    real model's widths and vocabulary in a second (no random values, no quantizing). llama.cpp loads and plans
    it like any other; only its outputs are meaningless."""
    token = _ZERO_FILLED.set(True)
    try:
        return builder(**sizes)
    finally:
        _ZERO_FILLED.reset(token)


class _Model:
    """A GGUFFile being filled: typed keys of one architecture, and tensors in ggml's shape order (ne0 first)."""

    def __init__(self, arch: str, wtype: str, seed: int, n_vocab: int, context_length: int) -> None:
        if wtype not in WEIGHT_TYPES:
            raise ValueError(f"wtype {wtype!r}: one of {WEIGHT_TYPES}")
        self.arch, self.wtype, self.n_vocab = arch, wtype, n_vocab
        self.rng = np.random.default_rng(seed)
        self.f = new()
        md = self.f.metadata
        md.set("general.architecture", arch)
        md.set("general.name", f"tiny {arch}")
        md.set("general.file_type", _FILE_TYPE[wtype], type="u32")
        if wtype not in ("f32", "f16"):
            md.set("general.quantization_version", 2, type="u32")
        self.key("context_length", context_length)
        _spm_vocabulary(self.f, n_vocab)

    def key(self, name: str, value: Any, type: str = "u32") -> None:  # noqa: A002 - the metadata API's word
        self.f.metadata.set(f"{self.arch}.{name}", value, type=type)

    def _values(self, ne: tuple[int, ...], scale: float) -> np.ndarray:
        return (self.rng.standard_normal(ne[::-1]) * scale).astype(np.float32)

    def _zeros(self, name: str, kind: str, ne: tuple[int, ...]) -> bool:
        """Under :func:`zero_filled`: the tensor's data are zero bytes made when the file is written."""
        if not _ZERO_FILLED.get():
            return False
        size = GGML_TYPES.lookup(kind).nbytes(ne[0]) * int(np.prod(ne[1:], dtype=np.int64))
        self.f.tensors.add(name, lambda: bytes(size), kind, ne)
        return True

    def weight(self, name: str, *ne: int) -> None:
        """A weight matrix (2-D or a 3-D stack of experts/heads) in ``wtype``."""
        kind = self.wtype if ne[0] % _BLOCK[self.wtype] == 0 else "f16"
        if self._zeros(name, kind, ne):
            return
        values = self._values(ne, 0.02)
        if kind == "f32":
            self.f.tensors.add(name, values)
        elif kind == "f16":
            self.f.tensors.add(name, values.astype(np.float16))
        else:
            self.f.tensors.add(name, quantize(values.reshape(-1, ne[0]), kind), kind, ne)

    def f32(self, name: str, *ne: int, values: np.ndarray | None = None, scale: float = 0.02) -> None:
        """A tensor llama.cpp keeps in f32 (norms, biases, small parameters): ``values`` or random."""
        if self._zeros(name, "f32", ne):
            return
        data = self._values(ne, scale) if values is None else np.asarray(values, np.float32).reshape(ne[::-1])
        self.f.tensors.add(name, data)

    def norm(self, name: str, n: int, bias: bool = False) -> None:
        self.f32(f"{name}.weight", n, values=np.ones(n))
        if bias:
            self.f32(f"{name}.bias", n, values=np.zeros(n))

    def embeddings(self, n_embd: int, output: bool = True, output_bias: bool = False) -> None:
        """token_embd, and output unless the model ties it to token_embd."""
        self.weight("token_embd.weight", n_embd, self.n_vocab)
        if output:
            self.weight("output.weight", n_embd, self.n_vocab)

    def output_norm(self, n_embd: int, bias: bool = False) -> None:
        self.norm("output_norm", n_embd, bias)


def _spm_vocabulary(f: GGUFFile, n_vocab: int) -> None:
    """A SentencePiece-style vocabulary of ``n_vocab`` tokens: <unk>, <s>, </s>, the newline byte token and
    <|endoftext|> llama.cpp looks up (phi3's vocabulary requires the last; src/llama-vocab.cpp), then plain pieces."""
    if n_vocab < 6:
        raise ValueError("n_vocab: at least 6 tokens")
    md = f.metadata
    tokens = ["<unk>", "<s>", "</s>", "<0x0A>", "<|endoftext|>"] + [f"t{i}" for i in range(n_vocab - 5)]
    md.set("tokenizer.ggml.model", "llama")
    md.set("tokenizer.ggml.tokens", tokens, type="arr[str]")
    md.set("tokenizer.ggml.scores", np.zeros(n_vocab, np.float32), type="arr[f32]")
    md.set("tokenizer.ggml.token_type", np.array([2, 3, 3, 6, 3] + [1] * (n_vocab - 5), np.int32), type="arr[i32]")
    md.set("tokenizer.ggml.bos_token_id", 1, type="u32")
    md.set("tokenizer.ggml.eos_token_id", 2, type="u32")


def _attention_keys(m: _Model, n_layer: int, n_embd: int, n_head: int, n_head_kv: int, head_dim: int | None) -> int:
    m.key("embedding_length", n_embd)
    m.key("block_count", n_layer)
    m.key("attention.head_count", n_head)
    m.key("attention.head_count_kv", n_head_kv)
    m.key("attention.layer_norm_rms_epsilon", 1e-6, "f32")
    if head_dim is None:
        return n_embd // n_head
    m.key("attention.key_length", head_dim)
    m.key("attention.value_length", head_dim)
    return head_dim


def _qkvo(m: _Model, i: int, n_embd: int, n_q: int, n_kv: int, bias: bool = False) -> None:
    m.weight(f"blk.{i}.attn_q.weight", n_embd, n_q)
    m.weight(f"blk.{i}.attn_k.weight", n_embd, n_kv)
    m.weight(f"blk.{i}.attn_v.weight", n_embd, n_kv)
    if bias:
        for name, n in (("attn_q", n_q), ("attn_k", n_kv), ("attn_v", n_kv)):
            m.f32(f"blk.{i}.{name}.bias", n)
    m.weight(f"blk.{i}.attn_output.weight", n_q, n_embd)


def _swiglu(m: _Model, i: int, n_embd: int, n_ff: int) -> None:
    m.weight(f"blk.{i}.ffn_gate.weight", n_embd, n_ff)
    m.weight(f"blk.{i}.ffn_up.weight", n_embd, n_ff)
    m.weight(f"blk.{i}.ffn_down.weight", n_ff, n_embd)


def _experts(m: _Model, i: int, n_embd: int, n_ff_exp: int, n_expert: int) -> None:
    """The router and the stacked SwiGLU experts of one layer."""
    m.f32(f"blk.{i}.ffn_gate_inp.weight", n_embd, n_expert)
    m.weight(f"blk.{i}.ffn_gate_exps.weight", n_embd, n_ff_exp, n_expert)
    m.weight(f"blk.{i}.ffn_up_exps.weight", n_embd, n_ff_exp, n_expert)
    m.weight(f"blk.{i}.ffn_down_exps.weight", n_ff_exp, n_embd, n_expert)


def _dense(
    arch: str,
    *,
    n_layer: int,
    n_embd: int,
    n_ff: int,
    n_head: int,
    n_head_kv: int,
    n_vocab: int,
    head_dim: int | None,
    wtype: str,
    seed: int,
    context_length: int,
    qkv_bias: bool = False,
    qk_norm: bool = False,
    post_norms: bool = False,
    output: bool = True,
    n_expert: int = 0,
    n_expert_used: int = 0,
) -> _Model:
    """The llama-like layout shared by llama, qwen2, qwen3, gemma2 and gemma3; with ``n_expert``, each layer's
    FFN is a mixture of that many SwiGLU experts of ``n_ff`` (Mixtral's layout of llama)."""
    m = _Model(arch, wtype, seed, n_vocab, context_length)
    hd = _attention_keys(m, n_layer, n_embd, n_head, n_head_kv, head_dim)
    m.key("feed_forward_length", n_ff)
    if n_expert:
        m.key("expert_count", n_expert)
        m.key("expert_used_count", n_expert_used)
    m.embeddings(n_embd, output)
    for i in range(n_layer):
        m.norm(f"blk.{i}.attn_norm", n_embd)
        _qkvo(m, i, n_embd, hd * n_head, hd * n_head_kv, qkv_bias)
        if qk_norm:
            m.norm(f"blk.{i}.attn_q_norm", hd)
            m.norm(f"blk.{i}.attn_k_norm", hd)
        if post_norms:
            m.norm(f"blk.{i}.post_attention_norm", n_embd)
        m.norm(f"blk.{i}.ffn_norm", n_embd)
        if n_expert:
            _experts(m, i, n_embd, n_ff, n_expert)
        else:
            _swiglu(m, i, n_embd, n_ff)
        if post_norms:
            m.norm(f"blk.{i}.post_ffw_norm", n_embd)
    m.output_norm(n_embd)
    return m


def llama(
    *,
    n_layer: int = 2,
    n_embd: int = 256,
    n_ff: int = 512,
    n_head: int = 4,
    n_head_kv: int = 4,
    n_vocab: int = 64,
    wtype: str = "f16",
    seed: int = 0,
    context_length: int = 4096,
    n_expert: int = 0,
    n_expert_used: int = 0,
) -> GGUFFile:
    """llama (llama.cpp src/models/llama.cpp); with ``n_expert`` experts of ``n_ff``, ``n_expert_used`` per
    token, Mixtral's mixture-of-experts layout."""
    m = _dense(
        "llama", n_layer=n_layer, n_embd=n_embd, n_ff=n_ff, n_head=n_head, n_head_kv=n_head_kv, n_vocab=n_vocab,
        head_dim=None, wtype=wtype, seed=seed, context_length=context_length, n_expert=n_expert,
        n_expert_used=n_expert_used,
    )  # fmt: skip
    m.key("rope.dimension_count", n_embd // n_head)
    return m.f


def qwen2(
    *,
    n_layer: int = 2,
    n_embd: int = 256,
    n_ff: int = 512,
    n_head: int = 4,
    n_head_kv: int = 2,
    n_vocab: int = 64,
    wtype: str = "f16",
    seed: int = 0,
    context_length: int = 4096,
) -> GGUFFile:
    """qwen2: llama's layout with q/k/v biases (llama.cpp src/models/qwen2.cpp)."""
    m = _dense(
        "qwen2", n_layer=n_layer, n_embd=n_embd, n_ff=n_ff, n_head=n_head, n_head_kv=n_head_kv, n_vocab=n_vocab,
        head_dim=None, wtype=wtype, seed=seed, context_length=context_length, qkv_bias=True,
    )  # fmt: skip
    m.key("rope.freq_base", 1000000.0, "f32")
    return m.f


def qwen3(
    *,
    n_layer: int = 2,
    n_embd: int = 256,
    n_ff: int = 512,
    n_head: int = 4,
    n_head_kv: int = 2,
    head_dim: int = 64,
    n_vocab: int = 64,
    wtype: str = "f16",
    seed: int = 0,
    context_length: int = 4096,
) -> GGUFFile:
    """qwen3: q/k RMS norms per head, a head size of its own (llama.cpp src/models/qwen3.cpp)."""
    m = _dense(
        "qwen3", n_layer=n_layer, n_embd=n_embd, n_ff=n_ff, n_head=n_head, n_head_kv=n_head_kv, n_vocab=n_vocab,
        head_dim=head_dim, wtype=wtype, seed=seed, context_length=context_length, qk_norm=True,
    )  # fmt: skip
    m.key("rope.freq_base", 1000000.0, "f32")
    return m.f


def qwen3moe(
    *,
    n_layer: int = 2,
    n_embd: int = 256,
    n_head: int = 4,
    n_head_kv: int = 2,
    head_dim: int = 64,
    n_expert: int = 8,
    n_expert_used: int = 2,
    n_ff_exp: int = 128,
    n_vocab: int = 64,
    wtype: str = "f16",
    seed: int = 0,
    context_length: int = 4096,
) -> GGUFFile:
    """qwen3moe: qwen3's attention, a softmax-gated mixture of SwiGLU experts (llama.cpp src/models/qwen3moe.cpp)."""
    m = _Model("qwen3moe", wtype, seed, n_vocab, context_length)
    hd = _attention_keys(m, n_layer, n_embd, n_head, n_head_kv, head_dim)
    m.key("rope.freq_base", 1000000.0, "f32")
    m.key("feed_forward_length", n_ff_exp * n_expert_used)
    m.key("expert_count", n_expert)
    m.key("expert_used_count", n_expert_used)
    m.key("expert_feed_forward_length", n_ff_exp)
    m.embeddings(n_embd)
    for i in range(n_layer):
        m.norm(f"blk.{i}.attn_norm", n_embd)
        _qkvo(m, i, n_embd, hd * n_head, hd * n_head_kv)
        m.norm(f"blk.{i}.attn_q_norm", hd)
        m.norm(f"blk.{i}.attn_k_norm", hd)
        m.norm(f"blk.{i}.ffn_norm", n_embd)
        _experts(m, i, n_embd, n_ff_exp, n_expert)
    m.output_norm(n_embd)
    return m.f


def qwen2moe(
    *,
    n_layer: int = 2,
    n_embd: int = 256,
    n_head: int = 4,
    n_head_kv: int = 2,
    n_expert: int = 8,
    n_expert_used: int = 2,
    n_ff_exp: int = 128,
    n_ff_shexp: int = 256,
    n_vocab: int = 64,
    wtype: str = "f16",
    seed: int = 0,
    context_length: int = 4096,
) -> GGUFFile:
    """qwen2moe: qwen2's attention (q/k/v biases), experts and a shared expert scaled by its own sigmoid-like
    gate (llama.cpp src/models/qwen2moe.cpp)."""
    m = _Model("qwen2moe", wtype, seed, n_vocab, context_length)
    hd = _attention_keys(m, n_layer, n_embd, n_head, n_head_kv, None)
    m.key("rope.freq_base", 1000000.0, "f32")
    m.key("feed_forward_length", n_ff_shexp)
    m.key("expert_count", n_expert)
    m.key("expert_used_count", n_expert_used)
    m.key("expert_feed_forward_length", n_ff_exp)
    m.key("expert_shared_feed_forward_length", n_ff_shexp)
    m.embeddings(n_embd)
    for i in range(n_layer):
        m.norm(f"blk.{i}.attn_norm", n_embd)
        _qkvo(m, i, n_embd, hd * n_head, hd * n_head_kv, bias=True)
        m.norm(f"blk.{i}.ffn_norm", n_embd)
        _experts(m, i, n_embd, n_ff_exp, n_expert)
        m.f32(f"blk.{i}.ffn_gate_inp_shexp.weight", n_embd)
        m.weight(f"blk.{i}.ffn_gate_shexp.weight", n_embd, n_ff_shexp)
        m.weight(f"blk.{i}.ffn_up_shexp.weight", n_embd, n_ff_shexp)
        m.weight(f"blk.{i}.ffn_down_shexp.weight", n_ff_shexp, n_embd)
    m.output_norm(n_embd)
    return m.f


def gpt_oss(
    *,
    n_layer: int = 2,
    n_embd: int = 256,
    n_head: int = 4,
    n_head_kv: int = 2,
    head_dim: int = 64,
    n_expert: int = 8,
    n_expert_used: int = 2,
    n_ff_exp: int = 128,
    sliding_window: int = 128,
    n_vocab: int = 64,
    wtype: str = "f16",
    seed: int = 0,
    context_length: int = 4096,
) -> GGUFFile:
    """gpt-oss (llama.cpp's openai-moe): every other layer attends within ``sliding_window`` tokens, attention
    sinks, biases on the attention output, the router and the experts, SwiGLU-OAI experts weighted by a softmax
    over the chosen ones (llama.cpp src/models/openai-moe.cpp)."""
    m = _Model("gpt-oss", wtype, seed, n_vocab, context_length)
    _attention_keys(m, n_layer, n_embd, n_head, n_head_kv, head_dim)
    m.key("rope.dimension_count", head_dim)
    m.key("rope.freq_base", 150000.0, "f32")
    m.key("feed_forward_length", n_ff_exp)
    m.key("expert_count", n_expert)
    m.key("expert_used_count", n_expert_used)
    m.key("expert_feed_forward_length", n_ff_exp)
    m.key("attention.sliding_window", sliding_window)
    m.embeddings(n_embd)
    for i in range(n_layer):
        m.norm(f"blk.{i}.attn_norm", n_embd)
        _qkvo(m, i, n_embd, head_dim * n_head, head_dim * n_head_kv, bias=True)
        m.f32(f"blk.{i}.attn_output.bias", n_embd)
        m.f32(f"blk.{i}.attn_sinks.weight", n_head)
        m.norm(f"blk.{i}.post_attention_norm", n_embd)
        _experts(m, i, n_embd, n_ff_exp, n_expert)
        m.f32(f"blk.{i}.ffn_gate_inp.bias", n_expert)
        m.f32(f"blk.{i}.ffn_gate_exps.bias", n_ff_exp, n_expert)
        m.f32(f"blk.{i}.ffn_up_exps.bias", n_ff_exp, n_expert)
        m.f32(f"blk.{i}.ffn_down_exps.bias", n_embd, n_expert)
    m.output_norm(n_embd)
    return m.f


def glm4moe(
    *,
    n_layer: int = 3,
    n_embd: int = 256,
    n_ff: int = 512,
    n_head: int = 4,
    n_head_kv: int = 2,
    head_dim: int = 64,
    n_expert: int = 8,
    n_expert_used: int = 2,
    n_expert_shared: int = 1,
    n_ff_exp: int = 128,
    n_layer_dense_lead: int = 1,
    n_nextn: int = 0,
    n_vocab: int = 64,
    wtype: str = "f16",
    seed: int = 0,
    context_length: int = 4096,
) -> GGUFFile:
    """glm4moe (GLM-4.5): q/k/v biases, a post-attention norm before the FFN, dense leading layers, then
    sigmoid-routed experts with a selection bias and shared experts; the last ``n_nextn`` of the ``n_layer``
    blocks are next-token-prediction layers llama.cpp loads and skips (llama.cpp src/models/glm4-moe.cpp)."""
    m = _Model("glm4moe", wtype, seed, n_vocab, context_length)
    _attention_keys(m, n_layer, n_embd, n_head, n_head_kv, head_dim)
    m.key("rope.dimension_count", head_dim // 2)
    m.key("feed_forward_length", n_ff)
    m.key("expert_count", n_expert)
    m.key("expert_used_count", n_expert_used)
    m.key("expert_shared_count", n_expert_shared)
    m.key("expert_feed_forward_length", n_ff_exp)
    m.key("leading_dense_block_count", n_layer_dense_lead)
    m.key("expert_weights_scale", 2.5, "f32")
    m.key("expert_weights_norm", True, "bool")
    m.key("expert_gating_func", 2)  # sigmoid (llama.cpp's llama_expert_gating_func_type)
    m.key("nextn_predict_layers", n_nextn)
    m.embeddings(n_embd)
    for i in range(n_layer):
        m.norm(f"blk.{i}.attn_norm", n_embd)
        _qkvo(m, i, n_embd, head_dim * n_head, head_dim * n_head_kv, bias=True)
        m.norm(f"blk.{i}.post_attention_norm", n_embd)
        if i < n_layer_dense_lead:
            _swiglu(m, i, n_embd, n_ff)
        else:
            _experts(m, i, n_embd, n_ff_exp, n_expert)
            m.f32(f"blk.{i}.exp_probs_b.bias", n_expert)
            m.weight(f"blk.{i}.ffn_gate_shexp.weight", n_embd, n_ff_exp * n_expert_shared)
            m.weight(f"blk.{i}.ffn_up_shexp.weight", n_embd, n_ff_exp * n_expert_shared)
            m.weight(f"blk.{i}.ffn_down_shexp.weight", n_ff_exp * n_expert_shared, n_embd)
        if i >= n_layer - n_nextn:
            m.weight(f"blk.{i}.nextn.eh_proj.weight", 2 * n_embd, n_embd)
            m.norm(f"blk.{i}.nextn.enorm", n_embd)
            m.norm(f"blk.{i}.nextn.hnorm", n_embd)
    m.output_norm(n_embd)
    return m.f


def gemma2(
    *,
    n_layer: int = 2,
    n_embd: int = 256,
    n_ff: int = 512,
    n_head: int = 4,
    n_head_kv: int = 2,
    head_dim: int = 64,
    sliding_window: int = 128,
    n_vocab: int = 64,
    wtype: str = "f16",
    seed: int = 0,
    context_length: int = 4096,
) -> GGUFFile:
    """gemma2: every other layer attends within ``sliding_window`` tokens, soft-capped logits, post-norms, the
    output tied to token_embd (llama.cpp src/models/gemma2.cpp)."""
    m = _dense(
        "gemma2", n_layer=n_layer, n_embd=n_embd, n_ff=n_ff, n_head=n_head, n_head_kv=n_head_kv, n_vocab=n_vocab,
        head_dim=head_dim, wtype=wtype, seed=seed, context_length=context_length, post_norms=True, output=False,
    )  # fmt: skip
    m.key("attention.sliding_window", sliding_window)
    m.key("attn_logit_softcapping", 50.0, "f32")
    m.key("final_logit_softcapping", 30.0, "f32")
    return m.f


def gemma3(
    *,
    n_layer: int = 2,
    n_embd: int = 256,
    n_ff: int = 512,
    n_head: int = 4,
    n_head_kv: int = 2,
    head_dim: int = 64,
    sliding_window: int = 128,
    swa_period: int = 2,
    n_vocab: int = 64,
    wtype: str = "f16",
    seed: int = 0,
    context_length: int = 4096,
) -> GGUFFile:
    """gemma3: of every ``swa_period`` layers all but the last attend within ``sliding_window`` tokens (llama.cpp's
    default period is 6: 2 makes a 2-layer model have both kinds), q/k norms, post-norms, tied output
    (llama.cpp src/models/gemma3.cpp)."""
    m = _dense(
        "gemma3", n_layer=n_layer, n_embd=n_embd, n_ff=n_ff, n_head=n_head, n_head_kv=n_head_kv, n_vocab=n_vocab,
        head_dim=head_dim, wtype=wtype, seed=seed, context_length=context_length, qk_norm=True, post_norms=True,
        output=False,
    )  # fmt: skip
    m.key("attention.sliding_window", sliding_window)
    m.key("attention.sliding_window_pattern", swa_period)
    m.key("rope.freq_base", 1000000.0, "f32")
    m.key("rope.freq_base_swa", 10000.0, "f32")
    return m.f


def phi3(
    *,
    n_layer: int = 2,
    n_embd: int = 256,
    n_ff: int = 512,
    n_head: int = 4,
    n_head_kv: int = 4,
    n_vocab: int = 64,
    wtype: str = "f16",
    seed: int = 0,
    context_length: int = 4096,
) -> GGUFFile:
    """phi3: fused q/k/v and fused gate/up projections (llama.cpp src/models/phi3.cpp)."""
    m = _Model("phi3", wtype, seed, n_vocab, context_length)
    hd = _attention_keys(m, n_layer, n_embd, n_head, n_head_kv, None)
    m.key("feed_forward_length", n_ff)
    m.key("rope.dimension_count", hd)
    m.embeddings(n_embd)
    for i in range(n_layer):
        m.norm(f"blk.{i}.attn_norm", n_embd)
        m.weight(f"blk.{i}.attn_qkv.weight", n_embd, n_embd + 2 * hd * n_head_kv)
        m.weight(f"blk.{i}.attn_output.weight", n_embd, n_embd)
        m.norm(f"blk.{i}.ffn_norm", n_embd)
        m.weight(f"blk.{i}.ffn_up.weight", n_embd, 2 * n_ff)
        m.weight(f"blk.{i}.ffn_down.weight", n_ff, n_embd)
    m.output_norm(n_embd)
    return m.f


def deepseek2(
    *,
    n_layer: int = 2,
    n_embd: int = 256,
    n_ff: int = 512,
    n_head: int = 4,
    kv_lora_rank: int = 128,
    q_lora_rank: int = 0,
    qk_nope_head_dim: int = 64,
    qk_rope_head_dim: int = 32,
    v_head_dim: int = 64,
    n_expert: int = 8,
    n_expert_used: int = 2,
    n_expert_shared: int = 1,
    n_ff_exp: int = 128,
    n_layer_dense_lead: int = 1,
    n_vocab: int = 64,
    wtype: str = "f16",
    seed: int = 0,
    context_length: int = 4096,
    mla: bool = True,
    expert_groups: tuple[int, int] = (0, 0),
    probs_bias: bool = False,
    gating_func: int = 1,
) -> GGUFFile:
    """deepseek2 with multi-head latent attention in the layout llama.cpp's converter writes now: k_b and v_b
    split, the cache one latent "head" of kv_lora_rank + rope dims (key_length) and kv_lora_rank (value_length),
    the per-head sizes in key_length_mla / value_length_mla. ``mla`` False: the older layout (one attn_kv_b,
    the per-head sizes in key_length / value_length, a K and V cache). ``q_lora_rank`` 0: one q projection (the
    "lite" variants), else q_a/q_b. The first ``n_layer_dense_lead`` layers have a dense FFN, the rest experts
    with shared experts; ``expert_groups`` (count, used) routes within groups as DeepSeek V3 does,
    ``probs_bias`` adds its expert selection bias, ``gating_func`` is llama.cpp's llama_expert_gating_func_type
    (1 softmax, 2 sigmoid) (llama.cpp src/models/deepseek2.cpp)."""
    m = _Model("deepseek2", wtype, seed, n_vocab, context_length)
    k_mla = qk_nope_head_dim + qk_rope_head_dim
    m.key("embedding_length", n_embd)
    m.key("block_count", n_layer)
    m.key("feed_forward_length", n_ff)
    m.key("attention.head_count", n_head)
    if mla:
        m.key("attention.head_count_kv", 1)
        m.key("attention.key_length", kv_lora_rank + qk_rope_head_dim)
        m.key("attention.value_length", kv_lora_rank)
        m.key("attention.key_length_mla", k_mla)
        m.key("attention.value_length_mla", v_head_dim)
    else:
        m.key("attention.head_count_kv", n_head)
        m.key("attention.key_length", k_mla)
        m.key("attention.value_length", v_head_dim)
    if expert_groups[0]:
        m.key("expert_group_count", expert_groups[0])
        m.key("expert_group_used_count", expert_groups[1])
    m.key("attention.layer_norm_rms_epsilon", 1e-6, "f32")
    m.key("attention.q_lora_rank", q_lora_rank)
    m.key("attention.kv_lora_rank", kv_lora_rank)
    m.key("rope.dimension_count", qk_rope_head_dim)
    m.key("leading_dense_block_count", n_layer_dense_lead)
    m.key("expert_count", n_expert)
    m.key("expert_used_count", n_expert_used)
    m.key("expert_shared_count", n_expert_shared)
    m.key("expert_feed_forward_length", n_ff_exp)
    m.key("expert_weights_scale", 1.0, "f32")
    m.key("expert_weights_norm", True, "bool")
    m.key("expert_gating_func", gating_func)
    m.embeddings(n_embd)
    for i in range(n_layer):
        m.norm(f"blk.{i}.attn_norm", n_embd)
        if q_lora_rank:
            m.weight(f"blk.{i}.attn_q_a.weight", n_embd, q_lora_rank)
            m.norm(f"blk.{i}.attn_q_a_norm", q_lora_rank)
            m.weight(f"blk.{i}.attn_q_b.weight", q_lora_rank, n_head * k_mla)
        else:
            m.weight(f"blk.{i}.attn_q.weight", n_embd, n_head * k_mla)
        m.weight(f"blk.{i}.attn_kv_a_mqa.weight", n_embd, kv_lora_rank + qk_rope_head_dim)
        m.norm(f"blk.{i}.attn_kv_a_norm", kv_lora_rank)
        if mla:
            m.weight(f"blk.{i}.attn_k_b.weight", qk_nope_head_dim, kv_lora_rank, n_head)
            m.weight(f"blk.{i}.attn_v_b.weight", kv_lora_rank, v_head_dim, n_head)
        else:
            m.weight(f"blk.{i}.attn_kv_b.weight", kv_lora_rank, n_head * (qk_nope_head_dim + v_head_dim))
        m.weight(f"blk.{i}.attn_output.weight", n_head * v_head_dim, n_embd)
        m.norm(f"blk.{i}.ffn_norm", n_embd)
        if i < n_layer_dense_lead:
            _swiglu(m, i, n_embd, n_ff)
            continue
        m.f32(f"blk.{i}.ffn_gate_inp.weight", n_embd, n_expert)
        if probs_bias:
            m.f32(f"blk.{i}.exp_probs_b.bias", n_expert)
        m.weight(f"blk.{i}.ffn_gate_exps.weight", n_embd, n_ff_exp, n_expert)
        m.weight(f"blk.{i}.ffn_up_exps.weight", n_embd, n_ff_exp, n_expert)
        m.weight(f"blk.{i}.ffn_down_exps.weight", n_ff_exp, n_embd, n_expert)
        m.weight(f"blk.{i}.ffn_gate_shexp.weight", n_embd, n_ff_exp * n_expert_shared)
        m.weight(f"blk.{i}.ffn_up_shexp.weight", n_embd, n_ff_exp * n_expert_shared)
        m.weight(f"blk.{i}.ffn_down_shexp.weight", n_ff_exp * n_expert_shared, n_embd)
    m.output_norm(n_embd)
    return m.f


def mamba(
    *,
    n_layer: int = 2,
    n_embd: int = 128,
    d_state: int = 16,
    d_conv: int = 4,
    dt_rank: int = 8,
    n_vocab: int = 64,
    wtype: str = "f16",
    seed: int = 0,
    context_length: int = 4096,
) -> GGUFFile:
    """mamba (v1): d_inner = 2 * n_embd, the only expansion llama.cpp takes (llama.cpp src/models/mamba.cpp)."""
    m = _Model("mamba", wtype, seed, n_vocab, context_length)
    d_inner = 2 * n_embd
    m.key("embedding_length", n_embd)
    m.key("block_count", n_layer)
    m.key("feed_forward_length", 0)
    m.key("attention.head_count", 0)
    m.key("attention.layer_norm_rms_epsilon", 1e-5, "f32")
    m.key("ssm.conv_kernel", d_conv)
    m.key("ssm.inner_size", d_inner)
    m.key("ssm.state_size", d_state)
    m.key("ssm.time_step_rank", dt_rank)
    m.embeddings(n_embd)
    for i in range(n_layer):
        b = f"blk.{i}"
        m.norm(f"{b}.attn_norm", n_embd)
        m.weight(f"{b}.ssm_in.weight", n_embd, 2 * d_inner)
        m.f32(f"{b}.ssm_conv1d.weight", d_conv, d_inner, scale=0.2)
        m.f32(f"{b}.ssm_conv1d.bias", d_inner)
        m.weight(f"{b}.ssm_x.weight", d_inner, dt_rank + 2 * d_state)
        m.weight(f"{b}.ssm_dt.weight", dt_rank, d_inner)
        m.f32(f"{b}.ssm_dt.bias", d_inner)
        m.f32(f"{b}.ssm_a", d_state, d_inner, values=-np.tile(np.arange(1, d_state + 1, dtype=np.float32), d_inner))
        m.f32(f"{b}.ssm_d", d_inner, values=np.ones(d_inner))
        m.weight(f"{b}.ssm_out.weight", d_inner, n_embd)
    m.output_norm(n_embd)
    return m.f


def mamba2(
    *,
    n_layer: int = 2,
    n_embd: int = 128,
    d_state: int = 32,
    d_conv: int = 4,
    head_dim: int = 32,
    n_group: int = 2,
    n_vocab: int = 64,
    wtype: str = "f16",
    seed: int = 0,
    context_length: int = 4096,
) -> GGUFFile:
    """mamba2: d_inner = 2 * n_embd in heads of ``head_dim`` (ssm.time_step_rank is the head count), B and C in
    ``n_group`` groups, a grouped RMS norm before the output (llama.cpp src/models/mamba2.cpp). Like llama.cpp's
    converter it writes head_count 0 (llama.cpp takes the SSM head count for the tensors' shapes)."""
    m = _Model("mamba2", wtype, seed, n_vocab, context_length)
    d_inner = 2 * n_embd
    n_head = d_inner // head_dim
    m.key("embedding_length", n_embd)
    m.key("block_count", n_layer)
    m.key("feed_forward_length", 0)
    m.key("attention.head_count", 0)
    m.key("attention.layer_norm_rms_epsilon", 1e-5, "f32")
    m.key("ssm.conv_kernel", d_conv)
    m.key("ssm.inner_size", d_inner)
    m.key("ssm.state_size", d_state)
    m.key("ssm.time_step_rank", n_head)
    m.key("ssm.group_count", n_group)
    m.embeddings(n_embd)
    conv = d_inner + 2 * n_group * d_state
    for i in range(n_layer):
        b = f"blk.{i}"
        m.norm(f"{b}.attn_norm", n_embd)
        m.weight(f"{b}.ssm_in.weight", n_embd, 2 * d_inner + 2 * n_group * d_state + n_head)
        m.f32(f"{b}.ssm_conv1d.weight", d_conv, conv, scale=0.2)
        m.f32(f"{b}.ssm_conv1d.bias", conv)
        m.f32(f"{b}.ssm_dt.bias", n_head)
        m.f32(f"{b}.ssm_a", 1, n_head, values=-np.arange(1, n_head + 1, dtype=np.float32))
        m.f32(f"{b}.ssm_d", 1, n_head, values=np.ones(n_head))
        m.f32(f"{b}.ssm_norm.weight", d_inner // n_group, n_group, values=np.ones(d_inner))
        m.weight(f"{b}.ssm_out.weight", d_inner, n_embd)
    m.output_norm(n_embd)
    return m.f


def _rwkv_keys(m: _Model, n_layer: int, n_embd: int, n_ff: int, head_size: int) -> None:
    """The keys llama.cpp's converter writes for rwkv6/rwkv7 (head_count is read and unused)."""
    if n_embd % head_size:
        raise ValueError(f"n_embd {n_embd} is not a multiple of head_size {head_size}")
    m.key("embedding_length", n_embd)
    m.key("block_count", n_layer)
    m.key("feed_forward_length", n_ff)
    m.key("attention.head_count", 0)
    m.key("attention.layer_norm_epsilon", 1e-5, "f32")
    m.key("wkv.head_size", head_size)


def _rwkv_common(m: _Model, i: int, n_embd: int) -> None:
    if i == 0:
        m.norm("token_embd_norm", n_embd, bias=True)
    m.norm(f"blk.{i}.attn_norm", n_embd, bias=True)
    m.norm(f"blk.{i}.attn_norm_2", n_embd, bias=True)


def rwkv6(
    *,
    n_layer: int = 2,
    n_embd: int = 128,
    n_ff: int = 448,
    head_size: int = 32,
    time_mix_extra_dim: int = 32,
    time_decay_extra_dim: int = 64,
    n_vocab: int = 64,
    wtype: str = "f16",
    seed: int = 0,
    context_length: int = 4096,
) -> GGUFFile:
    """rwkv6 (Finch) in llama.cpp's converter layout, fused lerp weights (llama.cpp src/models/rwkv6.cpp). The
    LoRA matrices stay f32, as llama.cpp's quantizer leaves them."""
    m = _Model("rwkv6", wtype, seed, n_vocab, context_length)
    _rwkv_keys(m, n_layer, n_embd, n_ff, head_size)
    m.key("time_mix_extra_dim", time_mix_extra_dim)
    m.key("time_decay_extra_dim", time_decay_extra_dim)
    m.key("rescale_every_n_layers", 0)
    m.embeddings(n_embd)
    for i in range(n_layer):
        b = f"blk.{i}"
        _rwkv_common(m, i, n_embd)
        m.f32(f"{b}.time_mix_w1.weight", n_embd, time_mix_extra_dim * 5)
        m.f32(f"{b}.time_mix_w2.weight", time_mix_extra_dim, n_embd, 5)
        m.f32(f"{b}.time_mix_lerp_x.weight", n_embd, 1, 1, values=np.full(n_embd, 0.5))
        m.f32(f"{b}.time_mix_lerp_fused.weight", n_embd, 1, 1, 5, values=np.full(5 * n_embd, 0.5))
        m.f32(f"{b}.time_mix_first.weight", head_size, n_embd // head_size, scale=0.3)
        m.f32(f"{b}.time_mix_decay.weight", n_embd, values=np.full(n_embd, -1.0))
        m.f32(f"{b}.time_mix_decay_w1.weight", n_embd, time_decay_extra_dim)
        m.f32(f"{b}.time_mix_decay_w2.weight", time_decay_extra_dim, n_embd)
        for name in ("key", "value", "receptance", "gate"):
            m.weight(f"{b}.time_mix_{name}.weight", n_embd, n_embd)
        m.norm(f"{b}.time_mix_ln", n_embd, bias=True)
        m.weight(f"{b}.time_mix_output.weight", n_embd, n_embd)
        m.f32(f"{b}.channel_mix_lerp_k.weight", n_embd, 1, 1, values=np.full(n_embd, 0.5))
        m.f32(f"{b}.channel_mix_lerp_r.weight", n_embd, 1, 1, values=np.full(n_embd, 0.5))
        m.weight(f"{b}.channel_mix_key.weight", n_embd, n_ff)
        m.weight(f"{b}.channel_mix_value.weight", n_ff, n_embd)
        m.weight(f"{b}.channel_mix_receptance.weight", n_embd, n_embd)
    m.output_norm(n_embd, bias=True)
    return m.f


def rwkv7(
    *,
    n_layer: int = 2,
    n_embd: int = 128,
    n_ff: int = 512,
    head_size: int = 64,
    decay_lora_rank: int = 32,
    iclr_lora_rank: int = 32,
    value_residual_mix_lora_rank: int = 16,
    gate_lora_rank: int = 64,
    n_vocab: int = 64,
    wtype: str = "f16",
    seed: int = 0,
    context_length: int = 4096,
) -> GGUFFile:
    """rwkv7 (Goose) in llama.cpp's converter layout (llama.cpp src/models/rwkv7.cpp); block 0 has value-residual
    LoRA tensors of the ICLR rank, required and unused. ``head_size`` a multiple of 64: llama.cpp's SIMD wkv7
    kernel overruns shorter heads on some CPUs. The LoRA matrices stay f32, as llama.cpp's quantizer leaves them."""
    if head_size % 64:
        raise ValueError(f"head_size {head_size}: a multiple of 64 runs the same on every llama.cpp CPU kernel")
    m = _Model("rwkv7", wtype, seed, n_vocab, context_length)
    _rwkv_keys(m, n_layer, n_embd, n_ff, head_size)
    m.key("attention.decay_lora_rank", decay_lora_rank)
    m.key("attention.iclr_lora_rank", iclr_lora_rank)
    m.key("attention.value_residual_mix_lora_rank", value_residual_mix_lora_rank)
    m.key("attention.gate_lora_rank", gate_lora_rank)
    m.embeddings(n_embd)
    for i in range(n_layer):
        b = f"blk.{i}"
        _rwkv_common(m, i, n_embd)
        v_rank = iclr_lora_rank if i == 0 else value_residual_mix_lora_rank
        for name, rank in (("w", decay_lora_rank), ("a", iclr_lora_rank), ("v", v_rank)):
            m.f32(f"{b}.time_mix_{name}0.weight", n_embd)
            m.f32(f"{b}.time_mix_{name}1.weight", n_embd, rank)
            m.f32(f"{b}.time_mix_{name}2.weight", rank, n_embd)
        m.f32(f"{b}.time_mix_g1.weight", n_embd, gate_lora_rank)
        m.f32(f"{b}.time_mix_g2.weight", gate_lora_rank, n_embd)
        m.f32(f"{b}.time_mix_lerp_fused.weight", n_embd, 1, 1, 6, values=np.full(6 * n_embd, 0.5))
        m.f32(f"{b}.time_mix_k_k.weight", n_embd, values=np.full(n_embd, 0.8))
        m.f32(f"{b}.time_mix_k_a.weight", n_embd, values=np.full(n_embd, 0.8))
        m.f32(f"{b}.time_mix_r_k.weight", n_embd, scale=0.3)
        for name in ("key", "value", "receptance"):
            m.weight(f"{b}.time_mix_{name}.weight", n_embd, n_embd)
        m.norm(f"{b}.time_mix_ln", n_embd, bias=True)
        m.weight(f"{b}.time_mix_output.weight", n_embd, n_embd)
        m.f32(f"{b}.channel_mix_lerp_k.weight", n_embd, 1, 1, values=np.full(n_embd, 0.5))
        m.weight(f"{b}.channel_mix_key.weight", n_embd, n_ff)
        m.weight(f"{b}.channel_mix_value.weight", n_ff, n_embd)
    m.output_norm(n_embd, bias=True)
    return m.f


BUILDERS: dict[str, Callable[..., GGUFFile]] = {
    "llama": llama,
    "qwen2": qwen2,
    "qwen3": qwen3,
    "qwen3moe": qwen3moe,
    "qwen2moe": qwen2moe,
    "gpt-oss": gpt_oss,
    "glm4moe": glm4moe,
    "gemma2": gemma2,
    "gemma3": gemma3,
    "phi3": phi3,
    "deepseek2": deepseek2,
    "mamba": mamba,
    "mamba2": mamba2,
    "rwkv6": rwkv6,
    "rwkv7": rwkv7,
}
