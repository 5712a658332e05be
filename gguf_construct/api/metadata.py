"""Metadata as an ordered mapping that keeps every value's GGUF type.

``GGUFFile.metadata[key]`` gives the value (Python scalars and str; numeric arrays as read-only numpy views;
string arrays as lazy ``StringArray``; nested arrays as lists); ``.field(key)`` gives it with its type. Setting
a value infers its type (an existing key keeps its type, a standard key gets its standard type) unless one is
given: ``metadata.set("general.alignment", 64, type="u32")``, ``type="arr[str]"``.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, MutableMapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np
from construct import Container

from .. import rules
from ..formats.fields import StringArray, enum_value_type, value_type_id
from ..tables import VALUE_TYPES, ValueType, standard_key, standard_keys
from ..untrusted import DIGITS

_INT_RANGES = {
    "u8": (0, 2**8 - 1), "i8": (-(2**7), 2**7 - 1), "u16": (0, 2**16 - 1), "i16": (-(2**15), 2**15 - 1),
    "u32": (0, 2**32 - 1), "i32": (-(2**31), 2**31 - 1), "u64": (0, 2**64 - 1), "i64": (-(2**63), 2**63 - 1),
}  # fmt: skip


@dataclass(frozen=True)
class MetadataField:
    """One key-value pair with its types: ``type`` is a value type name, ``array_type`` the element type."""

    key: str
    type: str
    value: Any
    array_type: str | None = None

    @property
    def type_label(self) -> str:
        """``u32``, ``arr[str]``, ``arr[arr]``."""
        return f"arr[{self.array_type}]" if self.type == "arr" else self.type


def array_content(arr: Container) -> Any:
    """The elements of a schema array container: numpy view, StringArray, or a list for nested arrays."""
    items = arr["array"]
    if isinstance(items, list) and value_type_id(arr["type"]) == VALUE_TYPES.lookup("arr").id:
        return [array_content(inner) for inner in items]
    return items


def parse_type(spec: str | int | ValueType) -> tuple[ValueType, Any]:
    """A type given as ``u32``, ``arr[str]``, ``arr[arr[u8]]`` (or an id or record): (type, element spec)."""
    if isinstance(spec, str) and spec.startswith("arr[") and spec.endswith("]"):
        return VALUE_TYPES.lookup("arr"), spec[4:-1]
    try:
        return VALUE_TYPES.lookup(spec), None
    except KeyError:
        raise ValueError(f"unknown GGUF value type {spec!r}") from None


def infer_type(value: Any) -> str:
    """The type a new value gets when none is given (bool, i32/i64/u64, f32, str, arrays by element)."""
    if isinstance(value, (bool, np.bool_)):
        return "bool"
    if isinstance(value, (int, np.integer)):
        v = int(value)
        return "i32" if -(2**31) <= v < 2**31 else ("i64" if -(2**63) <= v < 2**63 else "u64")
    if isinstance(value, (float, np.floating)):
        return {np.dtype("f8"): "f64"}.get(getattr(value, "dtype", None), "f32")
    if isinstance(value, str):
        return "str"
    if isinstance(value, np.ndarray):
        for vt in VALUE_TYPES.values():
            if vt.numpy and np.dtype(vt.numpy) == value.dtype.newbyteorder("="):
                return f"arr[{vt.name}]"
        raise ValueError(f"no GGUF array type for numpy dtype {value.dtype}")
    if isinstance(value, (list, tuple, StringArray)):
        if not value:
            raise ValueError("the element type of an empty array cannot be inferred: give type='arr[...]'")
        kinds = {infer_type(v) for v in value}
        if kinds <= {"i32", "i64"}:
            return "arr[i64]" if "i64" in kinds else "arr[i32]"
        if len(kinds) != 1:
            raise ValueError(f"mixed element types {sorted(kinds)} in one array")
        inner = kinds.pop()
        return "arr[arr]" if inner.startswith("arr[") else f"arr[{inner}]"
    raise ValueError(f"no GGUF type for a value of type {type(value).__name__}")


def _check_scalar(value: Any, vt: ValueType, key: str) -> Any:
    name = vt.name
    if name == "str":
        if not isinstance(value, str):
            raise ValueError(f"{key}: a str value is needed, not {type(value).__name__}")
        return value
    if name == "bool":
        if not isinstance(value, (bool, np.bool_)) and value not in (0, 1):
            raise ValueError(f"{key}: a bool value is needed")
        return bool(value)
    if name in _INT_RANGES:
        if isinstance(value, (bool, float, np.floating)) or not isinstance(value, (int, np.integer)):
            raise ValueError(f"{key}: an integer is needed for {name}, not {value!r}")
        lo, hi = _INT_RANGES[name]
        if not lo <= int(value) <= hi:
            raise ValueError(f"{key}: {value} does not fit {name}")
        return int(value)
    if not isinstance(value, (int, float, np.integer, np.floating)) or isinstance(value, bool):
        raise ValueError(f"{key}: a number is needed for {name}")
    if name == "f32" and math.isfinite(float(value)) and abs(float(value)) > float(np.finfo(np.float32).max):
        raise ValueError(f"{key}: {value} does not fit f32")
    return float(value)


def to_schema_value(value: Any, type_spec: str, key: str) -> tuple[Any, Any]:
    """(value_type, value) in the schema's form for ``value`` of type ``type_spec``; ValueError when it does not fit."""
    vt, elem = parse_type(type_spec)
    if vt.name != "arr":
        return enum_value_type(vt.id), _check_scalar(value, vt, key)
    return enum_value_type(vt.id), _to_array(value, elem, key)


def _to_array(value: Any, elem: Any, key: str) -> Container:
    if not isinstance(value, (list, tuple, np.ndarray, StringArray)):
        raise ValueError(f"{key}: an array value is needed, not {type(value).__name__}")
    if elem in (None, "arr") or (isinstance(elem, str) and elem.startswith("arr")):
        # nested: each element is an array whose own type is inferred unless elem says arr[arr[T]]
        inner_spec = elem[4:-1] if isinstance(elem, str) and elem.startswith("arr[") else None
        inners = [_to_array(v, inner_spec or infer_type(v)[4:-1], key) for v in value]
        return Container(type=enum_value_type(VALUE_TYPES.lookup("arr").id), len=len(inners), array=inners)
    et = VALUE_TYPES.lookup(elem)
    if et.name == "str":
        if isinstance(value, StringArray):
            items: Any = value
        else:
            items = [_check_scalar(v, et, key) for v in value]
    else:
        if isinstance(value, np.ndarray):
            if value.ndim != 1:
                raise ValueError(f"{key}: arrays must be one-dimensional")
            items = value if value.dtype.kind == np.dtype(et.numpy).kind or et.name == "bool" else None
            if items is None:
                raise ValueError(f"{key}: numpy dtype {value.dtype} does not match {et.name}")
            if et.name in _INT_RANGES and value.size:
                lo, hi = _INT_RANGES[et.name]
                if int(value.min()) < lo or int(value.max()) > hi:
                    raise ValueError(f"{key}: values do not fit {et.name}")
            items = np.ascontiguousarray(value).astype(np.dtype(et.numpy).newbyteorder("="), copy=False)
        else:
            items = np.array([_check_scalar(v, et, key) for v in value], dtype=et.numpy)
    return Container(type=enum_value_type(et.id), len=len(items), array=items)


def _field_of(kv: Container) -> MetadataField:
    vt = VALUE_TYPES[value_type_id(kv["value_type"])]
    if vt.name != "arr":
        return MetadataField(kv["key"], vt.name, kv["value"])
    arr = kv["value"]
    return MetadataField(kv["key"], "arr", array_content(arr), VALUE_TYPES[value_type_id(arr["type"])].name)


class Metadata(MutableMapping[str, Any]):
    """The file's key-value pairs, in file order; edits change the schema container that ``save`` builds."""

    def __init__(self, kvs: list[Container]):
        self._kvs = kvs
        self._index = {kv["key"]: i for i, kv in enumerate(kvs)}

    def __getitem__(self, key: str) -> Any:
        return self.field(key).value

    def field(self, key: str) -> MetadataField:
        """The value of ``key`` with its GGUF type."""
        return _field_of(self._kvs[self._index[key]])

    def fields(self) -> Iterator[MetadataField]:
        for kv in self._kvs:
            yield _field_of(kv)

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


def json_value(value: Any) -> Any:
    """A metadata value as JSON-ready data (arrays as lists; NaN and infinities as strings)."""
    if isinstance(value, (StringArray, np.ndarray, list, tuple)):
        return [json_value(v) for v in (value.tolist() if hasattr(value, "tolist") else value)]
    if isinstance(value, float) and not math.isfinite(value):
        return repr(float(value))
    if isinstance(value, (np.integer, np.floating, np.bool_)):
        return value.item()
    if isinstance(value, (bytes, bytearray, memoryview)):  # legacy vocabularies: tokens need not be UTF-8
        return bytes(value).decode("utf-8", errors="backslashreplace")
    return value


def first_last(items: Sequence[Any]) -> tuple[Any, Any]:
    return (items[0], items[-1]) if len(items) else (None, None)


# -- typed access to the standard keys ------------------------------------------------------------------
@cache
def _templates() -> frozenset[tuple[str, ...]]:
    """Every standard key as its dotted segments, ``{arch}`` and ``{id}`` kept as placeholders."""
    return frozenset(tuple(k.key.split(".")) for k in standard_keys())


class StandardKeys:
    """Attribute access to the spec's standard keys, typed by the registry in ``schema/keys.json``.

    ``f.meta.general.architecture``, ``f.meta.llm.context_length`` (``llm`` is ``general.architecture``'s
    prefix, the spec's ``[llm]``), ``f.meta.tokenizer.ggml.bos_token_id``, ``f.meta.general.base_model[0].name``,
    ``f.meta.split.count``. A standard key the file lacks reads as None; a name that is no standard key raises
    AttributeError; a value whose type the spec does not allow raises ``UnsupportedTypeError`` (rule ``key.type``)
    so a consumer never works on a mistyped value. Assigning sets the key with its standard type (an existing
    value of another accepted type keeps its type); ``del`` removes it. A key that is also a prefix
    (``general.license`` and ``general.license.name``) reads as its value: reach the longer one by item,
    ``f.meta.general["license.name"]``.
    """

    def __init__(self, metadata: Metadata):
        object.__setattr__(self, "_meta", metadata)

    def _root(self) -> _KeyNode:
        return _KeyNode(self._meta, (), ())

    def __getattr__(self, name: str) -> Any:
        if name == "llm":
            arch = self._meta.get("general.architecture")
            if not isinstance(arch, str):
                raise AttributeError("llm: the file has no general.architecture to name the [llm] prefix")
            return _KeyNode(self._meta, ("{arch}",), (arch,))
        return getattr(self._root(), name)

    def __getitem__(self, key: str) -> Any:
        return self._root()[key]

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._root(), name, value)

    def __dir__(self) -> list[str]:
        return sorted({"llm", *self._root().__dir__()} - {"{arch}"})

    def __repr__(self) -> str:
        return f"StandardKeys({self._meta!r})"


class _KeyNode:
    """One level of the standard key tree: ``tpl`` is the registry path (with placeholders), ``at`` the concrete one."""

    __slots__ = ("_meta", "_tpl", "_at")

    def __init__(self, meta: Metadata, tpl: tuple[str, ...], at: tuple[str, ...]):
        object.__setattr__(self, "_meta", meta)
        object.__setattr__(self, "_tpl", tpl)
        object.__setattr__(self, "_at", at)

    def _children(self) -> dict[str, bool]:
        """Next segment → whether some key ends there (a leaf)."""
        n = len(self._tpl)
        out: dict[str, bool] = {}
        for t in _templates():
            if len(t) > n and t[:n] == self._tpl:
                out[t[n]] = out.get(t[n], False) or len(t) == n + 1
        return out

    def _step(self, segment: str) -> tuple[str, str] | None:
        """(template segment, concrete segment) for ``segment``, or None when no standard key continues so."""
        children = self._children()
        if segment in children and not segment.startswith("{"):
            return segment, segment
        if "{id}" in children and DIGITS.match(segment):
            return "{id}", segment
        if not self._tpl and "{arch}" in children and self._meta.get("general.architecture") == segment:
            return "{arch}", segment
        return None

    def _walk(self, dotted: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
        tpl, at = self._tpl, self._at
        for seg in dotted.split("."):
            step = _KeyNode(self._meta, tpl, at)._step(seg)
            if step is None:
                raise AttributeError(f"{'.'.join((*at, seg))} is not a standard GGUF key or prefix")
            tpl, at = (*tpl, step[0]), (*at, step[1])
        return tpl, at

    def _resolve(self, tpl: tuple[str, ...], at: tuple[str, ...]) -> Any:
        if tpl in _templates():
            return self._read(".".join(at))
        return _KeyNode(self._meta, tpl, at)

    def _read(self, key: str) -> Any:
        if key not in self._meta:
            return None
        std = standard_key(key, self._meta.get("general.architecture"))
        label = self._meta.type_of(key)
        if std is not None and label not in std.types:
            pass

            raise rules.KEY_TYPE.error(f"{key} is {label}, the spec says {' or '.join(std.types)}", path=key)
        return self._meta[key]

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return self._resolve(*self._walk(name))

    def __getitem__(self, key: int | str) -> Any:
        return self._resolve(*self._walk(str(key)))

    def __setattr__(self, name: str, value: Any) -> None:
        self[name] = value

    def __setitem__(self, key: int | str, value: Any) -> None:
        tpl, at = self._walk(str(key))
        if tpl not in _templates():
            raise AttributeError(f"{'.'.join(at)} is a prefix, not a key")
        full = ".".join(at)
        std = standard_key(full, self._meta.get("general.architecture"))
        kind = std.type if std else None
        if std is not None and full in self._meta and self._meta.type_of(full) in std.types:
            kind = self._meta.type_of(full)
        self._meta.set(full, value, type=kind)

    def __delattr__(self, name: str) -> None:
        tpl, at = self._walk(name)
        self._meta.pop(".".join(at), None)

    def __dir__(self) -> list[str]:
        return sorted(c for c in self._children() if not c.startswith("{"))

    def __repr__(self) -> str:
        return f"<standard keys {'.'.join(self._at) or '(root)'}.*: {', '.join(self.__dir__())}>"
