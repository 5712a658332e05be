"""Fast paths for the one-pass types (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, TQ1_0, TQ2_0, MXFP4) and the plain float types
(F16, BF16): the same bytes as :mod:`.legacy`, :mod:`.nonlinear` and :mod:`.cfloat`, in fewer whole-array passes.

Each quantizer takes one cache-sized piece of blocks ``(n_blocks, block_size)`` float32 and writes the fields into
its slice of the declared block array. It returns False, having written nothing, when the piece holds a value its
shortcuts do not cover (NaN, ±inf, a scale whose inverse overflows, an MXFP4 scale outside ``2**±100``); the caller
then runs the reference quantizer on that piece. The shortcuts, and why each gives C's bytes:

- Every float32 product, difference and sum C computes is still one float32 operation here (numpy rounds each
  float32 ufunc once, as SSE2 does; ggml-python's build has no FMA contraction), so nothing needs float64.
- C's ``(int8_t)(v)`` and ``(int)(v)`` truncate; for finite ``v`` inside the target's range numpy's float → int
  cast truncates too. The guard (finite values, finite inverse scale) bounds every such ``v``: ``|x * id| <= amax *
  id``, and ``amax * id`` is the block's extreme times its own inverse, within 1 ulp of the step count (8, 16, 15,
  31, 127 or 1), so every cast is in range.
- ``roundf(v)`` (half away from zero) is ``trunc(v + copysign(0.49999997f, v))`` in float32 for ``|v| < 2**23``:
  below 0.5 the sum stays below 1; ``k + 0.5`` gives ``k + 0.99999997``, which rounds to ``k + 1`` (a tie to even
  in [0.5, 1), round-up above); and ``k + 0.5 - ulp`` sums to at most ``k + 1 - ulp``. ``tests/quants/test_quantize.py``
  checks it against :func:`.cfloat.roundf` on every float32 in [0.25, 256).
- ``lroundf(v) + 1`` for ``|v| <= 1 + ulp`` (the ternary types) is ``1 + (v >= 0.5) - (v <= -0.5)``.
- A running maximum with C's strict ``<`` keeps the first of equal values; values only tie in magnitude when the
  block holds ``v`` and ``-v``, or ``±0``, so ``argmax`` (first occurrence) gives C's signed maximum, and ``min``/
  ``max`` are C's except for the sign of a zero extreme, which is re-read at its first occurrence.
"""

from __future__ import annotations

import numpy as np

from .. import grids
from ..floats import e8m0_half_table
from .cfloat import F32, fp32_to_fp16_bits
from .classic_quantizers import _e8m0_exponent

U32 = np.uint32
#: float32 0.49999997 (0.5 - 2**-25): ``trunc(v + copysign(HALF_DOWN, v)) == roundf(v)``
HALF_DOWN_BITS = U32(0x3EFFFFFF)
SIGN = U32(0x80000000)


def _finite(*arrays: np.ndarray) -> bool:
    return all(bool(np.isfinite(a).all()) for a in arrays)


def _inverse(d: np.ndarray) -> np.ndarray:
    """``d ? 1.0f/d : 0.0f`` (:func:`.legacy.inverse` in one ufunc call; a NaN ``d`` is caught by the guards)."""
    return np.divide(F32(1), d, out=np.zeros_like(d), where=d != 0)


def _first_index(x: np.ndarray, arg, a: np.ndarray | None = None) -> np.ndarray:
    """``arg`` (``np.argmax``/``np.argmin``: the first occurrence) of each row of ``x``, or of ``|x|`` written into
    ``a``, as flat indices. (Along 32-value rows this costs about 1 ns a value, mostly per-row overhead; numpy's
    ``max``/``min`` along the rows cost more, and a tree of whole-array ``maximum`` passes about as much.)"""
    if a is not None:
        x = np.abs(x, out=a)
    flat = arg(x, axis=1)
    flat += np.arange(0, x.size, x.shape[1])
    return flat


def _abs_max(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(``max |x|`` per row, ``|x|``): ``argmax`` then a gather, faster than numpy's ``max`` along short rows; a NaN
    is its own maximum (the guards then decline the piece)."""
    a = np.empty_like(x)
    return a.reshape(-1)[_first_index(x, np.argmax, a)], a


def _signed_abs_max(x: np.ndarray, a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``if (amax < fabsf(v)) { amax = fabsf(v); max = v; }`` per row: the first value of largest magnitude,
    +0.0 for an all-zero row (C never updates its initial 0). ``a`` receives ``|x|``."""
    flat = _first_index(x, np.argmax, a)
    vmax = x.reshape(-1)[flat]
    amax = a.reshape(-1)[flat]
    vmax[amax == 0] = 0
    return amax, vmax


def _first_extreme(x: np.ndarray, arg) -> np.ndarray:
    """The row's first minimum or maximum (``arg``: ``np.argmin``/``np.argmax``, which return the first
    occurrence, so of equal zeros the sign C's strict comparison keeps; a NaN is returned, for the guards)."""
    return x.reshape(-1)[_first_index(x, arg)]


def _trunc_u8(v: np.ndarray, out: np.ndarray) -> np.ndarray:
    """``(uint8)(int)v`` for finite ``v`` in [0, 256): numpy's cast truncates like C's."""
    out[...] = v
    return out


_ONES = np.uint64(0x0101010101010101)


def _min_top(q: np.ndarray, top: int) -> np.ndarray:
    """``MIN(top, q)`` in place for codes ``q <= top + 1`` with ``top + 1`` a power of two, 8 bytes at a time: a byte
    equal to ``top + 1`` is the only one with that bit set, and loses 1 without borrowing from its neighbour."""
    q64 = q.view(np.uint64)
    over = q64 >> np.uint64(top.bit_length())
    over &= _ONES
    q64 -= over
    return q


def _pack_nibbles(q: np.ndarray, mask: bool = False) -> np.ndarray:
    """``qs[j] = q[j] | q[j + 16] << 4`` (bits 4 and up of ``q[j + 16]`` dropped; ``mask``: ``q[j] & 15`` too), on
    8 bytes at a time: with every ``q[j + 16] & 15`` below 16, a 64-bit shift by 4 never carries across bytes. One
    strided 1-D call per word of a half (not per block: numpy's per-row overhead would dominate)."""
    words = q.shape[1] // 16  # 64-bit words in a half
    flat = q.view(np.uint64).reshape(-1)
    out = np.empty((q.shape[0], words), np.uint64)
    nibbles = np.uint64(0x0F0F0F0F0F0F0F0F)
    for k in range(words):
        col = out[:, k]
        hi, lo = flat[words + k :: 2 * words], flat[k :: 2 * words]
        if mask:
            np.bitwise_and(hi, nibbles, out=col)
            col <<= np.uint64(4)
            col |= lo & nibbles
        else:
            np.left_shift(hi, np.uint64(4), out=col)
            col |= lo
    return out.view(np.uint8)


def _symmetric(x: np.ndarray, blocks: np.ndarray, steps: float, top: int) -> np.ndarray | None:
    """Q4_0/Q5_0: ``d = max / -steps``, ``q = MIN(top, (int8_t)(x * id + steps + 0.5))``; the codes, or None."""
    buf = np.empty_like(x)
    amax, vmax = _signed_abs_max(x, buf)
    d = vmax / F32(-steps)
    idv = _inverse(d)
    if not _finite(amax, idv):
        return None
    np.multiply(x, idv[:, None], out=buf)
    buf += F32(steps + 0.5)  # in [0.5 - ulp, 2 steps + 0.5 + ulp]: positive, so the cast truncates as C does
    q = _min_top(_trunc_u8(buf, np.empty(x.shape, np.uint8)), top)
    blocks["d"] = fp32_to_fp16_bits(d).view("<f2")
    return q


def _affine(x: np.ndarray, blocks: np.ndarray, steps: int, top: int = 255) -> np.ndarray | None:
    """Q4_1/Q5_1: ``d = (max - min) / steps``, ``q = MIN(top, (int)((x - min) * id + 0.5))``; the codes, or None."""
    vmin = _first_extreme(x, np.argmin)
    vmax = _first_extreme(x, np.argmax)
    d = (vmax - vmin) / F32(steps)
    idv = _inverse(d)
    if not _finite(d, idv):  # a finite max - min bounds every x - min
        return None
    buf = np.subtract(x, vmin[:, None])
    buf *= idv[:, None]
    buf += F32(0.5)  # in [0.5, steps + 0.5 + ulp]
    q = _trunc_u8(buf, np.empty(x.shape, np.uint8))
    if top < 255:
        _min_top(q, top)
    blocks["d"] = fp32_to_fp16_bits(d).view("<f2")
    blocks["m"] = fp32_to_fp16_bits(vmin).view("<f2")
    return q


#: multiplying eight 0/1 bytes (little-endian in a uint64) by this puts byte k's bit at bit 56 + k, and nothing else
#: in the top byte: the partial products ``2**(8k + 56 - 7j)`` are distinct bits, in the top byte only for j = k
_GATHER_BITS = np.uint64(0x0102040810204080)


def _high_bits(q: np.ndarray, blocks: np.ndarray) -> None:
    """Q5's ``qh``: bit 4 of element j at bit j, little-endian (q <= 31, so ``q >> 4`` is that bit)."""
    h = q.view(np.uint64) >> np.uint64(4)
    h &= _ONES
    h *= _GATHER_BITS
    h >>= np.uint64(56)
    blocks["qh"] = h


def q4_0(x: np.ndarray, blocks: np.ndarray) -> bool:
    q = _symmetric(x, blocks, 8, 15)
    if q is None:
        return False
    blocks["qs"] = _pack_nibbles(q)
    return True


def q5_0(x: np.ndarray, blocks: np.ndarray) -> bool:
    q = _symmetric(x, blocks, 16, 31)
    if q is None:
        return False
    _high_bits(q, blocks)
    blocks["qs"] = _pack_nibbles(q, mask=True)
    return True


def q4_1(x: np.ndarray, blocks: np.ndarray) -> bool:
    q = _affine(x, blocks, 15, top=15)
    if q is None:
        return False
    blocks["qs"] = _pack_nibbles(q)
    return True


def q5_1(x: np.ndarray, blocks: np.ndarray) -> bool:
    q = _affine(x, blocks, 31)
    if q is None:
        return False
    _high_bits(q, blocks)
    blocks["qs"] = _pack_nibbles(q, mask=True)
    return True


def _roundf_into(v: np.ndarray, bits: np.ndarray) -> np.ndarray:
    """``v + copysign(0.49999997f, v)`` in place (its truncation is ``roundf(v)``); ``bits`` is uint32 scratch."""
    np.bitwise_and(v.view(U32), SIGN, out=bits)
    bits |= HALF_DOWN_BITS
    v += bits.view(F32)
    return v


def q8_0(x: np.ndarray, blocks: np.ndarray) -> bool:
    """``d = amax / 127``, ``qs = roundf(x * id)``."""
    amax, a = _abs_max(x)
    d = amax / F32(127)
    idv = _inverse(d)
    if not _finite(amax, idv):
        return False
    v = np.multiply(x, idv[:, None], out=a)  # |v| <= 127 + ulp
    _roundf_into(v, np.empty(x.shape, U32))
    blocks["qs"] = v  # the int8 cast truncates
    blocks["d"] = fp32_to_fp16_bits(d).view("<f2")
    return True


def _ternary(x: np.ndarray, blocks: np.ndarray) -> np.ndarray | None:
    """TQ1_0/TQ2_0's ``lroundf(x * id) + 1`` with ``d = amax``, as uint8 codes 0, 1, 2; or None."""
    amax, a = _abs_max(x)
    idv = _inverse(amax)
    if not _finite(amax, idv):
        return None
    v = np.multiply(x, idv[:, None], out=a)  # |v| <= 1 + ulp
    codes = np.greater_equal(v, F32(0.5)).view(np.uint8)
    codes += np.uint8(1)
    codes -= np.less_equal(v, F32(-0.5)).view(np.uint8)
    blocks["d"] = fp32_to_fp16_bits(amax).view("<f2")
    return codes


def tq2_0(x: np.ndarray, blocks: np.ndarray) -> bool:
    codes = _ternary(x, blocks)
    if codes is None:
        return False
    c = codes.reshape(-1, 2, 4, 32)
    q = c[:, :, 3] << np.uint8(6)
    q |= c[:, :, 2] << np.uint8(4)
    q |= c[:, :, 1] << np.uint8(2)
    q |= c[:, :, 0]
    blocks["qs"] = q.reshape(-1, 64)
    return True


#: ``(q * 256 + 242) / 243`` as a byte: a base-3 number of up to five trits scaled to a byte, rounded up
_TRITS_TO_BYTE = ((np.arange(256) * 256 + 242) // 243 & 0xFF).astype(np.uint8)


def _trits(t: np.ndarray) -> np.ndarray:
    """``q = q * 3 + t[n]`` over axis 1 (at most five trits: at most 242, no wrap) in uint8."""
    q = t[:, 0].copy()
    for n in range(1, t.shape[1]):
        q *= np.uint8(3)
        q += t[:, n]
    return q


def tq1_0(x: np.ndarray, blocks: np.ndarray) -> bool:
    codes = _ternary(x, blocks)
    if codes is None:
        return False
    nb = x.shape[0]
    qs = blocks["qs"]
    qs[:, :32] = _TRITS_TO_BYTE[_trits(codes[:, :160].reshape(nb, 5, 32))]
    qs[:, 32:] = _TRITS_TO_BYTE[_trits(codes[:, 160:240].reshape(nb, 5, 16))]
    tail = _trits(codes[:, 240:].reshape(nb, 4, 4))
    tail *= np.uint8(3)  # the fifth trit is 0: the first of the four lands in the top trit
    blocks["qh"] = _TRITS_TO_BYTE[tail]
    return True


_FP4_MAG = np.array(grids.KVALUES_FP4[:8], np.int8).astype(np.int64)  # 0, 1, 2, 3, 4, 6, 8, 12
#: for ``t = floor(|x| / e)`` in 0..15: the index of the largest magnitude <= t, that magnitude, and the next one
#: (a sentinel past 12, whose error is never smaller)
_FP4_LO = np.array([int(np.searchsorted(_FP4_MAG, t, side="right")) - 1 for t in range(16)], np.uint8)
_FP4_KLO = _FP4_MAG[_FP4_LO].astype(F32)
_FP4_KHI = np.array([_FP4_MAG[j + 1] if j < 7 else 1e30 for j in _FP4_LO], F32)
_E_LO, _E_HI = F32(2.0**-100), F32(2.0**100)


def _best_fp4(x: np.ndarray, a: np.ndarray, e: np.ndarray) -> np.ndarray:
    """:func:`.legacy.best_fp4` (the first code of smallest ``fabsf(k * e - x)``) by bracketing.

    With ``e`` a power of two in ``2**±100`` and ``|x| < 16 e`` (``e`` is ``2**(floor(log2 amax) - 3)``),
    ``t = |x| * (1/e)`` is exact (or a subnormal below 1), so ``t``'s integer part finds the magnitudes ``klo e <=
    |x| < khi e`` exactly (``k e`` is exact too). The float errors ``|x| - k e`` fall strictly as k rises to klo
    (consecutive ones differ by at least ``e``, far above an ulp of ``|x| < 16 e``) and rise strictly beyond, so
    the first minimum is klo, or khi when its error is strictly smaller, the two float32 errors C computes."""
    inv = np.where(e > 0, F32(1) / np.where(e > 0, e, F32(1)), F32(0))[:, None]
    t8 = np.empty(x.shape, np.uint8)
    u = np.multiply(a, inv)
    t8[...] = u  # < 16, non-negative: truncation is floor
    k = _FP4_KLO[t8]
    k *= e[:, None]
    err_lo = np.subtract(a, k, out=k)
    h = _FP4_KHI[t8]
    h *= e[:, None]
    err_hi = np.subtract(h, a, out=h)
    j = _FP4_LO[t8]
    j += np.less(err_hi, err_lo).view(np.uint8)
    neg = np.less(x, F32(0)).view(np.uint8)
    neg &= np.not_equal(j, 0).view(np.uint8)  # code 0 (value 0) comes before code 8 (-0)
    j += neg << np.uint8(3)
    return j


def mxfp4(x: np.ndarray, blocks: np.ndarray) -> bool:
    amax, a = _abs_max(x)
    if not _finite(amax):
        return False
    e8 = _e8m0_exponent(amax)
    d = e8m0_half_table()[e8]
    zero = amax == 0
    if not bool(((d >= _E_LO) & (d <= _E_HI) | zero).all()):
        return False
    j = _best_fp4(x, a, np.where(zero, F32(0), d))
    blocks["e"] = e8
    blocks["qs"] = _pack_nibbles(j)
    return True


QUANTIZERS = {f.__name__: f for f in (q4_0, q4_1, q5_0, q5_1, q8_0, tq1_0, tq2_0, mxfp4)}


def f16_bits(x: np.ndarray, out: np.ndarray) -> None:
    """``ggml_compute_fp32_to_fp16`` (ggml's portable conversion) over float32 ``x`` into uint16 ``out``. The float
    part is C's, one float32 operation per C operation: ``base = (|f| * 2**112) * 2**-110``, then ``base +=
    from_bits((bias >> 1) + 0x07800000)``. C's ``bias = max((w + w) & 0xFF000000, 0x71000000)`` shifted right once is
    ``max(w & 0x7F800000, 0x38800000)`` (the exponent field, kept in place), computed so. The rest is integer; NaN
    (``w + w > 0xFF000000``) becomes ``sign | 0x7E00``, fixed up only where present."""
    w = x.view(U32)
    base = np.abs(x)
    base *= F32(2.0**112)
    base *= F32(2.0**-110)
    bias = np.bitwise_and(w, U32(0x7F800000))
    np.maximum(bias, U32(0x38800000), out=bias)
    bias += U32(0x07800000)
    base += bias.view(F32)
    bits = base.view(U32)
    np.right_shift(bits, U32(13), out=bias)
    bias &= U32(0x7C00)  # exp_bits
    bits &= U32(0xFFF)  # mantissa_bits
    bias += bits  # nonsign
    np.right_shift(w, U32(16), out=bits)
    bits &= U32(0x8000)  # sign >> 16
    np.bitwise_or(bias, bits, out=out, casting="unsafe")
    if np.isnan(x).any():
        nan = np.flatnonzero(np.isnan(x.reshape(-1)))
        out.reshape(-1)[nan] = bits.reshape(-1)[nan] | U32(0x7E00)


def bf16_bits(x: np.ndarray, out: np.ndarray) -> None:
    """``ggml_compute_fp32_to_bf16`` into uint16 ``out``: ``(u + 0x7FFF + ((u >> 16) & 1)) >> 16``; a NaN is
    truncated and made quiet (``u >> 16 | 64``), fixed up only where present."""
    u = x.view(U32)
    r = np.right_shift(u, U32(16))
    r &= U32(1)
    r += U32(0x7FFF)
    r += u
    np.right_shift(r, U32(16), out=out, casting="unsafe")
    if np.isnan(x).any():
        nan = np.flatnonzero(np.isnan(x.reshape(-1)))
        out.reshape(-1)[nan] = ((u.reshape(-1)[nan] >> U32(16)) | U32(64)).astype(np.uint16)


CONVERTERS = {"f16": f16_bits, "bf16": bf16_bits}
