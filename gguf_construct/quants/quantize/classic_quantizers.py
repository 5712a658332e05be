"""ggml's one-scale block quantizers (``quantize_row_*_ref`` in ggml-quants.c): Q4_0, Q4_1, Q5_0, Q5_1, Q8_0,
Q8_1, Q1_0, Q2_0, MXFP4, NVFP4.

Each takes the values as ``(n_blocks, block_size)`` float32 and returns the block fields by name; the caller builds
them through the type's declared dtype. Per-element work is vectorised; loops run over the positions of a block,
in the order C visits them, so that ties and running maxima resolve as in C.
"""

from __future__ import annotations

import numpy as np

from .. import grids
from ..floats import e8m0_half_table, ue4m3_table
from .cfloat import F32, fp32_to_fp16_bits, roundf, seqsum, trunc_int

FLT_MAX = np.finfo(np.float32).max


def abs_max(cols: np.ndarray, axis: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``if (amax < fabsf(v)) { amax = fabsf(v); max = v; }`` along ``axis``: (amax, max), first index wins,
    NaNs skipped. Without NaNs that is numpy's argmax (first occurrence), with +0.0 for an all-zero group."""
    a = np.abs(cols)
    if np.isnan(a).any():
        a, cols = np.moveaxis(a, axis, 0), np.moveaxis(cols, axis, 0)
        amax = np.zeros(cols.shape[1:], F32)
        vmax = np.zeros(cols.shape[1:], F32)
        for c, ac in zip(cols, a):
            take = amax < ac
            amax = np.where(take, ac, amax)
            vmax = np.where(take, c, vmax)
        return amax, vmax
    idx = np.expand_dims(np.argmax(a, axis=axis), axis)
    amax = np.take_along_axis(a, idx, axis).squeeze(axis)
    vmax = np.take_along_axis(cols, idx, axis).squeeze(axis)
    return amax, np.where(amax > 0, vmax, F32(0))


def macro_abs_max(cols: np.ndarray, axis: int = 0) -> np.ndarray:
    """``amax = MAX(amax, fabsf(v))`` with ggml's ``MAX(a, b) = a > b ? a : b`` (a NaN replaces amax)."""
    a = np.abs(cols)
    if not np.isnan(a).any():
        return np.maximum(a.max(axis=axis), F32(0))
    a = np.moveaxis(a, axis, 0)
    amax = np.zeros(a.shape[1:], F32)
    for c in a:
        amax = np.where(amax > c, amax, c)
    return amax


def min_max(cols: np.ndarray, axis: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``min = FLT_MAX; max = -FLT_MAX; if (v < min) min = v; if (v > max) max = v;``: numpy's first arg-extremes
    (which keep the first of equal signed zeros, as C's strict comparisons do) when there is no NaN."""
    if np.isnan(cols).any():
        cols = np.moveaxis(cols, axis, 0)
        vmin = np.full(cols.shape[1:], FLT_MAX, F32)
        vmax = np.full(cols.shape[1:], -FLT_MAX, F32)
        for c in cols:
            vmin = np.where(c < vmin, c, vmin)
            vmax = np.where(c > vmax, c, vmax)
        return vmin, vmax
    vmin = np.take_along_axis(cols, np.expand_dims(np.argmin(cols, axis=axis), axis), axis).squeeze(axis)
    vmax = np.take_along_axis(cols, np.expand_dims(np.argmax(cols, axis=axis), axis), axis).squeeze(axis)
    return np.minimum(vmin, FLT_MAX), np.maximum(vmax, -FLT_MAX)


def inverse(d: np.ndarray) -> np.ndarray:
    """``d ? 1.0f/d : 0.0f`` (NaN is true in C)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(d != 0, F32(1) / np.where(d != 0, d, F32(1)), F32(0)).astype(F32)


def _mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore", invalid="ignore"):
        return a * b


def pack_nibbles(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """``qs[j] = lo | hi << 4`` stored in a byte (the low 8 bits)."""
    return lo.astype(np.uint8) | (hi.astype(np.uint8) << np.uint8(4))  # integer casts keep the low byte


def pack_high_bits(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Q5's ``qh``: bit 4 of element j at bit j (and of element j + 16 at bit j + 16), as 4 little-endian bytes."""
    bits = np.concatenate([(lo >> 4) & 1, (hi >> 4) & 1], axis=1).astype(np.uint8)
    return np.packbits(bits, axis=1, bitorder="little")


def _int8_min(v: np.ndarray, top: int) -> np.ndarray:
    """``MIN(top, (int8_t)v)`` as an int."""
    return np.minimum(trunc_int(v).astype(np.int8).astype(np.int32), top)


def _halves(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    half = x.shape[1] // 2
    return x[:, :half], x[:, half:]


def q4_0(x: np.ndarray) -> dict[str, np.ndarray]:
    _, vmax = abs_max(x, 1)
    d = vmax / F32(-8)
    idv = inverse(d)[:, None]
    lo, hi = (_int8_min(_mul(h, idv) + F32(8.5), 15) for h in _halves(x))
    return {"d": fp32_to_fp16_bits(d), "qs": pack_nibbles(lo & 0xFF, hi)}


def q4_1(x: np.ndarray) -> dict[str, np.ndarray]:
    vmin, vmax = min_max(x, 1)
    with np.errstate(over="ignore", invalid="ignore"):
        d = (vmax - vmin) / F32(15)
        idv = inverse(d)[:, None]
        lo, hi = (_int8_min(_mul(h - vmin[:, None], idv) + F32(0.5), 15) for h in _halves(x))
    return {"d": fp32_to_fp16_bits(d), "m": fp32_to_fp16_bits(vmin), "qs": pack_nibbles(lo & 0xFF, hi)}


def q5_0(x: np.ndarray) -> dict[str, np.ndarray]:
    _, vmax = abs_max(x, 1)
    d = vmax / F32(-16)
    idv = inverse(d)[:, None]
    lo, hi = (_int8_min(_mul(h, idv) + F32(16.5), 31) & 0xFF for h in _halves(x))
    return {"d": fp32_to_fp16_bits(d), "qh": pack_high_bits(lo, hi), "qs": pack_nibbles(lo & 0xF, hi & 0xF)}


def q5_1(x: np.ndarray) -> dict[str, np.ndarray]:
    vmin, vmax = min_max(x, 1)
    with np.errstate(over="ignore", invalid="ignore"):
        d = (vmax - vmin) / F32(31)
        idv = inverse(d)[:, None]
        lo, hi = (trunc_int(_mul(h - vmin[:, None], idv) + F32(0.5)) & 0xFF for h in _halves(x))
    return {
        "d": fp32_to_fp16_bits(d),
        "m": fp32_to_fp16_bits(vmin),
        "qh": pack_high_bits(lo, hi),
        "qs": pack_nibbles(lo & 0xF, hi & 0xF),
    }


def _q8(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    d = macro_abs_max(x, 1) / F32(127)
    qs = trunc_int(roundf(_mul(x, inverse(d)[:, None]))).astype(np.int8)
    return d, qs


def q8_0(x: np.ndarray) -> dict[str, np.ndarray]:
    d, qs = _q8(x)
    return {"d": fp32_to_fp16_bits(d), "qs": qs}


def q8_1(x: np.ndarray) -> dict[str, np.ndarray]:
    """Q8_0 plus ``s = sum(qs) * d`` (the int sum converted to float, then one float multiply)."""
    d, qs = _q8(x)
    s = qs.astype(np.int32).sum(axis=1).astype(F32) * d
    return {"d": fp32_to_fp16_bits(d), "s": fp32_to_fp16_bits(s), "qs": qs}


def q1_0(x: np.ndarray) -> dict[str, np.ndarray]:
    """Q1_0: d = mean |x| (summed in order), one bit per value: set when x >= 0."""
    d = seqsum(np.abs(x.T)) / F32(x.shape[1])
    return {"d": fp32_to_fp16_bits(d), "qs": np.packbits(x >= 0, axis=1, bitorder="little")}


def q2_0(x: np.ndarray) -> dict[str, np.ndarray]:
    """Q2_0: d = max |x| (``if (a > amax)``: a NaN never replaces it), two bits per value: ``(int)roundf(x / d)``
    clamped to -1..2, plus 1, four values a byte from the low bits up."""
    with np.errstate(invalid="ignore"):
        d = np.fmax.reduce(np.abs(x), axis=1, initial=F32(0)).astype(F32)
    q = np.clip(trunc_int(roundf(_mul(x, inverse(d)[:, None]))).astype(np.int64) + 1, 0, 3).astype(np.uint8)
    q = q.reshape(x.shape[0], -1, 4)
    qs = q[..., 0] | (q[..., 1] << np.uint8(2)) | (q[..., 2] << np.uint8(4)) | (q[..., 3] << np.uint8(6))
    return {"d": fp32_to_fp16_bits(d), "qs": qs}


_FP4 = np.array(grids.KVALUES_FP4, np.int8).astype(F32)


_FP4_MAGNITUDES = _FP4[:8]  # 0, 1, 2, 3, 4, 6, 8, 12; codes 8..15 are their negatives


def best_fp4(x: np.ndarray, e: np.ndarray) -> np.ndarray:
    """ggml's ``best_index_mxfp4``: the first of the 16 E2M1 codes with the smallest ``|k * e - x|``.

    For x >= 0 a negative code's error ``k e + x`` never beats its positive twin (ties go to the earlier, positive
    code); for x < 0 the mirror holds, except that code 0 (value 0) comes before code 8 (-0). So the search runs
    over the 8 magnitudes against ``|x|`` (the same float errors, sign-symmetric), by ``argmin`` (first minimum,
    as C's strict ``<``; a NaN error at code 0 wins in both), and the sign picks the half. In chunks of rows."""
    out = np.empty(x.shape, np.uint8)
    step = max(1, (1 << 16) // x.shape[1])
    for i in range(0, x.shape[0], step):
        xs, es = x[i : i + step], e[i : i + step]
        err = np.abs((_FP4_MAGNITUDES * es[..., None]) - np.abs(xs)[..., None])
        j = np.argmin(err, axis=-1).astype(np.uint8)
        out[i : i + step] = np.where((xs < 0) & (j > 0), j + np.uint8(8), j)
    return out


def _e8m0_exponent(amax: np.ndarray) -> np.ndarray:
    """``amax > 0 ? (uint8_t)(floorf(log2f(amax)) - 2 + 127) : 0``; log2 in double, rounded once to float."""
    with np.errstate(divide="ignore", invalid="ignore"):
        lg = np.log2(amax.astype(np.float64)).astype(F32)
        e = trunc_int(np.floor(lg) - F32(2) + F32(127)) & 0xFF
    return np.where(amax > 0, e, 0).astype(np.uint8)


def mxfp4(x: np.ndarray) -> dict[str, np.ndarray]:
    amax, _ = abs_max(x, 1)
    e = _e8m0_exponent(amax)
    d = e8m0_half_table()[e][:, None]
    lo, hi = _halves(x)
    return {"e": e, "qs": pack_nibbles(best_fp4(lo, d), best_fp4(hi, d))}


def fp32_to_ue4m3(x: np.ndarray) -> np.ndarray:
    """ggml's ``ggml_fp32_to_ue4m3``: clamp to 448, round the mantissa half up, subnormals by ``x * 512 + 0.5``."""
    x = np.asarray(x, F32)
    positive = x > F32(0)
    x = np.where(x > F32(448), F32(448), x)
    bits = x.view(np.uint32).astype(np.int64)
    exp = ((bits >> 23) & 0xFF) - 127 + 7
    man = ((bits >> 20) & 7) + ((bits >> 19) & 1)
    exp = np.where(man > 7, exp + 1, exp)
    man = np.where(man > 7, 0, man)
    normal = np.where(exp >= 15, 0x7E, (exp << 3) | man)
    sub = np.minimum(trunc_int(x * F32(512) + F32(0.5)), 7)
    sub = np.where(sub < 1, 0, sub)
    first_exp = ((bits >> 23) & 0xFF) - 127 + 7
    out = np.where(first_exp <= 0, sub, np.where(first_exp >= 15, 0x7E, normal))
    return np.where(positive, out, 0).astype(np.uint8)


def nvfp4(x: np.ndarray) -> dict[str, np.ndarray]:
    """NVFP4: four sub-blocks of 16, each with a UE4M3 scale of amax / 6."""
    n = x.shape[0]
    sub = x.reshape(n * 4, 16)
    amax, _ = abs_max(sub, 1)
    ue = fp32_to_ue4m3(amax / F32(6))
    d = ue4m3_table()[ue][:, None]
    lo, hi = _halves(sub)
    qs = pack_nibbles(best_fp4(lo, d), best_fp4(hi, d))
    return {"d": ue.reshape(n, 4), "qs": qs.reshape(n, 32)}


QUANTIZERS = {f.__name__: f for f in (q4_0, q4_1, q5_0, q5_1, q8_0, q8_1, q1_0, q2_0, mxfp4, nvfp4)}
