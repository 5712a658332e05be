"""Will it fit? llama.cpp's memory for a model, planned from the GGUF header alone (local, sharded or remote).

``plan(path, n_ctx=..., ...)`` returns a ``Plan``: the model buffers (mapped, repacked, per device), the KV
cache and recurrent state per layer, the compute buffer, and the context llama.cpp actually uses, each as
llama.cpp sizes it (the rules are data in ``schema/memory.json``; the compute buffer is ggml's graph allocator
run over the graph llama.cpp builds, in ``planning.compute``). Totals follow llama.cpp's own memory breakdown
(``llama_get_memory_breakdown``): model + context (KV and recurrent state) + compute; the small logits buffer
(4 bytes per vocabulary entry per sequence) is not in it. With ``n_gpu_layers`` the output layer and the last
layers go to one GPU, as llama.cpp places them; ``n_gpu_layers="auto"`` finds the most that fit in ``gpu_mem``.

Layer: above the file objects (it opens files through ``api.registry``), beside ``convert`` and ``migration``.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from .cache import CacheLayer, kv_cache, recurrent_state
from .context import ContextRequest, PlanError, ResolvedContext, resolve
from .shape import ModelShape
from .weights import INPUT, OUTPUT, WeightBuffers, cpu_features, on_gpu, weight_buffers

__all__ = ["ContextRequest", "ModelShape", "Plan", "PlanError", "plan", "plan_shape"]


@dataclass
class Plan:
    """llama.cpp's buffers for one model and context, in bytes. ``compute_bytes`` is None where the compute
    graph of the architecture is not modelled; ``notes`` say what could not be planned and why."""

    architecture: str
    context: ResolvedContext
    weights: WeightBuffers
    kv_layers: list[CacheLayer]
    recurrent_layers: list[CacheLayer]
    compute_bytes: int | None
    n_gpu_layers: int = 0
    gpu: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    features: tuple[str, ...] = ()

    @property
    def model_bytes(self) -> int:
        return self.weights.total

    @property
    def kv_bytes(self) -> int:
        return sum(layer.nbytes for layer in self.kv_layers)

    @property
    def recurrent_bytes(self) -> int:
        return sum(layer.nbytes for layer in self.recurrent_layers)

    @property
    def total_bytes(self) -> int | None:
        """Everything llama.cpp's memory breakdown counts, or None when the compute buffer is unknown."""
        if self.compute_bytes is None:
            return None
        return self.model_bytes + self.kv_bytes + self.recurrent_bytes + self.compute_bytes

    def to_json(self) -> dict[str, Any]:
        """The plan as JSON-ready data: byte counts as integers (None where unknown)."""
        layer_names = {INPUT: "input", OUTPUT: "output"}
        return {
            "architecture": self.architecture,
            "n_ctx": self.context.n_ctx,
            "context": asdict(self.context),
            "model_bytes": self.model_bytes,
            "kv_bytes": self.kv_bytes,
            "recurrent_bytes": self.recurrent_bytes,
            "compute_bytes": self.compute_bytes,
            "total_bytes": self.total_bytes,
            "model_buffers": dict(self.weights.by_buffer),
            "repacked_tensors": list(self.weights.repacked),
            "model_bytes_by_layer": {layer_names.get(k, str(k)): v for k, v in sorted(self.weights.by_layer.items())},
            "kv_layers": [asdict(layer) for layer in self.kv_layers],
            "recurrent_layers": [asdict(layer) for layer in self.recurrent_layers],
            "n_gpu_layers": self.n_gpu_layers,
            "gpu": self.gpu,
            "cpu_features": list(self.features),
            "notes": self.notes,
        }


def _compute(shape: ModelShape, ctx: ResolvedContext) -> tuple[int | None, str | None]:
    from .compute import compute_bytes

    try:
        return compute_bytes(shape, ctx), None
    except NotImplementedError as e:
        return None, f"the compute buffer is not modelled for {shape.arch!r}: {e}"
    except (TypeError, ValueError, ArithmeticError, LookupError) as e:
        if isinstance(e, PlanError):
            raise
        # an optional key the graph reads (expert gating, scales, flags) of a type or value no converter writes:
        # llama.cpp's get_key refuses such a file, and so does the plan
        raise PlanError(f"{shape.arch}: a key the compute graph reads has a type or value llama.cpp refuses ({e})") from None


def plan_shape(
    shape: ModelShape,
    request: ContextRequest | None = None,
    *,
    features: tuple[str, ...] | frozenset[str] | None = None,
    use_mmap: bool = True,
    n_gpu_layers: int | Literal["auto"] = 0,
    gpu_mem: int | None = None,
) -> Plan:
    """The plan for a model whose shape is known (see ``plan`` for the parameters)."""
    request = request or ContextRequest()
    feats = frozenset(cpu_features() if features is None else features)
    ctx = resolve(shape, request)
    notes = []
    if not shape.known:
        notes.append(
            f"architecture {shape.arch!r} is not in schema/memory.json: its weights are planned, "
            "its KV cache, recurrent state and compute buffer are not"
        )
    compute, why = _compute(shape, ctx) if shape.known else (None, None)
    if why:
        notes.append(why)
    kv, rs = kv_cache(shape, ctx), recurrent_state(shape, ctx)
    if n_gpu_layers == "auto":
        if gpu_mem is None:
            raise PlanError("n_gpu_layers='auto' needs gpu_mem")
        n_gpu_layers = _most_layers(shape, kv, rs, compute, gpu_mem, feats, use_mmap)
    weights = weight_buffers(shape, features=feats, use_mmap=use_mmap, n_gpu_layers=n_gpu_layers)
    gpu = _gpu_share(shape, kv, rs, compute, weights, n_gpu_layers) if n_gpu_layers else {}
    if n_gpu_layers:
        notes.append(
            "GPU sizes follow the CPU's rules (tensor sizes padded to 32 bytes; the GPU's compute buffer taken "
            "as the CPU's): a GPU backend may pad more; only CPU sizes are checked against llama.cpp"
        )
    return Plan(shape.arch, ctx, weights, kv, rs, compute, n_gpu_layers, gpu, notes, tuple(sorted(feats)))


def _gpu_share(shape, kv, rs, compute, weights: WeightBuffers, n_gpu_layers: int) -> dict[str, int]:
    """The GPU's part: offloaded weights, the KV cache and state of offloaded layers, and a compute buffer."""
    offloaded = [layer.layer for layer in kv + rs if on_gpu(layer.layer, shape.n_layer, n_gpu_layers)]
    cache = sum(layer.nbytes for layer in kv + rs if layer.layer in offloaded)
    out = {"model_bytes": weights.gpu, "cache_bytes": cache, "compute_bytes": compute or 0}
    out["total_bytes"] = sum(out.values())
    return out


def _most_layers(shape, kv, rs, compute, gpu_mem: int, feats, use_mmap: bool) -> int:
    """The largest n_gpu_layers (0 to n_layer + 1) whose GPU share fits in ``gpu_mem`` bytes."""
    best = 0
    for n in range(1, shape.n_layer + 2):
        weights = weight_buffers(shape, features=feats, use_mmap=use_mmap, n_gpu_layers=n)
        if _gpu_share(shape, kv, rs, compute, weights, n)["total_bytes"] > gpu_mem:
            break
        best = n
    return best


def plan(
    source: str | os.PathLike[str] | Any,
    *,
    n_ctx: int = 0,
    n_batch: int = 0,
    n_ubatch: int = 0,
    n_seq_max: int = 1,
    type_k: str = "f16",
    type_v: str = "f16",
    flash_attn: Literal["auto", "on", "off"] = "auto",
    kv_unified: bool = False,
    swa_full: bool = False,
    use_mmap: bool = True,
    n_gpu_layers: int | Literal["auto"] = 0,
    gpu_mem: int | None = None,
    features: tuple[str, ...] | frozenset[str] | None = None,
) -> Plan:
    """llama.cpp's memory for the GGUF model at ``source`` (a path, the first shard of a split set, a URL, or an
    opened ``GGUFFile``), with llama.cpp's context parameters (0: its defaults; ``n_ctx`` 0 is the training
    context). ``features`` are the CPU's ('avx2', 'avx512'; default: this machine's), which decide the weights
    llama.cpp repacks."""
    request = ContextRequest(n_ctx, n_batch, n_ubatch, n_seq_max, type_k, type_v, flash_attn, kv_unified, swa_full)
    if hasattr(source, "metadata") and hasattr(source, "tensors"):
        shape = ModelShape.of(source)
    else:
        from ..api.registry import load

        f = load(source, format="gguf", strict=False)
        try:
            shape = ModelShape.of(f)
        finally:
            f.close()
    return plan_shape(shape, request, features=features, use_mmap=use_mmap, n_gpu_layers=n_gpu_layers, gpu_mem=gpu_mem)
