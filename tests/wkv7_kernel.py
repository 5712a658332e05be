"""llama.cpp's CPU RWKV-7 kernel (``ggml_rwkv_wkv7``), modelled in numpy and run in the ggml library that
llama-cpp-python ships, so that tests can say which heads each CPU's build computes correctly.

The SIMD path of ``ggml_compute_forward_rwkv_wkv7_f32`` (ggml/src/ggml-cpu/ops.cpp, llama.cpp 0c1e570, the copy
vendored by llama-cpp-python 0.3.36) walks a head of ``S`` floats in strides of ``GGML_F32_STEP``
(ggml/src/ggml-cpu/simd-mappings.h: 64 with AVX-512F, 32 with AVX or SSE3, 16 with NEON) and has no remainder
loop. When ``S`` is not a multiple of the step, every row of a head reads ``a``/``r``/``w``/``k``/``b`` and the
state past the head's end and stores the state past it too (into the next row, the next head, or past the output).

- :func:`wkv7_reference`: the RWKV-7 state update, head by head (what the scalar path computes);
- :func:`wkv7_simd_model`: the SIMD loop over one flat float memory, overruns included;
- :class:`LlamaGgml`: ctypes access to llama-cpp-python's own ``libggml-base``/``libggml-cpu`` (the library that
  runs the models in the tests) to run the op on tensors laid out in one arena, and the step its build uses.
"""

from __future__ import annotations

import ctypes
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

INPUTS = ("r", "w", "k", "v", "a", "b")


@dataclass
class Wkv7Case:
    """Inputs of one ``ggml_rwkv_wkv7`` call for one sequence: r/w/k/v/a/b of shape (T, H, S), state (H, S, S)
    indexed [head][value row i][key column j], and what lies in memory after the state (``pad`` floats)."""

    r: np.ndarray
    w: np.ndarray
    k: np.ndarray
    v: np.ndarray
    a: np.ndarray
    b: np.ndarray
    state: np.ndarray
    pad: np.ndarray

    @property
    def shape(self) -> tuple[int, int, int]:
        t, h, s = self.r.shape
        return t, h, s

    def arena(self) -> np.ndarray:
        """The inputs as one float32 block, in the order r, w, k, v, a, b, state, pad: memory past one input is the
        next one, so every read of the modelled kernel is of a known value."""
        return np.concatenate([np.asarray(getattr(self, n), np.float32).reshape(-1) for n in (*INPUTS, "state", "pad")])


def random_case(tokens: int, heads: int, head_size: int, seed: int = 0, pad: int = 256) -> Wkv7Case:
    """Inputs in the ranges llama.cpp's rwkv7 graph gives the op: w in (0.54, 1) (exp(-0.607 sigmoid)), a = -kk
    and b = kk * iclr with kk unit-norm per head."""
    rng = np.random.default_rng(seed)
    shape = (tokens, heads, head_size)
    kk = rng.standard_normal(shape)
    kk /= np.linalg.norm(kk, axis=-1, keepdims=True)
    values = {
        "r": rng.standard_normal(shape) * 0.5,
        "w": np.exp(-0.606531 * rng.uniform(0, 1, shape)),
        "k": rng.standard_normal(shape) * 0.5,
        "v": rng.standard_normal(shape) * 0.5,
        "a": -kk,
        "b": kk * rng.uniform(0, 1, shape),
        "state": rng.standard_normal((heads, head_size, head_size)) * 0.3,
        "pad": rng.standard_normal(pad),
    }
    return Wkv7Case(**{n: x.astype(np.float32) for n, x in values.items()})


def wkv7_reference(case: Wkv7Case) -> tuple[np.ndarray, np.ndarray]:
    """Output (T, H, S) and final state (H, S, S), in float64: per head and token,
    state = state * w + v k^T + (state a) b^T, output = state r."""
    f = {n: np.asarray(getattr(case, n), np.float64) for n in INPUTS}
    state = np.asarray(case.state, np.float64).copy()
    t_count, heads, _ = case.shape
    out = np.zeros(case.r.shape)
    for t in range(t_count):
        for h in range(heads):
            s = state[h]
            sa = s @ f["a"][t, h]
            s = s * f["w"][t, h][None, :] + np.outer(f["v"][t, h], f["k"][t, h]) + np.outer(sa, f["b"][t, h])
            state[h] = s
            out[t, h] = s @ f["r"][t, h]
    return out, state


def wkv7_simd_model(case: Wkv7Case, step: int | None) -> tuple[np.ndarray, np.ndarray]:
    """What the SIMD loop of ``ggml_compute_forward_rwkv_wkv7_f32`` computes with ``GGML_F32_STEP = step`` on one
    thread (None: the scalar path), over the arena of :meth:`Wkv7Case.arena` followed by the op's output (T*C
    floats, then the state) and the memory after it. Offsets are the kernel's; each row reads and writes
    ``ceil(S / step) * step`` floats. Memory past the output starts as NaN: a finite result shows the kernel
    only read it after writing it itself."""
    t_count, heads, s = case.shape
    c = heads * s
    width = s if step is None else -(-s // step) * step
    arena = case.arena().astype(np.float64)
    base = {n: i * t_count * c for i, n in enumerate(INPUTS)}
    state_in = len(INPUTS) * t_count * c
    dst = len(arena)
    mem = np.concatenate([arena, np.zeros(c * t_count + s * c), np.full(width, np.nan)])
    state_out = dst + c * t_count
    for t in range(t_count):
        prev = state_in if t == 0 else state_out
        for h in range(heads):
            t_h = t * c + h * s
            for i in range(s):
                row = h * s * s + i * s
                vec = {n: mem[base[n] + t_h : base[n] + t_h + width] for n in ("r", "w", "k", "a", "b")}
                old = mem[prev + row : prev + row + width].copy()
                sa = float(vec["a"] @ old)
                new = old * vec["w"] + mem[base["v"] + t_h + i] * vec["k"] + sa * vec["b"]
                mem[state_out + row : state_out + row + width] = new
                mem[dst + t_h + i] = float(new @ vec["r"])
    out = mem[dst : dst + t_count * c].reshape(t_count, heads, s)
    return out, mem[state_out : state_out + s * c].reshape(heads, s, s)


#: GGML_F32_STEP of ggml/src/ggml-cpu/simd-mappings.h for the instruction sets the wkv7 SIMD path is built with.
#: SVE and RISC-V V builds take the kernel's scalar route (None).
F32_STEP = {"avx512": 64, "avx": 32, "sse3": 32, "neon": 16}


class LlamaGgml:
    """The ggml of llama-cpp-python (``llama_cpp/lib``), through ctypes: the op run on one thread, and the
    instruction sets its CPU backend was compiled for (``ggml_cpu_has_*`` report compile-time features)."""

    def __init__(self, lib: Path | None = None) -> None:
        if lib is None:
            import llama_cpp

            lib = Path(llama_cpp.__file__).parent / "lib"
        suffix = {"darwin": ".dylib", "win32": ".dll"}.get(sys.platform, ".so")
        cpu = sorted(lib.glob(f"*ggml-cpu*{suffix}"))
        if len(cpu) != 1:  # a GGML_CPU_ALL_VARIANTS build picks one at run time: not this helper's case
            raise RuntimeError(f"expected one ggml CPU library in {lib}, found {[p.name for p in cpu]}")
        self.base = ctypes.CDLL(str(next(lib.glob(f"*ggml-base{suffix}"))))
        self.cpu = ctypes.CDLL(str(cpu[0]))
        p, i64, sz = ctypes.c_void_p, ctypes.c_int64, ctypes.c_size_t
        b = self.base
        b.ggml_init.argtypes, b.ggml_init.restype = [_InitParams], p
        b.ggml_free.argtypes, b.ggml_free.restype = [p], None
        b.ggml_new_tensor_1d.argtypes, b.ggml_new_tensor_1d.restype = [p, ctypes.c_int, i64], p
        b.ggml_view_2d.argtypes, b.ggml_view_2d.restype = [p, p, i64, i64, sz, sz], p
        b.ggml_view_3d.argtypes, b.ggml_view_3d.restype = [p, p, i64, i64, i64, sz, sz, sz], p
        b.ggml_rwkv_wkv7.argtypes, b.ggml_rwkv_wkv7.restype = [p] * 8, p
        b.ggml_new_graph.argtypes, b.ggml_new_graph.restype = [p], p
        b.ggml_build_forward_expand.argtypes, b.ggml_build_forward_expand.restype = [p, p], None
        b.ggml_get_data.argtypes, b.ggml_get_data.restype = [p], p
        self.cpu.ggml_graph_compute_with_ctx.argtypes, self.cpu.ggml_graph_compute_with_ctx.restype = [p, p, ctypes.c_int], ctypes.c_int

    def has(self, feature: str) -> bool:
        fn = getattr(self.cpu, f"ggml_cpu_has_{feature}", None)
        return bool(fn and fn())

    def f32_step(self) -> int | None:
        """The wkv7 SIMD path's GGML_F32_STEP in this build (None: it computes the scalar way)."""
        if self.has("sve") or self.has("riscv_v"):
            return None
        for feature in ("avx512", "avx", "sse3", "neon"):  # simd-mappings.h's order of precedence
            if self.has(feature):
                return F32_STEP[feature]
        return None

    def wkv7(self, case: Wkv7Case) -> tuple[np.ndarray, np.ndarray]:
        """llama.cpp's output (T, H, S) and final state (H, S, S) for ``case``, computed on one thread with the
        inputs as views of one arena (so what the kernel reads past an input is the next input) and spare memory
        after the op's output (which an overrunning kernel writes to)."""
        t_count, heads, s = case.shape
        c = heads * s
        arena_values = case.arena()
        out_floats = c * t_count + s * c
        b = self.base
        ctx = b.ggml_init(_InitParams(len(arena_values) * 4 + out_floats * 4 + 4 * 1024 * 1024, None, False))
        try:
            arena = b.ggml_new_tensor_1d(ctx, 0, len(arena_values))  # GGML_TYPE_F32
            ctypes.memmove(b.ggml_get_data(arena), arena_values.ctypes.data, arena_values.nbytes)
            views = [b.ggml_view_3d(ctx, arena, s, heads, t_count, s * 4, c * 4, i * t_count * c * 4) for i in range(len(INPUTS))]
            state = b.ggml_view_2d(ctx, arena, s * c, 1, s * c * 4, len(INPUTS) * t_count * c * 4)
            result = b.ggml_rwkv_wkv7(ctx, *views, state)
            b.ggml_new_tensor_1d(ctx, 0, 1024)  # room after the output for the kernel's stores past it
            graph = b.ggml_new_graph(ctx)
            b.ggml_build_forward_expand(graph, result)
            assert self.cpu.ggml_graph_compute_with_ctx(ctx, graph, 1) == 0
            got = np.ctypeslib.as_array(ctypes.cast(b.ggml_get_data(result), ctypes.POINTER(ctypes.c_float)), (out_floats,)).copy()
        finally:
            b.ggml_free(ctx)
        return got[: c * t_count].reshape(t_count, heads, s), got[c * t_count :].reshape(heads, s, s)


class _InitParams(ctypes.Structure):
    _fields_ = [("mem_size", ctypes.c_size_t), ("mem_buffer", ctypes.c_void_p), ("no_alloc", ctypes.c_bool)]
