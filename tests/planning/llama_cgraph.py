"""The whole graph llama.cpp reserves (nodes and leafs, with what ggml-alloc reads of each tensor), as planning IR.

:func:`reserved_graph` builds llama.cpp's graph for a batch (``llama_graph_reserve``) and converts it into a
:class:`gguf_construct.planning.compute.ggml_ir.Graph`: the same tensors in the same node and leaf order, with their
types, shapes, strides, views, sources, input/output flags and whether their memory is outside the compute buffer
(weights, KV cache). Running the planning allocator on it checks the allocator alone against llama.cpp; comparing
it with a planned graph checks the graph builder alone.
"""

from __future__ import annotations

import ctypes
import struct
from pathlib import Path

from gguf_construct.planning.compute.ggml_ir import GgmlTensor, Graph
from tests.llama_memory import _TENSOR, _context, _lib, _load

_FLAG_INPUT, _FLAG_OUTPUT = 1, 2  # ggml.h enum ggml_tensor_flag


def ggml_of_llama() -> ctypes.CDLL:
    """The ggml library llama.cpp was built with (libllama's own dependencies, looked up through its handle), for
    op and type names and the allocator's constants: the ggml llama.cpp calls, since tests/conftest.py binds
    llama.cpp to its own ggml (ggml-python's older ggml, in the global symbol scope, would otherwise take its
    place)."""
    lib = _lib().handle
    for name, res, args in (
        ("ggml_op_desc", ctypes.c_char_p, [ctypes.c_void_p]),
        ("ggml_type_name", ctypes.c_char_p, [ctypes.c_int]),
        ("ggml_op_name", ctypes.c_char_p, [ctypes.c_int]),
        ("ggml_unary_op_name", ctypes.c_char_p, [ctypes.c_int]),
        ("ggml_op_can_inplace", ctypes.c_bool, [ctypes.c_int]),
        ("ggml_backend_cpu_buffer_type", ctypes.c_void_p, []),
        ("ggml_backend_buft_get_alignment", ctypes.c_size_t, [ctypes.c_void_p]),
        ("ggml_backend_buft_get_max_size", ctypes.c_size_t, [ctypes.c_void_p]),
    ):
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = res, args
    return lib


def _cgraph(g: int) -> tuple[list[int], list[int]]:
    """The node and leaf pointers of a ``struct ggml_cgraph`` (ggml-impl.h: size, n_nodes, n_leafs, nodes, grads,
    grad_accs, leafs)."""
    _size, n_nodes, n_leafs = struct.unpack("<3i", ctypes.string_at(g, 12))
    nodes_p, _grads, _accs, leafs_p = struct.unpack("<4Q", ctypes.string_at(g + 16, 32))
    nodes = list(struct.unpack(f"<{n_nodes}Q", ctypes.string_at(nodes_p, 8 * n_nodes))) if n_nodes else []
    leafs = list(struct.unpack(f"<{n_leafs}Q", ctypes.string_at(leafs_p, 8 * n_leafs))) if n_leafs else []
    return nodes, leafs


def reserved_graph(path: str | Path, *, n_tokens: int, n_seqs: int = 1, n_outputs: int | None = None, **context) -> Graph:
    """llama.cpp's reserved graph for ``n_tokens`` tokens in ``n_seqs`` sequences, as a planning Graph."""
    lib = _lib()
    ggml = ggml_of_llama()
    lib.log.clear()
    model = _load(lib, path, context.pop("use_mmap", True))
    defaults = dict(n_ctx=512, n_batch=2048, n_ubatch=512, n_seq_max=1, type_k="f16", type_v="f16")
    defaults.update(flash_attn="auto", swa_full=False, kv_unified=False)
    ctx = _context(lib, model, **{**defaults, **context})
    try:
        g = lib.reserve_fn(lib.address(ctx), n_tokens, n_seqs, n_tokens if n_outputs is None else n_outputs)
        node_ptrs, leaf_ptrs = _cgraph(g)
        made: dict[int, GgmlTensor] = {}

        def convert(p: int) -> GgmlTensor:
            if p in made:
                return made[p]
            raw = ctypes.string_at(p, _TENSOR)
            (typ,) = struct.unpack_from("<i", raw, 0)
            (buffer,) = struct.unpack_from("<Q", raw, 8)
            ne = struct.unpack_from("<4q", raw, 16)
            nb = struct.unpack_from("<4Q", raw, 48)
            (flags,) = struct.unpack_from("<i", raw, 148)
            srcs = [s for s in struct.unpack_from("<10Q", raw, 152) if s]
            view_src, view_offs, data = struct.unpack_from("<3Q", raw, 232)
            t = GgmlTensor(
                type=ggml.ggml_type_name(typ).decode(),
                ne=ne,
                nb=nb,
                op=ggml.ggml_op_desc(p).decode(),
                src=tuple(convert(s) for s in srcs),
                view_src=convert(view_src) if view_src else None,
                view_offs=view_offs,
                name=raw[256:320].split(b"\0")[0].decode(),
                input=bool(flags & _FLAG_INPUT),
                output=bool(flags & _FLAG_OUTPUT),
                external=bool(buffer or data),
            )
            made[p] = t
            return t

        out = Graph()
        out.nodes = [convert(p) for p in node_ptrs]
        out.leafs = [convert(p) for p in leaf_ptrs]
        return out
    finally:
        lib.L.llama_free(ctx)
        lib.L.llama_model_free(model)
