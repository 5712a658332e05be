"""ggml's IQ2_XXS, IQ2_XS and IQ3_XXS (``quantize_row_iq2_xxs_impl``, ``quantize_row_iq2_xs_impl``,
``quantize_row_iq3_xxs_impl``): groups of 8 (IQ2) or 4 (IQ3) magnitudes snapped to a grid of allowed patterns,
with odd sign counts per 8 values fixed by flipping the least important value.

The grid, the map from a group's pattern to its grid index and each off-grid pattern's neighbour list are built as
``iq2xs_init_impl``/``iq3xs_init_impl`` build them: grid points are the dequantization grid's bytes mapped to
levels (IQ2: 8, 25, 43 → 0..2; IQ3: 4, 12, …, 62 → 0..7, at positions 2l + 1); an off-grid pattern's neighbours
are all grid points at the ``nwant`` smallest squared distances, ordered by (distance, index) as its ``qsort``
leaves them. The best neighbour is the first with the smallest weighted error (C's strict ``<``), which is
``argmin`` over that ordered list.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import numpy as np

from ...core import rules
from .. import grids
from .cfloat import F32, fp32_to_fp16_bits, nearest_int, seqsum
from .search import GROUP_MAX_EPS, make_qp_quants


@dataclass(frozen=True)
class Grid:
    levels: np.ndarray  # (n, width) uint8: each grid point's levels
    kmap: np.ndarray  # (kmap_size,) int32: pattern → grid index, -1 off the grid
    neighbours: np.ndarray  # (kmap_size, max_n) int32: ordered neighbour indices, -1 padding
    bits: int  # bits per level in a pattern
    kmax: int  # levels are 0..kmax-1


#: name → (dequantization grid, bytes per point, byte value of each level, kmap size, nwant)
SPECS = {
    "iq2_xxs": (grids.IQ2XXS_GRID, 8, (8, 25, 43), 43692, 2),
    "iq2_xs": (grids.IQ2XS_GRID, 8, (8, 25, 43), 43692, 2),
    "iq2_s": (grids.IQ2S_GRID, 8, (8, 25, 43), 43692, 1),
    "iq3_xxs": (grids.IQ3XXS_GRID, 4, (4, 12, 20, 28, 36, 44, 52, 62), 4096, 2),
    "iq3_s": (grids.IQ3S_GRID, 4, (1, 3, 5, 7, 9, 11, 13, 15), 4096, 3),
    "iq1_s": (grids.IQ1S_GRID, 8, (0xFF, 0x00, 0x01), 43692, 3),
}


@cache
def grid(name: str) -> Grid:
    table, width, values, kmap_size, nwant = SPECS[name]
    bits = 2 if width == 8 else 3
    raw = np.array(table, np.uint64 if width == 8 else np.uint32).view(np.uint8).reshape(-1, width)
    levels = np.select([raw == v for v in values], list(range(len(values))), -1).astype(np.int64)
    assert (levels >= 0).all()
    shifts = bits * np.arange(width)
    kmap = np.full(kmap_size, -1, np.int32)
    kmap[(levels << shifts).sum(axis=1)] = np.arange(len(levels))
    # every pattern a clamped group can make (levels 0..len(values)-1)
    pats = np.stack(np.meshgrid(*[np.arange(len(values))] * width, indexing="ij"), -1).reshape(-1, width)
    index = (pats << shifts).sum(axis=1)
    off = kmap[index] < 0
    pats, index = pats[off], index[off]
    pos = (2 * pats + 1).astype(np.int32)
    gpos = (2 * levels + 1).astype(np.int32)
    d2 = np.zeros((len(pos), len(gpos)), np.int32)  # (m, grid)
    for k in range(width):
        d2 += (gpos[None, :, k] - pos[:, k, None]) ** 2
    order = np.argsort(d2, axis=1, kind="stable")  # by distance, then index: qsort's comparator
    sorted_d2 = np.take_along_axis(d2, order, 1)
    rank = np.cumsum(np.concatenate([np.zeros((len(d2), 1), bool), sorted_d2[:, 1:] > sorted_d2[:, :-1]], 1), 1)
    keep = rank < nwant
    max_n = int(keep.sum(axis=1).max())
    neighbours = np.full((kmap_size, max_n), -1, np.int32)
    neighbours[index] = np.where(keep[:, :max_n], order[:, :max_n], -1)
    return Grid(levels.astype(np.uint8), kmap, neighbours, bits, len(values))


def _pattern(g: Grid, L: np.ndarray) -> np.ndarray:
    """``u |= L[i] << bits*i`` for groups ``(..., width)`` of levels."""
    return (L.astype(np.int64) << (g.bits * np.arange(L.shape[-1]))).sum(axis=-1)


def best_neighbour(g: Grid, u: np.ndarray, xv: np.ndarray, wa: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """``iq2/iq3_find_best_neighbour`` for off-grid groups: grid indices, ``u`` ``(m,)``, ``xv``/``wa`` ``(m, w)``.

    Patterns have from a few to a few hundred neighbours, so they are evaluated in buckets of similar counts (the
    padding is +inf, which never wins the argmin)."""
    counts = (g.neighbours[u] >= 0).sum(axis=1)
    out = np.empty(len(u), np.int64)
    low = 0
    for high in (8, 16, 32, 64, 128, 256, 512):
        sel = np.flatnonzero((counts > low) & (counts <= high))
        low = high
        if not sel.size:
            continue
        cand = g.neighbours[u[sel], :high]  # (m, high)
        q = 2 * g.levels[np.where(cand >= 0, cand, 0)].astype(F32) + F32(1)  # (m, high, width)
        out[sel] = _closest(cand, q, scale[sel], xv[sel], wa[sel], "values too large for this type; ggml aborts")
    return out


def _closest(cand: np.ndarray, q: np.ndarray, sc: np.ndarray, xv: np.ndarray, wv: np.ndarray, why: str) -> np.ndarray:
    """The candidate (of ``cand`` ``(m, n)``, -1 padding) with the least ``sum w (sc*q - x)^2`` over its values
    ``q`` ``(m, n, width)``, the first of equals (C's strict ``<``). C finds none when no error is below
    ``FLT_MAX`` (``GGML_ASSERT`` or an out-of-bounds read, as ``why`` says): refused here."""
    d2 = np.zeros(cand.shape, F32)
    for i in range(q.shape[-1]):
        diff = sc[:, None] * q[:, :, i] - xv[:, None, i]
        d2 = d2 + (wv[:, None, i] * diff) * diff
    d2 = np.where(cand >= 0, d2, np.inf)
    if not (d2 < np.finfo(np.float32).max).any(axis=1).all():
        raise rules.QUANTIZE_GRID.error(f"no grid neighbour has a finite error ({why})")
    return np.take_along_axis(cand, np.argmin(d2, axis=1)[:, None], 1)[:, 0]


def _snap(g: Grid, L: np.ndarray, xval: np.ndarray, waux: np.ndarray, scale: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Groups ``(G, k, 8)`` whose pattern is off the grid (and ``mask``) replaced by their best neighbour's levels;
    returns (levels, on_grid before snapping)."""
    u = _pattern(g, L)
    on = g.kmap[u] >= 0
    todo = ~on & mask
    if todo.any():
        gi, ki = np.nonzero(todo)
        idx = best_neighbour(g, u[gi, ki], xval[gi, ki], waux[gi, ki], np.broadcast_to(scale[:, None], todo.shape)[gi, ki])
        L = L.copy()
        L[gi, ki] = g.levels[idx]
    return L, on


def _levels(g: Grid, idv: np.ndarray, xval: np.ndarray) -> np.ndarray:
    """``MAX(0, MIN(kMaxQ-1, nearest_int(0.5f*(id*xval-1))))``"""
    return np.clip(nearest_int(F32(0.5) * (idv[:, None, None] * xval - F32(1))), 0, g.kmax - 1)


def _fit(weight: np.ndarray, xval: np.ndarray, L: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``sumqx += w*xval*q; sumq2 += w*q*q`` with ``q = 2L + 1``, in order over the sub-block."""
    G = L.shape[0]
    q = (2 * L.reshape(G, -1) + 1).astype(F32)
    w = weight.reshape(G, -1)
    t1 = (w * xval.reshape(G, -1)) * q
    t2 = (w * q) * q
    return seqsum(np.ascontiguousarray(t1.T)), seqsum(np.ascontiguousarray(t2.T))


def _sigma2(x: np.ndarray, per: int, ndim: int, doubled: bool = True) -> np.ndarray:
    """``sigma2 = (2*)sumx2/QK_K`` of each super-block ``x`` ``(nbl, 256)``, repeated over its ``per`` groups and
    shaped to broadcast against groups of ``ndim`` dimensions."""
    sumx2 = seqsum(np.ascontiguousarray((x * x).T))
    sigma2 = ((F32(2) * sumx2) if doubled else sumx2) / F32(256)
    return np.repeat(sigma2, per).reshape((-1,) + (1,) * (ndim - 1))


def _imatrix_weight(qw: np.ndarray, n_rows: int, xs: np.ndarray, s2: np.ndarray) -> np.ndarray:
    """``weight[i] = qw[i] * sqrt(sigma2 + x[i]*x[i])``, the importance matrix tiled over ``n_rows`` rows and
    shaped as the groups ``xs``."""
    return np.tile(qw.reshape(-1, 256), (n_rows, 1)).reshape(xs.shape) * np.sqrt(s2 + xs * xs)


def _take(better: np.ndarray, sumqx: np.ndarray, sumq2: np.ndarray, scale: np.ndarray, best: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``if (better) { scale = sumqx/sumq2; best = scale*sumqx; }``: (scale, best)."""
    new_scale = sumqx / np.where(better, sumq2, F32(1))
    return np.where(better, new_scale, scale), np.where(better, new_scale * sumqx, best)


def _best_split(vmax: np.ndarray, candidates) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """IQ1's exhaustive search: over ``(i1, i2, k, sumqx, sumq2)`` in C's order (boundaries ``i1 <= i2``, shift
    choice ``k``), the first with the largest ``sumqx^2/sumq2`` where ``sumq2 > 0``. Returns (scale, i1, i2, k),
    the indices -1 and the scale ``vmax`` where no candidate qualified."""
    G = len(vmax)
    best = np.full(G, -np.finfo(np.float32).max, F32)
    scale = vmax.copy()
    b1, b2, bk = np.full(G, -1), np.full(G, -1), np.full(G, -1)
    for i1, i2, k, sumqx, sumq2 in candidates:
        better = (sumq2 > 0) & (sumqx * sumqx > best * sumq2)
        if better.any():
            scale, best = _take(better, sumqx, sumq2, scale, best)
            b1 = np.where(better, i1, b1)
            b2 = np.where(better, i2, b2)
            bk = np.where(better, k, bk)
    return scale, b1, b2, bk


def _boundary_levels(
    order: np.ndarray, b1: np.ndarray, b2: np.ndarray, live: np.ndarray, scale: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """IQ1's levels from the chosen boundaries: sorted positions below ``b1`` get 0, below ``b2`` 1, the rest 2, put
    back in element order; a negative scale mirrors them (``2 - L``). Returns (L, mirrored, |scale|)."""
    rank = np.arange(order.shape[1])[None, :]
    Ls = np.where(rank < b1[:, None], 0, np.where(rank < b2[:, None], 1, 2))
    L = np.empty(order.shape, np.int64)
    np.put_along_axis(L, order, Ls, 1)
    neg = live & (scale < 0)
    return np.where(neg[:, None], 2 - L, L), neg, np.where(neg, -scale, scale)


def _scale_scan(
    g: Grid,
    xval: np.ndarray,
    waux: np.ndarray,
    weight: np.ndarray,
    live: np.ndarray,
    safe: np.ndarray,
    scale: np.ndarray,
    on_grid: np.ndarray,
    base: float,
    stride: float,
    steps: range,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The trial scales ``id = (base + step*stride)/max``: each live group's levels at ``id`` snapped to the grid,
    the scale refitted, and kept where ``sumqx^2/sumq2`` beats the best so far. Returns (scale, levels, on_grid)
    of the kept trials (the given ``scale``/``on_grid`` where none was kept)."""
    best = np.zeros(len(live), F32)
    L = np.zeros(xval.shape, np.int64)
    for step in steps:
        idv = (F32(base) + F32(step) * F32(stride)) / safe
        laux, on = _snap(g, _levels(g, idv, xval), xval, waux, F32(1) / idv, live[:, None])
        sumqx, sumq2 = _fit(weight, xval, laux)
        better = live & (sumq2 > 0) & (sumqx * sumqx > best * sumq2)
        scale, best = _take(better, sumqx, sumq2, scale, best)
        L = np.where(better[:, None, None], laux, L)
        on_grid = np.where(better[:, None], on, on_grid)
    return scale, L, on_grid


def _resnap(
    g: Grid,
    redo: np.ndarray,
    group_mask: np.ndarray,
    xval: np.ndarray,
    waux: np.ndarray,
    weight: np.ndarray,
    scale: np.ndarray,
    L: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """After the scan: the groups of ``group_mask`` snapped again at the chosen scale, and the scale of ``redo``'s
    sub-blocks refitted over the result. Returns (scale, levels)."""
    if redo.any():
        idv = F32(1) / np.where(redo, scale, F32(1))
        fresh, _ = _snap(g, _levels(g, idv, xval), xval, waux, scale, group_mask)
        L = np.where(group_mask[:, :, None], fresh, L)
        sumqx, sumq2 = _fit(weight, xval, L)
        scale = np.where(redo & (sumq2 > 0), sumqx / np.where(sumq2 > 0, sumq2, F32(1)), scale)
    return scale, L


def _flip_negative(live: np.ndarray, scale: np.ndarray, signs: np.ndarray, mask: int) -> tuple[np.ndarray, np.ndarray]:
    """``if (scale < 0) { scale = -scale; signs = ~signs & mask; }`` for the live sub-blocks."""
    flip = live & (scale < 0)
    return np.where(flip, -scale, scale), np.where(flip[:, None], ~signs & mask, signs)


def _block_scale(scale: np.ndarray, divisor: int, lmax: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The super-block scale over sub-block scales ``(nbl, n)``: ``d = max_scale/divisor`` (0 where the maximum is
    0), and each sub-block's ``MAX(0, MIN(lmax, nearest_int(0.5f*(id*scale-1))))``. Returns (max_scale, has, d, ls)."""
    max_scale = scale.max(axis=1)
    has = max_scale != 0
    d = np.where(has, max_scale / F32(divisor), F32(0))
    idd = F32(1) / np.where(has, d, F32(1))
    ls = np.clip(nearest_int(F32(0.5) * (idd[:, None] * scale - F32(1))), 0, lmax)
    return max_scale, has, d, ls


def _refit_positive(weight: np.ndarray, q: np.ndarray, xb: np.ndarray, redo: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """IQ1's refit after snapping: ``scale = sumqx/sumq2`` over the sub-block where ``redo`` and both sums are
    positive."""
    sumqx = seqsum(np.ascontiguousarray(((weight * q) * xb).T))
    sumq2 = seqsum(np.ascontiguousarray(((weight * q) * q).T))
    ok = redo & (sumqx > 0) & (sumq2 > 0)
    return np.where(ok, sumqx / np.where(ok, sumq2, F32(1)), scale)


def _iq2(name: str, rows: np.ndarray, qw: np.ndarray | None) -> dict[str, np.ndarray]:
    """IQ2_XXS (sub-blocks of 32), IQ2_XS and IQ2_S (of 16). IQ2_S differs in its sigma² (doubled), its weights
    without an imatrix (``0.25 sigma² + x²``), its 8 plain sign bits, its ``1e-8`` threshold, its single-distance
    neighbour lists and its packing (low index bytes, 2 high bits each in ``qh``, then the signs)."""
    g = grid(name)
    is_s = name == "iq2_s"
    sub = 32 if name == "iq2_xxs" else 16
    ngr = sub // 8
    x = rows.reshape(-1, 256)
    nbl = x.shape[0]
    per = 256 // sub
    xs = x.reshape(-1, ngr, 8)  # (G, k, 8), G = nbl * per
    G = xs.shape[0]
    s2 = _sigma2(x, per, 3, doubled=is_s)
    if qw is None:  # IQ2_S only: the others require an imatrix
        weight = F32(0.25) * s2 + xs * xs
    else:
        weight = _imatrix_weight(qw, rows.shape[0], xs, s2)
    waux = np.sqrt(weight)
    if is_s:
        _, xval, signs = _plain_signs(xs)
    else:
        xval, signs = _signs(xs, weight)
    vmax = xval.reshape(G, -1).max(axis=1)
    zero = vmax < (F32(1e-8) if is_s else GROUP_MAX_EPS)
    if name == "iq2_xxs":
        scale, _ = make_qp_quants(np.ascontiguousarray(xval.reshape(G, -1).T), 3 + 1, np.ascontiguousarray(weight.reshape(G, -1).T))
        denom = scale * F32(3)
        zero |= ~(denom > 0)
        steps = range(-6, 7)
    else:
        denom = vmax
        scale = vmax / F32(5)
        steps = range(-9, 10)
    live = ~zero
    scale, L, on_grid = _scale_scan(
        g, xval, waux, weight, live, np.where(zero, F32(1), denom), scale, np.ones((G, ngr), bool), 5, 0.1, steps
    )
    if name == "iq2_xxs":
        redo = live & (scale > 0)
        group_mask = np.broadcast_to(redo[:, None], on_grid.shape)
    else:
        redo = live & (scale > 0) & ~on_grid.all(axis=1)
        group_mask = redo[:, None] & ~on_grid
    scale, L = _resnap(g, redo, group_mask, xval, waux, weight, scale, L)
    scale, signs = _flip_negative(live, scale, signs, 255 if is_s else 127)
    index = g.kmap[_pattern(g, L)].astype(np.int64)
    scale = np.where(zero, F32(0), scale).reshape(nbl, per)
    index = np.where(zero[:, None], 0, index)
    signs = np.where(zero[:, None], 0, signs)
    _, has, d, ls = _block_scale(scale, 31, 15)
    if name == "iq2_xxs":
        q2 = np.zeros((nbl, per, 2), np.uint32)
        q2[:, :, 0] = (index.reshape(nbl, per, 4) << (8 * np.arange(4))).sum(axis=-1)
        q2[:, :, 1] = (signs.reshape(nbl, per, 4) << (7 * np.arange(4))).sum(axis=-1) | (ls.astype(np.int64) << 28)
        q2 = np.where(has[:, None, None], q2, 0).astype("<u4")
        return {"d": fp32_to_fp16_bits(d), "qs": q2.reshape(nbl, -1).view("<u2")}
    sc = (ls[:, 0::2] | (ls[:, 1::2] << 4)).astype(np.uint8)
    if is_s:
        index = np.where(zero[:, None], 0, index).reshape(nbl, 32)
        signs = np.where(zero[:, None], 0, signs).reshape(nbl, 32)
        qh = ((index >> 8).reshape(nbl, 8, 4) << (2 * np.arange(4))).sum(axis=-1)
        qs = np.concatenate([index & 255, signs], axis=1).astype(np.uint8)
        return {
            "d": fp32_to_fp16_bits(d * F32(0.9875)),
            "qs": qs,  # written per sub-block in C: not cleared when the block's max scale is 0 (unlike IQ2_XS)
            "qh": qh.astype(np.uint8),
            "scales": np.where(has[:, None], sc, 0).astype(np.uint8),
        }
    q2 = (index | (signs << 9)).reshape(nbl, 32)
    return {
        "d": fp32_to_fp16_bits(d),
        "qs": np.where(has[:, None], q2, 0).astype("<u2"),
        "scales": np.where(has[:, None], sc, 0).astype(np.uint8),
    }


WEIGHTED = {"iq2_xxs": lambda rows, qw: _iq2("iq2_xxs", rows, qw), "iq2_xs": lambda rows, qw: _iq2("iq2_xs", rows, qw)}
REQUIRES_IMATRIX = frozenset({"iq2_xxs", "iq2_xs", "iq1_s"})  # ggml_quantize_requires_imatrix


def _plain_signs(xs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per 8 values ``(G, k, 8)``: which are negative (``!(x >= 0)``, so NaN counts), the magnitudes, and the 8 sign
    bits."""
    neg = ~(xs >= 0)
    return neg, np.where(neg, -xs, xs), (neg.astype(np.int64) << np.arange(8)).sum(axis=-1)


def _iq3_groups(name: str, rows: np.ndarray, qw: np.ndarray | None) -> tuple[Grid, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """IQ3's common start: (grid, super-blocks ``(nbl, 256)``, values in groups ``(G, 4, 8)``, weights (``x*x``
    without an imatrix), ``sqrt(weight)`` as ``(G, 8, 4)``), G = 8 sub-blocks of 32 per super-block."""
    x = rows.reshape(-1, 256)
    xs = x.reshape(-1, 4, 8)
    weight = xs * xs if qw is None else _imatrix_weight(qw, rows.shape[0], xs, _sigma2(x, 8, 3))
    return grid(name), x, xs, weight, np.sqrt(weight).reshape(-1, 8, 4)


def _signs(xs: np.ndarray, weight: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per 8 values: magnitudes and 7 stored sign bits, an odd count of negatives evened by flipping the value with
    the smallest ``weight*x*x`` (the first such); ``xs``/``weight`` ``(G, k, 8)``."""
    neg, xval, signs = _plain_signs(xs)
    odd = neg.sum(axis=-1) % 2 == 1
    imin = np.argmin((weight * xs) * xs, axis=-1)
    gi, ki = np.nonzero(odd)
    xval[gi, ki, imin[gi, ki]] = -xval[gi, ki, imin[gi, ki]]
    return xval, np.where(odd, signs ^ (1 << imin), signs) & 127


def _iq3_xxs(rows: np.ndarray, qw: np.ndarray | None) -> dict[str, np.ndarray]:
    g, x, xs, weight, waux = _iq3_groups("iq3_xxs", rows, qw)
    nbl = x.shape[0]
    G = nbl * 8
    xval8, signs = _signs(xs, weight)
    xval = xval8.reshape(G, 8, 4)
    weight = weight.reshape(G, 8, 4)
    vmax = xval.reshape(G, -1).max(axis=1)
    zero = vmax < F32(1e-8)  # GROUP_MAX_EPS_IQ3_XXS
    live = ~zero
    safe = np.where(zero, F32(1), vmax)
    scale, L, on_grid = _scale_scan(g, xval, waux, weight, live, safe, vmax / F32(15), np.ones((G, 8), bool), 15, 0.2, range(-15, 16))
    redo = live & (scale > 0) & ~on_grid.all(axis=1)
    scale, L = _resnap(g, redo, redo[:, None] & ~on_grid, xval, waux, weight, scale, L)
    scale, signs = _flip_negative(live, scale, signs, 127)
    index = np.where(zero[:, None], 0, g.kmap[_pattern(g, L)].astype(np.int64))
    packed_signs = np.where(zero, 0, (signs << (7 * np.arange(4))).sum(axis=-1))
    scale = np.where(zero, F32(0), scale).reshape(nbl, 8)
    _, has, d, ls = _block_scale(scale, 31, 15)
    words = (packed_signs.reshape(nbl, 8) | (ls.astype(np.int64) << 28)).astype("<u4")
    qs = np.concatenate([index.reshape(nbl, 64).astype(np.uint8), words.view(np.uint8).reshape(nbl, 32)], axis=1)
    return {"d": fp32_to_fp16_bits(d * F32(1.0125)), "qs": np.where(has[:, None], qs, 0).astype(np.uint8)}


def _iq3_s(rows: np.ndarray, qw: np.ndarray | None) -> dict[str, np.ndarray]:
    """IQ3_S (``quantize_row_iq3_s_impl`` with 32-value sub-blocks): 8 plain sign bits per 8 values (no parity
    fix), the 512-point grid with ``nwant = 3``, and all of a sub-block's groups re-snapped at the end. As in C, a
    sub-block whose values are all zero does not advance the ``qs``/``signs`` write pointers, so the later
    sub-blocks' grid bytes and signs move up by one slot (``qh`` and the scales keep their places)."""
    g, x, xs, weight, waux = _iq3_groups("iq3_s", rows, qw)
    nbl = x.shape[0]
    G = nbl * 8
    _, xval, signs = _plain_signs(xs)  # signs (G, 4)
    xval = xval.reshape(G, 8, 4)
    weight = weight.reshape(G, 8, 4)
    vmax = xval.reshape(G, -1).max(axis=1)
    zero = vmax == 0
    live = ~zero
    safe = np.where(zero, F32(1), vmax)
    scale, L, on_grid = _scale_scan(g, xval, waux, weight, live, safe, vmax / F32(15), np.zeros((G, 8), bool), 15, 0.2, range(-9, 10))
    redo = live & (scale > 0) & ~on_grid.all(axis=1)
    scale, L = _resnap(g, redo, np.broadcast_to(redo[:, None], on_grid.shape), xval, waux, weight, scale, L)
    scale, signs = _flip_negative(live, scale, signs, 255)
    index = g.kmap[_pattern(g, L)].astype(np.int64)  # (G, 8)
    live_b = live.reshape(nbl, 8)
    slot = np.cumsum(live_b, axis=1) - 1  # where C's advancing pointers put each live sub-block
    qs = np.zeros((nbl, 8, 8), np.uint8)
    sg = np.zeros((nbl, 8, 4), np.uint8)
    bi, ib = np.nonzero(live_b)
    qs[bi, slot[bi, ib]] = (index.reshape(nbl, 8, 8)[bi, ib] & 255).astype(np.uint8)
    sg[bi, slot[bi, ib]] = signs.reshape(nbl, 8, 4)[bi, ib].astype(np.uint8)
    high = np.where(live[:, None], index >> 8, 0).reshape(nbl, 64).astype(np.uint8)
    qh = np.packbits(high, axis=1, bitorder="little")
    scale = np.where(zero, F32(0), scale).reshape(nbl, 8)
    _, has, d, ls = _block_scale(scale, 31, 15)
    sc = np.where(has[:, None], ls[:, 0::2] | (ls[:, 1::2] << 4), 0).astype(np.uint8)
    return {"d": fp32_to_fp16_bits(d * F32(1.033)), "qs": qs.reshape(nbl, 64), "qh": qh, "signs": sg.reshape(nbl, 32), "scales": sc}


def _iq1_s(rows: np.ndarray, qw: np.ndarray) -> dict[str, np.ndarray]:
    """IQ1_S (``quantize_row_iq1_s_impl``): per 32 values, the exhaustive search over the two boundaries that split
    the sorted values into -1/0/+1, for both signs of the 0.125 shift, scanned in C's order; groups off the
    2048-point grid go to the neighbour with the least weighted error at that scale."""
    g = grid("iq1_s")
    x = rows.reshape(-1, 256)
    nbl = x.shape[0]
    G = nbl * 8
    xb = x.reshape(G, 32)
    weight = _imatrix_weight(qw, rows.shape[0], xb, _sigma2(x, 8, 2))
    vmax = np.abs(xb).max(axis=1)
    zero = vmax < F32(1e-12)  # GROUP_MAX_EPS_IQ1_S
    order = np.argsort(xb, axis=1, kind="stable")  # qsort on the values alone: ties keep their order here
    ws = np.take_along_axis(weight * xb, order, 1)
    wo = np.take_along_axis(weight, order, 1)
    sumx = np.zeros((33, G), F32)
    sumw = np.zeros((33, G), F32)
    for j in range(32):
        sumx[j + 1] = sumx[j] + ws[:, j]
        sumw[j + 1] = sumw[j] + wo[:, j]
    d = F32(0.125)
    x_p = (F32(-1) + d, d, F32(1) + d)
    x_m = (F32(-1) - d, -d, F32(1) - d)

    def candidates():
        for i1 in range(33):
            for i2 in range(i1, 33):
                a, b, c = sumx[i1] - sumx[0], sumx[i2] - sumx[i1], sumx[32] - sumx[i2]
                wa, wb, wc = sumw[i1] - sumw[0], sumw[i2] - sumw[i1], sumw[32] - sumw[i2]
                for k, xx in enumerate((x_p, x_m)):
                    sumqx = (a * xx[0] + b * xx[1]) + c * xx[2]
                    sumq2 = ((wa * xx[0]) * xx[0] + (wb * xx[1]) * xx[1]) + (wc * xx[2]) * xx[2]
                    yield i1, i2, k, sumqx, sumq2

    scale, b1, b2, bk = _best_split(vmax, candidates())
    shift = np.where(bk == 0, 1, np.where(bk == 1, -1, 0))
    zero |= (b1 < 0) | (b2 < 0) | (shift == 0)
    live = ~zero
    L, neg, scale = _boundary_levels(order, b1, b2, live, scale)
    shift = np.where(neg, -shift, shift)
    xg = np.where(shift[:, None] == 1, np.array(x_p, F32)[None], np.array(x_m, F32)[None])  # (G, 3)
    L = L.reshape(G, 4, 8)
    u = _pattern(g, L)
    off = (g.kmap[u] < 0) & live[:, None]
    index = g.kmap[u].astype(np.int64)
    if off.any():
        gi, ki = np.nonzero(off)
        index[gi, ki] = _iq1_neighbours(g, u[gi, ki], xb.reshape(G, 4, 8)[gi, ki], weight.reshape(G, 4, 8)[gi, ki], scale[gi], xg[gi])
        lv = g.levels[index].astype(np.int64)  # (G, 4, 8)
        q = np.take_along_axis(xg[:, None, :].repeat(4, 1), lv, 2).reshape(G, 32)
        scale = _refit_positive(weight, q, xb, off.any(axis=1), scale)
    index = np.where(live[:, None], index, 0)
    qh = np.where(live, ((index >> 8) << (3 * np.arange(4))).sum(axis=1), 0)
    scale = np.where(zero, F32(0), scale).reshape(nbl, 8)
    shift = np.where(zero, 1, shift).reshape(nbl, 8)
    _, has, dd, ls = _block_scale(scale, 15, 7)
    ls = np.where(shift == -1, ls.astype(np.int64) | 8, ls.astype(np.int64))
    qh = qh.reshape(nbl, 8) | np.where(has[:, None], ls << 12, 0)
    return {"d": fp32_to_fp16_bits(dd * F32(1.125)), "qs": (index & 255).reshape(nbl, 32).astype(np.uint8), "qh": qh.astype("<u2")}


def _iq1_neighbours(g: Grid, u, xv, wv, sc, xg) -> np.ndarray:
    """``iq1_find_best_neighbour2``: the neighbour with the least ``sum w (scale * xg[level] - x)^2``; ``xg`` is
    each group's three values ``(m, 3)``."""
    cand = g.neighbours[u]
    lv = g.levels[np.where(cand >= 0, cand, 0)].astype(np.int64)
    q = np.take_along_axis(xg[:, None, :].repeat(cand.shape[1], 1), lv, 2)
    return _closest(cand, q, sc, xv, wv, "ggml's fallback reads out of bounds here")


def _iq1_m(rows: np.ndarray, qw: np.ndarray | None) -> dict[str, np.ndarray]:
    """IQ1_M (``quantize_row_iq1_m_impl``): sub-blocks of 16 whose two halves each take a shift sign (four
    combinations, scanned with the boundaries in C's order, each candidate's sums recomputed in sorted order as C
    does); 3-bit sub-block scales; the super-block scale refitted over the stored codes and spread over the top
    nibbles of the four scale words."""
    g = grid("iq1_s")
    x = rows.reshape(-1, 256)
    nbl = x.shape[0]
    G = nbl * 16
    xb = x.reshape(G, 16)
    weight = xb * xb if qw is None else _imatrix_weight(qw, rows.shape[0], xb, _sigma2(x, 16, 2))
    vmax = np.abs(xb).max(axis=1)
    zero = vmax < F32(1e-7)  # GROUP_MAX_EPS_IQ1_M
    d = F32(0.125)
    x_p = np.array([F32(-1) + d, d, F32(1) + d], F32)
    x_m = np.array([F32(-1) - d, -d, F32(1) - d], F32)
    order = np.argsort(xb, axis=1, kind="stable")
    first_half = order < 8  # (G, 16): sorted position j's element is in the first half
    wx = np.take_along_axis(weight, order, 1)
    xs_sorted = np.take_along_axis(xb, order, 1)
    pairs = [(i1, i2) for i1 in range(17) for i2 in range(i1, 17)]
    i1s = np.array([p[0] for p in pairs])[:, None]
    i2s = np.array([p[1] for p in pairs])[:, None]
    sqx = np.zeros((4, len(pairs), G), F32)
    sq2 = np.zeros((4, len(pairs), G), F32)
    for j in range(16):
        cat = np.where(j < i1s, 0, np.where(j < i2s, 1, 2))  # (P, 1)
        w, xv, fh = wx[:, j][None, :], xs_sorted[:, j][None, :], first_half[:, j][None, :]
        vp, vm = x_p[cat], x_m[cat]  # (P, 1)
        tpx = (w * vp) * xv
        tmx = (w * vm) * xv
        tp2 = (w * vp) * vp
        tm2 = (w * vm) * vm
        # first half: k=0,1 use x_p, k=2,3 x_m; second half: k=0,2 x_p, k=1,3 x_m
        sqx[0] += tpx
        sq2[0] += tp2
        sqx[3] += tmx
        sq2[3] += tm2
        sqx[1] += np.where(fh, tpx, tmx)
        sq2[1] += np.where(fh, tp2, tm2)
        sqx[2] += np.where(fh, tmx, tpx)
        sq2[2] += np.where(fh, tm2, tp2)
    scale, b1, b2, bk = _best_split(vmax, ((i1, i2, k, sqx[k, p], sq2[k, p]) for p, (i1, i2) in enumerate(pairs) for k in range(4)))
    zero |= (b1 < 0) | (b2 < 0) | (bk < 0)
    live = ~zero
    L, neg, scale = _boundary_levels(order, b1, b2, live, scale)
    bk = np.where(neg, 3 - bk, bk)
    xg0 = np.where((bk < 2)[:, None], x_p[None], x_m[None])
    xg1 = np.where((bk % 2 == 0)[:, None], x_p[None], x_m[None])
    xg = np.stack([xg0, xg1], 1)  # (G, 2, 3)
    L = L.reshape(G, 2, 8)
    u = _pattern(g, L)
    index = g.kmap[u].astype(np.int64)
    off = (index < 0) & live[:, None]
    if off.any():
        gi, ki = np.nonzero(off)
        index[gi, ki] = _iq1_neighbours(g, u[gi, ki], xb.reshape(G, 2, 8)[gi, ki], weight.reshape(G, 2, 8)[gi, ki], scale[gi], xg[gi, ki])
        lv = g.levels[np.where(live[:, None], index, 0)].astype(np.int64)  # (G, 2, 8)
        q = np.take_along_axis(xg, lv, 2).reshape(G, 16)
        scale = _refit_positive(weight, q, xb, off.any(axis=1), scale)
    index = np.where(live[:, None], index, 0)
    shifts = np.where(live, bk, 0).reshape(nbl, 16)
    scale = np.where(zero, F32(0), scale).reshape(nbl, 16)
    qs = (index & 255).reshape(nbl, 32)
    qh = ((index[:, 0] >> 8) | ((index[:, 1] >> 8) << 4)).reshape(nbl, 16)
    max_scale, has, _, ls = _block_scale(scale, 15, 7)
    ls = ls.astype(np.int64)  # (nbl, 16)
    masks = np.array([0x00, 0x80, 0x08, 0x88])
    qh_final = np.where(has[:, None], qh | masks[shifts], qh)
    sc = (ls.reshape(nbl, 4, 4) << (3 * np.arange(4))).sum(axis=-1)  # four uint16 words
    # the super-block scale: refit over the codes as stored, every sub-block in order
    lv = g.levels[index].astype(np.int64).reshape(nbl, 16, 2, 8)
    sh = shifts
    xg0 = np.where((sh < 2)[..., None], x_p, x_m)  # (nbl, 16, 3)
    xg1 = np.where((sh % 2 == 0)[..., None], x_p, x_m)
    q = np.stack([np.take_along_axis(xg0, lv[:, :, 0], 2), np.take_along_axis(xg1, lv[:, :, 1], 2)], 2)  # (nbl,16,2,8)
    q = (q * (2 * ls + 1).astype(F32)[:, :, None, None]).reshape(nbl, 256)
    w = weight.reshape(nbl, 256)
    xf = x
    sumqx = seqsum(np.ascontiguousarray(((w * q) * xf).T))
    sumq2 = seqsum(np.ascontiguousarray(((w * q) * q).T))
    dfin = np.where(sumq2 > 0, sumqx / np.where(sumq2 > 0, sumq2, F32(1)), max_scale / F32(15))
    bits = fp32_to_fp16_bits(dfin * F32(1.1125)).astype(np.int64)
    sc[:, 0] |= (bits & 0x000F) << 12
    sc[:, 1] |= (bits & 0x00F0) << 8
    sc[:, 2] |= (bits & 0x0F00) << 4
    sc[:, 3] |= bits & 0xF000
    sc = np.where(has[:, None], sc, 0).astype("<u2")
    return {"qs": qs.astype(np.uint8), "qh": qh_final.astype(np.uint8), "scales": sc.view(np.uint8).reshape(nbl, 8)}


WEIGHTED["iq1_m"] = _iq1_m
WEIGHTED["iq1_s"] = _iq1_s
WEIGHTED["iq2_s"] = lambda rows, qw: _iq2("iq2_s", rows, qw)
WEIGHTED["iq3_xxs"] = _iq3_xxs
WEIGHTED["iq3_s"] = _iq3_s
QUANTIZERS = {
    "iq1_m": lambda x: _iq1_m(x, None),
    "iq2_s": lambda x: _iq2("iq2_s", x, None),
    "iq3_xxs": lambda x: _iq3_xxs(x, None),
    "iq3_s": lambda x: _iq3_s(x, None),
}
