"""The quantized block layouts ggml retired, declared and decoded like the current ones (:mod:`.blocks`).

llama.cpp files older than GGJT v2, whisper.cpp/ggml-example files with quantization version 0 or 1, and
rwkv.cpp version-100 files hold blocks in layouts ggml no longer has (``ggml-org/llama.cpp`` ``ggml.c`` before
b9fd7ee, GGJT v2's nibble order, and 2d5db48, GGJT v3's f16 scales; Q4_2 and Q4_3 as 77a7340 and e0305ea added
them; ``RWKV/rwkv.cpp`` ``ggml.c`` at c40941d for Q4_1_O):

- ``*.v1`` — before GGJT v2 ("pairs"): byte ``qs[j]`` holds element ``2j`` in its low nibble and ``2j+1`` in its
  high one; Q4_0/Q4_1/Q8_0 scales are f32. Q5's high bit of element ``l`` is bit ``l`` of ``qh``.
- ``*.v2`` — GGJT v2: today's nibble order ("halves") with the old f32 scales.
- ``q4_2``, ``q4_3`` (16-element blocks, pairs) and rwkv.cpp's ``q4_1_o`` (Q4_1 with one f16 outlier per block).

Each layout is a construct ``Struct`` (the numpy dtype is derived from it by :func:`.blocks.dtype_of`), a kernel
giving float32 exactly as the C code of its era did (``(q - 8) * d``, ``q * d + m``), and, where one exists, a
lossless re-encoding into today's layout of the same type (:func:`to_current`): the nibbles are reordered and an
f32 scale is narrowed to f16 only when every scale of the tensor survives the narrowing unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

import numpy as np
from construct import Array, Float16l, Float32l, Int8sl, Int8ul, Int16ul, Struct

from ..core import rules
from .blocks import block_dtype, dtype_of
from .dequant import as_bytes
from .floats import half_to_float
from .kernel_parts import U8, finish, packed

Kernel = Callable[[np.ndarray, np.ndarray], None]


def _pairs(qs: np.ndarray) -> np.ndarray:
    """Pairs order: ``(n, k)`` bytes → ``(n, 2k)`` codes, element 2j from the low nibble of byte j, 2j+1 the high."""
    n, k = qs.shape
    out = np.empty((n, k, 2), U8)
    out[:, :, 0] = qs & U8(0x0F)
    out[:, :, 1] = qs >> U8(4)
    return out.reshape(n, 2 * k)


def _halves(qs: np.ndarray) -> np.ndarray:
    """Halves order (today's): byte j holds element j (low nibble) and element j + k (high nibble)."""
    return np.concatenate([qs & U8(0x0F), qs >> U8(4)], axis=1)


def _scale(blocks: np.ndarray, name: str) -> np.ndarray:
    raw = blocks[name]
    return (half_to_float(raw) if raw.dtype.itemsize == 2 else raw.astype(np.float32))[:, None]


def _signed(codes: np.ndarray, offset: int) -> np.ndarray:
    codes -= U8(offset)
    return codes.view(np.int8)


def _q5_codes(blocks: np.ndarray, order: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """Five-bit codes: the nibbles in ``order`` plus 16 where bit ``l`` of ``qh`` (little-endian u32) is set."""
    codes = order(packed(blocks, "qs"))
    high = np.unpackbits(packed(blocks, "qh"), bitorder="little").reshape(codes.shape)
    codes |= high << U8(4)
    return codes


def _kernel(order: Callable[[np.ndarray], np.ndarray], offset: int | None, five_bit: bool = False) -> Kernel:
    """``(q - offset) * d`` when ``offset`` is given (Q4_0 style), else ``q * d + m`` (Q4_1 style)."""

    def kernel(blocks: np.ndarray, out: np.ndarray) -> None:
        codes = _q5_codes(blocks, order) if five_bit else order(packed(blocks, "qs"))
        if offset is None:
            finish(codes, out, _scale(blocks, "d"), plus=_scale(blocks, "m"))
        else:
            finish(_signed(codes, offset), out, _scale(blocks, "d"))

    return kernel


def _q8(blocks: np.ndarray, out: np.ndarray) -> None:
    finish(packed(blocks, "qs").view(np.int8), out, _scale(blocks, "d"))


def _q4_1_o(blocks: np.ndarray, out: np.ndarray) -> None:
    """rwkv.cpp's Q4_1_O: Q4_1 (pairs, f16 d and m), then element ``outlier_index & 31`` set to the outlier."""
    _kernel(_pairs, None)(blocks, out)
    index = blocks["outlier_index"].astype(np.intp) & 31
    out[np.arange(out.shape[0]), index] = half_to_float(blocks["outlier_value"])


# -- re-encoding into today's layouts ---------------------------------------------------------------------
def _narrow(values: np.ndarray) -> np.ndarray | None:
    """f32 scales as f16 bits, or None when one of them does not survive the narrowing bit for bit."""
    values = np.ascontiguousarray(values, dtype="<f4")
    with np.errstate(all="ignore"):
        halves = values.astype("<f2")
    back = half_to_float(halves.view("<u2"))
    return halves.view("<u2") if np.array_equal(back.view("<u4"), values.view("<u4")) else None


def _pack_halves(codes: np.ndarray) -> np.ndarray:
    """``(n, 32)`` nibble codes → today's ``qs[16]``: element j low, element j + 16 high."""
    k = codes.shape[1] // 2
    return (codes[:, :k] & U8(0x0F)) | ((codes[:, k:] & U8(0x0F)) << U8(4))


def _pack_qh(codes: np.ndarray) -> np.ndarray:
    """Bit 4 of each of 32 codes → four ``qh`` bytes, bit j for element j (little-endian u32)."""
    return np.packbits((codes >> U8(4)) & U8(1), axis=1, bitorder="little")


def _current(ggml_name: str, n: int) -> np.ndarray:
    return np.zeros(n, block_dtype(ggml_name))


def _reencode(ggml_name: str, order: Callable[[np.ndarray], np.ndarray] | None, scales: tuple[str, ...], five_bit: bool = False):
    """A re-encoder into today's ``ggml_name`` blocks: reorder nibbles (``order`` given), narrow f32 scales."""

    def to_current(blocks: np.ndarray) -> np.ndarray | None:
        out = _current(ggml_name, blocks.shape[0])
        for name in scales:
            raw = blocks[name]
            bits = _narrow(raw) if raw.dtype.itemsize == 4 else raw.view("<u2")
            if bits is None:
                return None
            out[name] = bits.view("<f2")
        if order is None:
            out["qs"] = blocks["qs"]
            return out
        codes = _q5_codes(blocks, order) if five_bit else order(packed(blocks, "qs"))
        out["qs"] = _pack_halves(codes)
        if five_bit:
            out["qh"] = _pack_qh(codes)
        return out

    return to_current


@dataclass(frozen=True)
class RetiredLayout:
    """A retired block layout: ``elements`` values per ``struct``; ``ggml_name`` is the type it was a version of."""

    name: str
    ggml_name: str
    elements: int
    struct: Struct
    kernel: Kernel
    reencode: Callable[[np.ndarray], np.ndarray | None] | None
    note: str

    @property
    def type_size(self) -> int:
        return self.struct.sizeof()

    @property
    def dtype(self) -> np.dtype:
        return _dtype(self.name)

    def nbytes(self, n_elements: int) -> int:
        return n_elements // self.elements * self.type_size


def _layouts() -> dict[str, RetiredLayout]:
    u8, f16, f32 = Int8ul, Float16l, Float32l
    qs16 = "qs" / Array(16, u8)
    return {
        r.name: r
        for r in (
            RetiredLayout(
                "q4_0.v1",
                "q4_0",
                32,
                Struct("d" / f32, qs16),
                _kernel(_pairs, 8),
                _reencode("q4_0", _pairs, ("d",)),
                "before GGJT v2: f32 d, pairs",
            ),
            RetiredLayout(
                "q4_0.v2",
                "q4_0",
                32,
                Struct("d" / f32, qs16),
                _kernel(_halves, 8),
                _reencode("q4_0", None, ("d",)),
                "GGJT v2: f32 d, halves",
            ),
            RetiredLayout(
                "q4_1.v1",
                "q4_1",
                32,
                Struct("d" / f32, "m" / f32, qs16),
                _kernel(_pairs, None),
                _reencode("q4_1", _pairs, ("d", "m")),
                "before GGJT v2: f32 d and m, pairs",
            ),
            RetiredLayout(
                "q4_1.v2",
                "q4_1",
                32,
                Struct("d" / f32, "m" / f32, qs16),
                _kernel(_halves, None),
                _reencode("q4_1", None, ("d", "m")),
                "GGJT v2: f32 d and m, halves",
            ),
            RetiredLayout(
                "q4_2",
                "q4_2",
                16,
                Struct("d" / f16, "qs" / Array(8, u8)),
                _kernel(_pairs, 8),
                None,
                "2023-04-18 to 05-12: Q4_0 with 16-element blocks and f16 d, pairs",
            ),
            RetiredLayout(
                "q4_3",
                "q4_3",
                16,
                Struct("d" / f16, "m" / f16, "qs" / Array(8, u8)),
                _kernel(_pairs, None),
                None,
                "2023-04-20 to 04-28: Q4_1 with 16-element blocks and f16 d and m, pairs",
            ),
            RetiredLayout(
                "q5_0.v1",
                "q5_0",
                32,
                Struct("d" / f16, "qh" / Array(4, u8), qs16),
                _kernel(_pairs, 16, True),
                _reencode("q5_0", _pairs, ("d",), True),
                "before GGJT v2: pairs, qh bit l for element l",
            ),
            RetiredLayout(
                "q5_1.v1",
                "q5_1",
                32,
                Struct("d" / f16, "m" / f16, "qh" / Array(4, u8), qs16),
                _kernel(_pairs, None, True),
                _reencode("q5_1", _pairs, ("d", "m"), True),
                "before GGJT v2: pairs, qh bit l for element l",
            ),
            RetiredLayout(
                "q8_0.v1",
                "q8_0",
                32,
                Struct("d" / f32, "qs" / Array(32, Int8sl)),
                _q8,
                _reencode("q8_0", None, ("d",)),
                "before GGJT v3: f32 d",
            ),
            RetiredLayout(
                "q8_1.v1",
                "q8_1",
                32,
                Struct("d" / f32, "s0" / f32, "s1" / f32, "qs" / Array(32, Int8sl)),
                _q8,
                None,
                "2023-04-25 to 05-12 (intermediate only): f32 d, s0, s1",
            ),
            RetiredLayout(
                "q8_1.v2",
                "q8_1",
                32,
                Struct("d" / f32, "s" / f32, "qs" / Array(32, Int8sl)),
                _q8,
                None,
                "2023-05-12 to 2024-03-12 (intermediate only): f32 d and s",
            ),
            RetiredLayout(
                "q4_1_o",
                "q4_1_o",
                32,
                Struct("d" / f16, "m" / f16, "outlier_index" / Int16ul, "outlier_value" / f16, qs16),
                _q4_1_o,
                None,
                "rwkv.cpp 2023-04-07 to 04-29: Q4_1 (pairs, f16) with one f16 outlier per block",
            ),
        )
    }


RETIRED: dict[str, RetiredLayout] = _layouts()


@cache
def _dtype(name: str) -> np.dtype:
    return dtype_of(RETIRED[name].struct)


def retired_layout(name: str) -> RetiredLayout:
    try:
        return RETIRED[name]
    except KeyError:
        raise rules.TENSOR_LAYOUT.error(f"no retired block layout {name!r}") from None


def _blocks(data: object, layout: RetiredLayout) -> np.ndarray:
    buf = as_bytes(data)
    if buf.size % layout.type_size:
        raise rules.TENSOR_PARTIAL_BLOCK.error(
            f"{buf.size} bytes of {layout.name} end inside a {layout.type_size}-byte block",
            offset=buf.size - buf.size % layout.type_size,
        )
    return buf.view(layout.dtype)


def dequantize_retired(data: object, layout: str) -> np.ndarray:
    """The values of blocks in a retired ``layout`` (e.g. ``'q4_0.v1'``) as a flat float32 array."""
    lay = retired_layout(layout)
    blocks = _blocks(data, lay)
    out = np.empty((blocks.shape[0], lay.elements), np.float32)
    with np.errstate(all="ignore"):
        lay.kernel(blocks, out)
    return out.reshape(-1)


def to_current(data: object, layout: str) -> tuple[str, bytes] | None:
    """``(ggml type name, bytes)`` of the same values in today's layout, or None when that would change a value
    (a scale that f16 cannot hold, or a type ggml no longer has)."""
    lay = retired_layout(layout)
    if lay.reencode is None:
        return None
    out = lay.reencode(_blocks(data, lay))
    return None if out is None else (lay.ggml_name, out.tobytes())
