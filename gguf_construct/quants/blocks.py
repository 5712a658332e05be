"""Every ggml tensor type's storage block, declared once as a construct ``Struct``.

Each declaration follows ggml's ``block_*`` struct in ``ggml-common.h`` (field order and names as ggml has them;
a ``ggml_half`` is an IEEE half, ``uint16_t``/``uint32_t`` fields are multi-byte integers, everything declared as
a ``uint8_t``/``int8_t`` array stays a byte array). The scalar types are one-field blocks. The declarations are
written against an abstract set of scalar fields, so one declaration gives the little- and the big-endian layout;
the numpy structured dtype used by the vectorised kernels is *derived* from the construct ``Struct`` by
:func:`dtype_of`, never written a second time.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from functools import cache
from typing import Any

import construct
import numpy as np
from construct import Array, Struct

from ..core import rules
from ..core.tables import GGML_TYPES, GGMLType

QK_K = 256  # ggml's super-block size
BYTE_ORDERS = ("little", "big")


@dataclass(frozen=True)
class Scalars:
    """The construct fields of one byte order: what a block declaration is written against."""

    half: Any
    f32: Any
    f64: Any
    i8: Any
    u8: Any
    i16: Any
    u16: Any
    i32: Any
    u32: Any
    i64: Any


_SCALARS = {
    "little": Scalars(
        construct.Float16l,
        construct.Float32l,
        construct.Float64l,
        construct.Int8sl,
        construct.Int8ul,
        construct.Int16sl,
        construct.Int16ul,
        construct.Int32sl,
        construct.Int32ul,
        construct.Int64sl,
    ),
    "big": Scalars(
        construct.Float16b,
        construct.Float32b,
        construct.Float64b,
        construct.Int8sb,
        construct.Int8ub,
        construct.Int16sb,
        construct.Int16ub,
        construct.Int32sb,
        construct.Int32ub,
        construct.Int64sb,
    ),
}


def _declarations(t: Scalars) -> dict[str, tuple[int, Struct]]:
    """name → (elements per block, block Struct), for the byte order whose fields ``t`` holds."""
    u8, i8 = t.u8, t.i8
    return {
        # plain element types: one value per "block"
        "f32": (1, Struct("value" / t.f32)),
        "f16": (1, Struct("value" / t.half)),
        "bf16": (1, Struct("bits" / t.u16)),  # ggml_bf16_t { uint16_t bits; }
        "f64": (1, Struct("value" / t.f64)),
        "i8": (1, Struct("value" / t.i8)),
        "i16": (1, Struct("value" / t.i16)),
        "i32": (1, Struct("value" / t.i32)),
        "i64": (1, Struct("value" / t.i64)),
        # legacy quants
        "q4_0": (32, Struct("d" / t.half, "qs" / Array(16, u8))),
        "q4_1": (32, Struct("d" / t.half, "m" / t.half, "qs" / Array(16, u8))),
        "q5_0": (32, Struct("d" / t.half, "qh" / Array(4, u8), "qs" / Array(16, u8))),
        "q5_1": (32, Struct("d" / t.half, "m" / t.half, "qh" / Array(4, u8), "qs" / Array(16, u8))),
        "q8_0": (32, Struct("d" / t.half, "qs" / Array(32, i8))),
        "q8_1": (32, Struct("d" / t.half, "s" / t.half, "qs" / Array(32, i8))),
        "q1_0": (128, Struct("d" / t.half, "qs" / Array(16, u8))),
        "q2_0": (64, Struct("d" / t.half, "qs" / Array(16, u8))),
        # fp4 with shared 8-bit scales
        "mxfp4": (32, Struct("e" / u8, "qs" / Array(16, u8))),
        "nvfp4": (64, Struct("d" / Array(4, u8), "qs" / Array(32, u8))),
        # k-quants (super-blocks of QK_K) and the ternary types
        "q2_K": (QK_K, Struct("scales" / Array(16, u8), "qs" / Array(64, u8), "d" / t.half, "dmin" / t.half)),
        "q3_K": (QK_K, Struct("hmask" / Array(32, u8), "qs" / Array(64, u8), "scales" / Array(12, u8), "d" / t.half)),
        "q4_K": (QK_K, Struct("d" / t.half, "dmin" / t.half, "scales" / Array(12, u8), "qs" / Array(128, u8))),
        "q5_K": (
            QK_K,
            Struct("d" / t.half, "dmin" / t.half, "scales" / Array(12, u8), "qh" / Array(32, u8), "qs" / Array(128, u8)),
        ),
        "q6_K": (QK_K, Struct("ql" / Array(128, u8), "qh" / Array(64, u8), "scales" / Array(16, i8), "d" / t.half)),
        "q8_K": (QK_K, Struct("d" / t.f32, "qs" / Array(QK_K, i8), "bsums" / Array(16, t.i16))),
        "tq1_0": (QK_K, Struct("qs" / Array(48, u8), "qh" / Array(4, u8), "d" / t.half)),
        "tq2_0": (QK_K, Struct("qs" / Array(64, u8), "d" / t.half)),
        # i-quants
        "iq2_xxs": (QK_K, Struct("d" / t.half, "qs" / Array(32, t.u16))),
        "iq2_xs": (QK_K, Struct("d" / t.half, "qs" / Array(32, t.u16), "scales" / Array(8, u8))),
        "iq2_s": (QK_K, Struct("d" / t.half, "qs" / Array(64, u8), "qh" / Array(8, u8), "scales" / Array(8, u8))),
        "iq3_xxs": (QK_K, Struct("d" / t.half, "qs" / Array(96, u8))),
        "iq3_s": (
            QK_K,
            Struct("d" / t.half, "qs" / Array(64, u8), "qh" / Array(8, u8), "signs" / Array(32, u8), "scales" / Array(4, u8)),
        ),
        "iq1_s": (QK_K, Struct("d" / t.half, "qs" / Array(32, u8), "qh" / Array(8, t.u16))),
        "iq1_m": (QK_K, Struct("qs" / Array(32, u8), "qh" / Array(16, u8), "scales" / Array(8, u8))),
        "iq4_nl": (32, Struct("d" / t.half, "qs" / Array(16, u8))),
        "iq4_xs": (QK_K, Struct("d" / t.half, "scales_h" / t.u16, "scales_l" / Array(4, u8), "qs" / Array(128, u8))),
    }


DECLARED: frozenset[str] = frozenset(_declarations(_SCALARS["little"]))


def resolve(ggml_type: int | str | GGMLType) -> GGMLType:
    """The table record for an id, name (case-insensitive) or record; unknown and removed types are rejected."""
    valid_key = isinstance(ggml_type, (str, GGMLType)) or (isinstance(ggml_type, (int, np.integer)) and not isinstance(ggml_type, bool))
    try:
        t = GGML_TYPES.lookup(ggml_type) if valid_key else None
    except KeyError:
        t = None
    if t is None:
        raise rules.TENSOR_TYPE.error(f"unknown ggml type {ggml_type!r}")
    if t.removed:
        raise rules.TENSOR_TYPE.error(f"ggml type {t.name} (id {t.id}) was removed from ggml and has no layout")
    if t.name not in DECLARED:
        raise rules.TENSOR_TYPE.error(f"ggml type {t.name} (id {t.id}) has no block declaration")
    return t


def check_order(byte_order: str) -> str:
    """``byte_order`` itself, after checking it is "little" or "big"."""
    if byte_order not in BYTE_ORDERS:
        raise rules.TENSOR_BYTE_ORDER.error(f"byte_order must be 'little' or 'big', not {byte_order!r}")
    return byte_order


@cache
def _declared(name: str, byte_order: str) -> tuple[int, Struct]:
    return _declarations(_SCALARS[byte_order])[name]


def block_elements(ggml_type: int | str | GGMLType) -> int:
    """How many values one block holds, as declared (``QK`` in ggml)."""
    return _declared(resolve(ggml_type).name, "little")[0]


def block_struct(ggml_type: int | str | GGMLType, byte_order: str = "little") -> Struct:
    """The construct ``Struct`` of one block of ``ggml_type`` in ``byte_order``."""
    return _declared(resolve(ggml_type).name, check_order(byte_order))[1]


def _scalar_dtype(field: construct.FormatField) -> np.dtype:
    """numpy's dtype for a construct scalar field (construct uses ``struct`` codes in standard sizes)."""
    order, code = field.fmtstr[0], field.fmtstr[1]
    size = struct.calcsize(field.fmtstr)
    kind = "f" if code in "efd" else "i" if code.islower() else "u"
    return np.dtype(f"{'<' if order == '<' else '>'}{kind}{size}")


def _member_dtype(sub: Any) -> tuple[np.dtype, tuple[int, ...]]:
    if isinstance(sub, construct.Renamed):
        return _member_dtype(sub.subcon)
    if isinstance(sub, construct.FormatField):
        return _scalar_dtype(sub), ()
    if isinstance(sub, construct.Array) and isinstance(sub.count, int):
        base, shape = _member_dtype(sub.subcon)
        return base, (sub.count, *shape)
    if isinstance(sub, construct.Bytes) and isinstance(sub.length, int):
        return np.dtype(np.uint8), (sub.length,)
    raise TypeError(f"no numpy equivalent for construct field {sub!r}")


def dtype_of(declaration: Struct) -> np.dtype:
    """The packed numpy structured dtype with the same fields, shapes, types and byte order as ``declaration``."""
    fields = []
    for member in declaration.subcons:
        base, shape = _member_dtype(member)
        fields.append((member.name, base, shape) if shape else (member.name, base))
    return np.dtype(fields)


@cache
def _dtype(name: str, byte_order: str) -> np.dtype:
    return dtype_of(_declared(name, byte_order)[1])


def block_dtype(ggml_type: int | str | GGMLType, byte_order: str = "little") -> np.dtype:
    """The numpy structured dtype of one block, derived from :func:`block_struct`."""
    return _dtype(resolve(ggml_type).name, check_order(byte_order))
