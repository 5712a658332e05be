"""``info`` output: the JSON shape (type names as ggml spells them) and the readable report."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..api.file import GGUFFile
from ..api.metadata import first_last, json_value
from ..tables import FILE_TYPES


def info_json(f: GGUFFile, full: bool = False) -> dict[str, Any]:
    """``{"format", "version", "byte_order", "alignment", "data_offset", "metadata", "tensors"}``."""
    metadata = []
    for field in f.metadata.fields():
        if field.type != "arr":
            metadata.append({"key": field.key, "type": field.type, "value": json_value(field.value)})
            continue
        entry: dict[str, Any] = {"key": field.key, "type": "arr", "array_type": field.array_type, "n": len(field.value)}
        if field.array_type == "str":
            entry["first"], entry["last"] = first_last(field.value)
        if full:
            entry["values"] = json_value(field.value)
        metadata.append(entry)
    tensors = [{"name": t.name, "type": t.type.name, "shape": list(t.shape), "offset": t.offset, "nbytes": t.nbytes} for t in f.tensors.values()]
    return {
        "format": "gguf",
        "version": f.version,
        "byte_order": f.byte_order,
        "alignment": f.alignment,
        "data_offset": f.data_offset,
        "metadata": metadata,
        "tensors": tensors,
    }


def _short(value: Any, width: int = 72) -> str:
    if isinstance(value, (np.generic, float)) and not isinstance(value, bool):
        value = np.float32(value).item() if isinstance(value, (float, np.floating)) else value.item()
        text = repr(value) if not isinstance(value, float) else str(np.float32(value))
    else:
        text = repr(value)
    return text if len(text) <= width else text[: width - 3] + "..."


def info_text(f: GGUFFile, path: str, full: bool = False) -> str:
    """A readable report: header, metadata with types, tensors with shapes and sizes."""
    lines = [
        f"{path}",
        f"  GGUF v{f.version}, {f.byte_order}-endian, alignment {f.alignment}, data at byte {f.data_offset}",
        f"  {len(f.metadata)} metadata keys, {len(f.tensors)} tensors",
        "",
        "metadata:",
    ]
    for field in f.metadata.fields():
        if field.type == "arr":
            n = len(field.value)
            if full:
                shown = _short(json_value(field.value), 10**9)
            elif (field.array_type == "str" or isinstance(field.value, np.ndarray)) and n:
                shown = f"[{_short(field.value[0], 32)} ... {_short(field.value[-1], 32)}]"
            else:
                shown = ""
            lines.append(f"  {field.key:48s} {field.type_label:10s} n={n} {shown}")
        else:
            value = field.value
            if field.key == "general.file_type" and isinstance(value, int) and value in FILE_TYPES:
                shown = f"{value} ({FILE_TYPES[value]})"
            else:
                shown = _short(value, 10**9 if full else 72) if field.type == "f32" or not full else repr(value)
            lines.append(f"  {field.key:48s} {field.type_label:10s} {shown}")
    if len(f.tensors):
        lines += ["", "tensors:"]
        total = 0
        for t in f.tensors.values():
            total += t.nbytes
            lines.append(f"  {t.name:48s} {t.type.name:8s} {str(list(t.shape)):24s} offset {t.offset:>12} {t.nbytes:>12} bytes")
        lines.append(f"  {len(f.tensors)} tensors, {total} bytes of data")
    return "\n".join(lines)
