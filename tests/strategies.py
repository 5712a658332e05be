"""Hypothesis strategies drawing valid GGUF files as schema containers (every version, byte order, value type)."""

from __future__ import annotations

import struct

import numpy as np
from construct import Container
from hypothesis import strategies as st

from gguf_construct.tables import GGML_TYPES, standard_key

INT_RANGES = {"u8": (0, 255), "i8": (-128, 127), "u16": (0, 2**16 - 1), "i16": (-(2**15), 2**15 - 1), "u32": (0, 2**32 - 1),
              "i32": (-(2**31), 2**31 - 1), "u64": (0, 2**64 - 1), "i64": (-(2**63), 2**63 - 1)}  # fmt: skip
NUMPY = {"u8": "u1", "i8": "i1", "u16": "u2", "i16": "i2", "u32": "u4", "i32": "i4", "f32": "f4", "bool": "?", "u64": "u8", "i64": "i8", "f64": "f8"}
V1_TYPES = ["u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "str"]
ALL_TYPES = [*V1_TYPES, "u64", "i64", "f64"]

segment = st.from_regex(r"[a-z][a-z0-9_]{0,11}", fullmatch=True)
# Standard keys are left out: they have fixed types, which a random value would break.
keys = st.lists(segment, min_size=1, max_size=4).map(".".join).filter(lambda k: standard_key(k) is None and k != "general.alignment")
text = st.text(st.characters(exclude_categories=("Cs",)), max_size=24)
f32 = st.integers(0, 2**32 - 1).map(lambda b: struct.unpack("<f", struct.pack("<I", b))[0]).filter(lambda v: v == v)
f64 = st.floats(allow_nan=False, width=64)


def scalar(vtype):
    if vtype in INT_RANGES:
        return st.integers(*INT_RANGES[vtype])
    return {"f32": f32, "f64": f64, "bool": st.booleans(), "str": text}[vtype]


@st.composite
def array_value(draw, types, depth=0):
    etype = draw(st.sampled_from([*types, "arr"] if depth < 2 else types))
    if etype == "arr":
        items = draw(st.lists(array_value(types, depth + 1), max_size=3))
        return Container(type="arr", len=len(items), array=items)
    items = draw(st.lists(scalar(etype), max_size=8))
    if etype != "str":
        items = np.array(items, dtype=NUMPY[etype])
    return Container(type=etype, len=len(items), array=items)


@st.composite
def metadata_kv(draw, types):
    vtype = draw(st.sampled_from([*types, "arr"]))
    value = draw(array_value(types) if vtype == "arr" else scalar(vtype))
    return Container(key=draw(keys), value_type=vtype, value=value)


# Types whose bytes are any bit pattern: plain numbers and a few block types.
TENSOR_TYPES = ["f32", "f16", "bf16", "i8", "i16", "i32", "i64", "f64", "q4_0", "q8_0", "q4_K", "iq4_nl"]


@st.composite
def tensor_info(draw, name):
    t = GGML_TYPES.lookup(draw(st.sampled_from(TENSOR_TYPES)))
    dims = [t.block_size * draw(st.integers(1, 3))] + draw(st.lists(st.integers(1, 3), max_size=3))
    nbytes = t.nbytes(int(np.prod(dims)))
    data = draw(st.binary(min_size=nbytes, max_size=nbytes))
    return Container(name=name, dimensions=dims, type=t.name, offset=None, data=data)


@st.composite
def gguf_files(draw, versions=(1, 2, 3), orders=("little", "big"), nested=True):
    """A valid GGUF file as a container for ``GGUF.build`` (offsets and padding left to the schema)."""
    version = draw(st.sampled_from(versions))
    types = V1_TYPES if version == 1 else ALL_TYPES
    kvs = draw(st.lists(metadata_kv(types), max_size=6, unique_by=lambda kv: kv["key"]))
    if not nested:
        kvs = [kv for kv in kvs if not (kv["value_type"] == "arr" and kv["value"]["type"] == "arr")]
    alignment = draw(st.sampled_from([None, 8, 16, 32, 64, 256]))
    if alignment is not None:
        kvs.insert(draw(st.integers(0, len(kvs))), Container(key="general.alignment", value_type="u32", value=alignment))
    names = draw(st.lists(st.from_regex(r"[a-z][a-z0-9_.]{0,20}", fullmatch=True), max_size=4, unique=True))
    tensors = [draw(tensor_info(n)) for n in names]
    return Container(version=version, byte_order=draw(st.sampled_from(orders)), metadata_kv=kvs, tensor_infos=tensors, tensor_data=None)
