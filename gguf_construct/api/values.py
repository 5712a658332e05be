"""GGUF metadata values and their types: parsing type labels (``u32``, ``arr[str]``), inferring a new value's
type, checking a value fits its type (integer ranges from ``schema/value_types.json``), and converting between
the schema's containers and Python values.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from construct import Container

from ..core.tables import INT_RANGES, VALUE_TYPES, ValueType
from ..formats.fields import StringArray, enum_value_type, value_type_id

#: Kept under its old name: the integer ranges of ``schema/value_types.json``.
_INT_RANGES = INT_RANGES


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
        return next((t for t in ("i32", "i64") if INT_RANGES[t][0] <= v <= INT_RANGES[t][1]), "u64")
    if isinstance(value, (float, np.floating)):
        return "f64" if isinstance(value, np.float64) else "f32"  # (np.dtype("f8") == None holds: no dtype comparison)
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


def field_of(kv: Container) -> MetadataField:
    vt = VALUE_TYPES[value_type_id(kv["value_type"])]
    if vt.name != "arr":
        return MetadataField(kv["key"], vt.name, kv["value"])
    arr = kv["value"]
    return MetadataField(kv["key"], "arr", array_content(arr), VALUE_TYPES[value_type_id(arr["type"])].name)


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
