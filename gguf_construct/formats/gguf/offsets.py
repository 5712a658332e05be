"""Where each field of a GGUF file is, from the offsets the schema records while parsing (``_at`` of each
record): what the broken-file strategies and the fuzzer's field mutator patch, so that neither computes a byte
offset by hand. Only the positions inside a field the schema reads as one piece (an array's element type and
count after its value type, each dimension after the first) are derived here, from the version's count width.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from functools import cached_property
from typing import Any

from construct import Container

from ...core.tables import DEFAULT_ALIGNMENT, GGML_TYPES
from .schema import GGUF


class Layout:
    """The fields of a built file and their positions; the version's count width (u32 in v1, u64 from v2) and
    byte order give the formats of the values patched in."""

    def __init__(self, data: bytes):
        self.data = data

    @cached_property
    def c(self) -> Container:
        """The parsed file (parsed on first use: a caller that only needs the bytes never parses them)."""
        return GGUF.parse(self.data)

    @property
    def order(self) -> str:
        return "<" if self.c.byte_order == "little" else ">"

    @property
    def width(self) -> int:
        return 4 if self.c.version == 1 else 8

    @property
    def count_fmt(self) -> str:
        return self.order + ("I" if self.width == 4 else "Q")

    def header(self, field: str) -> int:
        """Where a header field (``version``, ``tensor_count``, ``metadata_kv_count``) is."""
        return self.c._at[field]

    def kv(self, i: int) -> dict[str, int]:
        at = self.c.metadata_kv[i]._at
        fields = {"key_length": at["key"], "value_type": at["value_type"], "value": at["value"]}
        if str(self.c.metadata_kv[i].value_type) == "arr":  # the array's header: u32 element type, then its count
            fields["array_type"], fields["array_count"] = at["value"], at["value"] + 4
        return fields

    def tensor(self, i: int) -> dict[str, Any]:
        at = self.c.tensor_infos[i]._at
        dims = [at["dimensions"] + j * self.width for j in range(len(self.c.tensor_infos[i].dimensions))]
        return {"name_length": at["name"], "n_dims": at["n_dimensions"], "dims": dims, "type": at["type"], "offset": at["offset"]}

    def fields(self) -> list[tuple[str, int, str]]:
        """Every count, length, type, dimension and offset a reader trusts: ``(name, position, struct format)``."""
        u32, count, c = self.order + "I", self.count_fmt, self.c
        out = [("tensor_count", self.header("tensor_count"), count), ("metadata_kv_count", self.header("metadata_kv_count"), count)]
        for i, kv in enumerate(c.metadata_kv):
            at = self.kv(i)
            out += [(f"metadata_kv[{i}].key length", at["key_length"], count), (f"metadata_kv[{i}].value_type", at["value_type"], u32)]
            if "array_type" in at:
                out += [(f"metadata_kv[{i}].value.type", at["array_type"], u32), (f"metadata_kv[{i}].value.len", at["array_count"], count)]
            elif str(kv.value_type) == "str":
                out.append((f"metadata_kv[{i}].value length", at["value"], count))
        for i in range(len(c.tensor_infos)):
            ti = self.tensor(i)
            out += [(f"tensor_infos[{i}].name length", ti["name_length"], count), (f"tensor_infos[{i}].n_dimensions", ti["n_dims"], u32)]
            out += [(f"tensor_infos[{i}].dimensions[{j}]", d, count) for j, d in enumerate(ti["dims"])]
            out += [(f"tensor_infos[{i}].type", ti["type"], u32), (f"tensor_infos[{i}].offset", ti["offset"], self.order + "Q")]
        return out

    def patch(self, at: int, fmt: str, value: int) -> bytes:
        packed = struct.pack(self.order + fmt if fmt[0] not in "<>" else fmt, value)
        return self.data[:at] + packed + self.data[at + len(packed) :]

    def patch_count(self, at: int, value: int) -> bytes:
        return self.data[:at] + struct.pack(self.count_fmt, value) + self.data[at + self.width :]


# -- ggml's size arithmetic: what a reader written in C computes, wrapping at 2**64 -------------------------------
GGML_MAX_DIMS = 4  # ggml-org/ggml include/ggml.h
SIZE_T = 2**64


def ggml_nbytes(dims: Sequence[int], ggml_type: str) -> int:
    """ggml's ``ggml_nbytes`` for ``dims`` (ne0 first, padded with 1 to four dims) in 64-bit unsigned arithmetic:
    0 when a dimension is zero or negative (as int64), otherwise the wrapped byte count."""
    t = GGML_TYPES.lookup(ggml_type)
    ne = [int(d) for d in dims] + [1] * (GGML_MAX_DIMS - len(dims))
    ne = [d - SIZE_T if d >= 2**63 else d for d in ne]  # read as int64_t
    if any(d <= 0 for d in ne):
        return 0
    m = SIZE_T - 1  # every product and sum is size_t: wrapped after each operation, as in C
    nb = [t.type_size, t.type_size * (ne[0] // t.block_size) & m]
    for j in range(2, len(ne)):
        nb.append(nb[j - 1] * ne[j - 1] & m)
    if t.block_size == 1:
        first, rest = t.type_size, range(len(ne))
    else:  # ne0 * nb0 wraps before the division by the block size
        first, rest = (ne[0] * nb[0] & m) // t.block_size, range(1, len(ne))
    total = first
    for j in rest:
        total = total + ((ne[j] - 1) * nb[j] & m) & m
    return total


def padded_offsets(tensors: Sequence[tuple[str, Sequence[int], str]], alignment: int = DEFAULT_ALIGNMENT) -> tuple[list[int], int]:
    """Offsets as ggml's reader expects them (the running sum of sizes padded to ``alignment``, wrapping at 2**64)
    and the data section's size (the final sum)."""
    offsets, total = [], 0
    for _, dims, ggml_type in tensors:
        offsets.append(total)
        size = ggml_nbytes(dims, ggml_type)
        total = (total + size + (-size % alignment)) % SIZE_T
    return offsets, total
