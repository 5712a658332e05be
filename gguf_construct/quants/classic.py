"""Kernels of the one-scale block types: Q4_0 … Q8_1, Q1_0, Q2_0, IQ4_NL, and the fp4 types MXFP4 and NVFP4.

Quant codes are built as small integers in ggml's element order (uint8 that wraps into int8 where ggml
subtracts an offset in ``int``), then :func:`.common.finish` converts and scales them in ggml's order of
operations, e.g. ``(float)(q - 8) * d`` for Q4_0 and ``(float)q * d + m`` for Q4_1.
"""

from __future__ import annotations

from functools import cache

import numpy as np

from . import grids
from .floats import e8m0_half_table, half_to_float, ue4m3_table
from .kernel_parts import U8, U32, field, finish, nibbles, packed, place


def _scale(blocks: np.ndarray, name: str = "d") -> np.ndarray:
    return half_to_float(blocks[name])[:, None]


def q4_0(blocks: np.ndarray, out: np.ndarray) -> None:
    codes = nibbles(field(blocks, "qs"), 16)
    codes -= U8(8)
    finish(codes.view(np.int8), out, _scale(blocks))


def q4_1(blocks: np.ndarray, out: np.ndarray) -> None:
    finish(nibbles(field(blocks, "qs"), 16), out, _scale(blocks), plus=_scale(blocks, "m"))


def _five_bit_codes(blocks: np.ndarray) -> np.ndarray:
    """Q5_0/Q5_1 codes 0..31: nibbles plus 16 where bit j of ``qh`` (a little-endian uint32) is set."""
    codes = nibbles(field(blocks, "qs"), 16)
    high = np.unpackbits(packed(blocks, "qh"), bitorder="little").reshape(codes.shape)
    high <<= U8(4)
    codes |= high
    return codes


def q5_0(blocks: np.ndarray, out: np.ndarray) -> None:
    codes = _five_bit_codes(blocks)
    codes -= U8(16)
    finish(codes.view(np.int8), out, _scale(blocks))


def q5_1(blocks: np.ndarray, out: np.ndarray) -> None:
    finish(_five_bit_codes(blocks), out, _scale(blocks), plus=_scale(blocks, "m"))


def q8_0(blocks: np.ndarray, out: np.ndarray) -> None:
    """Q8_0, and Q8_1 (whose ``s = d * sum(qs)`` only serves dot products): qs * d."""
    finish(field(blocks, "qs").view(np.int8), out, _scale(blocks))  # finish casts slice by slice from the blocks


def q1_0(blocks: np.ndarray, out: np.ndarray) -> None:
    """Q1_0: bit j set → d, clear → -d; the C negation is a sign-bit flip, so it is one here too (NaN included)."""
    clear = np.unpackbits(packed(blocks, "qs"), bitorder="little").reshape(out.shape)
    clear ^= U8(1)
    bits = out.view(np.uint32)
    np.copyto(bits, clear, casting="unsafe")
    bits <<= np.uint32(31)
    bits ^= half_to_float(blocks["d"]).view(np.uint32)[:, None]


def q2_0(blocks: np.ndarray, out: np.ndarray) -> None:
    """Q2_0: element 4i + j is bits 2j of byte i; code 0..3 stands for -1..2, times d."""
    x = packed(blocks, "qs").astype(U32)  # one byte per word; spread its four crumbs over the word's bytes
    spread = x & np.uint32(3)
    for shift, mask in ((6, 0x300), (12, 0x30000), (18, 0x3000000)):
        part = x << np.uint32(shift)
        part &= np.uint32(mask)
        spread |= part
    codes = spread.view(U8).reshape(out.shape)
    codes -= U8(1)
    finish(codes.view(np.int8), out, _scale(blocks))


@cache
def quad_table(values: tuple[int, ...]) -> np.ndarray:
    """For every 16-bit index of four nibbles (lowest first), the four int8 ``values`` they select, as a uint32."""
    index = np.arange(1 << 16)
    v = np.array(values, np.int8).view(U8).astype(np.uint32)
    table = v[index & 15] | (v[(index >> 4) & 15] << 8) | (v[(index >> 8) & 15] << 16) | (v[index >> 12] << 24)
    return table.astype(U32)


def _quad_index(nibble_bytes: np.ndarray) -> np.ndarray:
    """Words holding one nibble per byte (0x0N0N0N0N) → the 16-bit index N0 | N1 << 4 | N2 << 8 | N3 << 12."""
    y = nibble_bytes >> np.uint32(4)
    y |= nibble_bytes
    y &= np.uint32(0x00FF00FF)
    z = y >> np.uint32(8)
    z |= y
    z &= np.uint32(0xFFFF)
    return z


def lookup_nibbles(data: np.ndarray, group: int, values: tuple[int, ...]) -> np.ndarray:
    """Like :func:`.common.nibbles`, with every nibble replaced by ``values[nibble]`` (int8), four per lookup."""
    n, k = data.shape
    words = data.view(U32)
    table = quad_table(values)
    out = np.empty((n, k // group, 2, group), U8)
    low = _quad_index(words & np.uint32(0x0F0F0F0F))
    place(out[:, :, 0], np.take(table, low).reshape(n, k // group, group // 4))
    high = words >> np.uint32(4)
    high &= np.uint32(0x0F0F0F0F)
    place(out[:, :, 1], np.take(table, _quad_index(high)).reshape(n, k // group, group // 4))
    return out.reshape(n, 2 * k).view(np.int8)


def iq4_nl(blocks: np.ndarray, out: np.ndarray) -> None:
    finish(lookup_nibbles(packed(blocks, "qs"), 16, grids.KVALUES_IQ4NL), out, _scale(blocks))


def mxfp4(blocks: np.ndarray, out: np.ndarray) -> None:
    """MXFP4: doubled E2M1 values times half the E8M0 scale."""
    scale = e8m0_half_table()[blocks["e"]][:, None]
    finish(lookup_nibbles(packed(blocks, "qs"), 16, grids.KVALUES_FP4), out, scale)


def nvfp4(blocks: np.ndarray, out: np.ndarray) -> None:
    """NVFP4: four sub-blocks of 16, each with its own UE4M3 scale; E2M1 values as MXFP4."""
    scales = ue4m3_table()[field(blocks, "d")]
    finish(lookup_nibbles(packed(blocks, "qs"), 8, grids.KVALUES_FP4), out, scales)


KERNELS = {
    "q4_0": q4_0,
    "q4_1": q4_1,
    "q5_0": q5_0,
    "q5_1": q5_1,
    "q8_0": q8_0,
    "q8_1": q8_0,
    "q1_0": q1_0,
    "q2_0": q2_0,
    "iq4_nl": iq4_nl,
    "mxfp4": mxfp4,
    "nvfp4": nvfp4,
}
