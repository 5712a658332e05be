"""llama.cpp's memory for a draft model with llama-server's draft context, through llama-cpp-python: the oracle of
the draft's plan. llama-server makes the draft's context from the main one's parameters with one output per
sequence (``n_outputs_max`` = the sequences, ``n_outputs_max_per_seq`` = 1: common/speculative.cpp), which
``tests.llama_memory.measure`` does not set; :func:`measure_models` loads the main model and the draft at once,
each with its context, and returns both breakdowns.
"""

from __future__ import annotations

from pathlib import Path

from tests import llama_memory as lm

__all__ = ["make_context", "measure_models"]

_DEFAULTS = dict(n_ctx=512, n_batch=2048, n_ubatch=512, n_seq_max=1, type_k="f16", type_v="f16", flash_attn="auto")


def make_context(
    lib: lm._Lib, model, *, n_outputs_max: int = 0, n_outputs_max_per_seq: int = 0, ctx_type: int = 0, ctx_other=None, **settings
):
    L = lib.L
    s = {**_DEFAULTS, "swa_full": False, "kv_unified": False, **settings}
    cp = L.llama_context_default_params()
    cp.n_ctx, cp.n_batch, cp.n_ubatch, cp.n_seq_max = s["n_ctx"], s["n_batch"], s["n_ubatch"], s["n_seq_max"]
    cp.type_k, cp.type_v = lm.GGML_TYPES[s["type_k"]], lm.GGML_TYPES[s["type_v"]]
    cp.flash_attn_type = {"auto": -1, "off": 0, "on": 1}[s["flash_attn"]]
    cp.swa_full, cp.kv_unified = s["swa_full"], s["kv_unified"]
    cp.n_outputs_max, cp.n_outputs_max_per_seq = n_outputs_max, n_outputs_max_per_seq
    cp.ctx_type, cp.ctx_other = ctx_type, lib.null if ctx_other is None else ctx_other  # an MTP context (1) over the one it drafts for
    cp.n_threads = cp.n_threads_batch = 1
    ctx = L.llama_init_from_model(model, cp)
    if not ctx:
        raise RuntimeError("llama.cpp refused the context:\n" + "".join(lib.log[-20:]))
    return ctx


def measure_models(*specs: dict) -> list[lm.Measured]:
    """Each spec (``path`` and context settings, ``n_outputs_max`` among them) loaded at once, one context
    each: their breakdowns, in order."""
    lib = lm._lib()
    lib.log.clear()
    models, contexts = [], []
    try:
        for spec in specs:
            settings = dict(spec)
            models.append(lm._load(lib, Path(settings.pop("path")), True))
            contexts.append(make_context(lib, models[-1], **settings))
        return [lm.Measured(lib.L.llama_n_ctx(ctx), lib.breakdown(ctx), list(lib.log)) for ctx in contexts]
    finally:
        for ctx in contexts:
            lib.L.llama_free(ctx)
        for model in models:
            lib.L.llama_model_free(model)


def reserved_nodes(ctx, n_tokens: int, n_seqs: int, n_outputs: int) -> list[tuple]:
    """The graph ``ctx`` reserves for a batch (``llama_graph_reserve``), as (op, type, shape, is-view) per node,
    the planned graphs' ``summary()`` form."""
    import ctypes
    import struct

    lib = lm._lib()
    g = lib.reserve_fn(lib.address(ctx), n_tokens, n_seqs, n_outputs)
    out = []
    for i in range(lib.base.ggml_graph_n_nodes(g)):
        raw = ctypes.string_at(lib.base.ggml_graph_node(g, i), lm._TENSOR)
        (typ,) = struct.unpack_from("<i", raw, 0)
        (view_src,) = struct.unpack_from("<Q", raw, 232)
        op = lib.base.ggml_op_desc(lib.base.ggml_graph_node(g, i)).decode()
        out.append((op, lib.base.ggml_type_name(typ).decode(), struct.unpack_from("<4q", raw, 16), bool(view_src)))
    return out
