"""numpy quantization bit-exact with ggml's ``ggml_quantize_chunk`` (ggml-python's libggml, ggml 0.15.x).

:func:`quantize` takes float values shaped ``(n_rows, n_per_row)`` (a 1-D array is one row) and returns the bytes
ggml writes. A family module turns ``(n_blocks, block_size)`` float32 values into the block's fields by name; they
are assembled through the type's declared dtype (:func:`..blocks.block_dtype`), so each layout stays declared once.
With an importance matrix (``n_per_row`` float weights, one per column) the types that use one take ggml's
``quantize_row_*_impl`` path, which also depends on the whole row (sigma² is the row's mean square).

Families: :mod:`.plain` (F16, BF16), :mod:`.legacy` (Q4_0 … Q8_1, Q1_0, MXFP4, NVFP4), :mod:`.kquants` (Q2_K … Q8_K
and the weighted legacy paths), :mod:`.nonlinear` (IQ4_NL, IQ4_XS, TQ1_0, TQ2_0), :mod:`.gridsearch` (IQ1_*, IQ2_*,
IQ3_*); :mod:`.search` holds ggml's shared scale searches and :mod:`.cfloat` C's float32 semantics;
:mod:`.policy` decides which tensors of a model get which type.

Imports: ``errors``, ``core`` and ``quants`` only.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ...core import rules
from ...core.tables import GGMLType
from ..blocks import block_dtype, block_elements, resolve
from . import classic_quantizers as legacy
from . import fast, gridsearch, nonlinear, plain
from . import kquant_quantizers as kquants

Fields = dict[str, np.ndarray]
#: type name → quantizer of ``(n_blocks, block_size)`` values (the reference path, no importance matrix)
REFERENCE: dict[str, Callable[[np.ndarray], Fields]] = {
    **legacy.QUANTIZERS,
    **kquants.QUANTIZERS,
    **nonlinear.QUANTIZERS,
    **gridsearch.QUANTIZERS,
}
#: type name → quantizer of rows ``(n_rows, n_per_row)`` with their importance matrix (``(n_per_row,)``)
WEIGHTED: dict[str, Callable[[np.ndarray, np.ndarray], Fields]] = {**kquants.WEIGHTED, **nonlinear.WEIGHTED, **gridsearch.WEIGHTED}
#: the plain float types: values → their element array
PLAIN: dict[str, Callable[[np.ndarray], np.ndarray]] = dict(plain.CONVERTERS)
#: types ggml refuses to quantize without an importance matrix (``ggml_quantize_requires_imatrix``)
REQUIRES_IMATRIX: frozenset[str] = gridsearch.REQUIRES_IMATRIX

SUPPORTED: frozenset[str] = frozenset(REFERENCE) | frozenset(PLAIN) | REQUIRES_IMATRIX


#: values per call of a family's quantizer: the one-pass types run in cache-sized pieces, the searched types in
#: larger ones (their cost is a Python loop per element position, paid once per piece)
CHUNK_VALUES = {"legacy": 1 << 16, "search": 1 << 18, "grid": 1 << 14}
#: values per piece on the fast paths (:mod:`.fast`): 1 MiB of float32 (measured: smaller pieces pay more in
#: per-call overhead, about 40 numpy calls a piece, than they gain in cache hits; a 2-thread pool over the pieces,
#: as the dequantizer has, was slower on the shared 2-core machine, so the pieces run in turn)
FAST_CHUNK = 1 << 18


def _assemble(name: str, fields: Fields, blocks: np.ndarray) -> None:
    """Write a quantizer's fields into ``blocks`` (the type's declared dtype)."""
    for key, value in fields.items():
        base = blocks.dtype[key].base
        if value.dtype.itemsize == base.itemsize and value.dtype.kind != base.kind:
            value = value.view(base.newbyteorder("="))  # bit patterns (a half's uint16) into their float field
        blocks[key] = value.reshape(blocks[key].shape)


def _rows(values: np.ndarray, block: int, name: str) -> np.ndarray:
    x = np.ascontiguousarray(values, dtype=np.float32)
    if x.ndim == 1:
        x = x[None]
    if x.ndim != 2:
        raise rules.QUANTIZE_VALUES.error(f"values must be 1-D or 2-D (rows, n_per_row), not {x.ndim}-D")
    if x.shape[1] % block:
        raise rules.QUANTIZE_VALUES.error(f"{name} needs rows of a multiple of {block} values, not {x.shape[1]}")
    return x


def quantize(values: np.ndarray, ggml_type: int | str | GGMLType, *, imatrix: np.ndarray | None = None) -> bytes:
    """``values`` (rows of ``n_per_row`` floats) quantized to ``ggml_type``, byte for byte as ggml's
    ``ggml_quantize_chunk``; ``imatrix`` holds one importance weight per column (ignored by the types ggml does not
    weight, as in ggml)."""
    t = resolve(ggml_type)
    name = t.name
    if name not in SUPPORTED:
        raise rules.QUANTIZE_TYPE.error(f"quantizing to {name} is not implemented")
    block = block_elements(name)
    x = _rows(values, block, name)
    n_rows, n_per_row = x.shape
    if name in fast.CONVERTERS:
        flat: np.ndarray = x.reshape(-1)
        out = np.empty(flat.size, "<u2")
        with np.errstate(all="ignore"):  # C's float semantics: overflow to inf, silently
            for i in range(0, flat.size, FAST_CHUNK):
                fast.CONVERTERS[name](flat[i : i + FAST_CHUNK], out[i : i + FAST_CHUNK])
        return out.tobytes()
    if name in PLAIN:
        return PLAIN[name](x.reshape(-1)).tobytes()
    if imatrix is not None:
        imatrix = np.ascontiguousarray(imatrix, dtype=np.float32).reshape(-1)
        if imatrix.size != n_per_row:
            raise rules.QUANTIZE_IMATRIX.error(f"imatrix has {imatrix.size} weights for rows of {n_per_row}")
    if name in REQUIRES_IMATRIX and imatrix is None:
        raise rules.QUANTIZE_IMATRIX.error(f"{name} needs an importance matrix (as in ggml)")
    blocks = np.zeros(n_rows * n_per_row // block, block_dtype(name))
    family = "legacy" if name in legacy.QUANTIZERS or name in ("tq1_0", "tq2_0") else "grid" if name in gridsearch.WEIGHTED else "search"
    piece = CHUNK_VALUES[family]
    with np.errstate(all="ignore"):  # C's float semantics: overflow to inf, NaN from 0 * inf, all silently
        if imatrix is not None and name in WEIGHTED:  # whole rows: the legacy types' sigma² is the row's
            step = max(1, piece // n_per_row)
            per_row = n_per_row // block
            for r in range(0, n_rows, step):
                _assemble(name, WEIGHTED[name](x[r : r + step], imatrix), blocks[r * per_row : (r + step) * per_row])
        elif name in fast.QUANTIZERS:
            flat = x.reshape(-1, block)
            step = FAST_CHUNK // block
            for i in range(0, flat.shape[0], step):
                part, dest = flat[i : i + step], blocks[i : i + step]
                if not fast.QUANTIZERS[name](part, dest):  # a piece the shortcuts do not cover: the reference path
                    _assemble(name, REFERENCE[name](part), dest)
        else:
            flat = x.reshape(-1, block)
            step = max(1, piece // block)
            for b in range(0, flat.shape[0], step):
                _assemble(name, REFERENCE[name](flat[b : b + step]), blocks[b : b + step])
    return blocks.tobytes()


def supported() -> frozenset[str]:
    """The type names :func:`quantize` accepts."""
    return SUPPORTED


def mixes() -> frozenset[str]:
    """The names of llama-quantize's mixes a model can be quantized to (``Q4_K_M``, ``Q3_K_S``, ``IQ2_M`` …, spelt
    as llama-quantize spells them), besides the ggml types of :func:`supported`: see :func:`.policy.mixes`."""
    from .policy import mixes as table

    return frozenset(table())


__all__ = ["mixes", "quantize", "supported"]
