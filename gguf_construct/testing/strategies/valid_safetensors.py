"""Hypothesis strategies for valid safetensors files: fresh objects for ``SAFETENSORS.build`` and their bytes.

``safetensors_containers()`` draws ``Container(tensors=..., metadata=..., style=...)`` with every dtype numpy can
hold (plus BF16 given as raw uint16), shapes including 0-d scalars and empty dimensions, names in any Unicode,
metadata of any strings, and each writer's layout (HF safetensors, MLX, Ollama's Go writer).
``safetensors_bytes()`` draws the built bytes, sometimes with the header re-padded (spaces, none, or leading
whitespace), which both MLX and the safetensors library read.
"""

from __future__ import annotations

import numpy as np
from construct import Container
from hypothesis import strategies as st

from ...formats.safetensors.schema import SAFETENSORS, dtypes
from ...formats.safetensors.writers import STYLES

__all__ = ["safetensors_bytes", "safetensors_containers"]

#: dtypes drawn: those numpy can hold, and BF16 (raw uint16 bit patterns).
DRAWN = [d.name for d in dtypes().values() if d.numpy] + ["BF16"]

names = st.text(st.characters(exclude_categories=["Cs"]), min_size=1, max_size=20).filter(lambda n: n != "__metadata__")
shapes = st.lists(st.integers(0, 5), min_size=0, max_size=3).map(tuple)


@st.composite
def tensor(draw: st.DrawFn) -> Container:
    """One tensor entry ``{dtype, shape, data}`` with random bytes of the right size."""
    dtype = draw(st.sampled_from(DRAWN))
    shape = draw(shapes)
    d = dtypes()[dtype]
    n = int(np.prod(shape, dtype=np.int64))
    raw = draw(st.binary(min_size=n * d.bits // 8, max_size=n * d.bits // 8))
    return Container(dtype=dtype, shape=list(shape), data=raw)


@st.composite
def safetensors_containers(draw: st.DrawFn, max_tensors: int = 6) -> Container:
    """A fresh object ``SAFETENSORS.build`` lays out: tensors, optional metadata, a writer style."""
    tensors = draw(st.dictionaries(names, tensor(), max_size=max_tensors))
    metadata = draw(st.none() | st.dictionaries(names, st.text(max_size=12), max_size=4))
    return Container(tensors=tensors, metadata=metadata, style=draw(st.sampled_from(STYLES)))


@st.composite
def safetensors_bytes(draw: st.DrawFn) -> bytes:
    """The bytes of a valid file: a drawn object built, its header sometimes re-padded with spaces."""
    data = SAFETENSORS.build(draw(safetensors_containers()))
    n = int.from_bytes(data[:8], "little")
    body = data[8 : 8 + n].rstrip(b" ")
    pad = draw(st.sampled_from(["keep", "none", "pad8", "leading"]))
    if pad == "keep":
        return data
    header = {"none": body, "pad8": body + b" " * (-len(body) % 8), "leading": b"  " + body}[pad]
    return len(header).to_bytes(8, "little") + header + data[8 + n :]
