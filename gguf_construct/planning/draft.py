"""A draft model for speculative decoding (``--draft FILE``, llama-server's ``--model-draft``): a second model
with its own context, whose weights, KV cache and compute buffer add to the devices' memory.

llama-server loads the draft as a model of its own and makes its context from the main one's parameters
(common/speculative.cpp ``common_base_params_to_speculative`` and ``common_speculative_init_result``): the main
context's cells (``llama_n_ctx``, all sequences'), its sequences, batch sizes, flash attention, unified and
sliding-window settings; one output per sequence (``n_outputs_max`` = the sequences); its own K and V cache types
(``--cache-type-k-draft``, ``--cache-type-v-draft``, default f16) and offload (``--n-gpu-layers-draft``: its
default ``auto`` is llama.cpp's own fit; the plan offloads as many draft layers as the main model's unless told).
The draft has no context size of its own in the llama.cpp followed. The plan makes the draft's plan with those
parameters, over the same devices. llama-server does not refuse a draft whose vocabulary differs from the main
model's (it translates tokens through text), and neither does the plan.

Next-token-prediction heads (MTP: ``{arch}.nextn_predict_layers``, glm4moe's last blocks) are not a draft model.
With llama.cpp's default model parameters (``load_mtp`` false) their tensors are created skipped (``TENSOR_SKIP``:
in the file's mapped span, no buffer of their own), they get no KV cache (``n_layer()`` leaves them out) and no
graph; ``mtp_note`` says so. llama-server's ``--spec-type draft-mtp`` (``plan(..., mtp=True)``) loads them
(``load_mtp``) and makes a second context over the same model for them (``LLAMA_CONTEXT_TYPE_MTP``), with the
draft context's parameters: a KV cache of the MTP layers only and the compute buffer of the MTP graph
(``compute.mtp``); ``mtp_plan`` plans the loaded tensors, that cache and that buffer, on the CPU.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from typing import Any

from ..core import rules
from ..errors import PlanError, ShapeError
from ..formats.gguf.offsets import ggml_nbytes
from .cache import aligned
from .context import CACHE_TYPES, ContextRequest, ResolvedContext
from .shape import ModelShape, refused, shown

__all__ = ["DraftModel", "DraftOptions", "draft_request", "mtp_note", "mtp_plan", "mtp_request", "read_draft"]


@dataclass(frozen=True)
class DraftOptions:
    """llama-server's draft options: the layers offloaded (None: as many as the main model's) and the cache types."""

    n_gpu_layers: int | None = None
    type_k: str = "f16"
    type_v: str = "f16"

    def check(self) -> None:
        """Refuse options llama.cpp's parameters cannot hold."""
        layers = self.n_gpu_layers
        if layers is not None and (isinstance(layers, bool) or not isinstance(layers, int) or not 0 <= layers < 2**31):
            raise _request(f"the draft's n_gpu_layers is {shown(layers)}, not a whole number below 2**31", "draft_gpu_layers")
        for name in ("type_k", "type_v"):
            if getattr(self, name) not in CACHE_TYPES:
                raise _request(f"the draft's {name} {shown(getattr(self, name))} is not one of {', '.join(CACHE_TYPES)}", f"draft_{name}")


@dataclass(frozen=True)
class DraftModel:
    """The draft model's shape (read once, planned at every context the main plan tries) and its options."""

    source: str
    shape: ModelShape
    options: DraftOptions


def _request(message: str, field: str) -> PlanError:
    return PlanError(rules.PLAN_REQUEST.id, message, path=field)


def read_draft(source: str | os.PathLike[str] | Any, options: DraftOptions | None = None) -> DraftModel:
    """The draft model at ``source`` (a path, the first shard, a URL or an opened ``GGUFFile``), header only."""
    from ..api.registry import load

    options = DraftOptions() if options is None else options
    if not isinstance(options, DraftOptions):
        raise _request(f"draft_options is {type(options).__name__}, not DraftOptions", "draft_options")
    options.check()
    _check_source(source, "draft")
    name = str(getattr(source, "path", source))[:200]
    if hasattr(source, "metadata") and hasattr(source, "tensors"):
        return DraftModel(name, ModelShape.of(source), options)
    f = load(source, format="gguf", strict=False)
    try:
        return DraftModel(name, ModelShape.of(f), options)
    finally:
        f.close()


def _check_source(source: object, field: str) -> None:
    """Refuse a source that is no path, URL or opened file (``load`` would fail on it with a TypeError)."""
    if not isinstance(source, (str, os.PathLike)) and not (hasattr(source, "metadata") and hasattr(source, "tensors")):
        raise _request(f"{field} is {type(source).__name__}, not a path, a URL or an opened GGUF file", field)


def mtp_request(mtp: object, draft: DraftModel | None, options: DraftOptions | None) -> DraftOptions | None:
    """``plan``'s ``mtp`` as the MTP context's options (the draft options' cache types), or None; refused with a
    draft model (llama-server would load the draft as the MTP model) or when not a bool."""
    if not isinstance(mtp, bool):
        raise _request(f"mtp is {type(mtp).__name__}, not a bool", "mtp")
    if not mtp:
        return None
    if draft is not None:
        raise _request("MTP speculation drafts with the model's own heads: plan it without a draft model", "mtp")
    options = DraftOptions() if options is None else options
    if not isinstance(options, DraftOptions):
        raise _request(f"draft_options is {type(options).__name__}, not DraftOptions", "draft_options")
    options.check()
    return options


def draft_request(main: ContextRequest, n_ctx: int, options: DraftOptions) -> ContextRequest:
    """The draft context's parameters, from the main context's (``n_ctx``: its resolved cells)."""
    return replace(main, n_ctx=n_ctx, type_k=options.type_k, type_v=options.type_v, n_outputs_max=max(1, main.n_seq_max))


def mtp_note(shape: ModelShape) -> str | None:
    """What llama.cpp does with the model's next-token-prediction layers by default, when it has some."""
    n = shape.n_layer - shape.n_layer_cached
    if n <= 0:
        return None
    return (
        f"the last {n} layer(s) are next-token-prediction (MTP) heads: planned as llama.cpp loads them by default (tensors "
        "skipped, mapped with the file but in no buffer of their own; no KV cache, no graph); with llama-server's "
        "--spec-type draft-mtp (plan --mtp) they are loaded and get a context of their own"
    )


def _mtp_layers(shape: ModelShape) -> range:
    return range(shape.n_layer_cached, shape.n_layer)


def _mtp_cache(shape: ModelShape, ctx: ResolvedContext) -> int:
    """The MTP context's KV cache: the MTP layers only (llama_kv_cache filters the others out)."""
    layers = _mtp_layers(shape)
    v_max = max(shape.n_embd_v_gqa(il) for il in layers)
    total = 0
    for il in layers:
        cells = ctx.n_ctx_swa if shape.swa_layers[il] else ctx.n_ctx_seq
        total += aligned(ggml_nbytes((shape.n_embd_k_gqa(il), cells, ctx.n_stream), ctx.type_k))
        width = v_max if not ctx.flash_attn else shape.n_embd_v_gqa(il)
        total += aligned(ggml_nbytes((width, cells, ctx.n_stream), ctx.type_v))
    return total


def mtp_plan(
    shape: ModelShape,
    main: ContextRequest,
    n_ctx: int,
    options: DraftOptions,
    *,
    features: frozenset[str],
    use_mmap: bool,
    checkpoint: Callable[[], None] = lambda: None,
) -> dict[str, Any]:
    """llama-server's MTP speculation on the CPU: the MTP layers' tensors loaded with the model (the bytes they
    add to its buffers), and the MTP context (made as a draft's, ``n_ctx`` the main context's cells) with its
    KV cache and compute buffer."""
    from .compute.mtp import MTP_ARCHITECTURES, mtp_compute_bytes
    from .context import resolve
    from .weights import weight_buffers

    if shape.n_layer_cached >= shape.n_layer:
        raise _request(f"the model has no next-token-prediction layers ({shape.arch}.nextn_predict_layers): MTP needs them", "mtp")
    loaded = replace(shape, metadata={**shape.metadata, f"{shape.arch}.nextn_predict_layers": 0})
    with_heads = weight_buffers(loaded, features=features, use_mmap=use_mmap)
    without = weight_buffers(shape, features=features, use_mmap=use_mmap)
    added = {k: v - without.by_buffer.get(k, 0) for k, v in with_heads.by_buffer.items() if v != without.by_buffer.get(k, 0)}
    ctx = resolve(shape, draft_request(main, n_ctx, options))
    checkpoint()
    kv = _mtp_cache(shape, ctx) if shape.memory == "kv" else 0
    compute: int | None = None
    notes = []
    if shape.arch in MTP_ARCHITECTURES:
        try:
            compute = mtp_compute_bytes(shape, ctx, checkpoint)
        except ShapeError as e:  # an op ggml refuses, a tensor the graph needs missing
            raise refused(f"{shape.arch}.nextn_predict_layers", f"{shape.arch}: the MTP graph cannot be built ({e.message})") from None
        except (ValueError, LookupError, ZeroDivisionError) as e:  # llama.cpp asserts (one MTP block, experts)
            raise refused(f"{shape.arch}.nextn_predict_layers", f"{shape.arch}: the MTP graph cannot be built ({e})") from None
    else:
        notes.append(f"the MTP graph of {shape.arch!r} is not modelled: its compute buffer is unknown")
    model = sum(added.values())
    return {
        "kind": "mtp",
        "architecture": shape.arch,
        "n_ctx": ctx.n_ctx,
        "context": asdict(ctx),
        "layers": list(_mtp_layers(shape)),
        "model_bytes": model,
        "model_buffers": added,
        "kv_bytes": kv,
        "recurrent_bytes": 0,
        "compute_bytes": compute,
        "total_bytes": None if compute is None else model + kv + compute,
        "gpu": {},
        "devices": [],
        "notes": notes,
    }
