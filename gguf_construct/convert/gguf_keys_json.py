"""GGUF metadata keys in a safetensors ``__metadata__`` (a JSON object of strings), typed and reversible.

Each GGUF key ``K`` becomes the entry ``"gguf:K"`` whose string is a JSON object ``{"type": T, "value": V}``:
``T`` the GGUF type label (``u32``, ``str``, ``arr[f32]``, ``arr[arr[u8]]``) and ``V`` the value (arrays as
lists). Floats that JSON cannot hold (NaN, infinities) are their bit pattern as a hex string (``"0x7fc00000"``),
so even a NaN's payload comes back. Reading them back gives every key with its type and value, in order.

What cannot be kept: a bool byte other than 0 and 1 (read back as true), and the element types of an array of
arrays whose inner arrays differ in type (read back with types inferred from the values).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import numpy as np

from ..api.metadata import Metadata
from ..core import rules
from ..errors import FormatError

#: the prefix of the ``__metadata__`` entries holding GGUF keys (a character GGUF keys do not use)
PREFIX = "gguf:"
#: the ``__metadata__`` entries holding the GGUF file's key and tensor orders (JSON lists of names): a JSON object's
#: order is not kept by every reader (the safetensors library's is a hash map), and safetensors writers sort tensors
KEY_ORDER, TENSOR_ORDER = "gguf/key_order", "gguf/tensor_order"
#: the ``__metadata__`` entry listing keys left out because they describe tensor types the conversion changed: the
#: way back writes them anew from the tensors
REDESCRIBE = "gguf/describe_anew"
_BITS = {"f32": ("<f4", "<u4", 8), "f64": ("<f8", "<u8", 16)}


def encode_keys(metadata: Metadata, skip: frozenset[str] = frozenset()) -> dict[str, str]:
    """Every key of ``metadata`` but those in ``skip`` as ``__metadata__`` entries, in file order."""
    out = {
        PREFIX + f.key: json.dumps(_typed(f.type_label, f.value), ensure_ascii=False, allow_nan=False)
        for f in metadata.fields()
        if f.key not in skip
    }
    out[KEY_ORDER] = json.dumps([k for k in metadata if k not in skip], ensure_ascii=False)
    return out


def decode_keys(entries: Mapping[str, str]) -> Iterator[tuple[str, Any, str]]:
    """``(key, value, type label)`` for every ``gguf:`` entry of a ``__metadata__``, in the recorded key order;
    an entry that is not this encoding is an ``InvalidValueError`` (rule ``convert.gguf_keys``) naming it."""
    names = [PREFIX + k for k in ordered(entries, KEY_ORDER, (n[len(PREFIX) :] for n in entries if n.startswith(PREFIX)))]
    for name in names:
        text = entries[name]
        try:
            record = json.loads(text)
            label, value = record["type"], record["value"]
            if not isinstance(label, str):
                raise ValueError("its type is not a string")
            yield name[len(PREFIX) :], _value(label, value, name), label
        except FormatError:
            raise
        except (ValueError, TypeError, KeyError, OverflowError, RecursionError) as e:
            raise _refusal(name, f"not a typed GGUF value ({type(e).__name__}: {str(e)[:80]})") from None


def is_gguf_entry(name: str) -> bool:
    return name.startswith(PREFIX) or name in (KEY_ORDER, TENSOR_ORDER, REDESCRIBE)


def ordered(entries: Mapping[str, str], order_entry: str, names: Iterable[str]) -> list[str]:
    """``names`` in the order the entry ``order_entry`` records (names it does not list after, as they come)."""
    names = list(names)
    try:
        recorded = json.loads(entries.get(order_entry, "[]"))
    except ValueError:
        recorded = []
    present = set(names)
    first = [n for n in dict.fromkeys(recorded) if isinstance(n, str) and n in present] if isinstance(recorded, list) else []
    listed = set(first)
    return first + [n for n in names if n not in listed]


def _typed(label: str, value: Any) -> dict[str, Any]:
    return {"type": _label(label, value), "value": _plain(label, value)}


def _label(label: str, value: Any) -> str:
    """``arr[arr]`` made precise when every inner array has one type (``arr[arr[u8]]``)."""
    if label != "arr[arr]" or not len(value):
        return label
    inner = {_inner_label(v) for v in value}
    return f"arr[{inner.pop()}]" if len(inner) == 1 and None not in inner else label


def _inner_label(value: Any) -> str | None:
    from ..api.values import infer_type

    if isinstance(value, np.ndarray):
        return infer_type(value)
    return None


def _plain(label: str, value: Any) -> Any:
    """The JSON form of a value of GGUF type ``label``."""
    if label.startswith("arr["):
        elem = label[4:-1]
        if elem.startswith("arr"):
            return [_plain(_inner_label(v) or "arr[arr]", v) for v in value]
        return [_plain(elem, v) for v in (value.tolist() if hasattr(value, "tolist") else list(value))]
    if label in _BITS:
        v = float(value)
        if math.isfinite(v):
            return v
        ftype, utype, width = _BITS[label]
        return "0x" + format(int(np.array(value, ftype).view(utype)), f"0{width}x")
    if label == "bool":
        return bool(value)
    if isinstance(value, np.generic):
        return value.item()
    return value


def _value(label: str, value: Any, name: str) -> Any:
    """The Python value ``GGUFFile.metadata.set`` takes for the JSON form ``value`` of type ``label``."""
    if label.startswith("arr["):
        if not isinstance(value, list):
            raise _refusal(name, "an array value is not a list")
        elem = label[4:-1]
        if elem.startswith("arr"):
            return [_value(elem if elem != "arr" else "arr[arr]", v, name) for v in value]
        if elem in _BITS:
            return np.array([_value(elem, v, name) for v in value], _BITS[elem][0][1:])
        return value
    if label in _BITS and isinstance(value, str):
        ftype, utype, _ = _BITS[label]
        try:
            return np.array(int(value, 16), utype).view(ftype)[()]
        except (ValueError, OverflowError):
            raise _refusal(name, f"{value[:20]!r} is not a float's bit pattern") from None
    return value


def _refusal(name: str, message: str) -> FormatError:
    return rules.CONVERT_GGUF_KEYS.error(f"__metadata__ entry {name[:80]!r}: {message}", path=f"__metadata__ -> {name[:80]}")


def restore_keys(target: Metadata, entries: Mapping[str, str]) -> int:
    """Set every GGUF key stored in ``entries`` on ``target``, with its type; the number of keys set."""
    n = 0
    for key, value, label in decode_keys(entries):
        try:
            target.set(key, value, type=None if label == "arr[arr]" else label)
        except (ValueError, TypeError, OverflowError) as e:
            raise _refusal(PREFIX + key, str(e)[:120]) from None
        n += 1
    return n
