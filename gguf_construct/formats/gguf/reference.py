"""GGUF as the specification writes it, in stock construct: the declaration to read beside the spec.

Spec: https://github.com/ggml-org/ggml/blob/master/docs/gguf.md (``gguf_header_t``, ``gguf_metadata_kv_t``,
``gguf_metadata_value_t``, ``gguf_tensor_info_t``, ``gguf_file_t``). Every field is a stock construct piece:
the value is a ``Switch`` over ``gguf_metadata_value_type`` (ids and names from ``schema/value_types.json``),
an array is ``{type, len, array}`` with ``array`` an ``Array`` of the same ``Switch``, a string is a
``PascalString``. Counts, lengths and dimensions are ``uint64_t`` from v2 and ``uint32_t`` in v1, both byte
orders are declared (``reference_layout("<")`` and ``(">")``), and the padding before the tensor data is
computed from the position (``_infos_end``) and ``general.alignment``.

:data:`gguf_construct.formats.gguf.schema.GGUF` is the fast declaration of the same format (numpy views, lazy string
arrays, every count checked before allocating). ``tests/formats/test_gguf_reference.py`` proves the two equal on
generated and real files: both parse a file to the same :func:`comparable` form, and each builds the other's
parse back to the same bytes. This one is for reading and for proofs only: it checks nothing a hostile file
could abuse (a count of 2**60 is believed), so never give it untrusted input.

Where the container differs from the fast schema's (:func:`comparable` removes these differences):

- numeric arrays are lists of Python numbers (fast: read-only numpy arrays); string arrays are lists of ``str``
  (fast: lazy ``StringArray``); ``tensor_data`` is ``bytes`` (fast: a memoryview of the input);
- an ``f32`` NaN is a plain float (fast: ``F32``, which keeps its bits); construct's ``Float32`` may not keep a
  signalling NaN's payload when it builds, so byte identity holds for every file without such a NaN;
- containers carry construct's and the fast schema's bookkeeping (``_io``, ``_offset``, ``_at``).

Why ``Aligned`` is not used for the padding: construct's ``Aligned(m, subcon)`` pads a field to a multiple of
``m`` counted from the field's own start, with ``m`` known before the field is read. GGUF aligns the absolute
position, with the alignment read from the metadata just parsed; so ``_padding`` is ``Bytes`` of the size
``align_offset(position) - position``, and none at all in a file without tensors (as ggml and gguf-py write it).
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from functools import cache
from typing import Any

import numpy as np
from construct import (
    Array,
    Bytes,
    Computed,
    Const,
    Construct,
    Container,
    Enum,
    Error,
    ExprAdapter,
    FormatField,
    GreedyBytes,
    IfThenElse,
    Int8ul,
    LazyBound,
    OneOf,
    PascalString,
    Rebuild,
    SizeofError,
    Struct,
    Switch,
    Tell,
    len_,
    this,
)
from construct.core import EnumIntegerString

from ...core.tables import GGML_TYPES, VALUE_TYPES
from ..fields import STRUCT_CODES
from .schema import MAGIC, ORDERS, VERSIONS, align_offset, alignment_of, detect_byte_order

__all__ = ["GGUF_REFERENCE", "comparable", "reference_layout"]


def padding_size(ctx: Any) -> int:
    """Bytes from the end of the tensor infos to the next multiple of the alignment (none without tensors)."""
    if not ctx.tensor_count:
        return 0
    return align_offset(ctx._infos_end, ctx.alignment) - ctx._infos_end


#: ``bool``: one byte, 0 or 1. Another byte stays an int, so that it builds back (validation rejects it).
gguf_bool = ExprAdapter(Int8ul, decoder=lambda b, ctx: bool(b) if b in (0, 1) else b, encoder=lambda v, ctx: int(v))


@cache
def reference_layout(order: str) -> Struct:
    """``gguf_file_t`` in byte order ``order`` (``<`` or ``>``), any version."""
    uint32_t = FormatField(order, "L")
    uint64_t = FormatField(order, "Q")
    # Counts, lengths and dimensions: uint64_t since GGUF v2, uint32_t in v1.
    count_t = IfThenElse(this._root.version >= 2, uint64_t, uint32_t)

    gguf_string_t = PascalString(count_t, "utf8")
    gguf_metadata_value_type = Enum(uint32_t, **{vt.name: vt.id for vt in VALUE_TYPES.values()})
    ggml_type = Enum(uint32_t, **{t.name: t.id for t in GGML_TYPES.values()})

    def gguf_metadata_value_t(value_type: Any) -> Switch:
        """One value of ``value_type``: a scalar, a string, or an array of values."""
        scalars = {vt.name: FormatField(order, STRUCT_CODES[vt.numpy]) for vt in VALUE_TYPES.values() if vt.numpy and vt.name != "bool"}
        return Switch(value_type, {**scalars, "bool": gguf_bool, "str": gguf_string_t, "arr": LazyBound(lambda: gguf_array)}, default=Error)

    gguf_array = Struct(
        "type" / gguf_metadata_value_type,
        "len" / Rebuild(count_t, len_(this.array)),
        "array" / Array(this.len, gguf_metadata_value_t(this.type)),
    )
    gguf_metadata_kv_t = Struct(
        "key" / gguf_string_t,
        "value_type" / gguf_metadata_value_type,
        "value" / gguf_metadata_value_t(this.value_type),
    )
    gguf_tensor_info_t = Struct(
        "name" / gguf_string_t,
        "n_dimensions" / Rebuild(uint32_t, len_(this.dimensions)),
        "dimensions" / Array(this.n_dimensions, count_t),
        "type" / ggml_type,
        "offset" / uint64_t,
    )
    return Struct(
        "magic" / Const(MAGIC),
        "version" / OneOf(uint32_t, VERSIONS),
        "tensor_count" / Rebuild(count_t, len_(this.tensor_infos)),
        "metadata_kv_count" / Rebuild(count_t, len_(this.metadata_kv)),
        "metadata_kv" / Array(this.metadata_kv_count, gguf_metadata_kv_t),
        "tensor_infos" / Array(this.tensor_count, gguf_tensor_info_t),
        "alignment" / Computed(lambda ctx: alignment_of(ctx.metadata_kv)),
        "_infos_end" / Tell,
        "_padding" / Bytes(padding_size),
        "data_offset" / Tell,
        "tensor_data" / GreedyBytes,
    )


class GGUFReference(Construct):
    """``gguf_file_t`` in either byte order: detected as ggml does (``detect_byte_order``) or forced with
    ``parse(data, byte_order="big")``; the parse result names it in ``byte_order``, and building follows it."""

    def _parse(self, stream, context, path):
        start = stream.tell()
        head = stream.read(8)
        stream.seek(start)
        order = context.get("byte_order") or detect_byte_order(head)
        obj = reference_layout(ORDERS[order])._parsereport(stream, context, path)
        obj.byte_order = order
        return obj

    def _build(self, obj, stream, context, path):
        order = obj.get("byte_order") or context.get("byte_order") or "little"
        if isinstance(obj.get("tensor_data"), memoryview):  # the fast schema's zero-copy view
            obj = Container(obj, tensor_data=bytes(obj["tensor_data"]))
        reference_layout(ORDERS[order])._build(obj, stream, context, path)
        return obj

    def _sizeof(self, context, path):
        raise SizeofError("a GGUF file has no fixed size", path=path)


#: The spec-readable GGUF declaration (v1-v3, both byte orders). For reading and proofs, not for untrusted input.
GGUF_REFERENCE = GGUFReference()


def comparable(obj: Any) -> Any:
    """A parse result of either GGUF declaration as plain Python, so that the two can be compared with ``==``.

    The normalisation: numpy arrays, ``StringArray`` and construct lists become lists; memoryviews become bytes;
    an enum value becomes ``(id, name)``; a float becomes its 64-bit pattern (so that NaN equals NaN: both
    declarations read an ``f32`` through the same float conversion); mappings keep their fields but not the
    bookkeeping ones (names starting with ``_``, except ``_padding``, which is file content).
    """
    if isinstance(obj, Mapping):
        return {k: comparable(v) for k, v in obj.items() if not k.startswith("_") or k == "_padding"}
    if isinstance(obj, EnumIntegerString):
        return (int(obj), str(obj))
    if isinstance(obj, (bytes, bytearray, memoryview)):
        return bytes(obj)
    if isinstance(obj, str):
        return obj
    if isinstance(obj, np.ndarray):
        return comparable(obj.tolist())
    if isinstance(obj, np.generic):
        return comparable(obj.item())
    if isinstance(obj, float):
        return ("float", struct.pack("<d", obj))
    if hasattr(obj, "tolist"):  # StringArray
        return obj.tolist()
    if isinstance(obj, (list, tuple)):
        return [comparable(x) for x in obj]
    return obj
