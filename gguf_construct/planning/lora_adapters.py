"""LoRA adapters (``--lora FILE``): their buffers as ``llama_adapter_lora_init`` allocates them, and the checks
it makes of an adapter against its base model (llama.cpp src/llama-adapter.cpp).

An adapter is a GGUF file with ``general.type`` ``adapter``, ``adapter.type`` ``lora``, the base model's
``general.architecture`` and, per adapted weight ``W``, a pair of tensors ``W.lora_a`` and ``W.lora_b`` (an aLoRA
adds ``adapter.alora.invocation_tokens``, an array of uint32). Tensors ending in ``_norm.weight`` are skipped;
any other name is refused. Each pair must be complete, ``W`` must be a tensor the loader created (not a skipped
next-token-prediction block's; a model with tied embeddings has no ``output.weight``: its output layer is the
embeddings' tensor, by name), and the shapes must chain: ``W.ne0 == A.ne0``, ``W.ne1 == B.ne1``,
``A.ne1 == B.ne0`` (for the token embeddings, whose A and B are flipped: ``W.ne0 == B.ne1``, ``W.ne1 == A.ne1``).

The pair is copied into a buffer of the type of the buffer that holds ``W``: the device's when it is offloaded,
``CPU_Mapped`` (an allocated buffer of that type, not a mapping) when ``W`` is memory-mapped, ``CPU`` when ``W``
was loaded into RAM or repacked (the repacked buffer type takes no adapter: llama.cpp falls back to ``CPU``).
One buffer per type holds its tensors, each padded to the CPU's 32-byte alignment. llama.cpp's memory
breakdown (``llama_get_memory_breakdown``) leaves adapters out: the plan lists them apart and adds them to the
totals. An adapter also adds its low-rank products to the compute graph (``compute.lora``).
"""

from __future__ import annotations

import itertools
import math
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..core import rules
from ..errors import PlanError
from .cache import aligned
from .compute.lora import LoraPair
from .shape import ModelShape, TensorSpan, shown
from .shape import _spans as tensor_spans
from .weights import layer_of, on_gpu, repacks

__all__ = [
    "MAX_ADAPTERS",
    "LoraAdapter",
    "adapter_buffers",
    "adapter_refused",
    "buffer_placement",
    "check_against",
    "on_cpu",
    "read_adapter",
    "requested",
]

#: the buffer types of the CPU an adapter's tensors can take (a repacked weight's adapter goes to CPU)
_CPU_TYPES = ("CPU_Mapped", "CPU")
#: the most adapters a plan takes (each is a file opened and a set of products in every graph)
MAX_ADAPTERS = 64


def adapter_refused(source: str, message: str, path: str = "") -> PlanError:
    """The refusal of an adapter llama.cpp's ``llama_adapter_lora_init`` rejects (rule ``plan.model``: the input
    file's fault), naming the adapter."""
    return PlanError(rules.PLAN_MODEL.id, f"LoRA adapter {source}: {message}: llama.cpp refuses the adapter", path=path)


@dataclass(frozen=True)
class LoraAdapter:
    """A LoRA adapter as llama.cpp reads it: its pairs by the adapted weight's name (in llama.cpp's order, by
    name), its alpha, the scale it is applied with, and its aLoRA invocation tokens' count."""

    source: str
    architecture: str
    alpha: float
    scale: float
    pairs: Mapping[str, tuple[TensorSpan, TensorSpan]]
    invocation_tokens: int = 0
    skipped: tuple[str, ...] = field(default=())

    @property
    def kind(self) -> str:
        return "alora" if self.invocation_tokens else "lora"

    def graph_pairs(self) -> dict[str, LoraPair]:
        """The pairs as the compute graph takes them (types and shapes)."""
        return {name: LoraPair(a.type, a.shape, b.type, b.shape) for name, (a, b) in self.pairs.items()}


def _type_of(md: Any, key: str) -> str | None:
    """The GGUF type label of ``key`` (``str``, ``f32``, ``arr[u32]``), None when missing."""
    if key not in md:
        return None
    type_of = getattr(md, "type_of", None)
    if type_of is not None:
        return str(type_of(key))
    value = md[key]  # a plain mapping (an opened file of another kind): its Python type
    return "str" if isinstance(value, str) else "f32" if isinstance(value, float) else type(value).__name__


def _string(md: Any, key: str, source: str) -> str:
    """A string key as llama.cpp's ``get_kv_str`` reads it: missing is empty; another type makes ggml abort."""
    kind = _type_of(md, key)
    if kind is None:
        return ""
    if kind != "str":
        raise adapter_refused(source, f"{key} is of type {kind}, not a string (ggml aborts reading it)", key)
    return str(md[key])


def read_adapter(source: str | os.PathLike[str] | Any, scale: float = 1.0) -> LoraAdapter:
    """The LoRA adapter at ``source`` (a path, a URL or an opened ``GGUFFile``), checked as llama.cpp checks the
    file alone: its type keys, its tensor names, complete pairs, data inside the file. ``scale`` is the scale
    it is applied with (``--lora-scaled``; 0 loads it without applying it)."""
    from ..api.registry import load

    name = str(getattr(source, "path", source))[:200]
    if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not math.isfinite(scale):
        raise PlanError(rules.PLAN_REQUEST.id, f"LoRA scale {shown(scale)} for {name} is not a finite number", path="lora")
    if hasattr(source, "metadata") and hasattr(source, "tensors"):
        return _adapter_of(source, name, float(scale))
    if not isinstance(source, (str, os.PathLike)):
        raise PlanError(
            rules.PLAN_REQUEST.id, f"LoRA source {type(source).__name__} is not a path, a URL or an opened GGUF file", path="lora"
        )
    f = load(source, format="gguf", strict=False)
    try:
        return _adapter_of(f, name, float(scale))
    finally:
        f.close()


def _adapter_of(f: Any, source: str, scale: float) -> LoraAdapter:
    md = f.metadata
    general_type = _string(md, "general.type", source)
    if general_type != "adapter":
        raise adapter_refused(source, f"general.type is {shown(general_type)}, not 'adapter'", "general.type")
    arch = _string(md, "general.architecture", source)
    adapter_type = _string(md, "adapter.type", source)
    if adapter_type != "lora":
        raise adapter_refused(source, f"adapter.type is {shown(adapter_type)}, not 'lora'", "adapter.type")
    alpha_type = _type_of(md, "adapter.lora.alpha")
    if alpha_type not in (None, "f32"):
        raise adapter_refused(source, f"adapter.lora.alpha is of type {alpha_type}, not f32 (ggml aborts reading it)", "adapter.lora.alpha")
    alpha = float(md["adapter.lora.alpha"]) if alpha_type else 0.0
    invocation_type = _type_of(md, "adapter.alora.invocation_tokens")
    if invocation_type not in (None, "arr[u32]"):
        raise adapter_refused(
            source,
            f"adapter.alora.invocation_tokens is of type {invocation_type}, not an array of uint32",
            "adapter.alora.invocation_tokens",
        )
    n_invocation = len(md["adapter.alora.invocation_tokens"]) if invocation_type else 0
    spans = tensor_spans(f)
    halves: dict[str, list[TensorSpan | None]] = {}
    skipped = []
    for t in spans:
        for suffix, index in ((".lora_a", 0), (".lora_b", 1)):
            if t.name.endswith(suffix):
                halves.setdefault(t.name.replace(suffix, ""), [None, None])[index] = t  # llama.cpp's replace_all
                break
        else:
            if not t.name.endswith("_norm.weight"):
                raise adapter_refused(source, f"tensor {t.name!r} has a suffix other than .lora_a, .lora_b or _norm.weight", t.name)
            skipped.append(t.name)
    _check_in_file(f, source)
    pairs: dict[str, tuple[TensorSpan, TensorSpan]] = {}
    for base in sorted(halves, key=lambda s: s.encode()):  # std::map<std::string>: byte order
        a, b = halves[base]
        if a is None or b is None:
            raise adapter_refused(source, f"the pair for {base!r} is missing its {'lora_a' if a is None else 'lora_b'}", base)
        pairs[base] = (a, b)
    return LoraAdapter(source, arch, alpha, scale, pairs, n_invocation, tuple(skipped))


def _check_in_file(f: Any, source: str) -> None:
    """llama.cpp refuses an adapter whose tensor data runs past the end of the file."""
    for name in f.tensors:
        t = f.tensors[name]
        present = t.bytes_present
        if present is not None and present < t.nbytes:
            raise adapter_refused(
                source, f"tensor {name!r} has {present} of its {t.nbytes} bytes in the file (the file is cut short)", name
            )


def _ne(shape: tuple[int, ...], i: int) -> int:
    return shape[i] if i < len(shape) else 1


def _model_tensor(shape: ModelShape, name: str) -> TensorSpan | None:
    """The model's tensor ``name`` as llama.cpp's ``get_tensor`` finds it among the tensors it created: not the
    skipped next-token-prediction blocks; a missing ``output.weight`` is none (the output layer of tied
    embeddings is created under the embeddings' name, ``token_embd.weight``)."""
    t = shape.tensor(name)
    if t is None:
        return None
    layer = layer_of(name, shape.n_layer)
    return None if shape.n_layer_cached <= layer < shape.n_layer else t


def check_against(adapter: LoraAdapter, shape: ModelShape) -> None:
    """Refuse an adapter llama.cpp refuses for this model: another architecture, a weight the model does not have,
    shapes that do not chain."""
    if adapter.architecture != shape.arch:
        raise adapter_refused(
            adapter.source, f"its architecture {shown(adapter.architecture)} is not the model's {shown(shape.arch)}", "general.architecture"
        )
    for name, (a, b) in adapter.pairs.items():
        w = _model_tensor(shape, name)
        if w is None:
            raise adapter_refused(adapter.source, f"the model has no tensor {name!r} to adapt (a wrong base model?)", name)
        if name.endswith("token_embd.weight"):
            ok = _ne(w.shape, 0) == _ne(b.shape, 1) and _ne(w.shape, 1) == _ne(a.shape, 1)
        else:
            ok = _ne(w.shape, 0) == _ne(a.shape, 0) and _ne(w.shape, 1) == _ne(b.shape, 1)
        if not ok:
            raise adapter_refused(
                adapter.source,
                f"{name}: A {list(a.shape)} and B {list(b.shape)} do not fit the weight {list(w.shape)} (a wrong base model?)",
                name,
            )
        if not name.endswith("token_embd.weight") and _ne(a.shape, 1) != _ne(b.shape, 0):
            raise adapter_refused(adapter.source, f"{name}: A {list(a.shape)} is not transposed to B {list(b.shape)}", name)


def buffer_placement(
    shape: ModelShape,
    *,
    features: Iterable[str] = (),
    use_mmap: bool = True,
    n_gpu_layers: int = 0,
    device_of: Callable[[str, int], str | None] | None = None,
) -> Callable[[TensorSpan, int], str]:
    """``placement(tensor, layer)``: the buffer type of the model buffer holding a weight, as
    ``weights.weight_buffers`` places it (a device's name, ``GPU``, ``CPU_REPACK``, ``CPU_Mapped`` or ``CPU``)."""
    features = frozenset(features)

    def placement(t: TensorSpan, layer: int) -> str:
        device = device_of(t.name, layer) if device_of is not None else ("GPU" if on_gpu(layer, shape.n_layer, n_gpu_layers) else None)
        if device is not None:
            return device
        if repacks(t, features):
            return "CPU_REPACK"
        return "CPU_Mapped" if use_mmap else "CPU"

    return placement


def adapter_buffers(adapter: LoraAdapter, shape: ModelShape, placement: Callable[[TensorSpan, int], str]) -> dict[str, int]:
    """The adapter's buffers by type: each pair in the buffer type of its weight's buffer (``CPU`` for a
    repacked weight), each tensor padded to 32 bytes."""
    out: dict[str, int] = {}
    for name, (a, b) in adapter.pairs.items():
        w = _model_tensor(shape, name)
        if w is None:  # check_against refuses it first
            raise adapter_refused(adapter.source, f"the model has no tensor {name!r} to adapt", name)
        where = placement(w, layer_of(w.name, shape.n_layer))
        if where == "CPU_REPACK":
            where = "CPU"
        out[where] = out.get(where, 0) + aligned(a.nbytes) + aligned(b.nbytes)
    return out


def on_cpu(buffer: str) -> bool:
    """Whether an adapter buffer of this type is in the CPU's memory."""
    return buffer in _CPU_TYPES


def requested(adapters: Iterable[Any]) -> list[tuple[Any, float]]:
    """``plan``'s ``lora`` list as (source, scale) pairs: each entry a source (scale 1) or a (source, scale)
    pair; refused when it is not a list of those, or holds more than ``MAX_ADAPTERS``."""
    if isinstance(adapters, (str, bytes, os.PathLike)) or not isinstance(adapters, Iterable):
        raise PlanError(rules.PLAN_REQUEST.id, f"lora is {shown(adapters)}, not a list of adapters", path="lora")
    listed = list(itertools.islice(adapters, MAX_ADAPTERS + 1))
    if len(listed) > MAX_ADAPTERS:
        raise PlanError(rules.PLAN_REQUEST.id, f"more than {MAX_ADAPTERS} LoRA adapters", path="lora")
    out = []
    for entry in listed:
        if isinstance(entry, tuple) and len(entry) == 2:
            out.append((entry[0], entry[1]))
        elif isinstance(entry, tuple):
            raise PlanError(rules.PLAN_REQUEST.id, f"LoRA entry {shown(entry)} is not a source or a (source, scale) pair", path="lora")
        else:
            out.append((entry, 1.0))
    return out
