"""llama.cpp's own account of the memory it allocates, through llama-cpp-python: the oracle of the memory plan.

:func:`measure` loads a model, makes a context and returns, per buffer type (``CPU``, ``CPU_Mapped``,
``CPU_REPACK``, ...), the bytes llama.cpp allocated for the model, the context's memory (KV cache and recurrent
state) and the compute buffer: ``llama_get_memory_breakdown`` (src/llama-ext.h), exact bytes where llama.cpp's
log prints MiB rounded to two places. That function returns a C++ ``std::map`` by value, so it is called with
the Itanium ABI's hidden return pointer and the map (libstdc++'s red-black tree) is walked here; the log lines
are kept too, to tell the KV cache from the recurrent state of a hybrid model.

:func:`graph` returns the compute graph llama.cpp reserves (``llama_graph_reserve``), node by node, to compare a
planned graph with.

The llama.cpp is llama-cpp-python's, unless ``GGUF_CONSTRUCT_LLAMA_CPP_BUILD`` names the directory of another
build's shared libraries (``libllama.so``, ``libggml-base.so``, ``libggml-cpu.so``: ``build/bin`` of a tree built
with ``-DBUILD_SHARED_LIBS=ON``): llama-cpp-python's bindings then load that build's ``libllama``
(``LLAMA_CPP_LIB_PATH``) and the ggml functions here come from its ``libggml-base``, so that following a newer
llama.cpp is a rerun of the planning tests (docs/howto/plan.md). Its ``llama_context_params`` must still have the
layout the bindings know; for a build whose structs have changed, ``GGUF_CONSTRUCT_LLAMA_CPP_BINDINGS=cffi`` binds
it through the declarations of a recent ``llama.h`` that llama-cpp-py-sync carries (CFFI, ABI mode), instead of
llama-cpp-python's ctypes ones.
"""

from __future__ import annotations

import ctypes
import os
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "BINDINGS_VARIABLE",
    "BUILD_VARIABLE",
    "VERSION_VARIABLE",
    "Measured",
    "build_name",
    "cpu_features",
    "graph",
    "lib_dir",
    "measure",
]

#: the environment variable naming a llama.cpp build's library directory for the oracle
BUILD_VARIABLE = "GGUF_CONSTRUCT_LLAMA_CPP_BUILD"
#: ``cffi``: bind the build through llama-cpp-py-sync's declarations (a newer llama.h); else llama-cpp-python's
BINDINGS_VARIABLE = "GGUF_CONSTRUCT_LLAMA_CPP_BINDINGS"
#: which of schema/memory.json's builds the oracle's llama.cpp is (b11549, ...); unset: llama-cpp-python's
VERSION_VARIABLE = "GGUF_CONSTRUCT_LLAMA_CPP_VERSION"


def build_name() -> str:
    """The build the oracle's llama.cpp is, as ``schema/memory.json`` names it: the plan follows its graph."""
    from gguf_construct.planning.compute.builds import DEFAULT

    return os.environ.get(VERSION_VARIABLE) or DEFAULT


_MAP_SIZE = 48  # sizeof(std::map) in libstdc++: comparator, header node (color, parent, left, right), count
_NODE_BASE = 32  # sizeof(_Rb_tree_node_base); the value (key pointer, three size_t) follows
_TENSOR = 336  # sizeof(struct ggml_tensor) (ggml.h), fields read by offset below
GGML_TYPES = {"f32": 0, "f16": 1, "q4_0": 2, "q4_1": 3, "q5_0": 6, "q5_1": 7, "q8_0": 8, "bf16": 30, "iq4_nl": 20}


def lib_dir() -> Path:
    """The directory of the llama.cpp libraries the oracle loads: ``GGUF_CONSTRUCT_LLAMA_CPP_BUILD``, else
    llama-cpp-python's own. Set before llama-cpp-python is imported, the variable also points its bindings there."""
    build = os.environ.get(BUILD_VARIABLE)
    if build:
        path = Path(build).resolve()
        if not (path / "libllama.so").is_file():
            raise RuntimeError(f"{BUILD_VARIABLE}={build}: no libllama.so there (a llama.cpp build's bin/ or lib/ directory)")
        if os.environ.get(BINDINGS_VARIABLE) != "cffi":  # llama-cpp-python's bindings then load it too
            os.environ["LLAMA_CPP_LIB_PATH"] = str(path)
        return path
    import importlib.util

    spec = importlib.util.find_spec("llama_cpp")
    if spec is None or spec.origin is None:
        raise RuntimeError("llama-cpp-python is not installed")
    return Path(spec.origin).parent / "lib"


@dataclass
class Measured:
    n_ctx: int  # the context llama.cpp uses (raised to its minimum and padded)
    buffers: dict[str, dict[str, int]]  # buffer type name -> {"model", "context", "compute"} in bytes
    log: list[str] = field(default_factory=list)

    def total(self, part: str) -> int:
        return sum(b[part] for b in self.buffers.values())


class _Lib:
    """The llama.cpp and ggml functions used here, bound once."""

    def __init__(self) -> None:
        where = lib_dir()  # before the import: the bindings read LLAMA_CPP_LIB_PATH when they load
        self.cffi = os.environ.get(BINDINGS_VARIABLE) == "cffi"
        if self.cffi:
            from llama_cpp_py_sync._cffi_bindings import get_ffi

            self.ffi = get_ffi()
            L: Any = self.ffi.dlopen(str(where / "libllama.so"))
            lib = ctypes.CDLL(str(where / "libllama.so"), mode=os.RTLD_LOCAL)
        else:
            from llama_cpp import llama_cpp as L

            lib = L._lib
        self.L = L
        self.handle = lib  # libllama as a ctypes library, whichever the bindings (its C++ symbols are called through it)
        # its own copy of ggml-base, its symbols bound to itself (RTLD_DEEPBIND): ggml-python's ggml-base, when loaded
        # in the same process, would otherwise answer the calls ggml_op_desc makes inside (older op names)
        base = ctypes.CDLL(str(where / "libggml-base.so"), mode=os.RTLD_LOCAL | os.RTLD_DEEPBIND)
        self.base = base
        for name, res, args in (
            ("ggml_backend_buft_name", ctypes.c_char_p, [ctypes.c_void_p]),
            ("ggml_graph_n_nodes", ctypes.c_int, [ctypes.c_void_p]),
            ("ggml_graph_node", ctypes.c_void_p, [ctypes.c_void_p, ctypes.c_int]),
            ("ggml_op_desc", ctypes.c_char_p, [ctypes.c_void_p]),
            ("ggml_nbytes", ctypes.c_size_t, [ctypes.c_void_p]),
            ("ggml_type_name", ctypes.c_char_p, [ctypes.c_int]),
        ):
            fn = getattr(base, name)
            fn.restype, fn.argtypes = res, args
        self.breakdown_fn = lib._Z26llama_get_memory_breakdownPK13llama_context
        self.breakdown_fn.restype = ctypes.c_void_p
        self.breakdown_fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        self.reserve_fn = lib._Z19llama_graph_reserveP13llama_contextjjj
        self.reserve_fn.restype = ctypes.c_void_p
        self.reserve_fn.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_uint32, ctypes.c_uint32]
        self.log: list[str] = []

        def _log(level, text, user_data):  # noqa: ARG001
            raw = self.ffi.string(text) if self.cffi else text
            self.log.append(raw.decode("utf-8", "replace"))

        # kept alive: llama.cpp holds the pointer
        self._log_cb = self.ffi.callback("ggml_log_callback", _log) if self.cffi else L.llama_log_callback(_log)
        L.llama_log_set(self._log_cb, self.null)
        L.llama_backend_init()

    @property
    def null(self) -> Any:
        return self.ffi.NULL if self.cffi else None

    def address(self, pointer: Any) -> int:
        """A llama.cpp object's address, for the ctypes calls below, from either bindings' pointer."""
        return int(self.ffi.cast("uintptr_t", pointer)) if self.cffi else pointer

    def breakdown(self, ctx) -> dict[str, dict[str, int]]:
        out_map = (ctypes.c_uint8 * _MAP_SIZE)()
        self.breakdown_fn(ctypes.addressof(out_map), self.address(ctx))
        root, _leftmost, _rightmost, count = struct.unpack_from("<4Q", bytes(out_map), 16)
        found: dict[str, dict[str, int]] = {}
        stack = [root] if root else []
        while stack:  # the tree's nodes in any order: the map is keyed by pointer, names are unique
            node = stack.pop()
            left, right = struct.unpack("<2Q", ctypes.string_at(node + 16, 16))
            buft, model, context, compute = struct.unpack("<4Q", ctypes.string_at(node + _NODE_BASE, 32))
            name = self.base.ggml_backend_buft_name(buft).decode()
            found[name] = {"model": model, "context": context, "compute": compute}
            stack += [n for n in (left, right) if n]
            assert len(found) <= count
        assert len(found) == count, (found, count)
        return found  # the map's nodes are leaked: a few hundred bytes per call, in tests only


_LIB: _Lib | None = None


def _lib() -> _Lib:
    global _LIB
    if _LIB is None:
        _LIB = _Lib()
    # llama.cpp keeps one log callback: claimed again on every use, as this file may be imported twice (as
    # tests.llama_memory and as llama_memory), each copy with its own callback and log
    _LIB.L.llama_log_set(_LIB._log_cb, _LIB.null)
    return _LIB


def cpu_features() -> frozenset[str]:
    """The CPU features the oracle's llama.cpp was built for and runs with ('avx2', 'avx512'): the ones that
    decide which weights it repacks (ggml_cpu_has_* of libggml-cpu)."""
    where = lib_dir()
    cpu = ctypes.CDLL(str(where / "libggml-cpu.so" if (where / "libggml-cpu.so").exists() else where / "libllama.so"))
    return frozenset(name for name in ("avx2", "avx512") if getattr(cpu, f"ggml_cpu_has_{name}")())


def _context(lib: _Lib, model, *, n_ctx, n_batch, n_ubatch, n_seq_max, type_k, type_v, flash_attn, swa_full, kv_unified):
    L = lib.L
    cp = L.llama_context_default_params()
    cp.n_ctx, cp.n_batch, cp.n_ubatch, cp.n_seq_max = n_ctx, n_batch, n_ubatch, n_seq_max
    cp.type_k, cp.type_v = GGML_TYPES[type_k], GGML_TYPES[type_v]
    cp.flash_attn_type = {"auto": -1, "off": 0, "on": 1}[flash_attn]
    cp.swa_full, cp.kv_unified = swa_full, kv_unified
    cp.n_threads = cp.n_threads_batch = 1
    ctx = L.llama_init_from_model(model, cp)
    if not ctx:
        raise RuntimeError("llama.cpp refused the context:\n" + "".join(lib.log[-20:]))
    return ctx


def _load(lib: _Lib, path: str | Path, use_mmap: bool):
    L = lib.L
    mp = L.llama_model_default_params()
    mp.load_mode = L.LLAMA_LOAD_MODE_MMAP if use_mmap else L.LLAMA_LOAD_MODE_NONE
    mp.n_gpu_layers = 0
    model = L.llama_model_load_from_file(str(path).encode(), mp)
    if not model:
        raise RuntimeError(f"llama.cpp refused {path}:\n" + "".join(lib.log[-20:]))
    return model


def measure(
    path: str | Path,
    *,
    n_ctx: int = 512,
    n_batch: int = 2048,
    n_ubatch: int = 512,
    n_seq_max: int = 1,
    type_k: str = "f16",
    type_v: str = "f16",
    flash_attn: str = "auto",
    use_mmap: bool = True,
    swa_full: bool = False,
    kv_unified: bool = False,
) -> Measured:
    """The bytes llama.cpp allocates for ``path`` with these context parameters, on the CPU."""
    lib = _lib()
    lib.log.clear()
    model = _load(lib, path, use_mmap)
    try:
        ctx = _context(
            lib,
            model,
            n_ctx=n_ctx,
            n_batch=n_batch,
            n_ubatch=n_ubatch,
            n_seq_max=n_seq_max,
            type_k=type_k,
            type_v=type_v,
            flash_attn=flash_attn,
            swa_full=swa_full,
            kv_unified=kv_unified,
        )
        try:
            return Measured(lib.L.llama_n_ctx(ctx), lib.breakdown(ctx), list(lib.log))
        finally:
            lib.L.llama_free(ctx)
    finally:
        lib.L.llama_model_free(model)


def graph(path: str | Path, *, n_tokens: int, n_seqs: int = 1, n_outputs: int | None = None, **context) -> list[dict]:
    """The nodes of the graph llama.cpp reserves for a batch of ``n_tokens``: op, type, shape, bytes, whether it
    is a view (and of which node), its sources (indices in the order first seen) and name."""
    lib = _lib()
    lib.log.clear()
    model = _load(lib, path, context.pop("use_mmap", True))
    defaults = dict(n_ctx=512, n_batch=2048, n_ubatch=512, n_seq_max=1, type_k="f16", type_v="f16")
    defaults.update(flash_attn="auto", swa_full=False, kv_unified=False)
    ctx = _context(lib, model, **{**defaults, **context})
    try:
        g = lib.reserve_fn(lib.address(ctx), n_tokens, n_seqs, n_tokens if n_outputs is None else n_outputs)
        ids: dict[int, int] = {}

        def tid(p: int) -> int:
            return ids.setdefault(p, len(ids))

        nodes = []
        for i in range(lib.base.ggml_graph_n_nodes(g)):
            t = lib.base.ggml_graph_node(g, i)
            raw = ctypes.string_at(t, _TENSOR)
            (typ,) = struct.unpack_from("<i", raw, 0)
            (view_src,) = struct.unpack_from("<Q", raw, 232)
            nodes.append(
                {
                    "id": tid(t),
                    "op": lib.base.ggml_op_desc(t).decode(),
                    "type": lib.base.ggml_type_name(typ).decode(),
                    "ne": struct.unpack_from("<4q", raw, 16),
                    "nbytes": lib.base.ggml_nbytes(t),
                    "view_of": tid(view_src) if view_src else None,
                    "src": [tid(s) for s in struct.unpack_from("<10Q", raw, 152) if s],
                    "name": raw[256:320].split(b"\0")[0].decode(),
                }
            )
        return nodes
    finally:
        lib.L.llama_free(ctx)
        lib.L.llama_model_free(model)
