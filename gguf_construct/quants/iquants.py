"""Kernels of the super-block i-quants: IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M, IQ4_XS.

(IQ4_NL, a one-scale type, is in :mod:`.legacy`.) Kernel contract as in :mod:`.common`. Groups of 8 (or 4) values are rows of a lattice
grid from :mod:`.grids`,
picked by an index; IQ2/IQ3 add a sign per value. Grid rows are gathered as whole 8-byte words, and signs
applied to all 8 bytes at once: where the sign mask byte is 0xFF, ``(g ^ 0xFF) + 1`` is ``-g`` (grid bytes are
never 0 in the signed grids, so no carry crosses a byte). ``db * (±g)`` equals ggml's ``db * g * (±1.f)``
bit for bit, except that the compiled C applies ``±1.f`` as a sign-bit flip, which also flips the sign of a NaN:
:func:`_signed_finish` repeats that flip for the (rare) blocks whose scale is NaN.
"""

from __future__ import annotations

from functools import cache

import numpy as np

from . import grids
from .classic import lookup_nibbles
from .floats import half_to_float
from .kernel_parts import U8, U32, U64, finish, packed, per_group, planes

F32 = np.float32
_LOW_BYTES = np.uint64(0x0101010101010101)


@cache
def _grid_words(name: str, width: int) -> np.ndarray:
    """A grid table, one little-endian word (8 or 4 bytes) per row."""
    table = np.ascontiguousarray(grids.grid_bytes(getattr(grids, name), width))
    return table.view(U64 if width == 8 else U32).ravel()


@cache
def _ksign_words() -> np.ndarray:
    """ksigns64: per 7-bit sign index, 8 bytes of 0xFF (negate) or 0x00, as little-endian words."""
    return np.ascontiguousarray(grids.sign_masks()).view(U64).ravel()


@cache
def _byte_sign_words() -> np.ndarray:
    """Per full sign byte (IQ2_S, IQ3_S), 8 bytes of 0xFF where bit j is set."""
    bits = np.unpackbits(np.arange(256, dtype=U8)[:, None], axis=1, bitorder="little")
    return np.ascontiguousarray(bits * U8(0xFF)).view(U64).ravel()


def _signed_finish(words: np.ndarray, masks: np.ndarray, scale: np.ndarray, out: np.ndarray) -> None:
    """out = scale * (grid bytes of ``words``, negated where ``masks`` has 0xFF); both ``(n, …)`` word arrays are
    consumed, ``scale`` is ``(n, groups)``."""
    words ^= masks
    masks &= _LOW_BYTES  # now 1 in each negated byte
    words += masks
    n = out.shape[0]
    finish(words.view(np.int8).reshape(out.shape), out, scale)
    nan_rows = np.flatnonzero(np.isnan(scale).any(axis=1))
    if nan_rows.size:  # ggml flips the sign bit even of a NaN
        flips = masks.reshape(n, -1)[nan_rows].view(U8).astype(np.uint32) << np.uint32(31)
        out.view(np.uint32)[nan_rows] ^= flips


def _half_step_scales(d: np.ndarray, nibble: np.ndarray, factor: float) -> np.ndarray:
    """ggml's ``d * (0.5f + s) * factor`` per group (IQ2 uses 0.25f, IQ3_XXS 0.5f): ``(n, g)`` float32."""
    step = F32(0.5) + nibble.astype(F32)
    return d.reshape(-1, 1) * step * F32(factor)


def _nibble_pairs(data: np.ndarray) -> np.ndarray:
    """``(n, k)`` bytes → ``(n, 2k)``: low nibble, high nibble of each byte in turn."""
    n, k = data.shape
    return planes(data, [0, 4], 0xF).transpose(1, 2, 0).reshape(n, 2 * k)


def _seven_bit_signs(aux: np.ndarray) -> np.ndarray:
    """``(n, g)`` uint32 words holding four 7-bit sign indices → their sign masks, ``(n, 4g)`` words."""
    n, g = aux.shape
    index = aux[None] >> np.array([0, 7, 14, 21], np.uint32).reshape(4, 1, 1)
    index &= np.uint32(127)
    return _ksign_words()[index.transpose(1, 2, 0)].reshape(n, 4 * g)


def iq2_xxs(blocks: np.ndarray, out: np.ndarray) -> None:
    n = blocks.shape[0]
    qs = packed(blocks, "qs").reshape(n, 8, 8)  # per 32 values: 4 grid indices, then a uint32
    aux = qs[:, :, 4:].copy().view(U32).reshape(n, 8)  # four 7-bit sign indices and a 4-bit scale
    words = _grid_words("IQ2XXS_GRID", 8)[qs[:, :, :4]].reshape(n, 32)
    scale = _half_step_scales(half_to_float(blocks["d"]), aux >> np.uint32(28), 0.25)
    _signed_finish(words, _seven_bit_signs(aux), scale, out)


def _iq2_scales(blocks: np.ndarray) -> np.ndarray:
    """IQ2_XS/IQ2_S: per 32 values, two 16-value scales from the low and the high nibble: ``(n, 16)``."""
    return _half_step_scales(half_to_float(blocks["d"]), _nibble_pairs(packed(blocks, "scales")), 0.25)


def iq2_xs(blocks: np.ndarray, out: np.ndarray) -> None:
    qs = packed(blocks, "qs").view("<u2")  # (n, 32): 9-bit grid index, 7-bit sign index
    words = _grid_words("IQ2XS_GRID", 8)[qs & np.uint16(511)]
    masks = _ksign_words()[qs >> np.uint16(9)]
    _signed_finish(words, masks, _iq2_scales(blocks), out)


def iq2_s(blocks: np.ndarray, out: np.ndarray) -> None:
    n = blocks.shape[0]
    qs = packed(blocks, "qs")  # 32 low index bytes, then 32 sign bytes
    high = planes(packed(blocks, "qh"), [0, 2, 4, 6], 3)  # (4, n, 8): bits 8-9 of index 4*ib32 + l
    index = qs[:, :32].astype(np.uint16)
    index |= high.transpose(1, 2, 0).reshape(n, 32).astype(np.uint16) << np.uint16(8)
    words = _grid_words("IQ2S_GRID", 8)[index]
    masks = _byte_sign_words()[qs[:, 32:]]
    _signed_finish(words, masks, _iq2_scales(blocks), out)


def iq3_xxs(blocks: np.ndarray, out: np.ndarray) -> None:
    qs = packed(blocks, "qs")  # 64 grid indices, then 8 uint32 of signs and scale
    aux = np.ascontiguousarray(qs[:, 64:]).view(U32)  # (n, 8)
    words = np.take(_grid_words("IQ3XXS_GRID", 4), qs[:, :64]).view(U64)  # two 4-value rows make 8 values
    scale = _half_step_scales(half_to_float(blocks["d"]), aux >> np.uint32(28), 0.5)
    _signed_finish(words, _seven_bit_signs(aux), scale, out)


def iq3_s(blocks: np.ndarray, out: np.ndarray) -> None:
    n = blocks.shape[0]
    high = np.unpackbits(packed(blocks, "qh"), bitorder="little").reshape(n, 64)  # bit 8 of index 8k + p
    index = packed(blocks, "qs").astype(np.uint16)
    index |= high.astype(np.uint16) << np.uint16(8)
    words = np.take(_grid_words("IQ3S_GRID", 4), index).view(U64)
    masks = _byte_sign_words()[packed(blocks, "signs")]
    odd = _nibble_pairs(packed(blocks, "scales")).astype(np.int32) * 2 + 1  # 1 + 2*s, as int
    scale = per_group(half_to_float(blocks["d"]), odd)
    _signed_finish(words, masks, scale, out)


@cache
def _iq1_grid_words() -> np.ndarray:
    return np.ascontiguousarray(grids.grid_bytes(grids.IQ1S_GRID, 8)).view(U64).ravel()


def _iq1_delta(negative: np.ndarray) -> np.ndarray:
    return np.where(negative, F32(-grids.IQ1S_DELTA), F32(grids.IQ1S_DELTA))


def iq1_s(blocks: np.ndarray, out: np.ndarray) -> None:
    n = blocks.shape[0]
    qh = packed(blocks, "qh").view("<u2")  # (n, 8)
    high = qh[None] >> np.array([0, 3, 6, 9], np.uint16).reshape(4, 1, 1)
    high &= np.uint16(7)
    index = packed(blocks, "qs").astype(np.uint16)
    index |= high.transpose(1, 2, 0).reshape(n, 32) << np.uint16(8)
    values = _iq1_grid_words()[index].view(np.int8).reshape(n, 256)
    odd = ((qh >> np.uint16(12)) & np.uint16(7)) * np.uint16(2) + np.uint16(1)
    dl = per_group(half_to_float(blocks["d"]), odd)
    finish(values, out, dl, before=_iq1_delta(qh >= np.uint16(0x8000)))  # dl * (grid + delta)


def iq1_m(blocks: np.ndarray, out: np.ndarray) -> None:
    n = blocks.shape[0]
    sc = packed(blocks, "scales").view("<u2")  # (n, 4)
    top = sc >> np.uint16(12)  # the block scale, a half, is spread over the top nibbles
    d_bits = top[:, 0] | (top[:, 1] << np.uint16(4)) | (top[:, 2] << np.uint16(8)) | (top[:, 3] << np.uint16(12))
    nib = _nibble_pairs(packed(blocks, "qh"))  # (n, 32): per group of 8, 3 index bits and the delta sign
    index = packed(blocks, "qs").astype(np.uint16)
    index |= (nib & U8(7)).astype(np.uint16) << np.uint16(8)
    values = _iq1_grid_words()[index].view(np.int8).reshape(n, 256)
    # per 16 values (ib, half): 3-bit scale at bit 6 * (ib % 2) + 3 * half of sc[ib // 2]
    s3 = sc[None] >> np.array([0, 3, 6, 9], np.uint16).reshape(4, 1, 1)
    s3 &= np.uint16(7)
    odd = s3.transpose(1, 2, 0).reshape(-1) * np.uint16(2) + np.uint16(1)
    dl = per_group(half_to_float(d_bits), odd.reshape(n, 16))
    finish(values, out, dl, before=_iq1_delta(nib >= U8(8)))


def iq4_xs(blocks: np.ndarray, out: np.ndarray) -> None:
    low = _nibble_pairs(packed(blocks, "scales_l")).astype(np.int16)  # (n, 8)
    high = blocks["scales_h"][None] >> np.arange(0, 16, 2, dtype=np.uint16).reshape(8, 1)
    high &= np.uint16(3)
    ls = low | (high.T.astype(np.int16) << np.int16(4))
    ls -= np.int16(32)
    dl = per_group(half_to_float(blocks["d"]), ls)
    finish(lookup_nibbles(packed(blocks, "qs"), 16, grids.KVALUES_IQ4NL), out, dl)


KERNELS = {
    "iq2_xxs": iq2_xxs,
    "iq2_xs": iq2_xs,
    "iq2_s": iq2_s,
    "iq3_xxs": iq3_xxs,
    "iq3_s": iq3_s,
    "iq1_s": iq1_s,
    "iq1_m": iq1_m,
    "iq4_xs": iq4_xs,
}
