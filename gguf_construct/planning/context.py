"""The context parameters as llama.cpp resolves them (llama.cpp src/llama-context.cpp, llama_context's
constructor): what a user asks for is not what it allocates. ``n_ctx`` is padded to a multiple of 256 (so a
context of 64 becomes 256), each sequence's share is padded again, the batch sizes are clamped, and the
sliding-window cache gets its own size."""

from __future__ import annotations

from dataclasses import dataclass

from .shape import ModelShape, PlanError, memory_table

__all__ = ["ContextRequest", "PlanError", "ResolvedContext", "resolve"]


def _pad(n: int, to: int) -> int:
    return (n + to - 1) // to * to


@dataclass(frozen=True)
class ContextRequest:
    """What the user asks llama.cpp for (``llama_context_params``); 0 means llama.cpp's default."""

    n_ctx: int = 0
    n_batch: int = 0
    n_ubatch: int = 0
    n_seq_max: int = 1
    type_k: str = "f16"
    type_v: str = "f16"
    flash_attn: str = "auto"  # 'auto', 'on' or 'off'
    kv_unified: bool = False
    swa_full: bool = False


@dataclass(frozen=True)
class ResolvedContext:
    """The values llama.cpp computes from a request for a model. ``n_ctx_seq`` cells per stream,
    ``n_stream`` streams (1 with a unified cache, else one per sequence); ``n_ctx_swa`` cells per stream of the
    sliding-window cache (0 without one)."""

    n_ctx: int
    n_ctx_seq: int
    n_stream: int
    n_batch: int
    n_ubatch: int
    n_seq_max: int
    n_outputs_max: int
    flash_attn: bool
    type_k: str
    type_v: str
    kv_unified: bool
    swa_full: bool
    n_ctx_swa: int


def resolve(shape: ModelShape, req: ContextRequest) -> ResolvedContext:
    """``req`` as llama.cpp resolves it for ``shape`` on the CPU (where automatic flash attention is on:
    the CPU backend runs every FLASH_ATTN_EXT, so ``sched_reserve`` finds no device mismatch)."""
    rules = memory_table().context
    pad = int(rules["pad"])
    n_seq_max = max(1, req.n_seq_max)
    n_ctx_asked = req.n_ctx or shape.n_ctx_train
    n_ctx = _pad(n_ctx_asked, pad)
    if req.kv_unified:
        n_ctx_seq = n_ctx
    else:
        n_ctx_seq = _pad(n_ctx // n_seq_max, pad)
        if n_ctx_seq == 0:
            raise PlanError("n_ctx_seq is 0: llama.cpp refuses the context")
        n_ctx = n_ctx_seq * n_seq_max
    # causal attention: the batch is bounded by the n_ctx asked for, before llama.cpp pads it
    n_batch = min(n_ctx_asked, req.n_batch or int(rules["default_n_batch"]))
    n_ubatch = min(n_batch, req.n_ubatch or int(rules["default_n_ubatch"]))
    if n_seq_max > n_batch:  # output_reserve(n_seq_max) asserts n_seq_max <= n_outputs_max (= n_batch)
        raise PlanError(f"{n_seq_max} sequences need a batch of at least {n_seq_max}: llama.cpp aborts with n_batch {n_batch}")
    flash = req.flash_attn != "off"
    if shape.mla and req.type_k != req.type_v:  # the V cache is a view of K: llama_init_from_model refuses
        raise PlanError(f"an MLA model's K and V caches share one type: llama.cpp refuses K {req.type_k}, V {req.type_v}")
    if not flash and req.type_v not in ("f32", "f16", "bf16"):
        raise PlanError(f"a {req.type_v} V cache needs flash attention: llama.cpp refuses it with flash attention off")
    n_ctx_swa = 0
    if any(shape.swa_layers):
        if req.swa_full:
            n_ctx_swa = n_ctx_seq
        else:
            window = shape.n_swa * (n_seq_max if req.kv_unified else 1) + n_ubatch
            n_ctx_swa = _pad(min(n_ctx_seq, window), int(memory_table().swa["pad"]))
    return ResolvedContext(
        n_ctx=n_ctx,
        n_ctx_seq=n_ctx_seq,
        n_stream=1 if req.kv_unified else n_seq_max,
        n_batch=n_batch,
        n_ubatch=n_ubatch,
        n_seq_max=n_seq_max,
        n_outputs_max=n_batch,
        flash_attn=flash,
        type_k=req.type_k,
        type_v=req.type_v,
        kv_unified=req.kv_unified,
        swa_full=req.swa_full,
        n_ctx_swa=n_ctx_swa,
    )
