"""The context parameters as llama.cpp resolves them (llama.cpp src/llama-context.cpp, llama_context's
constructor): what a user asks for is not what it allocates. ``n_ctx`` is padded to a multiple of 256 (so a
context of 64 becomes 256), each sequence's share is padded again, the batch sizes are clamped, and the
sliding-window cache gets its own size."""

from __future__ import annotations

from dataclasses import dataclass, fields

from ..core import rules
from ..core.tables import GGML_TYPES
from ..errors import PlanError
from .shape import ModelShape, memory_table, shown

__all__ = ["CACHE_TYPES", "ContextRequest", "ResolvedContext", "request_refused", "resolve"]

#: the K/V cache types llama.cpp's options accept (schema/memory.json)
CACHE_TYPES: tuple[str, ...] = tuple(memory_table().context["cache_types"])
_UINT32 = ("n_ctx", "n_batch", "n_ubatch", "n_seq_max", "n_outputs_max")  # uint32_t in llama_context_params
_MAX_UINT32 = 2**32 - 1


def request_refused(message: str, field: str = "") -> PlanError:
    """The refusal of a context llama.cpp rejects (rule ``plan.request``: the request's fault, not the model's)."""
    return PlanError(rules.PLAN_REQUEST.id, message, path=field)


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
    #: the most outputs of a batch (0: n_batch); llama-server's draft context takes one per sequence
    n_outputs_max: int = 0


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
    _check_request(req)
    table = memory_table().context
    pad = int(table["pad"])
    n_seq_max = max(1, req.n_seq_max)
    max_seq = int(memory_table().limits["max_seq"])
    if n_seq_max > max_seq:  # llama_context's constructor throws "n_seq_max must be <= LLAMA_MAX_SEQ"
        raise request_refused(f"{n_seq_max} sequences are more than llama.cpp's {max_seq} (LLAMA_MAX_SEQ)", "n_seq_max")
    n_ctx_asked = req.n_ctx or shape.n_ctx_train
    n_ctx = _pad(n_ctx_asked, pad)
    if req.kv_unified:
        n_ctx_seq = n_ctx
    else:
        n_ctx_seq = _pad(n_ctx // n_seq_max, pad)
        if n_ctx_seq == 0:
            raise request_refused("n_ctx_seq is 0: llama.cpp refuses the context", "n_ctx")
        n_ctx = n_ctx_seq * n_seq_max
    if n_ctx > _MAX_UINT32:  # llama.cpp's uint32 arithmetic wraps, and the context it gets has no cells
        whose = "the model's training context" if not req.n_ctx else "n_ctx"
        raise request_refused(
            f"{whose} {n_ctx_asked} padded to {n_ctx} cells passes uint32: llama.cpp refuses the context (n_ctx_seq == 0)", "n_ctx"
        )
    # causal attention: the batch is bounded by the n_ctx asked for, before llama.cpp pads it
    n_batch = min(n_ctx_asked, req.n_batch or int(table["default_n_batch"]))
    n_ubatch = min(n_batch, req.n_ubatch or int(table["default_n_ubatch"]))
    n_outputs_max = req.n_outputs_max or n_batch
    if n_seq_max > n_outputs_max:  # output_reserve(n_seq_max) asserts n_seq_max <= n_outputs_max (by default n_batch)
        which = "n_outputs_max" if req.n_outputs_max else "n_batch"
        raise request_refused(
            f"{n_seq_max} sequences need {which} of at least {n_seq_max}: llama.cpp aborts with {which} {n_outputs_max}", which
        )
    flash = req.flash_attn != "off"
    if shape.mla and req.type_k != req.type_v:  # the V cache is a view of K: llama_init_from_model refuses
        raise request_refused(f"an MLA model's K and V caches share one type: llama.cpp refuses K {req.type_k}, V {req.type_v}", "type_v")
    if not flash and req.type_v not in ("f32", "f16", "bf16"):
        raise request_refused(f"a {req.type_v} V cache needs flash attention: llama.cpp refuses it with flash attention off", "type_v")
    if flash:
        _check_blocks(shape, req)
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
        n_outputs_max=n_outputs_max,
        flash_attn=flash,
        type_k=req.type_k,
        type_v=req.type_v,
        kv_unified=req.kv_unified,
        swa_full=req.swa_full,
        n_ctx_swa=n_ctx_swa,
    )


def _check_request(req: ContextRequest) -> None:
    """Refuse a request llama.cpp's parameters cannot hold: sizes that are not uint32, unknown cache types or
    flash-attention modes, flags that are not bools."""
    for f in fields(req):
        value = getattr(req, f.name)
        if f.name in _UINT32:
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= _MAX_UINT32:
                raise request_refused(f"{f.name} is {shown(value)}, not an integer in 0 .. {_MAX_UINT32}", f.name)
        elif f.name in ("type_k", "type_v"):
            if value not in CACHE_TYPES:
                raise request_refused(f"{f.name} {shown(value)} is not a cache type llama.cpp accepts ({', '.join(CACHE_TYPES)})", f.name)
        elif f.name == "flash_attn":
            if value not in ("auto", "on", "off"):
                raise request_refused(f"flash_attn {shown(value)} is not auto, on or off", f.name)
        elif not isinstance(value, bool):
            raise request_refused(f"{f.name} is {type(value).__name__}, not a bool", f.name)


def _check_blocks(shape: ModelShape, req: ContextRequest) -> None:
    """With flash attention (on, or auto), llama_init_from_model refuses a quantized K or V cache whose block
    does not divide the head size (src/llama-context.cpp): heads of 16 with q8_0, for instance."""
    for which, type_name, head in (("K", req.type_k, shape.n_embd_head_k), ("V", req.type_v, shape.n_embd_head_v)):
        block = GGML_TYPES.lookup(type_name).block_size
        if block > 1 and head % block:
            raise request_refused(
                f"a {type_name} {which} cache has blocks of {block}, which do not divide the head size {head}: llama.cpp refuses it "
                "with flash attention (on or auto)",
                f"type_{which.lower()}",
            )
