"""Small-float conversions exactly as ggml's C does them, and the kernels of the plain float types.

ggml turns a half into a float with ``ggml_compute_fp16_to_fp32`` (ggml-impl.h), a bit trick whose only
difference from a plain IEEE widening is that signalling NaNs come out quiet (they pass through a float
multiply). numpy's ``float16 → float32`` cast keeps them signalling, so the conversion here is a 65536-entry
table computed once with ggml's own formula. The 8-bit scale formats (E8M0 for MXFP4, UE4M3 for NVFP4) are
256-entry tables built the same way.
"""

from __future__ import annotations

from functools import cache

import numpy as np

U32 = np.uint32


def _bits_to_f32(bits: np.ndarray) -> np.ndarray:
    return bits.astype(U32).view(np.float32)


@cache
def half_table() -> np.ndarray:
    """float32 value of every half bit pattern, by ggml's ``ggml_compute_fp16_to_fp32``."""
    w = np.arange(1 << 16, dtype=U32) << U32(16)
    two_w = w + w
    with np.errstate(invalid="ignore"):
        normalized = _bits_to_f32((two_w >> U32(4)) + U32(0xE0 << 23)) * np.float32(2.0**-112)
    denormalized = _bits_to_f32((two_w >> U32(17)) | U32(126 << 23)) - np.float32(0.5)
    magnitude = np.where(two_w < U32(1 << 27), denormalized.view(U32), normalized.view(U32))
    table = (w & U32(0x80000000)) | magnitude
    table.flags.writeable = False
    return table.view(np.float32)


def half_to_float(halves: np.ndarray) -> np.ndarray:
    """ggml's float32 for an array of halves (a ``<f2`` or ``<u2`` field, any shape or strides)."""
    return half_table()[halves.view("<u2")]


@cache
def e8m0_half_table() -> np.ndarray:
    """ggml's ``ggml_e8m0_to_fp32_half``: 2**(e - 128), with e = 0 and 1 as float32 subnormals, never NaN."""
    e = np.arange(256, dtype=U32)
    bits = np.where(e < 2, U32(0x00200000) << e, (e - U32(1)) << U32(23))
    return _bits_to_f32(bits)


@cache
def ue4m3_table() -> np.ndarray:
    """ggml's ``ggml_ue4m3_to_fp32``: unsigned E4M3 (bias 7, sign bit ignored) times 0.5; 0x00 and 0x7F give 0."""
    x = np.arange(256)
    exp = (x >> 3) & 0xF
    man = (x & 7).astype(np.float32)
    subnormal = np.ldexp(man, -9).astype(np.float32)
    normal = np.ldexp(np.float32(1) + man / np.float32(8), exp - 7).astype(np.float32)
    raw = np.where(exp == 0, subnormal, normal).astype(np.float32)
    raw[(x == 0) | (x == 0x7F)] = 0
    return raw * np.float32(0.5)


def f16(blocks: np.ndarray, out: np.ndarray) -> None:
    """F16 (ggml_fp16_to_fp32_row), in place in ``out``, faster than the table for whole tensors.

    The half's sign, exponent and mantissa are moved to their float32 positions (the int16 → int32 cast
    sign-extends, the mask clears the copies of the sign); read as float32 that is the half's value times
    2**-112, exactly, subnormals included, so a multiply by 2**112 finishes it. Infinities and NaNs (exponent 31)
    would come out finite: those few are taken from :func:`half_table`.
    """
    halves = blocks["value"].view("<u2")
    bits = out.view(np.int32)[:, 0]
    np.copyto(bits, halves.view("<i2"), casting="unsafe")
    bits <<= np.int32(13)
    bits &= np.int32(-0x70000001)  # 0x8FFFFFFF
    out *= np.float32(2.0**112)
    special = (halves & np.uint16(0x7C00)) == np.uint16(0x7C00)
    if special.any():
        where = np.flatnonzero(special)
        out[where, 0] = half_table()[halves[where]]


def bf16(blocks: np.ndarray, out: np.ndarray) -> None:
    """BF16: the 16 bits become the high half of a float32 (ggml_compute_bf16_to_fp32; NaNs unchanged)."""
    bits = out.view(U32)[:, 0]
    bits[...] = blocks["bits"]
    bits <<= U32(16)


def f32(blocks: np.ndarray, out: np.ndarray) -> None:
    out[:, 0] = blocks["value"]


KERNELS = {"f16": f16, "bf16": bf16, "f32": f32}
