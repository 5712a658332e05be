"""The public entry points: dequantize, swap_byte_order; chunking and threads.

A tensor is viewed (without copying) as an array of blocks with the dtype derived from its declaration in the
file's byte order. Kernels are written for little-endian blocks, so a big-endian chunk is first converted with
the same two declarations :func:`swap_byte_order` uses. Work is cut into chunks of at most ``CHUNK_VALUES``
values, so that temporaries stay a fraction of the output (at most about twice a chunk's output per worker);
chunks run on a two-thread pool (numpy releases the GIL in its loops), each writing its own slice of the output.
"""

from __future__ import annotations

import math
import operator
import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from ..core import rules
from ..core.tables import GGMLType
from . import classic as legacy
from . import floats, iquants, kquants
from .blocks import DECLARED, block_dtype, block_elements, check_order, resolve

Kernel = Callable[[np.ndarray, np.ndarray], None]

KERNELS: dict[str, Kernel] = {**floats.KERNELS, **legacy.KERNELS, **kquants.KERNELS, **iquants.KERNELS}
PLAIN = frozenset({"f64", "i8", "i16", "i32", "i64"})  # values keep their own dtype on request
SUPPORTED: frozenset[str] = frozenset(KERNELS) | PLAIN
assert SUPPORTED == DECLARED, SUPPORTED ^ DECLARED

CHUNK_VALUES = 1 << 20  # values per chunk, at most
MIN_CHUNK_VALUES = 1 << 16  # below this, splitting costs more than it gains
WORKERS = 2

_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _executor() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="gguf-dequant")
        return _pool


def _forget_pool() -> None:
    """In a forked child the pool's threads do not exist: start a new pool when one is needed."""
    global _pool, _pool_lock
    _pool, _pool_lock = None, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool)


def as_bytes(data: Any) -> np.ndarray:
    """``data`` (bytes, bytearray, memoryview, mmap, uint8 array) as a flat uint8 array, without copying."""
    if isinstance(data, np.ndarray):
        if data.dtype != np.uint8:
            raise rules.TENSOR_DATA.error(f"tensor data must be a uint8 array, not {data.dtype}")
        return data.reshape(-1)
    try:
        view = memoryview(data)
    except TypeError:
        raise rules.TENSOR_DATA.error(f"tensor data must be bytes-like, not {type(data).__name__}")
    if not view.c_contiguous:
        raise rules.TENSOR_DATA.error("tensor data must be contiguous")
    return np.frombuffer(view.cast("B") if view.format != "B" or view.ndim != 1 else view, dtype=np.uint8)


def _blocks(data: Any, t: GGMLType, byte_order: str) -> np.ndarray:
    buf = as_bytes(data)
    if buf.size % t.type_size:
        raise rules.TENSOR_PARTIAL_BLOCK.error(
            f"{buf.size} bytes of {t.name} end inside a block: {t.type_size}-byte blocks leave {buf.size % t.type_size} over",
            offset=buf.size - buf.size % t.type_size,
        )
    return buf.view(block_dtype(t, byte_order))


def _chunks(n: int, per_chunk: int) -> list[tuple[int, int]]:
    return [(i, min(n, i + per_chunk)) for i in range(0, n, per_chunk)]


def _run(work: Callable[[int, int], None], n_blocks: int, per_chunk: int) -> None:
    chunks = _chunks(n_blocks, per_chunk)
    if len(chunks) <= 1 or WORKERS <= 1:
        for i, j in chunks:
            work(i, j)
        return
    # consume the results so that an exception in a chunk is raised here
    for _ in _executor().map(lambda c: work(*c), chunks):
        pass


def dequantize(
    data: Any,
    ggml_type: int | str | GGMLType,
    *,
    shape: Sequence[int] | None = None,
    byte_order: str = "little",
    dtype: Any = np.float32,
) -> np.ndarray:
    """The values of a tensor's bytes, bit-exact with ggml's ``to_float``: a flat array, or shaped ``shape``
    (numpy order, rows last, as ``tensor.to_numpy()`` returns them; -1 once for the dimension to infer).

    ``data`` (bytes, memoryview, uint8 array …) holds whole blocks of ``ggml_type`` (id, name or record) in
    ``byte_order``; a partial block is a ``TruncatedError`` (rule ``tensor.partial_block``). The result is
    float32; for I8 … I64 and F64, ``dtype=None`` keeps the stored integer or float64 values instead, and any
    other ``dtype`` converts the result. Like ``numpy.frombuffer``, F32 data (and integer/F64 data with
    ``dtype=None``) already in the native byte order comes back as a view of ``data``, read-only if ``data`` is.
    A ``shape`` that does not hold the values exactly is a ``ValueError`` naming both counts.
    """
    flat = _dequantize_flat(data, ggml_type, byte_order, dtype)
    if shape is None:
        return flat
    dims = tuple(operator.index(d) for d in shape)
    known = math.prod(d for d in dims if d != -1)
    if sum(d == -1 for d in dims) > 1 or any(d < -1 for d in dims) or (-1 not in dims and known != flat.size):
        raise ValueError(f"shape {dims} does not hold the {flat.size} values of the data")
    if -1 in dims and (known == 0 or flat.size % known):
        raise ValueError(f"shape {dims} does not divide the {flat.size} values of the data")
    return flat.reshape(dims)


def _dequantize_flat(data: Any, ggml_type: int | str | GGMLType, byte_order: str, dtype: Any) -> np.ndarray:
    t = resolve(ggml_type)
    order = check_order(byte_order)
    blocks = _blocks(data, t, order)
    if t.name in PLAIN or t.name == "f32":
        values = blocks["value"]
        target = values.dtype.newbyteorder("=") if dtype is None else np.dtype(dtype)
        return values.astype(target, copy=False)
    out = np.empty(blocks.shape[0] * block_elements(t), np.float32)
    kernel = KERNELS[t.name]
    per_block = out.size // max(1, blocks.shape[0])
    little = block_dtype(t, "little")

    def work(i: int, j: int) -> None:
        chunk = blocks[i:j]
        if chunk.dtype != little:
            chunk = chunk.astype(little)
        with np.errstate(all="ignore"):  # NaN and Inf scales are data, as in ggml
            kernel(chunk, out[i * per_block : j * per_block].reshape(j - i, per_block))

    per_chunk = min(CHUNK_VALUES, max(MIN_CHUNK_VALUES, -(-out.size // WORKERS)))  # every worker gets a share
    _run(work, blocks.shape[0], max(1, per_chunk // max(1, per_block)))
    return out if dtype is None or np.dtype(dtype) == out.dtype else out.astype(dtype)


def swap_byte_order(data: Any, ggml_type: int | str | GGMLType, from_order: str, to_order: str) -> bytes:
    """A tensor's bytes rewritten from one byte order to the other: each block parsed with the ``from_order``
    declaration and built with the ``to_order`` one (multi-byte fields swapped, byte arrays untouched)."""
    t = resolve(ggml_type)
    target = block_dtype(t, check_order(to_order))
    return _blocks(data, t, check_order(from_order)).astype(target).tobytes()  # field by field, by position
