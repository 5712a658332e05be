"""Building blocks shared by the kernels, chosen for numpy's speed.

numpy is fast on long contiguous loops and slow on many short ones (a ``(n, 16)`` view of a field is ``n`` loops of
16 bytes). So the kernels do bit manipulation on whole contiguous arrays (a field copied out of the blocks, or a
stack of "planes" made by broadcasting along a *leading* axis), move rows of bytes around as single void items
(:func:`place`), and apply the per-group scales to a flat float32 array in one pass (:func:`finish`).

Kernel contract: ``kernel(blocks, out)`` with ``blocks`` a contiguous little-endian structured array (one item per
block) and ``out`` a float32 ``(n_blocks, block_size)`` array to fill, exactly as ggml's ``dequantize_row_*``.
"""

from __future__ import annotations

import numpy as np

U8 = np.uint8
U32 = np.dtype("<u4")
U64 = np.dtype("<u8")


def rows(blocks: np.ndarray) -> np.ndarray:
    """The blocks' bytes as a ``(n, type_size)`` uint8 array (a view)."""
    return blocks.view(U8).reshape(blocks.shape[0], blocks.dtype.itemsize)


def field(blocks: np.ndarray, name: str) -> np.ndarray:
    """A field's bytes as a ``(n, nbytes)`` uint8 view (rows are ``type_size`` apart)."""
    dt, offset = blocks.dtype.fields[name][:2]
    return rows(blocks)[:, offset : offset + dt.itemsize]


def packed(blocks: np.ndarray, name: str) -> np.ndarray:
    """A field's bytes copied into a contiguous ``(n, nbytes)`` uint8 array."""
    src = field(blocks, name)
    dst = np.empty(src.shape, U8)
    place(dst, src)
    return dst


def place(dst: np.ndarray, src: np.ndarray) -> None:
    """``dst[...] = src`` for arrays whose last axis is contiguous, copying each last-axis row as one void item."""
    width = src.shape[-1] * src.dtype.itemsize
    dst.view(f"V{width}")[...] = src.view(f"V{width}")


def planes(data: np.ndarray, shifts: list[int] | range, mask: int) -> np.ndarray:
    """``(data >> s) & mask`` for each shift ``s``, stacked on a new leading axis (one long loop per shift)."""
    shifted = np.right_shift(data[None], np.array(shifts, U8).reshape(-1, *([1] * data.ndim)))
    shifted &= U8(mask)
    return shifted


def nibbles(data: np.ndarray, group: int) -> np.ndarray:
    """``(n, k)`` contiguous bytes → ``(n, 2k)`` codes: per ``group`` bytes, their low nibbles then their high ones."""
    n, k = data.shape
    out = np.empty((n, k // group, 2, group), U8)
    place(out[:, :, 0], (data & U8(0x0F)).reshape(n, k // group, group))
    place(out[:, :, 1], (data >> U8(4)).reshape(n, k // group, group))
    return out.reshape(n, 2 * k)


def expand(per_group: np.ndarray, size: int) -> np.ndarray:
    """``(n, g)`` per-group values repeated to ``(n, size)``, i.e. one per value."""
    n, g = per_group.shape
    return np.repeat(per_group.reshape(-1), size // g).reshape(n, size)


def finish(
    codes: np.ndarray,
    out: np.ndarray,
    scale: np.ndarray,
    *,
    before: np.ndarray | None = None,
    plus: np.ndarray | None = None,
    minus: np.ndarray | None = None,
) -> None:
    """out = (float(codes) [+ before]) * scale [+ plus | - minus], each per-group array ``(n, g)`` broadcast to its
    group of values; float32 operations in exactly this order (ggml's)."""
    np.copyto(out, codes, casting="unsafe")
    size = out.shape[1]
    if before is not None:
        out += expand(before, size)
    out *= expand(scale, size)
    if plus is not None:
        out += expand(plus, size)
    if minus is not None:
        out -= expand(minus, size)
