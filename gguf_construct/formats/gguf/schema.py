"""GGUF v1, v2 and v3 as a construct declaration, in the spec's own field names.

``GGUF`` parses a whole file into a ``Container``::

    magic, version, tensor_count, metadata_kv_count,
    metadata_kv[]: {key, value_type, value}          # arrays: value = {type, len, array}
    tensor_infos[]: {name, n_dimensions, dimensions, type, offset}
    alignment (computed), _padding, data_offset (computed), tensor_data (memoryview), byte_order

and builds such a container back to bytes. v1 stores counts, lengths and dimensions as u32 (u64 from v2) and
has no 64-bit value types (their sizes being unambiguous, they are read anyway: validation reports them). A
tensor type the tables do not know parses as its id; its bytes reach up to the next tensor (``data_extents``). The byte order is detected
as ggml does it (a big-endian version word read
little-endian has its low 16 bits zero) or forced with ``byte_order="big"|"little"``.

Building computes what the caller may leave out: the counts, ``n_dimensions``, tensor offsets (the running
sum of padded sizes, as ggml and gguf-py lay them out), the padding after the tensor infos and between tensors.
``tensor_data`` may be the raw section (written as is) or left out, in which case each tensor info's ``data``
(bytes-like or numpy) is laid out at its offset.
"""

from __future__ import annotations

import bisect
import struct
from functools import cache
from typing import Any

from construct import (
    Computed,
    Container,
    Enum,
    Int32ub,
    Int32ul,
    Int64ub,
    Int64ul,
    Rebuild,
    Struct,
    Tell,
    len_,
    this,
)

from ...core import rules
from ...core.tables import DEFAULT_ALIGNMENT, GGML_TYPES, VALUE_TYPES, ggml_type_of
from ...errors import FormatError
from ..base import BufferStream, FileConstruct, as_stream, tensor_bytes
from ..fields import AlignPadding, CheckedArray, GGUFString, Located, Magic, MetadataValue, Remainder, Version, value_type_id
from ..streaming import write_data

MAGIC = b"GGUF"
VERSIONS = (1, 2, 3)
#: The spec's longest tensor name in bytes (ggml's reader wants one byte less: its buffer holds the NUL).
MAX_TENSOR_NAME = 64
ORDERS = {"little": "<", "big": ">"}


def align_offset(offset: int, alignment: int) -> int:
    """The spec's ``align_offset``: the next multiple of ``alignment`` at or after ``offset``."""
    return offset + (alignment - offset % alignment) % alignment


def alignment_of(metadata_kv: list[Any]) -> int:
    """``general.alignment`` when it is a u32, else ``DEFAULT_ALIGNMENT`` (validation reports a mistyped key)."""
    for kv in metadata_kv:
        if kv["key"] == "general.alignment" and value_type_id(kv["value_type"]) == VALUE_TYPES.lookup("u32").id:
            return int(kv["value"])
    return DEFAULT_ALIGNMENT


def tensor_nbytes(dimensions: list[int], ggml_type: Any) -> int:
    """Bytes of tensor data: whole blocks of ``ggml_type`` for ``prod(dimensions)`` elements."""
    try:
        t = GGML_TYPES.lookup(ggml_type)
    except (KeyError, ValueError, TypeError):
        raise rules.TENSOR_TYPE.error(f"unknown ggml type {ggml_type!r}") from None
    if t.removed:
        raise rules.TENSOR_TYPE.error(f"ggml type {t.id} ({t.name}) has been removed from ggml")
    n = 1
    for d in dimensions:
        n *= int(d)
    return t.nbytes(n)


def sized_type(ggml_type: Any) -> bool:
    """Whether the tables give ``ggml_type`` (id or name) a block and byte size."""
    try:
        return ggml_type_of(ggml_type).sized
    except (KeyError, ValueError, TypeError):
        return False


def data_extents(tensor_infos: list[Any], data_size: int) -> list[tuple[int, int]]:
    """Each tensor's byte range ``[start, end)`` in a data section of ``data_size`` bytes.

    A type with known sizes spans its ``tensor_nbytes`` (empty when its shape is invalid). A type without
    sizes (an id the tables do not know, or a removed one) spans from its offset to the next tensor's offset,
    or to the end of the data for the last one: its bytes and any padding after them. The range is empty where
    it cannot be derived (an offset at or past the end of the data). Ranges are clipped to the data.
    """
    starts = sorted({int(ti["offset"]) for ti in tensor_infos})
    out = []
    for ti in tensor_infos:
        start = int(ti["offset"])
        if sized_type(ti["type"]):
            try:
                end = start + tensor_nbytes(ti["dimensions"], ti["type"])
            except FormatError:
                end = start
        elif start >= data_size:
            end = start
        else:
            i = bisect.bisect_right(starts, start)
            end = starts[i] if i < len(starts) else data_size
        out.append((start, min(end, max(start, data_size))))
    return out


def placed_size(ti: Any) -> int:
    """Bytes a tensor takes when written: its ``tensor_nbytes``, or for a type without sizes the length of
    the data it carries (the range ``data_extents`` read from the file)."""
    if sized_type(ti["type"]) or ti.get("data") is None:
        return tensor_nbytes(ti["dimensions"], ti["type"])
    return len(tensor_bytes(ti["data"]))


def lay_out(tensor_infos: list[Any], alignment: int) -> list[Container]:
    """Tensor infos with every missing offset filled in: each tensor starts where the previous padded one ends."""
    out, offset = [], 0
    missing = [ti.get("offset") is None for ti in tensor_infos]
    if any(missing) and not all(missing):
        raise ValueError("give every tensor offset or none (then all are computed)")
    if not any(missing):  # offsets as given (a parsed file with an unknown tensor type still builds back)
        return [Container(ti) for ti in tensor_infos]
    for ti in tensor_infos:
        ti = Container(ti)
        if missing[0]:
            ti["offset"] = offset
        offset = align_offset(int(ti["offset"]) + placed_size(ti), alignment)
        out.append(ti)
    return out


class TensorDataSection(Remainder):
    """``uint8_t tensor_data[]``: everything after the padding, as a zero-copy memoryview.

    Built from a bytes-like object verbatim, or (when the object is None) from each tensor info's ``data``,
    placed at its offset with zero padding between tensors and after the last one.
    """

    def _build(self, obj, stream, context, path):
        if obj is not None:
            write_data(stream, obj)  # a mapped file's section is copied in the kernel
            return obj
        infos, alignment = context.tensor_infos, context.alignment
        written = 0
        for ti in sorted(infos, key=lambda t: int(t["offset"])):
            gap = int(ti["offset"]) - written
            if gap < 0:
                raise rules.TENSOR_OVERLAP.error(f"tensor {ti['name']!r} overlaps the one before it")
            stream.write(b"\0" * gap)
            data = tensor_bytes(ti.get("data"))
            expected = tensor_nbytes(ti["dimensions"], ti["type"]) if sized_type(ti["type"]) else len(data)
            if len(data) != expected:
                raise ValueError(f"tensor {ti['name']!r}: {len(data)} bytes of data, its shape and type need {expected}")
            write_data(stream, data)
            written = int(ti["offset"]) + expected
        if infos:
            stream.write(b"\0" * (align_offset(written, alignment) - written))
        return obj


@cache
def gguf_layout(order: str, wide: bool) -> Struct:
    """The declaration of one GGUF layout: ``order`` is ``<`` or ``>``; ``wide`` means u64 counts (v2, v3)."""
    U32 = Int32ul if order == "<" else Int32ub
    U64 = Int64ul if order == "<" else Int64ub
    count = U64 if wide else U32
    width = count.sizeof()
    string = GGUFString(order, wide)
    value_type = Enum(U32, **{vt.name: vt.id for vt in VALUE_TYPES.values()})
    ggml_type = Enum(U32, **{t.name: t.id for t in GGML_TYPES.values()})

    gguf_metadata_kv_t = Located(
        "_offset" / Tell,
        "key" / string,
        "value_type" / value_type,
        "value" / MetadataValue(this.value_type, order, wide),
    )
    gguf_tensor_info_t = Located(
        "_offset" / Tell,
        "name" / string,
        "n_dimensions" / Rebuild(U32, len_(this.dimensions)),
        "dimensions" / CheckedArray(this.n_dimensions, count, width, rules.TENSOR_N_DIMS, "dimensions"),
        "type" / ggml_type,
        "offset" / U64,
    )
    return Located(
        "magic" / Magic(MAGIC),
        "version" / Version(U32, VERSIONS, "GGUF"),
        "tensor_count" / Rebuild(count, len_(this.tensor_infos)),
        "metadata_kv_count" / Rebuild(count, len_(this.metadata_kv)),
        # weights: records charged to the stream's budget (limits objects_free, objects_per_kib) per entry; a
        # real key/value takes 30+ bytes and a real tensor info 50+, crafted ones 13 and 24
        "metadata_kv" / CheckedArray(this.metadata_kv_count, gguf_metadata_kv_t, width + 4 + 1, rules.HEADER_N_KV, "kv_count", weight=4),
        "tensor_infos"
        / CheckedArray(this.tensor_count, gguf_tensor_info_t, width + 4 + 4 + 8, rules.HEADER_N_TENSORS, "tensor_count", weight=3),
        "alignment" / Computed(lambda ctx: alignment_of(ctx.metadata_kv)),
        # Files without tensors end right after the tensor infos (ggml and gguf-py write no padding then).
        "_padding" / AlignPadding(this.alignment, this.tensor_count > 0, rules.DATA_PADDING),
        "data_offset" / Tell,
        "tensor_data" / TensorDataSection(),
    )


def detect_byte_order(head: bytes) -> str:
    """'big' when the version word read little-endian has its low 16 bits zero (ggml's test), else 'little'
    (also when ``head`` is too short to hold a version: the schema then reports the truncated header)."""
    if len(head) < 8:
        return "little"
    (version,) = struct.unpack_from("<I", head, 4)
    return "big" if version & 0xFFFF == 0 else "little"


class GGUFConstruct(FileConstruct):
    """A whole GGUF file, any version, either byte order: picks the layout from a look at the header (the byte
    order, and the count width of the version) and delegates; the layout's fields check magic and version."""

    what = "a GGUF file"

    def _layout(self, s: BufferStream, context: Any) -> tuple[str, Struct]:
        head = bytes(s.view[s.pos : s.pos + 8])
        order = context.get("byte_order") or detect_byte_order(head)
        if order not in ORDERS:
            raise ValueError(f"byte_order must be 'little' or 'big', not {order!r}")
        version = struct.unpack_from(ORDERS[order] + "I", head, 4)[0] if len(head) == 8 else 3
        return order, gguf_layout(ORDERS[order], version != 1)

    def _parse(self, stream, context, path):
        s = as_stream(stream)
        order, layout = self._layout(s, context)
        obj = layout._parsereport(s, context, path)
        obj["byte_order"] = order
        return obj

    def _build(self, obj, stream, context, path):
        order = obj.get("byte_order") or context.get("byte_order") or "little"
        version = int(obj.get("version", 3))
        infos = obj.get("tensor_infos", [])
        alignment = alignment_of(obj.get("metadata_kv", []))
        if obj.get("tensor_data") is None and alignment < 1:
            raise rules.ALIGNMENT_ZERO.error("general.alignment is 0")
        if version not in VERSIONS:
            raise ValueError(f"cannot build GGUF version {version}")
        obj = Container(obj, version=version, magic=MAGIC, tensor_infos=lay_out(infos, alignment) if infos else [])
        obj.setdefault("tensor_data", None)
        obj.setdefault("metadata_kv", [])
        gguf_layout(ORDERS[order], version >= 2)._build(obj, stream, context, path)
        return obj


#: The GGUF file format (v1–v3, little- and big-endian).
GGUF = GGUFConstruct()


def sniff(head: bytes) -> bool:
    """A GGUF file starts with its magic (in either byte order: the version tells them apart)."""
    return head[:4] == MAGIC
