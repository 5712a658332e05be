"""Building blocks shared by the kernels, chosen for numpy's speed.

numpy is fast on long contiguous loops and slow on many short ones (a ``(n, 16)`` view of a field is ``n`` loops of
16 bytes). So the kernels do bit manipulation on whole contiguous arrays (a field copied out of the blocks, or a
stack of "planes" made by broadcasting along a *leading* axis), move rows of bytes around as single void items
(:func:`place`), and apply the per-group scales to a flat float32 array in one pass (:func:`finish`).

Kernel contract: ``kernel(blocks, out)`` with ``blocks`` a contiguous little-endian structured array (one item per
block) and ``out`` a float32 ``(n_blocks, block_size)`` array to fill, exactly as ggml's ``dequantize_row_*``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

U8 = np.uint8
U32 = np.dtype("<u4")
U64 = np.dtype("<u8")


def rows(blocks: np.ndarray) -> np.ndarray:
    """The blocks' bytes as a ``(n, type_size)`` uint8 array (a view)."""
    return blocks.view(U8).reshape(blocks.shape[0], blocks.dtype.itemsize)


def field(blocks: np.ndarray, name: str) -> np.ndarray:
    """A field's bytes as a ``(n, nbytes)`` uint8 view (rows are ``type_size`` apart)."""
    fields: Any = blocks.dtype.fields  # a structured (block) dtype: never None here
    dt, offset = fields[name][:2]
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


def nibble_planes(data: np.ndarray, group: int) -> np.ndarray:
    """``(n, k)`` bytes (a field view will do) → ``(2k/group, n, group)`` codes: per ``group`` bytes a plane of
    their low nibbles, then one of their high nibbles, planes first so that every operation is one long loop."""
    n, k = data.shape
    g = k // group
    out = np.empty((g, 2, n, group), U8)
    place(out[:, 0], data.reshape(n, g, group).transpose(1, 0, 2))
    words = out.view(U64) if group % 8 == 0 else out  # eight nibbles per operation where the group allows
    np.right_shift(words[:, 0], words.dtype.type(4), out=words[:, 1])
    words &= words.dtype.type(0x0F0F0F0F0F0F0F0F & np.iinfo(words.dtype).max)
    return out.reshape(2 * g, n, group)


def interleave(planes: np.ndarray) -> np.ndarray:
    """``(p, n, w)`` planes → ``(n, p * w)``: block by block, plane after plane (ggml's element order)."""
    p, n, w = planes.shape
    out = np.empty((n, p, w), planes.dtype)
    place(out, planes.transpose(1, 0, 2))
    return out.reshape(n, p * w)


def nibbles(data: np.ndarray, group: int) -> np.ndarray:
    """``(n, k)`` bytes → ``(n, 2k)`` codes: per ``group`` bytes, their low nibbles then their high ones."""
    return interleave(nibble_planes(data, group))


def expand(per_group: np.ndarray, size: int) -> np.ndarray:
    """``(n, g)`` per-group values repeated to ``(n, size)``, i.e. one per value (a broadcast copy, which
    releases the GIL: ``np.repeat`` holds it, and so stalls the other dequantization thread)."""
    n, g = per_group.shape
    out = np.empty((n * g, size // g), per_group.dtype)
    np.copyto(out, per_group.reshape(-1, 1))
    return out.reshape(n, size)


def per_group(d: np.ndarray, small: np.ndarray) -> np.ndarray:
    """``(n, g)`` float32 ``d[i] * float(small[i, j])``, ggml's ``d * sc`` for every group of a block (a
    broadcast multiply, which releases the GIL)."""
    return np.multiply(d.reshape(-1, 1), small.astype(np.float32))


FINISH_VALUES = 1 << 17  # float32 values per slice of :func:`finish`: output and temporaries stay in the L2 cache


def _apply(out: np.ndarray, op: Callable[..., np.ndarray], per_group: np.ndarray) -> None:
    """``op(out, per_group broadcast over its group of values, out=out)`` for ``out`` ``(rows, size)``.

    A broadcast over groups of 16–32 values runs numpy's loop once per group, about 2.5 passes' worth, the same
    as expanding the scales first and applying them in one long loop; but ``np.repeat`` holds the GIL where the
    broadcast does not, so only the broadcast lets two threads share the work.
    """
    rows, size = out.shape
    g = per_group.shape[1]
    grouped = out.reshape(rows, g, size // g)
    op(grouped, per_group[:, :, None], out=grouped)


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
    group of values; float32 operations in exactly this order (ggml's).

    The passes run slice by slice (``FINISH_VALUES`` values), so that each pass reads what the one before it left
    in the cache instead of memory.
    """
    n, size = out.shape
    step = max(1, FINISH_VALUES // size)
    for i in range(0, n, step):
        j = min(n, i + step)
        part = out[i:j]
        np.copyto(part, codes[i:j], casting="unsafe")
        if before is not None:
            _apply(part, np.add, before[i:j])
        _apply(part, np.multiply, scale[i:j])
        if plus is not None:
            _apply(part, np.add, plus[i:j])
        if minus is not None:
            _apply(part, np.subtract, minus[i:j])
