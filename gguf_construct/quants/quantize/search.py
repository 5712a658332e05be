"""ggml's scale searches (``make_qx_quants``, ``make_q3_quants``, ``make_qkx2_quants``/``make_qkx3_quants``,
``make_qp_quants`` in ggml-quants.c), run on many groups at once.

Every function takes ``x`` (and weights) as ``(n, G)``: element ``i`` of each of ``G`` groups is row ``i``, so a
C loop ``for (i = 0; i < n; ++i)`` becomes a Python loop over rows of length-``G`` vectors, in C's order, with the
running sums as float32 vectors. Data-dependent branches become masked updates (``np.where``). A refinement pass
that changed nothing leaves the state as it was, so running the remaining passes of C's ``break``-ed loops is
harmless and keeps the groups in lock step.
"""

from __future__ import annotations

import numpy as np

from .cfloat import F32, nearest_int, seqsum
from .classic_quantizers import abs_max

GROUP_MAX_EPS = F32(1e-15)


def _abs_max(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``if (ax > amax) { amax = ax; max = x[i]; }``: the first largest |x| and its signed value (see legacy)."""
    return abs_max(x)


def _clamp(v: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """``MAX(lo, MIN(hi, v))`` on ints."""
    return np.maximum(np.minimum(v, hi), lo)


def _sums(w: np.ndarray, wx: np.ndarray, ls: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``sumlx += w*x*l; suml2 += w*l*l`` over the rows, in order: (sumlx, suml2)."""
    fl = ls.astype(F32)
    return seqsum(wx * fl), seqsum((w * fl) * fl)


def _refine(x: np.ndarray, w: np.ndarray, L: np.ndarray, start: np.ndarray, clamp, *, check_after: bool, store=lambda v: v) -> np.ndarray:
    """ggml's five coordinate-descent passes over ``L`` (updated in place): each element moved to
    ``clamp(nearest_int(x*sl2/slx))`` where that raises ``sumlx^2/suml2``; the sums start from ``start``'s levels.
    ``make_q3_quants`` asks ``sl2 > 0`` after the move (``check_after``), ``make_qp_quants`` before it, and stores
    ``store(new_l)`` (its uint8 ``L``). Returns the final ``sumlx/suml2`` (0 where ``suml2`` is not positive)."""
    wx = w * x
    sumlx, suml2 = _sums(w, wx, start)
    for _ in range(5):
        for i in range(x.shape[0]):
            fl = L[i].astype(F32)
            slx = sumlx - wx[i] * fl
            sl2 = suml2 - (w[i] * fl) * fl
            new_l = clamp(nearest_int((x[i] * sl2) / slx))
            fn = new_l.astype(F32)
            slx2 = slx + wx[i] * fn
            sl22 = sl2 + (w[i] * fn) * fn
            positive = sl22 > 0 if check_after else sl2 > 0
            take = (slx > 0) & positive & (new_l != L[i]) & ((slx2 * slx2) * suml2 > (sumlx * sumlx) * sl22)
            L[i] = np.where(take, store(new_l), L[i])
            sumlx = np.where(take, slx2, sumlx)
            suml2 = np.where(take, sl22, suml2)
    return np.where(suml2 > 0, sumlx / np.where(suml2 > 0, suml2, F32(1)), F32(0))


def make_qx_quants(x: np.ndarray, nmax: int, qw: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``make_qx_quants(n, nmax, x, L, rmse_type=1, qw)``: (scale ``(G,)``, L ``(n, G)`` int in 0..2*nmax-1)."""
    amax, vmax = _abs_max(x)
    w = x * x if qw is None else qw
    wx = w * x
    fnmax = F32(nmax)

    def quants(iscale: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        ls = _clamp(nearest_int(iscale * x), -nmax, nmax - 1)
        return (ls, *_sums(w, wx, ls))

    ls, sumlx, suml2 = quants(-fnmax / vmax)
    best_l = ls + nmax
    scale = np.where(suml2 != 0, sumlx / np.where(suml2 != 0, suml2, F32(1)), F32(0))
    best = scale * sumlx
    for step in range(-9, 10):
        if step == 0:
            continue
        iscale = -(fnmax + F32(0.1) * F32(step)) / vmax
        ls, sumlx, suml2 = quants(iscale)
        better = (suml2 > 0) & (sumlx * sumlx > best * suml2)
        best_l = np.where(better, ls + nmax, best_l)
        new_scale = sumlx / np.where(better, suml2, F32(1))
        scale = np.where(better, new_scale, scale)
        best = np.where(better, new_scale * sumlx, best)
    zero = amax < GROUP_MAX_EPS
    return np.where(zero, F32(0), scale), np.where(zero, 0, best_l)


def make_q3_quants(x: np.ndarray, nmax: int) -> tuple[np.ndarray, np.ndarray]:
    """``make_q3_quants(n, nmax, x, L, do_rmse=true)``: (scale, L in 0..2*nmax-1)."""
    amax, vmax = _abs_max(x)
    iscale = -F32(nmax) / vmax
    L = _clamp(nearest_int(iscale * x), -nmax, nmax - 1)
    scale = _refine(x, x * x, L, L, lambda v: _clamp(v, -nmax, nmax - 1), check_after=True)
    zero = amax < GROUP_MAX_EPS
    return np.where(zero, F32(0), scale), np.where(zero, 0, L + nmax)


def make_qkx_quants(
    x: np.ndarray,
    w: np.ndarray,
    nmax: int,
    rmin: float,
    rdelta: float,
    nstep: int,
    use_mad: bool,
    *,
    equal_is_flat: bool = True,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``make_qkx2_quants`` (``equal_is_flat``: a group is flat when ``max == min``) or ``make_qkx3_quants`` with
    weights (flat when ``max <= min``): (scale, the_min, L in 0..nmax)."""
    n = x.shape[0]
    vmin = x[0].copy()
    vmax = x[0].copy()
    sum_w = w[0].copy()
    sum_x = sum_w * x[0]
    wx = w * x
    for i in range(1, n):
        vmin = np.where(x[i] < vmin, x[i], vmin)
        vmax = np.where(x[i] > vmax, x[i], vmax)
        sum_w = sum_w + w[i]
        sum_x = sum_x + wx[i]
    vmin = np.where(vmin > 0, F32(0), vmin)
    flat = (vmax == vmin) if equal_is_flat else (vmax <= vmin)
    span = vmax - vmin
    fnmax = F32(nmax)
    iscale = fnmax / span
    scale = F32(1) / iscale
    xm = x - vmin
    L = _clamp(nearest_int(iscale * xm), 0, nmax)

    def error(s: np.ndarray, m: np.ndarray, ls: np.ndarray) -> np.ndarray:
        diff = (s * ls.astype(F32) + m) - x
        diff = np.abs(diff) if use_mad else diff * diff
        return seqsum(w * diff)

    best_error = error(scale, vmin, L)
    the_min = vmin
    for step in range(nstep + 1):  # C updates ``min`` when a step wins, and later steps start from it
        iscale = ((F32(rmin) + F32(rdelta) * F32(step)) + fnmax) / (vmax - the_min)
        laux = _clamp(nearest_int(iscale * (x - the_min)), 0, nmax)
        fl = laux.astype(F32)
        wl = w * fl
        t2 = wl * fl
        t3 = wl * x
        sum_l = np.zeros(x.shape[1:], F32)
        sum_l2 = np.zeros(x.shape[1:], F32)
        sum_xl = np.zeros(x.shape[1:], F32)
        for i in range(n):
            sum_l = sum_l + wl[i]
            sum_l2 = sum_l2 + t2[i]
            sum_xl = sum_xl + t3[i]
        D = sum_w * sum_l2 - sum_l * sum_l
        ok = D > 0
        Dd = np.where(ok, D, F32(1))
        this_scale = (sum_w * sum_xl - sum_x * sum_l) / Dd
        this_min = (sum_l2 * sum_x - sum_l * sum_xl) / Dd
        pos = this_min > 0
        this_scale = np.where(pos, sum_xl / np.where(pos, sum_l2, F32(1)), this_scale)
        this_min = np.where(pos, F32(0), this_min)
        cur = error(this_scale, this_min, laux)
        better = ok & (cur < best_error)
        L = np.where(better, laux, L)
        best_error = np.where(better, cur, best_error)
        scale = np.where(better, this_scale, scale)
        the_min = np.where(better, this_min, the_min)
    scale = np.where(flat, F32(0), scale)
    the_min = np.where(flat, -vmin, -the_min)
    return scale, the_min, np.where(flat, 0, L)


def make_qp_quants(x: np.ndarray, nmax: int, qw: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``make_qp_quants(n, nmax, x, L, quant_weights)`` for non-negative x: (scale, L as stored in uint8)."""
    vmax = np.zeros(x.shape[1:], F32)
    for c in x:
        vmax = np.where(vmax > c, vmax, c)
    fnmax = F32(nmax)
    safe_max = np.where(vmax < GROUP_MAX_EPS, F32(1), vmax)
    iscale = fnmax / safe_max
    L = nearest_int(iscale * x) & 0xFF
    scale = F32(1) / iscale

    def mse(s: np.ndarray, ls: np.ndarray) -> np.ndarray:
        diff = x - s * ls.astype(F32)
        return seqsum((qw * diff) * diff)

    best_mse = mse(scale, L)
    for step in range(-4, 5):
        if step == 0:
            continue
        iscale_is = (F32(0.1) * F32(step) + fnmax) / safe_max
        scale_is = F32(1) / iscale_is
        cur = mse(scale_is, np.minimum(nmax, nearest_int(iscale_is * x)))
        better = cur < best_mse
        best_mse = np.where(better, cur, best_mse)
        iscale = np.where(better, iscale_is, iscale)
    ls = np.minimum(nmax, nearest_int(iscale * x))
    L = ls & 0xFF
    scale = _refine(x, qw, L, ls, lambda v: np.minimum(nmax, v), check_after=False, store=lambda v: v & 0xFF)
    zero = vmax < GROUP_MAX_EPS
    return np.where(zero, F32(0), scale), np.where(zero, 0, L)
