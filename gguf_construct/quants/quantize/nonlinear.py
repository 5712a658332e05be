"""ggml's IQ4_NL and IQ4_XS (``quantize_row_iq4_nl_impl`` as ``quantize_iq4_nl``/``quantize_iq4_xs`` call it, with
``ntry = 7`` whether or not an importance matrix is given), and the ternary TQ1_0 and TQ2_0.

IQ4_NL is one 32-value block (its scale is the block's own search result); IQ4_XS is a 256-value super-block of
eight such searches whose scales are then quantized to 6 bits against ``-max_scale / 32``.
"""

from __future__ import annotations

import numpy as np

from .. import grids
from .cfloat import F32, fp32_to_fp16_bits, lroundf, nearest_int, seqsum
from .classic_quantizers import abs_max, inverse, macro_abs_max, pack_nibbles
from .search import GROUP_MAX_EPS, _abs_max

_VALUES = np.array(grids.KVALUES_IQ4NL, np.int8)
_FVALUES = _VALUES.astype(F32)
NTRY = 7


def best_index_int8(x: np.ndarray) -> np.ndarray:
    """ggml's ``best_index_int8(16, kvalues_iq4nl, x)``: the binary search's bracket, then the nearer side (ties
    go up)."""
    mu = np.clip(np.searchsorted(_FVALUES, x, side="right"), 1, 15)
    lo = _FVALUES[mu - 1]
    hi = _FVALUES[mu]
    idx = np.where((x - lo) < (hi - x), mu - 1, mu)
    idx = np.where(x <= _FVALUES[0], 0, idx)
    return np.where(x >= _FVALUES[15], 15, idx).astype(np.uint8)


def _block_scales(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """The per-32 search: ``x``/``w`` are ``(32, G)``; returns ``scales[ib]`` (0 for an all-zero block)."""
    n = x.shape[0]
    amax, vmax = _abs_max(x)
    zero = amax < GROUP_MAX_EPS
    safe_max = np.where(zero, F32(1), vmax)
    d = -safe_max / _FVALUES[0]
    idv = F32(1) / d

    def sums(iv: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        q = _FVALUES[best_index_int8(iv * x)]
        wq = w * q
        t1 = wq * x
        t2 = wq * q
        sqx = np.zeros(x.shape[1:], F32)
        sq2 = np.zeros(x.shape[1:], F32)
        for j in range(n):
            sqx = sqx + t1[j]
            sq2 = sq2 + t2[j]
        return sqx, sq2

    sumqx, sumq2 = sums(idv)
    d = np.where(sumq2 > 0, sumqx / np.where(sumq2 > 0, sumq2, F32(1)), F32(0))
    best = d * sumqx
    for itry in range(-NTRY, NTRY + 1):
        iv = F32(itry + int(_VALUES[0])) / safe_max
        sumqx, sumq2 = sums(iv)
        better = (sumq2 > 0) & (sumqx * sumqx > best * sumq2)
        nd = sumqx / np.where(better, sumq2, F32(1))
        d = np.where(better, nd, d)
        best = np.where(better, nd * sumqx, best)
    return np.where(zero, F32(0), d)


def _weights(x: np.ndarray, qw: np.ndarray | None, sigma2: np.ndarray | None) -> np.ndarray:
    if qw is None:
        return x * x
    return qw * np.sqrt(sigma2 + x * x)


def _groups(values: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(values.reshape(-1, 32).T)


def _pack(L: np.ndarray, n_values: int) -> np.ndarray:
    """``q4[16*i + j] = L[32*i + j] | L[32*i + 16 + j] << 4`` from ``L`` as ``(32, G)``."""
    Lb = np.ascontiguousarray(L.T)
    return pack_nibbles(Lb[:, :16], Lb[:, 16:]).reshape(-1, n_values // 2)


def _iq4_nl(rows: np.ndarray, qw: np.ndarray | None) -> dict[str, np.ndarray]:
    x = _groups(rows)
    sigma2 = None
    if qw is not None:
        sigma2 = seqsum(x * x) * (F32(2) / F32(32))
        qw = _groups(np.tile(qw, (rows.shape[0], 1)))
    scale = _block_scales(x, _weights(x, qw, sigma2))
    L = best_index_int8(inverse(scale) * x)
    return {"d": fp32_to_fp16_bits(scale), "qs": _pack(L, 32)}


def _iq4_xs(rows: np.ndarray, qw: np.ndarray | None) -> dict[str, np.ndarray]:
    sb = rows.reshape(-1, 256)
    nb = sb.shape[0]
    x = _groups(sb)
    sigma2 = None
    if qw is not None:
        sigma2 = np.repeat(seqsum(np.ascontiguousarray((sb * sb).T)) * (F32(2) / F32(256)), 8)
        qw = _groups(np.tile(qw, (rows.shape[0], 1)))
    scales = _block_scales(x, _weights(x, qw, sigma2)).reshape(nb, 8).T
    _, max_scale = abs_max(scales)
    d = -max_scale / F32(32)
    ls = np.maximum(-32, np.minimum(31, nearest_int(inverse(d) * scales)))  # (8, nb)
    dl = d * ls.astype(F32)
    idl = inverse(dl).T.reshape(-1)
    L = best_index_int8(idl * x)
    ls = (ls + 32).astype(np.uint16)
    scales_l = ((ls[0::2] & 0xF) | ((ls[1::2] & 0xF) << 4)).astype(np.uint8).T
    scales_h = np.zeros(nb, np.uint16)
    for ib in range(8):
        scales_h |= (ls[ib] >> 4) << (2 * ib)
    return {"d": fp32_to_fp16_bits(d), "scales_h": scales_h, "scales_l": scales_l, "qs": _pack(L, 256)}


def _ternary(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """TQ1_0/TQ2_0: d = max |x| (ggml's MAX macro), codes ``lroundf(x * id) + 1`` as C's int (low 32 bits)."""
    amax = macro_abs_max(x, 1)
    codes = (lroundf(x * inverse(amax)[:, None]) + 1).astype(np.int32)
    return amax, codes


def tq1_0(x: np.ndarray) -> dict[str, np.ndarray]:
    """Five trits per byte (first value most significant), as ``q * 256 / 243`` rounded up."""
    nb = x.shape[0]
    d, codes = _ternary(x)

    def pack(trits: np.ndarray) -> np.ndarray:  # (nb, k, m) → base-3 number of the k trits, in a uint8
        q = np.zeros(trits.shape[::2], np.int32)
        for n in range(trits.shape[1]):
            q = (q * 3 + trits[:, n]) & 0xFF
        return ((q * 256 + 242) // 243) & 0xFF

    qs_a = pack(codes[:, :160].reshape(nb, 5, 32))
    qs_b = pack(codes[:, 160:240].reshape(nb, 5, 16))
    q = np.zeros((nb, 4), np.int32)  # qh: four trits per byte, then "* 3" puts the first in the top trit
    tail = codes[:, 240:].reshape(nb, 4, 4)
    for m in range(4):
        q = (q * 3 + tail[:, m]) & 0xFF
    q = (q * 3) & 0xFF
    qh = ((q * 256 + 242) // 243) & 0xFF
    return {"qs": np.concatenate([qs_a, qs_b], axis=1).astype(np.uint8), "qh": qh.astype(np.uint8), "d": fp32_to_fp16_bits(d)}


def tq2_0(x: np.ndarray) -> dict[str, np.ndarray]:
    nb = x.shape[0]
    d, codes = _ternary(x)
    c = (codes & 3).reshape(nb, 2, 4, 32)
    q = c[:, :, 0] + (c[:, :, 1] << 2) + (c[:, :, 2] << 4) + (c[:, :, 3] << 6)
    return {"qs": (q & 0xFF).astype(np.uint8).reshape(nb, 64), "d": fp32_to_fp16_bits(d)}


QUANTIZERS = {
    "tq1_0": tq1_0,
    "tq2_0": tq2_0,
    "iq4_nl": lambda x: _iq4_nl(x, None),
    "iq4_xs": lambda x: _iq4_xs(x, None),
}
WEIGHTED = {"iq4_nl": _iq4_nl, "iq4_xs": _iq4_xs}
