"""ggml's k-quants (``quantize_row_q{2..6}_K_ref`` and, with an importance matrix, ``quantize_row_q*_K_impl``),
Q8_K (``quantize_row_q8_K_ref``), and the importance-weighted paths of Q4_0, Q4_1, Q5_0 and Q5_1.

Values arrive as ``(n_superblocks, 256)``; the sub-block searches of :mod:`.search` run on all sub-blocks of all
super-blocks at once (``(n, G)`` with the element index first), and the per-super-block logic on ``(16 or 8, nb)``
arrays of sub-block scales.
"""

from __future__ import annotations

import numpy as np

from .cfloat import F32, fp16_round, fp32_to_fp16_bits, nearest_int, seqsum
from .classic_quantizers import abs_max, pack_high_bits, pack_nibbles
from .search import GROUP_MAX_EPS, make_q3_quants, make_qkx_quants, make_qp_quants, make_qx_quants

QK_K = 256


def _groups(x: np.ndarray, size: int) -> np.ndarray:
    """``(nb, 256)`` → ``(size, nb * 256 / size)``: element index first, sub-blocks of all super-blocks across."""
    return np.ascontiguousarray(x.reshape(-1, size).T)


def _ungroup(a: np.ndarray, nb: int) -> np.ndarray:
    """The inverse of :func:`_groups` → ``(nb, 256)``."""
    return np.ascontiguousarray(a.T).reshape(nb, QK_K)


def _running_max(values: np.ndarray) -> np.ndarray:
    """``float m = 0; if (v > m) m = v;`` over the leading axis."""
    m = np.zeros(values.shape[1:], F32)
    for v in values:
        m = np.where(v > m, v, m)
    return m


def _pack2(L: np.ndarray) -> np.ndarray:
    """``qs[j/4 + l] = L[j+l] | L[j+l+32] << 2 | L[j+l+64] << 4 | L[j+l+96] << 6`` for j = 0, 128."""
    q = L.reshape(-1, 2, 4, 32).astype(np.uint8)
    return (q[:, :, 0] | (q[:, :, 1] << 2) | (q[:, :, 2] << 4) | (q[:, :, 3] << 6)).reshape(-1, 64)


def _requantize(x: np.ndarray, L: np.ndarray, d: np.ndarray, dm: np.ndarray | None, lo: int, hi: int) -> np.ndarray:
    """The final pass: ``if (!d) continue; l = nearest_int((x + dm)/d)`` (or ``x/d``) clamped, per sub-block;
    ``x`` and ``L`` are ``(size, G)`` and ``d``/``dm`` ``(G,)``."""
    ok = d != 0
    dd = np.where(ok, d, F32(1))
    v = x if dm is None else x + dm
    ln = np.maximum(np.minimum(nearest_int(v / dd), hi), lo)
    return np.where(ok, ln, L)


# -- Q2_K -------------------------------------------------------------------------------------------------


def _q2_k_finish(x16, L, scales_u8, d, dmin, nb):
    dq = fp16_round(d)
    mq = fp16_round(dmin)
    g_scale = dq[:, None] * (scales_u8 & 0xF).astype(F32)  # (nb, 16)
    g_min = mq[:, None] * (scales_u8 >> 4).astype(F32)
    L = _requantize(x16, L, g_scale.reshape(-1), g_min.reshape(-1), 0, 3)
    return {"scales": scales_u8, "qs": _pack2(_ungroup(L, nb)), "d": fp32_to_fp16_bits(d), "dmin": fp32_to_fp16_bits(dmin)}


def q2_K(x: np.ndarray) -> dict[str, np.ndarray]:
    nb = x.shape[0]
    x16 = _groups(x, 16)
    scales, mins, L = make_qkx_quants(x16, np.abs(x16), 3, -0.5, 0.1, 15, True)
    scales = scales.reshape(nb, 16).T
    mins = mins.reshape(nb, 16).T
    max_scale = _running_max(scales)
    max_min = _running_max(mins)
    q4 = F32(15)
    has_scale = max_scale > 0
    iscale = q4 / np.where(has_scale, max_scale, F32(1))
    sc = np.where(has_scale, nearest_int(iscale * scales) & 0xFF, 0)
    d = np.where(has_scale, max_scale / q4, F32(0))
    has_min = max_min > 0
    imin = q4 / np.where(has_min, max_min, F32(1))
    sc = np.where(has_min, (sc | (nearest_int(imin * mins) << 4)) & 0xFF, sc)
    dmin = np.where(has_min, max_min / q4, F32(0))
    return _q2_k_finish(x16, L, sc.T.astype(np.uint8), d, dmin, nb)


def q2_K_weighted(x: np.ndarray, qw: np.ndarray) -> dict[str, np.ndarray]:
    nb = x.shape[0]
    sigma2 = seqsum((x * x).T) / F32(QK_K)
    x16 = _groups(x, 16)
    s16 = np.repeat(sigma2, 16)
    weight = _groups(qw, 16) * np.sqrt(s16 + x16 * x16)
    sw = seqsum(weight).reshape(nb, 16).T
    scales, mins, L = make_qkx_quants(x16, weight, 3, -0.9, 0.05, 36, False, equal_is_flat=False)
    dm, Ls = make_qp_quants(scales.reshape(nb, 16).T, 15, sw)
    mm, Lm = make_qp_quants(mins.reshape(nb, 16).T, 15, sw)
    sc = ((Ls | (Lm << 4)) & 0xFF).T.astype(np.uint8)
    return _q2_k_finish(x16, L, sc, dm, mm, nb)


# -- Q3_K -------------------------------------------------------------------------------------------------


def _q3_scales_pack(l6: np.ndarray) -> np.ndarray:
    """Sixteen 6-bit scales ``(16, nb)`` → the 12 ``scales`` bytes: low nibbles in bytes 0..7, high pairs in 8..11."""
    l6 = l6.astype(np.int32)
    out = np.zeros((12, l6.shape[1]), np.int32)
    for j in range(16):
        lo = l6[j] & 0xF
        if j < 8:
            out[j] = lo
        else:
            out[j - 8] |= lo << 4
        out[j % 4 + 8] |= (l6[j] >> 4) << (2 * (j // 4))
    return (out & 0xFF).astype(np.uint8)


def _q3_scales_unpack(packed: np.ndarray) -> np.ndarray:
    """The 12 ``scales`` bytes ``(12, nb)`` → the 16 signed scales as C reads them back (``sc - 32``)."""
    p = packed.astype(np.int32)
    out = np.empty((16, p.shape[1]), np.int32)
    for j in range(16):
        sc = p[j] & 0xF if j < 8 else p[j - 8] >> 4
        out[j] = (sc | (((p[8 + j % 4] >> (2 * (j // 4))) & 3) << 4)) - 32
    return out.astype(np.int8)


def _q3_k_finish(x16, L, packed, d, nb):
    dq = fp16_round(d)
    g_scale = dq[None, :] * _q3_scales_unpack(packed).astype(F32)  # (16, nb)
    L = _requantize(x16, L, g_scale.T.reshape(-1), None, -4, 3)
    # L from the search is already offset (0..7); the requantized values are not yet
    requant = g_scale.T.reshape(-1) != 0
    L = np.where(requant, L + 4, L)
    L = _ungroup(L, nb)
    high = L > 3
    L = np.where(high, L - 4, L)
    hmask = np.packbits(high.reshape(nb, 8, 32).transpose(0, 2, 1), axis=2, bitorder="little").reshape(nb, 32)
    return {"hmask": hmask, "qs": _pack2(L), "scales": packed.T, "d": fp32_to_fp16_bits(d)}


def q3_K(x: np.ndarray) -> dict[str, np.ndarray]:
    nb = x.shape[0]
    x16 = _groups(x, 16)
    scales, L = make_q3_quants(x16, 4)
    scales = scales.reshape(nb, 16).T
    _, max_scale = abs_max(scales)
    has = max_scale != 0
    iscale = F32(-32) / np.where(has, max_scale, F32(1))
    l8 = nearest_int(iscale * scales).astype(np.int8).astype(np.int32)
    l6 = np.maximum(-32, np.minimum(31, l8)) + 32
    packed = np.where(has, _q3_scales_pack(l6), np.uint8(0))
    d = np.where(has, F32(1) / iscale, F32(0))
    return _q3_k_finish(x16, L, packed, d, nb)


def q3_K_weighted(x: np.ndarray, qw: np.ndarray) -> dict[str, np.ndarray]:
    nb = x.shape[0]
    sigma2 = (F32(2) * seqsum((x * x).T)) / F32(QK_K)
    x16 = _groups(x, 16)
    weight = _groups(qw, 16) * np.sqrt(np.repeat(sigma2, 16) + x16 * x16)
    sw = seqsum(weight).reshape(nb, 16).T
    scales, L = make_qx_quants(x16, 4, weight)
    d_block, Ls = make_qx_quants(scales.reshape(nb, 16).T, 32, sw)
    return _q3_k_finish(x16, L, _q3_scales_pack(Ls), d_block, nb)


# -- Q4_K and Q5_K ----------------------------------------------------------------------------------------


def _k4_scales_pack(ls: np.ndarray, lm: np.ndarray) -> np.ndarray:
    """Eight 6-bit scales and mins ``(8, nb)`` → the 12 ``scales`` bytes (ggml's ``get_scale_min_k4`` layout)."""
    ls = ls.astype(np.int32)
    lm = lm.astype(np.int32)
    out = np.zeros((12, ls.shape[1]), np.int32)
    for j in range(8):
        if j < 4:
            out[j] = ls[j]
            out[j + 4] = lm[j]
        else:
            out[j + 4] = (ls[j] & 0xF) | ((lm[j] & 0xF) << 4)
            out[j - 4] |= (ls[j] >> 4) << 6
            out[j] |= (lm[j] >> 4) << 6
    return (out & 0xFF).astype(np.uint8)


def _k4_scales_unpack(q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    q = q.astype(np.int32)
    sc = np.empty((8, q.shape[1]), np.int32)
    m = np.empty((8, q.shape[1]), np.int32)
    for j in range(8):
        if j < 4:
            sc[j] = q[j] & 63
            m[j] = q[j + 4] & 63
        else:
            sc[j] = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4)
            m[j] = (q[j + 4] >> 4) | ((q[j] >> 6) << 4)
    return sc, m


def _k45_finish(x32, L, packed, d, dmin, nb, nmax):
    sc, m = _k4_scales_unpack(packed)
    g_scale = fp16_round(d)[None, :] * sc.astype(F32)  # (8, nb)
    g_min = fp16_round(dmin)[None, :] * m.astype(F32)
    L = _ungroup(_requantize(x32, L, g_scale.T.reshape(-1), g_min.T.reshape(-1), 0, nmax), nb)
    fields = {"d": fp32_to_fp16_bits(d), "dmin": fp32_to_fp16_bits(dmin), "scales": packed.T}
    q = L.reshape(nb, 4, 2, 32)
    if nmax == 15:
        fields["qs"] = (q[:, :, 0] | (q[:, :, 1] << 4)).astype(np.uint8).reshape(nb, 128)
    else:
        fields["qs"] = ((q[:, :, 0] & 0xF) | ((q[:, :, 1] & 0xF) << 4)).astype(np.uint8).reshape(nb, 128)
        bits = (q >> 4).astype(np.uint8)  # (nb, 4, 2, 32): bit 2n of qh[j] for q[n][0], bit 2n+1 for q[n][1]
        qh = np.zeros((nb, 32), np.uint8)
        for n in range(4):
            qh |= bits[:, n, 0] << (2 * n)
            qh |= bits[:, n, 1] << (2 * n + 1)
        fields["qh"] = qh
    return fields


def _k45_ref(x: np.ndarray, nmax: int, rmin: float, nstep: int) -> dict[str, np.ndarray]:
    nb = x.shape[0]
    x32 = _groups(x, 32)
    av_x = np.sqrt(seqsum(x32 * x32) / F32(32))
    weights = av_x + np.abs(x32)
    scales, mins, L = make_qkx_quants(x32, weights, nmax, rmin, 0.1, nstep, False)
    scales = scales.reshape(nb, 8).T
    mins = mins.reshape(nb, 8).T
    max_scale = _running_max(scales)
    max_min = _running_max(mins)
    inv_scale = np.where(max_scale > 0, F32(63) / np.where(max_scale > 0, max_scale, F32(1)), F32(0))
    inv_min = np.where(max_min > 0, F32(63) / np.where(max_min > 0, max_min, F32(1)), F32(0))
    ls = np.minimum(63, nearest_int(inv_scale * scales) & 0xFF)
    lm = np.minimum(63, nearest_int(inv_min * mins) & 0xFF)
    d = max_scale / F32(63)
    dmin = max_min / F32(63)
    return _k45_finish(x32, L, _k4_scales_pack(ls, lm), d, dmin, nb, nmax)


def _k45_weighted(x: np.ndarray, qw: np.ndarray, nmax: int) -> dict[str, np.ndarray]:
    nb = x.shape[0]
    sigma2 = (F32(2) * seqsum((x * x).T)) / F32(QK_K)
    x32 = _groups(x, 32)
    weights = _groups(qw, 32) * np.sqrt(np.repeat(sigma2, 8) + x32 * x32)
    sw = seqsum(weights).reshape(nb, 8).T
    scales, mins, L = make_qkx_quants(x32, weights, nmax, -0.9, 0.05, 36, False, equal_is_flat=False)
    d_block, Ls = make_qp_quants(scales.reshape(nb, 8).T, 63, sw)
    m_block, Lm = make_qp_quants(mins.reshape(nb, 8).T, 63, sw)
    if nmax == 31:  # Q5_K clamps what Q4_K does not
        Ls, Lm = np.minimum(63, Ls), np.minimum(63, Lm)
    return _k45_finish(x32, L, _k4_scales_pack(Ls, Lm), d_block, m_block, nb, nmax)


def q4_K(x: np.ndarray) -> dict[str, np.ndarray]:
    return _k45_ref(x, 15, -1.0, 20)


def q5_K(x: np.ndarray) -> dict[str, np.ndarray]:
    return _k45_ref(x, 31, -0.5, 15)


# -- Q6_K -------------------------------------------------------------------------------------------------


def _q6_k(x: np.ndarray, qw: np.ndarray | None) -> dict[str, np.ndarray]:
    nb = x.shape[0]
    x16 = _groups(x, 16)
    scales, L = make_qx_quants(x16, 32, None if qw is None else _groups(qw, 16))
    scales = scales.reshape(nb, 16).T
    max_abs, max_scale = abs_max(scales)
    zero = max_abs < GROUP_MAX_EPS
    iscale = F32(-128) / np.where(zero, F32(1), max_scale)
    d = np.where(zero, F32(0), F32(1) / iscale)
    sc = np.minimum(127, nearest_int(iscale * scales)).astype(np.int8)  # (16, nb)
    g_scale = fp16_round(d)[None, :] * sc.astype(F32)
    Lr = _requantize(x16, L, g_scale.T.reshape(-1), None, -32, 31)
    L = np.where(g_scale.T.reshape(-1) != 0, Lr + 32, L)
    L = _ungroup(L, nb).reshape(nb, 2, 4, 32)
    ql = np.empty((nb, 2, 64), np.uint8)
    ql[:, :, :32] = (L[:, :, 0] & 0xF) | ((L[:, :, 2] & 0xF) << 4)
    ql[:, :, 32:] = (L[:, :, 1] & 0xF) | ((L[:, :, 3] & 0xF) << 4)
    qh = (L[:, :, 0] >> 4) | ((L[:, :, 1] >> 4) << 2) | ((L[:, :, 2] >> 4) << 4) | ((L[:, :, 3] >> 4) << 6)
    fields = {
        "ql": ql.reshape(nb, 128),
        "qh": qh.astype(np.uint8).reshape(nb, 64),
        "scales": sc.T,
        "d": fp32_to_fp16_bits(d),
    }
    for key in ("ql", "qh", "scales"):
        fields[key] = np.where(zero[:, None], 0, fields[key]).astype(fields[key].dtype)
    return fields


def q6_K(x: np.ndarray) -> dict[str, np.ndarray]:
    return _q6_k(x, None)


# -- Q8_K -------------------------------------------------------------------------------------------------


def q8_K(x: np.ndarray) -> dict[str, np.ndarray]:
    """Q8_K: d = max / -127 as float32; an all-zero block leaves ``bsums`` unwritten in C (zero here)."""
    nb = x.shape[0]
    amax, vmax = abs_max(x, 1)
    zero = amax == 0
    iscale = F32(-127) / np.where(zero, F32(1), vmax)
    qs = np.minimum(127, nearest_int(iscale[:, None] * x)).astype(np.int8)
    qs = np.where(zero[:, None], np.int8(0), qs)
    bsums = qs.reshape(nb, 16, 16).astype(np.int32).sum(axis=2).astype(np.int16)
    return {"d": np.where(zero, F32(0), F32(1) / iscale), "qs": qs, "bsums": bsums}


# -- importance-weighted legacy types (their sigma² is the whole row's) -------------------------------------


def _row_sigma2(rows: np.ndarray) -> np.ndarray:
    return seqsum((rows * rows).T) / F32(rows.shape[1])


def _legacy_weights(rows: np.ndarray, qw: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``weight = qw * sqrtf(sigma2 + x*x)`` for every 32-value block of every row, as ``(32, G)``."""
    n_rows, n_per_row = rows.shape
    sigma2 = np.repeat(_row_sigma2(rows), n_per_row // 32)
    x32 = _groups(rows, 32)
    w = np.tile(qw.reshape(-1, 32), (n_rows, 1)).T * np.sqrt(sigma2 + x32 * x32)
    return x32, w, sigma2


def _halves(L: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    Lb = np.ascontiguousarray(L.T)
    return Lb[:, :16], Lb[:, 16:]


def q4_0_weighted(rows: np.ndarray, qw: np.ndarray) -> dict[str, np.ndarray]:
    x32, w, _ = _legacy_weights(rows, qw)
    d, L = make_qx_quants(x32, 8, w)
    lo, hi = _halves(L)
    return {"d": fp32_to_fp16_bits(d), "qs": pack_nibbles(lo, hi)}


def q5_0_weighted(rows: np.ndarray, qw: np.ndarray) -> dict[str, np.ndarray]:
    x32, w, _ = _legacy_weights(rows, qw)
    d, L = make_qx_quants(x32, 16, w)
    lo, hi = _halves(L)
    return {"d": fp32_to_fp16_bits(d), "qh": pack_high_bits(lo, hi), "qs": pack_nibbles(lo & 0xF, hi & 0xF)}


def _q_1_weighted(rows: np.ndarray, qw: np.ndarray, nmax: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    x32, w, _ = _legacy_weights(rows, qw)
    d, the_min, L = make_qkx_quants(x32, w, nmax, -0.9, 0.05, 36, False, equal_is_flat=False)
    lo, hi = _halves(L)
    return fp32_to_fp16_bits(d), fp32_to_fp16_bits(-the_min), lo, hi


def q4_1_weighted(rows: np.ndarray, qw: np.ndarray) -> dict[str, np.ndarray]:
    d, m, lo, hi = _q_1_weighted(rows, qw, 15)
    return {"d": d, "m": m, "qs": pack_nibbles(lo, hi)}


def q5_1_weighted(rows: np.ndarray, qw: np.ndarray) -> dict[str, np.ndarray]:
    d, m, lo, hi = _q_1_weighted(rows, qw, 31)
    return {"d": d, "m": m, "qh": pack_high_bits(lo, hi), "qs": pack_nibbles(lo & 0xF, hi & 0xF)}


def _per_superblock(fn):
    """A k-quant ``_impl``: its sigma² is per super-block, so every row's blocks run together with the weights
    repeated for each row."""

    def weighted(rows: np.ndarray, qw: np.ndarray) -> dict[str, np.ndarray]:
        x = rows.reshape(-1, QK_K)
        return fn(x, np.tile(qw.reshape(-1, QK_K), (rows.shape[0], 1)))

    return weighted


QUANTIZERS = {"q2_K": q2_K, "q3_K": q3_K, "q4_K": q4_K, "q5_K": q5_K, "q6_K": q6_K, "q8_K": q8_K}
WEIGHTED = {
    "q2_K": _per_superblock(q2_K_weighted),
    "q3_K": _per_superblock(q3_K_weighted),
    "q4_K": _per_superblock(lambda x, qw: _k45_weighted(x, qw, 15)),
    "q5_K": _per_superblock(lambda x, qw: _k45_weighted(x, qw, 31)),
    "q6_K": _per_superblock(_q6_k),
    "q4_0": q4_0_weighted,
    "q4_1": q4_1_weighted,
    "q5_0": q5_0_weighted,
    "q5_1": q5_1_weighted,
}
