"""Metadata as an ordered mapping that keeps every value's GGUF type.

``GGUFFile.metadata[key]`` gives the value (Python scalars and str; numeric arrays as read-only numpy views;
string arrays as lazy ``StringArray``; nested arrays as lists); ``.field(key)`` gives it with its type. Setting
a value infers its type (an existing key keeps its type, a standard key gets its standard type) unless one is
given: ``metadata.set("general.alignment", 64, type="u32")``, ``type="arr[str]"``. Value typing lives in
:mod:`.values`, attribute access to the standard keys in :mod:`.standard_keys` (both re-exported here).
"""

from __future__ import annotations

from collections.abc import Iterator, MutableMapping
from typing import Any

from construct import Container

from ..core.tables import standard_key
from .standard_keys import StandardKeys
from .values import (
    _INT_RANGES,
    MetadataField,
    array_content,
    field_of,
    first_last,
    infer_type,
    json_value,
    parse_type,
    to_schema_value,
)

__all__ = [
    "_INT_RANGES",
    "Metadata",
    "MetadataField",
    "StandardKeys",
    "array_content",
    "first_last",
    "infer_type",
    "json_value",
    "parse_type",
    "to_schema_value",
]


class Metadata(MutableMapping[str, Any]):
    """The file's key-value pairs, in file order; edits change the schema container that ``save`` builds."""

    def __init__(self, kvs: list[Container]):
        self._kvs = kvs
        self._index = {kv["key"]: i for i, kv in enumerate(kvs)}

    def __getitem__(self, key: str) -> Any:
        return self.field(key).value

    def field(self, key: str) -> MetadataField:
        """The value of ``key`` with its GGUF type."""
        return field_of(self._kvs[self._index[key]])

    def fields(self) -> Iterator[MetadataField]:
        for kv in self._kvs:
            yield field_of(kv)

    def record(self, key: str) -> Container:
        """The schema's record for ``key`` (``key``, ``value_type``, ``value``), as ``save`` builds it."""
        return self._kvs[self._index[key]]

    def offset_of(self, key: str) -> int | None:
        """The byte offset of ``key``'s record in the file it was read from (None for a key set since)."""
        off = self._kvs[self._index[key]].get("_offset")
        return None if off is None else int(off)

    def type_of(self, key: str) -> str:
        """``u32``, ``str``, ``arr[f32]``, ``arr[arr]``."""
        return self.field(key).type_label

    def set(self, key: str, value: Any, type: str | None = None) -> None:
        """Set ``key``; the type is ``type``, else the existing key's, else the standard key's, else inferred."""
        if not isinstance(key, str) or not key:
            raise ValueError("a metadata key must be a non-empty str")
        if type is None:
            if key in self._index:
                type = self.type_of(key)
                if type == "arr[arr]":
                    type = None
            if type is None:
                std = standard_key(key, self.get("general.architecture") if key != "general.architecture" else None)
                type = std.type if std else infer_type(value)
        value_type, schema_value = to_schema_value(value, type, key)
        kv = Container(key=key, value_type=value_type, value=schema_value)
        if key in self._index:
            self._kvs[self._index[key]] = kv
        else:
            self._index[key] = len(self._kvs)
            self._kvs.append(kv)

    def __setitem__(self, key: str, value: Any) -> None:
        self.set(key, value)

    def __delitem__(self, key: str) -> None:
        i = self._index.pop(key)
        del self._kvs[i]
        self._index = {kv["key"]: j for j, kv in enumerate(self._kvs)}

    def __iter__(self) -> Iterator[str]:
        return (kv["key"] for kv in self._kvs)

    def __len__(self) -> int:
        return len(self._kvs)

    def __contains__(self, key: object) -> bool:
        return key in self._index

    def __repr__(self) -> str:
        return f"Metadata({len(self)} keys: {', '.join(list(self)[:5])}{', ...' if len(self) > 5 else ''})"
