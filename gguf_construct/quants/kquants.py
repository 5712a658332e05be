"""Kernels of the k-quants (Q2_K … Q6_K, Q8_K) and the ternary types TQ1_0 and TQ2_0 (super-blocks of 256).

Same contract as :mod:`.common`. A k-quant carries 8 or 16 sub-block scales (and mins) per super-block; each is
turned into a float32 sub-block scale as ggml does it (``d * sc``, ``dmin * m``), then
``y = (d * sc) * q - (dmin * m)`` for every value of the sub-block.
"""

from __future__ import annotations

import numpy as np

from .floats import half_to_float
from .kernel_parts import U8, U32, U64, field, finish, interleave, nibble_planes, nibbles, packed, per_group, place, planes

F32 = np.float32


def _two_bit_codes(qs: np.ndarray) -> np.ndarray:
    """``(n, 64)`` bytes → ``(n, 256)`` codes 0..3: per 32-byte half, the 2-bit fields at shift 0, 2, 4, 6.

    That is the element order of Q2_K, Q3_K and TQ2_0: 16-value groups one after the other.
    """
    n = qs.shape[0]
    fields = planes(qs, [0, 2, 4, 6], 3).reshape(4, n, 2, 32)  # [shift, block, half, l]
    codes = np.empty((n, 2, 4, 32), U8)
    place(codes, fields.transpose(1, 2, 0, 3))
    return codes.reshape(n, 256)


def q2_K(blocks: np.ndarray, out: np.ndarray) -> None:
    sc = packed(blocks, "scales")
    dl = per_group(half_to_float(blocks["d"]), sc & U8(0xF))
    ml = per_group(half_to_float(blocks["dmin"]), sc >> U8(4))
    finish(_two_bit_codes(packed(blocks, "qs")), out, dl, minus=ml)


def _q3_scales(blocks: np.ndarray) -> np.ndarray:
    """Q3_K's 16 six-bit scales as ggml unpacks them: three uint32 words into four, then each byte minus 32."""
    aux = packed(blocks, "scales").view(U32)  # (n, 3)
    k1, k2 = np.uint32(0x03030303), np.uint32(0x0F0F0F0F)
    a0, a1, tmp = aux[:, 0], aux[:, 1], aux[:, 2]
    words = np.empty((aux.shape[0], 4), U32)
    words[:, 0] = (a0 & k2) | (((tmp >> np.uint32(0)) & k1) << np.uint32(4))
    words[:, 1] = (a1 & k2) | (((tmp >> np.uint32(2)) & k1) << np.uint32(4))
    words[:, 2] = ((a0 >> np.uint32(4)) & k2) | (((tmp >> np.uint32(4)) & k1) << np.uint32(4))
    words[:, 3] = ((a1 >> np.uint32(4)) & k2) | (((tmp >> np.uint32(6)) & k1) << np.uint32(4))
    scales = words.view(U8)
    scales -= U8(32)
    return scales.view(np.int8)


def q3_K(blocks: np.ndarray, out: np.ndarray) -> None:
    n = blocks.shape[0]
    codes = _two_bit_codes(packed(blocks, "qs")).reshape(n, 2, 4, 32)
    hmask = planes(packed(blocks, "hmask"), range(8), 1).reshape(2, 4, n, 32)  # bit 4*half + j of hmask[l]
    high = np.empty_like(codes)
    place(high, hmask.transpose(2, 0, 1, 3))
    high <<= U8(2)
    codes |= high
    codes -= U8(4)  # (q & 3) - (hmask bit clear ? 4 : 0)
    dl = per_group(half_to_float(blocks["d"]), _q3_scales(blocks))
    finish(codes.reshape(n, 256).view(np.int8), out, dl)


def _k4_scales(blocks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """ggml's ``get_scale_min_k4`` for j = 0..7, on 32-bit words: the 6-bit scales and mins of Q4_K/Q5_K."""
    q = packed(blocks, "scales").view(U32)  # (n, 3)
    low6, low4, top2 = np.uint32(0x3F3F3F3F), np.uint32(0x0F0F0F0F), np.uint32(0x03030303)
    sc = np.empty((q.shape[0], 2), U32)
    m = np.empty((q.shape[0], 2), U32)
    sc[:, 0] = q[:, 0] & low6
    m[:, 0] = q[:, 1] & low6
    sc[:, 1] = (q[:, 2] & low4) | (((q[:, 0] >> np.uint32(6)) & top2) << np.uint32(4))
    m[:, 1] = ((q[:, 2] >> np.uint32(4)) & low4) | (((q[:, 1] >> np.uint32(6)) & top2) << np.uint32(4))
    return sc.view(U8), m.view(U8)


def _k4_finish(blocks: np.ndarray, codes: np.ndarray, out: np.ndarray) -> None:
    sc, m = _k4_scales(blocks)
    d1 = per_group(half_to_float(blocks["d"]), sc)
    m1 = per_group(half_to_float(blocks["dmin"]), m)
    finish(codes, out, d1, minus=m1)


def q4_K(blocks: np.ndarray, out: np.ndarray) -> None:
    _k4_finish(blocks, nibbles(field(blocks, "qs"), 32), out)


def q5_K(blocks: np.ndarray, out: np.ndarray) -> None:
    planes_ = nibble_planes(field(blocks, "qs"), 32).view(U64)  # (8, n, 4): sub-block s, words of 8 codes
    qh = packed(blocks, "qh").view(U64)  # (n, 4): sub-block s takes bit s of each byte, as bit 4 of its code
    bits = np.empty_like(qh)  # contiguous, so that each operation below is one long loop, not n loops of 4
    for s, plane in enumerate(planes_):
        if s <= 4:
            np.left_shift(qh, np.uint64(4 - s), out=bits)
        else:
            np.right_shift(qh, np.uint64(s - 4), out=bits)
        bits &= np.uint64(0x1010101010101010)
        plane |= bits
    _k4_finish(blocks, interleave(planes_.view(U8)), out)


def q6_K(blocks: np.ndarray, out: np.ndarray) -> None:
    n = blocks.shape[0]
    ql = packed(blocks, "ql").reshape(n, 2, 64)  # per half: ql[l] and ql[l + 32], l < 32
    codes: np.ndarray = np.empty((n, 2, 128), U8)  # per half: quarters 0, 1 from low nibbles, 2, 3 from high ones
    place(codes[:, :, :64], ql & U8(0xF))
    place(codes[:, :, 64:], ql >> U8(4))
    codes = codes.reshape(n, 2, 4, 32)  # [half, quarter, l]
    high = np.empty_like(codes)
    place(high, planes(packed(blocks, "qh"), [0, 2, 4, 6], 3).reshape(4, n, 2, 32).transpose(1, 2, 0, 3))
    high <<= U8(4)
    codes |= high
    codes -= U8(32)
    ds = per_group(half_to_float(blocks["d"]), packed(blocks, "scales").view(np.int8))  # d * sc
    finish(codes.reshape(n, 256).view(np.int8), out, ds)


def q8_K(blocks: np.ndarray, out: np.ndarray) -> None:
    """Q8_K: d * qs (``bsums`` only serve dot products); ggml's dequantize_row_q8_K."""
    finish(packed(blocks, "qs").view(np.int8), out, blocks["d"].astype(F32)[:, None])


def _trits(data: np.ndarray, count: int) -> np.ndarray:
    """TQ1_0's base-3 digits minus 1, digit-major: ``(count,) + data.shape`` int8.

    ggml computes ``q = byte * 3**k`` (uint8, wrapping) then ``(q * 3) >> 8``, which is 0, 1 or 2 as q is
    below 86, below 171, or above.
    """
    q = data[None] * np.array([1, 3, 9, 27, 81], U8)[:count].reshape(-1, *([1] * data.ndim))
    digits = (q > U8(85)).view(np.int8) + (q > U8(170)).view(np.int8)
    digits -= np.int8(1)
    return digits


def tq1_0(blocks: np.ndarray, out: np.ndarray) -> None:
    n = blocks.shape[0]
    qs = _trits(packed(blocks, "qs"), 5)  # (5, n, 48)
    qh = _trits(packed(blocks, "qh"), 4)  # (4, n, 4)
    codes = np.empty((n, 256), np.int8)  # digit-major within 32 bytes, then 16 bytes, then qh's 4
    first, second, last = codes[:, :160], codes[:, 160:240], codes[:, 240:]
    place(first.reshape(n, 5, 32), qs[:, :, :32].transpose(1, 0, 2))
    place(second.reshape(n, 5, 16), qs[:, :, 32:].transpose(1, 0, 2))
    place(last.reshape(n, 4, 4), qh.transpose(1, 0, 2))
    finish(codes, out, half_to_float(blocks["d"])[:, None])


def tq2_0(blocks: np.ndarray, out: np.ndarray) -> None:
    codes = _two_bit_codes(packed(blocks, "qs"))
    codes -= U8(1)
    finish(codes.view(np.int8), out, half_to_float(blocks["d"])[:, None])


KERNELS = {
    "q2_K": q2_K,
    "q3_K": q3_K,
    "q4_K": q4_K,
    "q5_K": q5_K,
    "q6_K": q6_K,
    "q8_K": q8_K,
    "tq1_0": tq1_0,
    "tq2_0": tq2_0,
}
