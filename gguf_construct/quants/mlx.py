"""MLX's quantization modes (what Ollama's tensor blobs hold), dequantized with numpy.

A quantized MLX tensor of logical shape ``[..., K]`` is three arrays: the packed codes (``uint32[..., K*bits/32]``,
element ``i`` of a word in bits ``[i*bits, (i+1)*bits)``, i.e. an LSB-first bit stream along the row), one scale
per group of ``group_size`` values (``[..., K/g]``) and, for ``affine`` only, one bias per group:

- ``affine`` (Ollama's int4, int8): ``w = scale * q + bias``, q unsigned, scale and bias BF16, F16 or F32;
- ``nvfp4``: ``w = E2M1[q] * E4M3(scale)``, groups of 16 (optionally times MLX's ``global_scale / 2688``);
- ``mxfp4``: ``w = E2M1[q] * 2**(scale - 127)`` (E8M0), groups of 32;
- ``mxfp8``: ``w = E4M3(q) * 2**(scale - 127)``, groups of 32.

:func:`dequantize_mlx` returns float32: by default the exact value ``s*q + b`` (the value a float32 reader of
the parameters means), or with ``mlx_rounding=True`` the value ``mx.dequantize`` returns by default, rounding
as MLX's CPU backend does (affine: in the scale's dtype after the multiply and after the add; fp modes: the
float32 result rounded to bfloat16, except nvfp4 with a global scale, which MLX returns as float32). The mode table is
``schema/mlx_quant_types.json``; the small-float
decoders below are computed from the formats' bit definitions (sign, exponent, mantissa, bias), not transcribed.
Sources: ``ml-explore/mlx`` ``mlx/backend/cpu/quantized.cpp`` at 846d176 (checked against mlx 0.32.4 in
tests/quants/test_mlx_dequant.py) and Ollama's modes in ``ollama/ollama`` ``x/quant/quant.go`` at fb30760.
"""

from __future__ import annotations

from functools import cache

import numpy as np

from ..core import rules
from ..core.table_records import MlxMode, MlxQuantType
from ..core.tables import load_table

#: Fixed by MLX for nvfp4's global scale: 448 (E4M3 max) * 6 (E2M1 max).
NVFP4_GLOBAL_DIVISOR = np.float32(448 * 6)


# -- the mode tables -------------------------------------------------------------------------------------
#: An MLX quantization mode and an Ollama ``quant_type`` (``schema/mlx_quant_types.json``).
Mode = MlxMode
QuantType = MlxQuantType


@cache
def modes() -> dict[str, Mode]:
    return {m.name: m for m in load_table("mlx_quant_types").modes}


@cache
def quant_types() -> dict[str, QuantType]:
    """Ollama quant_type name and aliases (lower-case) → QuantType."""
    out = {}
    for qt in load_table("mlx_quant_types").quant_types:
        for key in (qt.name, *qt.aliases):
            out[key] = qt
    return out


def quant_type(name: str) -> QuantType:
    """The QuantType for an Ollama ``quant_type`` string (case-insensitive, aliases accepted)."""
    qt = quant_types().get(str(name).lower())
    if qt is None:
        raise rules.QUANT_TYPE.error(f"unknown quant_type {name!r} (known: {', '.join(sorted({q.name for q in quant_types().values()}))})")
    return qt


def check_params(mode: str, bits: int, group_size: int) -> Mode:
    """The Mode, after checking that MLX accepts ``bits`` and ``group_size`` for it."""
    m = modes().get(mode)
    if m is None:
        raise rules.QUANT_MODE.error(f"unknown MLX quantization mode {mode!r}")
    if bits not in m.bits or group_size not in m.group_sizes:
        raise rules.QUANT_PARAMS.error(f"{mode} takes bits {m.bits} and group sizes {m.group_sizes}, not {bits} and {group_size}")
    return m


# -- small floats ----------------------------------------------------------------------------------------
@cache
def e2m1_table() -> np.ndarray:
    """FP4 E2M1 (bit 3 sign, 2 exponent bits with bias 1, 1 mantissa bit) for codes 0..15, as float32."""
    c = np.arange(16)
    e, m = (c >> 1) & 3, (c & 1).astype(np.float64)
    mag = np.where(e == 0, m * 0.5, (1 + m / 2) * np.exp2(e - 1.0))
    return np.where(c & 8, -mag, mag).astype(np.float32)


@cache
def e4m3_table() -> np.ndarray:
    """FP8 E4M3 'FN' (bias 7, no infinities, NaN at 0x7F and 0xFF) for all 256 bytes, as float32 (as MLX)."""
    x = np.arange(256)
    e, m = (x >> 3) & 15, (x & 7).astype(np.float64)
    mag = np.where(e == 0, m / 8 * 2.0**-6, (1 + m / 8) * np.exp2(e - 7.0))
    mag[(x & 0x7F) == 0x7F] = np.nan
    return np.where(x & 0x80, -mag, mag).astype(np.float32)


@cache
def e5m2_table() -> np.ndarray:
    """FP8 E5M2 (IEEE-like: bias 15, infinities and NaNs at exponent 31) for all 256 bytes, as float32."""
    x = np.arange(256, dtype=np.uint16) << np.uint16(8)
    return x.view(np.float16).astype(np.float32)


@cache
def e8m0_table() -> np.ndarray:
    """E8M0 scale bytes: 2**(x - 127) as float32; 0 is a float32 subnormal, 255 is +inf (as MLX reads it)."""
    with np.errstate(over="ignore"):
        return np.ldexp(np.float32(1), np.arange(256) - 127).astype(np.float32)


def bf16_to_f32(bits: np.ndarray) -> np.ndarray:
    """BF16 bit patterns (uint16) as float32 values (exact)."""
    return (np.asarray(bits, dtype=np.uint32) << np.uint32(16)).view(np.float32)


def round_to_bf16(x: np.ndarray) -> np.ndarray:
    """float32 → float32 holding the nearest bfloat16 (ties to even; NaN stays NaN), as MLX rounds."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    nan = np.isnan(u.view(np.float32))
    r = ((u + np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))) & np.uint32(0xFFFF0000)).view(np.float32)
    if nan.any():
        r = r.copy()
        r[nan] = np.float32(np.nan)
    return r


def float_values(raw: np.ndarray, dtype: str) -> np.ndarray:
    """A float parameter array (BF16 given as uint16, F16, F32) as exact float32 values."""
    if dtype == "BF16":
        return bf16_to_f32(raw.view(np.uint16) if raw.dtype != np.uint16 else raw)
    if dtype in ("F16", "F32"):
        return raw.astype(np.float32)
    raise rules.QUANT_SCALE_DTYPE.error(f"affine scales and biases are BF16, F16 or F32, not {dtype}")


# -- codes -----------------------------------------------------------------------------------------------
def unpack_codes(packed: np.ndarray, bits: int) -> np.ndarray:
    """``uint32[..., W]`` (or its little-endian bytes ``uint8[..., 4W]``) → ``uint8[..., W*32/bits]`` codes.

    Each row is an LSB-first bit stream: 4-bit element ``2k`` is byte ``k``'s low nibble, 8-bit element ``k``
    is byte ``k``; 3-, 5- and 6-bit codes cross byte boundaries.
    """
    b = np.ascontiguousarray(packed)
    if b.dtype != np.uint8:
        b = b.astype("<u4", copy=False).view(np.uint8)
    lead = b.shape[:-1]
    b = b.reshape(*lead, -1)
    if bits == 8:
        return b
    if bits in (1, 2, 4):
        per = 8 // bits
        shifts = (np.arange(per, dtype=np.uint8) * bits).astype(np.uint8)
        codes = (b[..., None] >> shifts) & np.uint8((1 << bits) - 1)
        return codes.reshape(*lead, -1)
    stream = np.unpackbits(b, axis=-1, bitorder="little").reshape(*lead, -1, bits)
    weights = (1 << np.arange(bits)).astype(np.uint8)
    return (stream * weights).sum(axis=-1, dtype=np.uint8)


def pack_codes(codes: np.ndarray, bits: int) -> np.ndarray:
    """The inverse of :func:`unpack_codes`: ``uint8[..., K]`` codes → little-endian bytes ``uint8[..., K*bits/8]``."""
    c = np.ascontiguousarray(codes, dtype=np.uint8)
    lead = c.shape[:-1]
    if bits == 8:
        return c
    if bits in (1, 2, 4):
        per = 8 // bits
        g = c.reshape(*lead, -1, per).astype(np.uint8)
        out = np.zeros(g.shape[:-1], np.uint8)
        for i in range(per):
            out |= g[..., i] << np.uint8(i * bits)
        return out
    stream = ((c[..., None] >> np.arange(bits, dtype=np.uint8)) & 1).reshape(*lead, -1)
    return np.packbits(stream, axis=-1, bitorder="little")


def _groups(x: np.ndarray, g: int) -> np.ndarray:
    return x.reshape(*x.shape[:-1], x.shape[-1] // g, g)


# -- dequantization --------------------------------------------------------------------------------------
def dequantize_mlx(
    mode: str,
    packed: np.ndarray,
    scales: np.ndarray,
    biases: np.ndarray | None = None,
    *,
    bits: int,
    group_size: int,
    scale_dtype: str = "F32",
    global_scale: float | None = None,
    mlx_rounding: bool = False,
) -> np.ndarray:
    """The float32 values ``[..., K]`` of an MLX-quantized tensor, bit-exact with ``mx.dequantize``.

    ``packed`` is the U32 weight (as uint32 or its raw bytes, shape ``[..., W]`` / ``[..., 4W]``); ``scales``
    (and ``biases``) hold raw values: uint16 bit patterns for BF16, float16/float32 arrays, or uint8 bytes for
    the fp modes (E4M3 for nvfp4, E8M0 for mxfp*), with ``scale_dtype`` naming the float type for affine.
    ``global_scale`` is MLX's nvfp4 argument (scales multiply by ``global_scale / 2688`` first). Result:
    ``mx.dequantize(..., dtype=float32)`` for float32 parameters; with ``mlx_rounding`` the default
    ``mx.dequantize`` result (the scale dtype for affine, bfloat16 for fp modes) widened to float32.
    """
    m = check_params(mode, bits, group_size)
    codes = unpack_codes(packed, bits)
    k = codes.shape[-1]
    if k % group_size:
        raise rules.QUANT_SHAPE.error(f"rows of {k} values are not whole groups of {group_size}")
    n_groups = k // group_size
    if scales.shape != (*codes.shape[:-1], n_groups):
        raise rules.QUANT_SCALE_SHAPE.error(
            f"scales have shape {list(scales.shape)}; weights of shape {list(codes.shape)} need {[*codes.shape[:-1], n_groups]}"
        )
    with np.errstate(all="ignore"):
        if m.name == "affine":
            if biases is None or biases.shape != scales.shape:
                raise rules.QUANT_BIAS_SHAPE.error("affine quantization needs one bias per scale")
            out = _affine(codes, scales, biases, group_size, scale_dtype, mlx_rounding)
        else:
            if biases is not None:
                raise rules.QUANT_BIAS.error(f"{mode} has no bias")
            if global_scale is not None and m.name != "nvfp4":
                raise rules.QUANT_GLOBAL_SCALE.error("only nvfp4 takes a global scale")
            values = (e2m1_table() if bits == 4 else e4m3_table())[codes]
            s = (e4m3_table() if m.scale == "e4m3" else e8m0_table())[np.asarray(scales, dtype=np.uint8)]
            if global_scale is not None:
                s = s * (np.float32(global_scale) / NVFP4_GLOBAL_DIVISOR)
            out = (_groups(values, group_size) * s[..., None]).reshape(codes.shape)
            if mlx_rounding and global_scale is None:  # with a (float32) global scale MLX returns float32
                out = round_to_bf16(out)
    return out.astype(np.float32, copy=False)


def _affine(codes: np.ndarray, scales: np.ndarray, biases: np.ndarray, g: int, dtype: str, mlx_rounding: bool) -> np.ndarray:
    q = _groups(codes.astype(np.float32), g)
    s = float_values(scales, dtype)[..., None]
    b = float_values(biases, dtype)[..., None]
    if not mlx_rounding or dtype == "F32":
        out = q * s
        out += b
    elif dtype == "BF16":
        out = round_to_bf16(round_to_bf16(q * s) + b)
    else:  # F16: each step rounded to half
        out = ((q * s).astype(np.float16).astype(np.float32) + b).astype(np.float16).astype(np.float32)
    return out.reshape(codes.shape)
