"""C's float32 arithmetic as ggml's quantizers compile it, vectorised over groups.

ggml-python's ``libggml-base`` is built for plain SSE2 (no FMA contraction, no ``-ffast-math``), so every C
expression is a sequence of correctly rounded float32 operations in source order, and sums are accumulated one term
at a time. The helpers here keep that order: a "group" axis runs across blocks (vectorised), and a sum over a
block's elements is a Python loop over its columns (numpy's own ``sum`` pairs terms differently). Integer
conversions follow x86: ``cvttss2si`` gives ``INT_MIN`` for NaN and out-of-range values, and a narrower C integer
keeps the low bits.
"""

from __future__ import annotations

import numpy as np

from ..floats import half_to_float

F32 = np.float32
I32 = np.int32
INT_MIN = np.int32(-(2**31))


def f32(value: float) -> np.float32:
    """A C ``float`` literal (``0.1f``) or a C double constant converted to float."""
    return np.float32(value)


def seqsum(columns: np.ndarray) -> np.ndarray:
    """``float s = 0; for (i...) s += c[i];`` over the leading axis of ``columns`` (shape ``(n, ...)``)."""
    acc = np.zeros(columns.shape[1:], F32)
    for c in columns:
        acc = acc + c
    return acc


def nearest_int(v: np.ndarray) -> np.ndarray:
    """ggml's ``nearest_int``: add 1.5 * 2**23 in float32 and read the low mantissa bits (int32)."""
    bits = (np.asarray(v, F32) + F32(12582912.0)).view(I32)
    return (bits & I32(0x007FFFFF)) - I32(0x00400000)


def trunc_int(v: np.ndarray) -> np.ndarray:
    """``(int)v`` on x86 (cvttss2si): toward zero, ``INT_MIN`` for NaN and values outside int32 (int32)."""
    v = np.asarray(v, F32)
    with np.errstate(invalid="ignore"):
        out = v.astype(I32)
        bad = ~(np.abs(v) < F32(2.0**31))
    if bad.any():
        out[bad] = INT_MIN
    return out


def roundf(v: np.ndarray) -> np.ndarray:
    """C ``roundf`` (half away from zero) as float32, for values about to become integers: ``t + trunc(2 (v - t))``
    with ``t = trunc(v)`` is exact (the fraction and its double are exact); an infinity comes out NaN, which every
    caller's conversion to int treats alike (``INT_MIN``)."""
    v = np.asarray(v, F32)
    t = np.trunc(v)
    frac = v - t
    frac += frac
    np.trunc(frac, out=frac)
    frac += t
    return frac


def lroundf(v: np.ndarray) -> np.ndarray:
    """glibc ``lroundf`` (int64): half away from zero, ``LONG_MIN`` for NaN and values outside int64."""
    v = np.asarray(v, F32)
    ok = np.abs(v) < F32(2.0**63)
    with np.errstate(invalid="ignore"):
        return np.where(ok, roundf(np.where(ok, v, F32(0))).astype(np.int64), np.int64(-(2**63)))


def fp32_to_fp16_bits(v: np.ndarray) -> np.ndarray:
    """``GGML_FP32_TO_FP16``: round to nearest even (numpy's cast), NaN → sign | 0x7E00 (uint16)."""
    v = np.asarray(v, F32)
    with np.errstate(over="ignore", invalid="ignore"):
        bits = v.astype(np.float16).view(np.uint16)
    nan = np.isnan(v)
    if nan.any():
        sign = (v.view(np.uint32) >> np.uint32(16)).astype(np.uint16) & np.uint16(0x8000)
        bits = np.where(nan, sign | np.uint16(0x7E00), bits)
    return bits


def fp16_round(v: np.ndarray) -> np.ndarray:
    """``GGML_FP16_TO_FP32(GGML_FP32_TO_FP16(v))``: the float32 a stored half scale reads back as."""
    return half_to_float(fp32_to_fp16_bits(v))


def fp32_to_bf16_bits(v: np.ndarray) -> np.ndarray:
    """``ggml_compute_fp32_to_bf16``: round to nearest even on the bit pattern; NaN truncated and made quiet."""
    u = np.ascontiguousarray(v, F32).view(np.uint32)
    r = u >> np.uint32(16)
    r &= np.uint32(1)
    r += np.uint32(0x7FFF)
    r += u
    r >>= np.uint32(16)
    out = r.astype(np.uint16)
    nan = np.flatnonzero((u & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000))
    if nan.size:
        out.reshape(-1)[nan] = ((u.reshape(-1)[nan] >> np.uint32(16)) | np.uint32(64)).astype(np.uint16)
    return out
