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
With llama.cpp's default model parameters (``load_mtp`` false), which the plan follows, their tensors are
created skipped (``TENSOR_SKIP``: in the file's mapped span, no buffer of their own), they get no KV cache
(``n_layer()`` leaves them out) and no graph. llama-server's ``--spec-type draft-mtp`` loads them instead and
makes a second context over the same model for them (``LLAMA_CONTEXT_TYPE_MTP``: a KV cache of those layers
only, at the main context's cells, and a compute buffer of its own graph); the plan does not model that
context, and ``mtp_note`` says so.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import Any

from ..core import rules
from ..errors import PlanError
from .context import CACHE_TYPES, ContextRequest
from .shape import ModelShape, shown

__all__ = ["DraftModel", "DraftOptions", "draft_request", "mtp_note", "read_draft"]


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


def draft_request(main: ContextRequest, n_ctx: int, options: DraftOptions) -> ContextRequest:
    """The draft context's parameters, from the main context's (``n_ctx``: its resolved cells)."""
    return replace(main, n_ctx=n_ctx, type_k=options.type_k, type_v=options.type_v, n_outputs_max=max(1, main.n_seq_max))


def mtp_note(shape: ModelShape) -> str | None:
    """What llama.cpp does with the model's next-token-prediction layers, when it has some."""
    n = shape.n_layer - shape.n_layer_cached
    if n <= 0:
        return None
    return (
        f"the last {n} layer(s) are next-token-prediction (MTP) heads: planned as llama.cpp loads them by default (tensors "
        "skipped, mapped with the file but in no buffer of their own; no KV cache, no graph); llama-server's --spec-type "
        "draft-mtp loads them and adds a context for them (their KV cache at the main context's cells and its own compute "
        "buffer), which is not planned"
    )
