"""A model's shape as llama.cpp reads it from the GGUF header: the hyper-parameters that size its buffers.

``ModelShape.of(f)`` reads the ``{arch}.*`` keys the way ``llama_model_base::load_hparams`` and the
architecture's ``load_arch_hparams`` do (llama.cpp src/llama-model.cpp, src/models/<arch>.cpp): scalars or
per-layer arrays for head counts and feed-forward sizes, head sizes defaulting to ``n_embd / n_head``, the
sliding-window pattern, MLA and recurrent sizes. Architecture facts (which memory, which window rule) come
from ``schema/memory.json``. Tensors are kept as (name, type, shape, file index, absolute offset, bytes): the
weights plan needs where each one lies in its file.
"""

from __future__ import annotations

import reprlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache, cached_property
from typing import Any

import numpy as np

from ..core import rules
from ..core.table_records import MemoryTable
from ..core.tables import load_table
from ..errors import PlanError

__all__ = ["KEYS", "ModelShape", "TensorSpan", "architecture", "memory_table", "refused", "shown"]


@cache
def memory_table() -> MemoryTable:
    """``schema/memory.json``: llama.cpp's sizing rules."""
    return load_table("memory")


def architecture(arch: str) -> Mapping[str, Any] | None:
    """The entry of ``arch`` in ``schema/memory.json``, or None for an architecture it does not describe (the
    table's own ``source`` note, or any other name that is not an entry, included)."""
    entry = memory_table().architectures.get(arch) if isinstance(arch, str) else None
    return entry if isinstance(entry, Mapping) else None


def shown(value: object) -> str:
    """``value`` for a message, short whatever it is: an integer past 30 digits by its size (``str`` of a huge
    integer is quadratic, and refused past 4300 digits), anything else by a bounded ``reprlib`` form."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool) and abs(int(value)).bit_length() > 99:
        return f"an integer of {abs(int(value)).bit_length()} bits"
    return reprlib.repr(value)


def refused(key: str, message: str) -> PlanError:
    """The refusal of a model whose ``key`` llama.cpp cannot load (rule ``plan.model``, the key as its path)."""
    return PlanError(rules.PLAN_MODEL.id, f"{message}: llama.cpp refuses the model", path=key)


#: Every ``{arch}.`` key the plan reads and how llama.cpp reads it (src/llama-model-loader.cpp get_key /
#: get_key_or_arr, src/models/<arch>.cpp): ``uint`` a uint32; ``layers`` a uint32 or an array of one per layer;
#: ``float`` a float32 (any value, NaN included, as llama.cpp stores it); ``bool`` a bool; ``pattern`` a uint32
#: period or an array of one bool per layer; ``array`` an array (its presence is what the plan reads). Each key
#: present is checked once, when the shape is read, so that the graphs and caches read checked values only.
KEYS: dict[str, str] = {
    "block_count": "uint",
    "embedding_length": "uint",
    "context_length": "uint",
    "vocab_size": "uint",
    "feed_forward_length": "layers",
    "attention.head_count": "layers",
    "attention.head_count_kv": "layers",
    "attention.key_length": "uint",
    "attention.value_length": "uint",
    "attention.key_length_swa": "uint",
    "attention.value_length_swa": "uint",
    "attention.key_length_mla": "uint",
    "attention.value_length_mla": "uint",
    "attention.kv_lora_rank": "uint",
    "attention.q_lora_rank": "uint",
    "attention.sliding_window": "uint",
    "attention.sliding_window_pattern": "pattern",
    "attention.temperature_scale": "float",
    "rope.dimension_count": "uint",
    "rope.scaling.finetuned": "bool",
    "expert_count": "uint",
    "expert_used_count": "uint",
    "expert_feed_forward_length": "uint",
    "expert_shared_count": "uint",
    "expert_shared_feed_forward_length": "uint",
    "expert_weights_scale": "float",
    "expert_weights_norm": "bool",
    "expert_gating_func": "uint",
    "expert_group_count": "uint",
    "expert_group_used_count": "uint",
    "leading_dense_block_count": "uint",
    "nextn_predict_layers": "uint",
    "deepstack_mapping": "array",
    "embedding_scale": "float",
    "residual_scale": "float",
    "logit_scale": "float",
    "final_logit_softcapping": "float",
    "ssm.conv_kernel": "uint",
    "ssm.inner_size": "uint",
    "ssm.state_size": "uint",
    "ssm.time_step_rank": "uint",
    "ssm.group_count": "uint",
    "ssm.dt_b_c_rms": "bool",
    "shortconv.l_cache": "uint",
    "full_attention_interval": "uint",
    "attention.recurrent_layers": "pattern",
    "wkv.head_size": "uint",
    "token_shift_count": "uint",
    "rescale_every_n_layers": "uint",
}

_ARRAYS = (list, tuple, np.ndarray)


@dataclass(frozen=True)
class TensorSpan:
    """One tensor as the loader sees it: its type name, ggml shape (ne0 first), the file it is in (index of the
    shard), its absolute offset in that file and its size in bytes."""

    name: str
    type: str
    shape: tuple[int, ...]
    file: int
    offset: int
    nbytes: int


def _uint(key: str, value: Any) -> int:
    """A key llama.cpp reads as uint32: an integer (not a bool, not an array) in 0 .. 2**32 - 1."""
    most = int(memory_table().limits["max_value"])
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise refused(key, f"{key} is {type(value).__name__}, not an integer")
    if not 0 <= int(value) <= most:
        raise refused(key, f"{key} = {shown(value)} is outside 0 .. {most}")
    return int(value)


def _check(key: str, kind: str, value: Any, n_layer: int) -> None:
    """Refuse ``value`` of ``key`` unless llama.cpp reads it as ``kind`` (see ``KEYS``)."""
    if kind == "uint":
        _uint(key, value)
    elif kind == "layers":
        _per_layer(key, value, n_layer, 0)
    elif kind == "float":
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
            raise refused(key, f"{key} is {type(value).__name__}, not a number")
        if isinstance(value, (int, np.integer)) and not -(2**128) < int(value) < 2**128:
            raise refused(key, f"{key} is an integer past float32's range")
    elif kind == "bool":
        if not isinstance(value, (bool, np.bool_)):
            raise refused(key, f"{key} is {type(value).__name__}, not a bool")
    elif kind == "pattern":
        if isinstance(value, _ARRAYS):
            if len(value) != n_layer or not all(isinstance(p, (bool, np.bool_, int, np.integer)) for p in value):
                raise refused(key, f"{key} is not {n_layer} flags, one per layer")
        else:
            _uint(key, value)
    elif kind == "array" and not isinstance(value, _ARRAYS):
        raise refused(key, f"{key} is {type(value).__name__}, not an array")


def _per_layer(key: str, value: Any, n_layer: int, default: int) -> tuple[int, ...]:
    """A key that is a scalar or an array of one value per layer (``get_key_or_arr``: an array of another
    length is refused)."""
    if value is None:
        return (default,) * n_layer
    if isinstance(value, _ARRAYS):
        if len(value) != n_layer:
            raise refused(key, f"{key} has {len(value)} values for {n_layer} layers")
        return tuple(_uint(f"{key}[{i}]", v) for i, v in enumerate(value))
    return (_uint(key, value),) * n_layer


@dataclass(frozen=True)
class ModelShape:
    """The hyper-parameters llama.cpp sizes its buffers by. Per-layer tuples have ``n_layer`` entries."""

    arch: str
    n_layer: int
    n_embd: int
    n_vocab: int
    n_ctx_train: int
    n_head: tuple[int, ...]
    n_head_kv: tuple[int, ...]
    n_ff: tuple[int, ...]
    head_k: tuple[int, ...]  # n_embd_head_k per layer (the SWA layers' own size where the file gives one)
    head_v: tuple[int, ...]
    #: the head sizes of the full-attention layers (hparams.n_embd_head_k / _v: key_length, value_length, or
    #: n_embd / n_head), which llama.cpp checks a quantized cache's block against
    n_embd_head_k: int
    n_embd_head_v: int
    n_rot: int
    swa_layers: tuple[bool, ...]
    #: the layers with a KV cache: all of an attention model's, none of a recurrent model's, the ones the
    #: architecture's layer rule picks in a hybrid (``recurrent_layers`` in schema/memory.json)
    attention_layers: tuple[bool, ...]
    #: the layers with a recurrent state: all of a recurrent model's, none of an attention model's, the recurrent
    #: layers of a hybrid
    recurrent_layers: tuple[bool, ...]
    n_swa: int
    mla: bool  # DeepSeek's multi-head latent attention: the cache holds K only
    n_lora_kv: int
    n_lora_q: int
    head_k_mla: int
    head_v_mla: int
    n_expert: int
    n_expert_used: int
    n_ff_exp: int
    n_expert_shared: int
    n_ff_shexp: int
    n_layer_dense_lead: int
    ssm_d_conv: int
    ssm_d_inner: int
    ssm_d_state: int
    ssm_dt_rank: int
    ssm_n_group: int
    shortconv_l_cache: int  # LFM2's short-convolution window
    wkv_head_size: int
    token_shift_count: int
    rwkv_lora: Mapping[str, int]  # RWKV's LoRA ranks (time_decay, decay, iclr, value_residual_mix, gate ...)
    tensors: tuple[TensorSpan, ...]
    metadata: Mapping[str, Any] = field(repr=False)

    @property
    def known(self) -> bool:
        """Whether ``schema/memory.json`` describes this architecture (its KV cache or state can be planned)."""
        return architecture(self.arch) is not None

    @property
    def memory(self) -> str | None:
        """'kv', 'recurrent', 'hybrid' (attention and recurrent layers), or None for an architecture the table does
        not describe."""
        entry = architecture(self.arch)
        return entry["memory"] if entry else None

    @property
    def n_layer_cached(self) -> int:
        """The layers with a KV cache: the next-token-prediction blocks at the end (glm4moe's
        ``nextn_predict_layers``) have none, as llama.cpp's ``n_layer()`` leaves them out (src/llama-hparams.cpp)."""
        return self.n_layer - self.key_int("nextn_predict_layers")

    def key_int(self, name: str) -> int:
        """The checked uint32 key ``{arch}.name`` (0 when absent)."""
        return int(self.metadata.get(f"{self.arch}.{name}", 0) or 0)

    def key_float(self, name: str) -> float:
        """The checked float32 key ``{arch}.name`` (0.0 when absent)."""
        return float(self.metadata.get(f"{self.arch}.{name}", 0.0) or 0.0)

    def n_embd_k_gqa(self, il: int) -> int:
        return self.head_k[il] * self.n_head_kv[il]

    def n_embd_v_gqa(self, il: int) -> int:
        return self.head_v[il] * self.n_head_kv[il]

    @property
    def n_embd_r(self) -> int:
        """Values per cell of the recurrent 'r' state (token shifts, or Mamba's convolution state)."""
        if self.wkv_head_size:
            return self.token_shift_count * self.n_embd
        if self.shortconv_l_cache:
            return self.n_embd * (self.shortconv_l_cache - 1)
        return max(self.ssm_d_conv - 1, 0) * (self.ssm_d_inner + 2 * self.ssm_n_group * self.ssm_d_state)

    @property
    def n_embd_s(self) -> int:
        """Values per cell of the recurrent 's' state (the WKV state, or Mamba's SSM state)."""
        if self.wkv_head_size:
            return self.n_embd * self.wkv_head_size
        return self.ssm_d_state * self.ssm_d_inner

    @cached_property
    def _by_name(self) -> dict[str, TensorSpan]:
        return {t.name: t for t in self.tensors}

    def tensor(self, name: str) -> TensorSpan | None:
        """The tensor called ``name``, or None (a dictionary lookup: headers with many tensors are normal input)."""
        return self._by_name.get(name)

    # -- reading ------------------------------------------------------------------------------------------
    @classmethod
    def of(cls, f: Any) -> ModelShape:
        """The shape of an opened GGUF model (a ``GGUFFile`` or a ``ShardedGGUF``; local or remote)."""
        md = f.metadata
        arch = str(md.get("general.architecture", ""))
        return cls.from_metadata(dict(md.items()) if hasattr(md, "items") else dict(md), _spans(f), arch)

    @classmethod
    def from_metadata(cls, md: Mapping[str, Any], tensors: Sequence[TensorSpan], arch: str) -> ModelShape:
        def key(name: str, default: Any = None) -> Any:
            return md.get(f"{arch}.{name}", default)

        def uint(name: str, default: int = 0) -> int:
            value = key(name, default)
            return default if value is None else _uint(f"{arch}.{name}", value)

        def layers(name: str) -> tuple[int, ...]:
            return _per_layer(f"{arch}.{name}", key(name), n_layer, 0)

        entry = architecture(arch) or {}
        limits = memory_table().limits
        n_layer = uint("block_count")
        if n_layer > int(limits["max_layers"]):
            raise refused(f"{arch}.block_count", f"{arch}.block_count = {n_layer} is more than llama.cpp's {limits['max_layers']} layers")
        for name, kind in KEYS.items():
            if key(name) is not None:
                _check(f"{arch}.{name}", kind, key(name), n_layer)
        n_nextn = uint("nextn_predict_layers")
        if n_nextn and n_nextn >= n_layer:
            raise refused(f"{arch}.nextn_predict_layers", f"{arch}.nextn_predict_layers = {n_nextn} is not less than the {n_layer} layers")
        n_embd = uint("embedding_length")
        n_head = layers("attention.head_count")
        n_head_kv = layers("attention.head_count_kv") if key("attention.head_count_kv") is not None else n_head
        n_ff = layers("feed_forward_length")
        h0 = n_head[0] if n_head else 0
        head_k_full = uint("attention.key_length", n_embd // h0 if h0 else 0)
        head_v_full = uint("attention.value_length", n_embd // h0 if h0 else 0)
        head_k_swa = uint("attention.key_length_swa", head_k_full)
        head_v_swa = uint("attention.value_length_swa", head_v_full)

        attention_layers, recurrent_layers = _cache_layers(entry, key, n_layer, n_head_kv, n_ff, arch)
        swa_layers, n_swa = _swa(entry.get("swa"), key, n_layer, attention_layers)
        head_k = tuple(head_k_swa if s else head_k_full for s in swa_layers)
        head_v = tuple(head_v_swa if s else head_v_full for s in swa_layers)

        tokens = md.get("tokenizer.ggml.tokens")
        n_vocab = uint("vocab_size", len(tokens) if isinstance(tokens, (list, tuple)) else 0)
        if not n_vocab:
            embd = next((t for t in tensors if t.name == "token_embd.weight"), None)  # once per model
            n_vocab = embd.shape[1] if embd and len(embd.shape) > 1 else 0
        head_k_mla, head_v_mla = uint("attention.key_length_mla"), uint("attention.value_length_mla")
        lora = {
            k.split(".")[-2]: _uint(k, v)
            for k, v in md.items()
            if isinstance(k, str) and k.startswith(f"{arch}.") and k.endswith("lora_rank")
        }
        n_expert = uint("expert_count")
        if n_expert > int(limits["max_experts"]):
            raise refused(
                f"{arch}.expert_count", f"{arch}.expert_count = {n_expert} is more than llama.cpp's {limits['max_experts']} experts"
            )
        return cls(
            arch=arch,
            n_layer=n_layer,
            n_embd=n_embd,
            n_vocab=n_vocab,
            n_ctx_train=uint("context_length"),
            n_head=n_head,
            n_head_kv=n_head_kv,
            n_ff=n_ff,
            head_k=head_k,
            head_v=head_v,
            n_embd_head_k=head_k_full,
            n_embd_head_v=head_v_full,
            n_rot=uint("rope.dimension_count", head_k_full),
            swa_layers=swa_layers,
            attention_layers=attention_layers,
            recurrent_layers=recurrent_layers,
            n_swa=n_swa,
            mla=bool(entry.get("mla")) and head_k_mla != 0 and head_v_mla != 0,
            n_lora_kv=uint("attention.kv_lora_rank"),
            n_lora_q=uint("attention.q_lora_rank"),
            head_k_mla=head_k_mla,
            head_v_mla=head_v_mla,
            n_expert=n_expert,
            n_expert_used=uint("expert_used_count"),
            n_ff_exp=uint("expert_feed_forward_length"),
            n_expert_shared=uint("expert_shared_count"),
            n_ff_shexp=uint("expert_shared_feed_forward_length"),
            n_layer_dense_lead=uint("leading_dense_block_count"),
            ssm_d_conv=uint("ssm.conv_kernel"),
            ssm_d_inner=uint("ssm.inner_size"),
            ssm_d_state=uint("ssm.state_size"),
            ssm_dt_rank=uint("ssm.time_step_rank"),
            ssm_n_group=uint("ssm.group_count"),
            shortconv_l_cache=uint("shortconv.l_cache"),
            wkv_head_size=uint("wkv.head_size"),
            token_shift_count=uint("token_shift_count", int(entry.get("token_shift_count", 0))),
            rwkv_lora=lora,
            tensors=tuple(tensors),
            metadata=md,
        )


def _swa(rule: Mapping[str, Any] | None, key: Any, n_layer: int, attention_layers: tuple[bool, ...]) -> tuple[tuple[bool, ...], int]:
    """Which layers use the sliding window, and its size (``set_swa_pattern`` in src/llama-hparams.cpp; with
    ``layers: attention``, every attention layer of a hybrid, as lfm2's load_arch_hparams sets it)."""
    none = ((False,) * n_layer, 0)
    if not rule or rule.get("disabled"):
        return none
    found = key("attention.sliding_window")
    window = rule.get("window") if found is None else _uint("attention.sliding_window", found)
    if not window:
        return none
    if rule.get("layers") == "attention":
        return attention_layers, window
    pattern = key("attention.sliding_window_pattern", rule.get("period"))
    if isinstance(pattern, _ARRAYS):  # one flag per layer (checked against KEYS)
        return tuple(bool(p) for p in pattern), window
    period = _uint("attention.sliding_window_pattern", pattern)
    return tuple(period == 0 or il % period < period - 1 for il in range(n_layer)), window


def _cache_layers(
    entry: Mapping[str, Any], key: Any, n_layer: int, n_head_kv: tuple[int, ...], n_ff: tuple[int, ...], arch: str
) -> tuple[tuple[bool, ...], tuple[bool, ...]]:
    """Which layers have a KV cache and which a recurrent state. Every layer of an attention model has the first,
    of a recurrent model the second; a hybrid's recurrent layers (``hparams.is_recr``) follow the architecture's
    rule (schema/memory.json ``recurrent_layers``): ``no_kv_heads``, the layers whose ``attention.head_count_kv``
    is 0; ``no_kv_heads_no_ffn``, those whose head_count_kv and feed_forward_length are both 0; ``all``;
    ``interval``, the ``attention.recurrent_layers`` flags or else all but every ``full_attention_interval``-th
    layer. Its ``caches`` (llama_memory_hybrid's layer filters, src/llama-model.cpp create_memory): ``split``,
    the KV cache over the other layers and the state over the recurrent ones; ``both``, both over every layer;
    ``mixers``, like split but only over the layers without a feed-forward (the others only run one)."""
    memory = entry.get("memory")
    if memory != "hybrid":
        return (memory == "kv",) * n_layer, (memory == "recurrent",) * n_layer
    rule = entry.get("recurrent_layers", {})
    kind = rule.get("rule")
    if kind == "no_kv_heads":
        recurrent = tuple(h == 0 for h in n_head_kv)
    elif kind == "no_kv_heads_no_ffn":
        recurrent = tuple(h == 0 and f == 0 for h, f in zip(n_head_kv, n_ff, strict=True))
    elif kind == "all":
        recurrent = (True,) * n_layer
    elif kind == "interval":
        recurrent = _interval_layers(rule, key, n_layer, arch)
    else:
        raise ValueError(f"schema/memory.json: {arch} is hybrid without a known recurrent_layers rule")
    caches = rule.get("caches", "split")
    if caches == "both":
        return (True,) * n_layer, (True,) * n_layer
    if caches == "mixers":
        return tuple(not r and f == 0 for r, f in zip(recurrent, n_ff, strict=True)), tuple(
            r and f == 0 for r, f in zip(recurrent, n_ff, strict=True)
        )
    return tuple(not r for r in recurrent), recurrent


def _interval_layers(rule: Mapping[str, Any], key: Any, n_layer: int, arch: str) -> tuple[bool, ...]:
    """qwen3next's recurrent layers: the ``attention.recurrent_layers`` flags (one value: every layer), else all
    but every ``full_attention_interval``-th of the main layers."""
    flags = key("attention.recurrent_layers")
    if isinstance(flags, _ARRAYS):  # n_layer flags (checked against KEYS)
        return tuple(bool(f) for f in flags)
    if flags is not None:  # get_key_or_arr: one value for every layer
        return (bool(flags),) * n_layer
    name = f"{arch}.full_attention_interval"
    found = key("full_attention_interval")
    interval = int(rule["default_interval"]) if found is None else _uint(name, found)
    if interval == 0:  # llama.cpp takes (il + 1) % 0: a division by zero
        raise refused(name, f"{name} is 0")
    n_main = n_layer - int(key("nextn_predict_layers") or 0)  # the prediction blocks are not recurrent
    return tuple(il < n_main and (il + 1) % interval != 0 for il in range(n_layer))


def _spans(f: Any) -> list[TensorSpan]:
    """Every tensor with the file it lies in and its absolute offset there (shards in order)."""
    from ..formats.gguf.offsets import ggml_nbytes

    out = []
    for index, part in enumerate(getattr(f, "shards", None) or [f]):
        base = part.data_offset
        for name in part.tensors:
            t = part.tensors[name]
            type_name = t.type.name
            if t.type.status != "active":
                raise refused(str(name), f"tensor {name!r} has type {type_name}, which has no size")
            shape = tuple(int(d) for d in t.shape)
            out.append(TensorSpan(name, type_name, shape, index, base + int(t.offset or 0), ggml_nbytes(shape, type_name)))
    return out
