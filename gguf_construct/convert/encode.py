"""Tensor-by-tensor encodings between MLX's quantization modes and ggml's block types, and exact float fallbacks.

Each encoder checks the conditions under which its mapping is lossless, group by group (MLX's packing in
``ml-explore/mlx`` ``mlx/backend/cpu/quantized.cpp`` at 846d176 against ggml's blocks in ``ggml-org/ggml``
``src/ggml-common.h`` at d99724f), and returns None with the reason when they fail, so that the caller can
fall back. The ggml blocks are built through their declared numpy dtypes
(``quants.block_dtype``), field by field, in ggml's own layout:

- mxfp4 → MXFP4: copy the E8M0 byte, move the nibbles from MLX's interleaved order (element ``2k`` low,
  ``2k+1`` high) to ggml's split halves (``qs[j]`` = element ``j`` low, ``j+16`` high). Not for byte 255.
- nvfp4 → NVFP4: four 16-value sub-blocks per 64-value block, ``qs[8s+j]`` = element ``16s+j`` low,
  ``16s+j+8`` high. Rows a multiple of 64, scale bytes in 0x00–0x7E, no global scale.
- affine 4-bit → Q4_1: ``d = f16(scale)``, ``m = f16(bias)``, repeated over the 32-value blocks of a group,
  when every scale and bias is an F16 value.

and the way back. The float fallback picks the smallest of BF16, F16, F32 that holds every value exactly.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..quants import block_dtype
from ..quants import mlx as mq


@dataclass
class Encoded:
    """A tensor ready for GGUF: ggml type name, ggml shape (ne0 first), its bytes."""

    ggml_type: str
    shape: tuple[int, ...]
    data: np.ndarray


def _rows(codes: np.ndarray) -> np.ndarray:
    return codes.reshape(-1, codes.shape[-1])


def split_halves(codes: np.ndarray, half: int) -> np.ndarray:
    """``(n, 2*half)`` codes → ``(n, half)`` bytes: code ``j`` in the low nibble, ``j + half`` in the high one."""
    return (codes[:, :half] | (codes[:, half:] << np.uint8(4))).astype(np.uint8)


def join_halves(qs: np.ndarray) -> np.ndarray:
    """The inverse of :func:`split_halves`."""
    return np.concatenate([qs & np.uint8(15), qs >> np.uint8(4)], axis=-1)


def ggml_shape(numpy_shape: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(reversed(numpy_shape)) or (1,)


# -- MLX → ggml ------------------------------------------------------------------------------------------
def mxfp4_to_ggml(codes: np.ndarray, scales: np.ndarray) -> np.ndarray | str:
    """ggml MXFP4 blocks for MLX mxfp4 codes ``[..., K]`` and E8M0 bytes ``[..., K/32]``, or the reason not."""
    e = np.ascontiguousarray(scales, dtype=np.uint8).reshape(-1)
    if (e == 255).any():
        return f"{int((e == 255).sum())} groups have scale byte 255 (MLX: infinity; ggml: 2**127)"
    c = _rows(codes).reshape(-1, 32)
    blocks = np.empty(c.shape[0], block_dtype("mxfp4"))
    blocks["e"] = e
    blocks["qs"] = split_halves(c, 16)
    return blocks


def nvfp4_to_ggml(codes: np.ndarray, scales: np.ndarray, has_global_scale: bool) -> np.ndarray | str:
    """ggml NVFP4 blocks for MLX nvfp4 codes ``[..., K]`` and E4M3 bytes ``[..., K/16]``, or the reason not."""
    if has_global_scale:
        return "a global scale has no place in ggml's NVFP4 block"
    if codes.shape[-1] % 64:
        return f"rows of {codes.shape[-1]} values are not whole 64-value NVFP4 blocks"
    s = np.ascontiguousarray(scales, dtype=np.uint8).reshape(-1, 4)
    bad = ((s & 0x80) != 0) | (s == 0x7F)
    if bad.any():
        return f"{int(bad.sum())} scale bytes are negative or NaN in MLX's E4M3 (ggml reads them unsigned)"
    c = _rows(codes).reshape(-1, 4, 16)
    blocks = np.empty(s.shape[0], block_dtype("nvfp4"))
    blocks["d"] = s
    blocks["qs"] = split_halves(c.reshape(-1, 16), 8).reshape(-1, 32)
    return blocks


def f16_exact(values: np.ndarray) -> bool:
    """Every value finite and exactly an IEEE half (so ``f16(x)`` loses nothing)."""
    with np.errstate(over="ignore"):
        h = values.astype(np.float16)
    return bool(np.isfinite(h).all() and np.array_equal(h.astype(np.float32), values))


def affine4_to_q4_1(codes: np.ndarray, scales: np.ndarray, biases: np.ndarray, group_size: int) -> np.ndarray | str:
    """ggml Q4_1 blocks for 4-bit affine codes ``[..., K]`` with float32 scale and bias values ``[..., K/g]``."""
    if group_size % 32:
        return f"group size {group_size} is not a multiple of Q4_1's 32"
    s, b = scales.reshape(-1), biases.reshape(-1)
    if not f16_exact(s) or not f16_exact(b):
        n = int((s.astype(np.float16).astype(np.float32) != s).sum() + (b.astype(np.float16).astype(np.float32) != b).sum())
        return f"{n} scales or biases are not exact F16 values"
    per = group_size // 32
    c = _rows(codes).reshape(-1, 32)
    blocks = np.empty(c.shape[0], block_dtype("q4_1"))
    blocks["d"] = np.repeat(s.astype(np.float16), per)
    blocks["m"] = np.repeat(b.astype(np.float16), per)
    blocks["qs"] = split_halves(c, 16)
    return blocks


# -- ggml → MLX ------------------------------------------------------------------------------------------
def ggml_mxfp4_to_mlx(blocks: np.ndarray, rows: int) -> tuple[np.ndarray, np.ndarray] | str:
    """(packed U32 bytes ``[rows, K/2]``, E8M0 bytes ``[rows, K/32]``) from MXFP4 blocks, or the reason not."""
    e = blocks["e"]
    if (e == 255).any():
        return f"{int((e == 255).sum())} blocks have scale byte 255 (ggml: 2**127; MLX: infinity)"
    codes = join_halves(blocks["qs"]).reshape(rows, -1)
    return mq.pack_codes(codes, 4), e.reshape(rows, -1).copy()


def ggml_nvfp4_to_mlx(blocks: np.ndarray, rows: int) -> tuple[np.ndarray, np.ndarray] | str:
    """(packed bytes, E4M3 bytes ``[rows, K/16]``) from NVFP4 blocks: ggml reads scales unsigned and 0x7F as 0,
    so the sign bit is dropped and 0x7F becomes 0x00; 0xFF (ggml: 480) has no MLX equal."""
    d = blocks["d"].reshape(-1)
    if (d == 0xFF).any():
        return f"{int((d == 0xFF).sum())} scale bytes are 0xFF (ggml: 480, MLX: NaN)"
    d = d & np.uint8(0x7F)
    d[d == 0x7F] = 0
    codes = join_halves(blocks["qs"].reshape(-1, 8)).reshape(rows, -1)
    return mq.pack_codes(codes, 4), d.reshape(rows, -1)


def ggml_q4_1_to_mlx(blocks: np.ndarray, rows: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """(packed bytes, F16 scales, F16 biases, group size) from Q4_1 blocks, with the largest group size (128,
    64, 32) over which every block of a group repeats the same ``d`` and ``m``."""
    d = blocks["d"].view(np.uint16).reshape(rows, -1)
    m = blocks["m"].view(np.uint16).reshape(rows, -1)
    group = 32
    for g in (128, 64):
        per = g // 32
        if d.shape[1] % per == 0:
            dd, mm = d.reshape(rows, -1, per), m.reshape(rows, -1, per)
            if (dd == dd[..., :1]).all() and (mm == mm[..., :1]).all():
                group = g
                break
    per = group // 32
    codes = join_halves(blocks["qs"]).reshape(rows, -1)
    scales = d[:, ::per].view(np.float16).copy()
    biases = m[:, ::per].view(np.float16).copy()
    return mq.pack_codes(codes, 4), scales, biases, group


# -- exact float fallbacks -------------------------------------------------------------------------------
def exact_float(values: np.ndarray, allowed: tuple[str, ...] = ("bf16", "f16", "f32")) -> tuple[str, np.ndarray]:
    """The first type of ``allowed`` holding every value of the float32 array exactly (NaNs kept), and the data
    in it: BF16 as uint16 bit patterns, F16, F32."""
    v = np.ascontiguousarray(values, dtype=np.float32)
    for t in allowed:
        if t == "bf16":
            r = mq.round_to_bf16(v)
            if np.array_equal(r, v, equal_nan=True):
                return "bf16", (r.view(np.uint32) >> np.uint32(16)).astype(np.uint16)
        elif t == "f16":
            with np.errstate(over="ignore"):
                h = v.astype(np.float16)
            if np.array_equal(h.astype(np.float32), v, equal_nan=True):
                return "f16", h
        elif t == "f32":
            return "f32", v
    return "f32", v
