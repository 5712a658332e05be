"""Safetensors dtypes (``schema/safetensors_dtypes.json``) and the header's reserved key, shared by the schema
(``safetensors.py``) and the writers (``safetensors_writer.py``)."""

from __future__ import annotations

from functools import cache

import numpy as np

from ...core.table_records import SafetensorsDtype
from ...core.tables import load_table

METADATA_KEY = "__metadata__"

#: A safetensors dtype record (``schema/safetensors_dtypes.json``).
Dtype = SafetensorsDtype


@cache
def dtypes() -> dict[str, Dtype]:
    """Every dtype name (case-sensitive, as the file spells it) → Dtype."""
    return {d.name: d for d in load_table("safetensors_dtypes").dtypes}


def dtype_for_numpy(dt: np.dtype) -> str:
    """The safetensors dtype name of a numpy dtype (uint16 is U16: BF16 data must name its dtype)."""
    dt = np.dtype(dt).newbyteorder("<") if np.dtype(dt).itemsize > 1 else np.dtype(dt)
    for d in dtypes().values():
        if d.numpy and np.dtype(d.numpy) == dt:
            return d.name
    raise ValueError(f"no safetensors dtype for numpy dtype {dt}")
