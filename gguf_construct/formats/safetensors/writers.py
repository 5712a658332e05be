"""How three writers lay out a safetensors file from fresh tensors: the HF library, MLX and Ollama's Go writer
(header key order, entry field order, JSON escapes, padding, data order). ``SAFETENSORS.build`` uses it for a
container without a ``header``.

Sources: ``huggingface/safetensors`` ``safetensors/src/tensor.rs`` at 24b0b28, ``ml-explore/mlx``
``mlx/io/safetensors.cpp`` at 846d176 and ``ollama/ollama`` ``x/safetensors/extractor.go`` at fb30760.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import numpy as np

from ...core import rules
from ...core.shapes import element_count
from ..base import tensor_bytes
from .dtypes import METADATA_KEY, dtype_for_numpy, dtypes

STYLES = ("safetensors", "mlx", "ollama")


def _numpy_entry(name: str, t: Any) -> tuple[str, list[int], Any]:
    if isinstance(t, np.ndarray):
        return dtype_for_numpy(t.dtype), list(t.shape), t
    dtype, shape, data = t["dtype"], [int(d) for d in t["shape"]], t["data"]
    return dtype, shape, data


def _go_escape(text: str) -> str:
    """Go's encoding/json escapes for a compact-dumped JSON text: <, >, & and U+2028/U+2029 as \\uXXXX."""
    return (
        text.replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("&", "\\u0026")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )


def header_and_sources(tensors: Any, metadata: Mapping[str, str] | None = None, style: str = "safetensors") -> tuple[bytes, list[Any]]:
    """(header bytes, data sources in data order) for ``tensors`` written by ``style``'s writer.

    ``tensors``: a mapping name → numpy array or ``{dtype, shape, data}``, or a list of ``{name, dtype, shape,
    data}``. Offsets are contiguous from 0.
    """
    if style not in STYLES:
        raise ValueError(f"style must be one of {STYLES}")
    items = list(tensors.items()) if isinstance(tensors, Mapping) else [(t["name"], t) for t in tensors]
    rows = []
    for name, t in items:
        dtype, shape, data = _numpy_entry(name, t)
        if dtype not in dtypes():
            raise rules.TENSOR_DTYPE.error(f"unknown dtype {dtype!r}", path=f"tensors[{name!r}]")
        rows.append((name, dtype, shape, data))
    if style == "safetensors":
        rows.sort(key=lambda r: (-dtypes()[r[1]].order, r[0]))
    header: dict[str, Any] = {}
    if metadata is not None and (metadata or style != "safetensors"):
        header[METADATA_KEY] = dict(metadata)
    elif style == "mlx":
        header[METADATA_KEY] = None
    offset, sources = 0, []
    for name, dtype, shape, data in rows:
        size = dtypes()[dtype].nbytes(element_count(shape))
        if size is None or len(tensor_bytes(data)) != size:
            raise ValueError(f"tensor {name!r}: shape {shape} of {dtype} needs {size} bytes of data")
        entry = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + size]}
        if style == "mlx":
            entry = dict(sorted(entry.items()))
        header[name] = entry
        offset += size
        sources.append(data)
    if style == "mlx":
        if header.get(METADATA_KEY):
            header[METADATA_KEY] = dict(sorted(header[METADATA_KEY].items()))
        header = dict(sorted(header.items()))
        return json.dumps(header, ensure_ascii=False, separators=(",", ":")).encode(), sources
    if style == "ollama":
        if header.get(METADATA_KEY):
            header[METADATA_KEY] = dict(sorted(header[METADATA_KEY].items()))
        header = dict(sorted(header.items()))
        text = _go_escape(json.dumps(header, ensure_ascii=False, separators=(",", ":"))).encode()
    else:
        text = json.dumps(header, ensure_ascii=False, separators=(",", ":")).encode()
    return text + b" " * (-len(text) % 8), sources
