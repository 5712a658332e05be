"""Where each field of a GGUF file is, from the offsets the schema records while parsing (``_at`` of each
record): what the broken-file strategies and the fuzzer's field mutator patch, so that neither computes a byte
offset by hand. Only the positions inside a field the schema reads as one piece (an array's element type and
count after its value type, each dimension after the first) are derived here, from the version's count width.
"""

from __future__ import annotations

import struct
from functools import cached_property
from typing import Any

from construct import Container

from .gguf import GGUF


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
