"""GGUF v1–v3 files drawn from the schema, valid ones of every shape (the broken ones: ``testing.strategies.gguf_broken``).

Valid files
    ``gguf_files()`` draws a file as the container ``GGUF.build`` takes (the spec's field names; counts, offsets
    and padding left to the schema); ``gguf_bytes()`` draws the built bytes. Every version and byte order, every
    value type (v1 without the 64-bit ones), arrays nested up to three deep, empty strings and arrays, any valid
    alignment, standard keys with their standard types (a vocabulary whose arrays agree, ``block_count`` with
    ``blk.N`` tensors below it), and tensors of every ggml type with block data that dequantizes to finite
    values. ``profile="ggml"`` keeps to what ggml's C reader accepts (v2/v3, no nested arrays, names shorter than
    64 bytes, power-of-two alignment).
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np
from construct import Container
from hypothesis import strategies as st

from ...core.tables import GGML_TYPES, INT_RANGES, VALUE_TYPES, standard_key
from ...formats.fields import F32
from ...formats.gguf.schema import GGUF
from ...quants import SUPPORTED, block_dtype, dequantize

__all__ = [
    "ALL_VALUE_TYPES",
    "TENSOR_TYPES",
    "V1_VALUE_TYPES",
    "array_value",
    "gguf_bytes",
    "gguf_files",
    "metadata_kv",
    "scalar",
    "tensor_data",
    "tensor_info",
]

#: Value types by version: v1 had no 64-bit scalars.
V1_VALUE_TYPES = tuple(vt.name for vt in VALUE_TYPES.values() if vt.since == 1 and vt.name != "arr")
ALL_VALUE_TYPES = tuple(vt.name for vt in VALUE_TYPES.values() if vt.name != "arr")
#: Every ggml tensor type that has a block layout (removed ids have none).
TENSOR_TYPES = tuple(t.name for t in sorted(GGML_TYPES.values(), key=lambda t: t.id) if not t.removed and t.name in SUPPORTED)
ARCHITECTURES = ("llama", "gpt2", "falcon", "qwen2", "phi3", "bert")


# -- values ----------------------------------------------------------------------------------------------
segment = st.from_regex(r"[a-z][a-z0-9_]{0,11}", fullmatch=True)
#: Keys that are not standard (a standard key has a fixed type, which a random value would break).
custom_keys = st.lists(segment, min_size=1, max_size=4).map(".".join).filter(lambda k: standard_key(k) is None and k != "general.alignment")
text = st.text(st.characters(exclude_categories=["Cs"]), max_size=24)


def _f32(allow_nan: bool) -> st.SearchStrategy[float]:
    """Any float32 bit pattern as a Python float; a NaN as ``F32`` so that its payload survives a build."""

    def of_bits(bits: int) -> float:
        (value,) = struct.unpack("<f", struct.pack("<I", bits))
        return F32(value, bits) if value != value else value

    values = st.integers(0, 2**32 - 1).map(of_bits)
    return values if allow_nan else values.filter(lambda v: v == v)


def scalar(vtype: str, allow_nan: bool = False) -> st.SearchStrategy[Any]:
    """One value of a scalar value type (``u8`` … ``f64``, ``bool``, ``str``)."""
    if vtype in INT_RANGES:
        return st.integers(*INT_RANGES[vtype])
    return {"f32": _f32(allow_nan), "f64": st.floats(allow_nan=allow_nan, width=64), "bool": st.booleans(), "str": text}[vtype]


@st.composite
def array_value(
    draw: Any, types: tuple[str, ...] = ALL_VALUE_TYPES, depth: int = 0, max_depth: int = 3, allow_nan: bool = False
) -> Container:
    """``{type, len, array}``: numeric arrays as numpy arrays, strings as a list, arrays of arrays nested up to
    ``max_depth`` levels (``max_depth=1``: no nesting)."""
    etype = draw(st.sampled_from([*types, "arr"] if depth + 1 < max_depth else list(types)))
    if etype == "arr":
        items = draw(st.lists(array_value(types, depth + 1, max_depth, allow_nan), max_size=3))
        return Container(type="arr", len=len(items), array=items)
    items = draw(st.lists(scalar(etype, allow_nan), max_size=8))
    if etype != "str":
        vt = VALUE_TYPES.lookup(etype)
        items = np.array([_bits32(x) for x in items], dtype="<u4").view("<f4") if etype == "f32" else np.array(items, dtype=vt.numpy)
    return Container(type=etype, len=len(items), array=items)


def _bits32(value: float) -> int:
    """A float32's bit pattern (an ``F32`` NaN keeps its own)."""
    return getattr(value, "bits", None) or struct.unpack("<I", struct.pack("<f", value))[0]


@st.composite
def metadata_kv(
    draw: Any, types: tuple[str, ...] = ALL_VALUE_TYPES, max_depth: int = 3, allow_nan: bool = False, keys: Any = custom_keys
) -> Container:
    """One ``{key, value_type, value}`` record with a non-standard key."""
    vtype = draw(st.sampled_from([*types, "arr"]))
    value = draw(array_value(types, 0, max_depth, allow_nan) if vtype == "arr" else scalar(vtype, allow_nan))
    return Container(key=draw(keys), value_type=vtype, value=value)


# -- tensors ---------------------------------------------------------------------------------------------
def finite_blocks(raw: bytes, ggml_type: str, byte_order: str) -> bytes:
    """``raw`` (whole blocks) with every block that would dequantize to a NaN or an infinity made finite:
    float fields (scales) that are not finite become 1, and a block still not finite after that is zeroed."""
    dtype = block_dtype(ggml_type, byte_order)
    blocks = np.frombuffer(bytearray(raw), dtype=dtype)
    for name in dtype.names or ():
        field = blocks[name]
        if field.dtype.base.kind == "f":
            field[~np.isfinite(field)] = 1
    with np.errstate(all="ignore"):
        values = dequantize(blocks.view(np.uint8), ggml_type, byte_order=byte_order).reshape(len(blocks), -1)
    bad = ~np.isfinite(values).all(axis=1)
    if bad.any():
        blocks.view(np.uint8).reshape(len(blocks), -1)[bad] = 0
    return blocks.tobytes()


@st.composite
def tensor_data(draw: Any, ggml_type: str, n_blocks: int, byte_order: str = "little", finite: bool = True) -> bytes:
    """``n_blocks`` blocks of ``ggml_type`` in ``byte_order``: any bytes, made finite (see ``finite_blocks``)."""
    t = GGML_TYPES.lookup(ggml_type)
    raw = draw(st.binary(min_size=n_blocks * t.type_size, max_size=n_blocks * t.type_size))
    return finite_blocks(raw, t.name, byte_order) if finite else raw


@st.composite
def tensor_info(draw: Any, name: str, types: tuple[str, ...] = TENSOR_TYPES, byte_order: str = "little", finite: bool = True) -> Container:
    """A tensor info with its ``data``: 1–4 dimensions, ne0 a multiple of the block size, offset left to the schema."""
    t = GGML_TYPES.lookup(draw(st.sampled_from(types)))
    dims = [t.block_size * draw(st.integers(1, 3))] + draw(st.lists(st.integers(1, 3), max_size=3))
    n_blocks = int(np.prod(dims)) // t.block_size
    data = draw(tensor_data(t.name, n_blocks, byte_order, finite))
    return Container(name=name, dimensions=dims, type=t.name, offset=None, data=data)


# -- whole files ---------------------------------------------------------------------------------------------
@st.composite
def standard_kvs(draw: Any, arch: str, tensor_names: list[str]) -> list[Container]:
    """Standard keys with their standard types: architecture, name, block_count (above every ``blk.N`` index)
    and, sometimes, a vocabulary whose tokens, scores and token types agree in length."""
    out = [Container(key="general.architecture", value_type="str", value=arch)]
    if draw(st.booleans()):
        out.append(Container(key="general.name", value_type="str", value=draw(text)))
    blocks = [int(n.split(".")[1]) for n in tensor_names if n.startswith("blk.")]
    if blocks or draw(st.booleans()):
        out.append(Container(key=f"{arch}.block_count", value_type="u32", value=draw(st.integers(max(blocks, default=-1) + 1, 64))))
    if draw(st.booleans()):
        tokens = draw(st.lists(text, min_size=1, max_size=12))
        n = len(tokens)
        out += [
            Container(key="tokenizer.ggml.model", value_type="str", value=draw(st.sampled_from(["llama", "gpt2", "bert"]))),
            Container(key="tokenizer.ggml.tokens", value_type="arr", value=Container(type="str", len=n, array=tokens)),
            Container(
                key="tokenizer.ggml.scores",
                value_type="arr",
                value=Container(
                    type="f32", len=n, array=np.array(draw(st.lists(st.floats(-100, 100, width=32), min_size=n, max_size=n)), "<f4")
                ),
            ),
            Container(
                key="tokenizer.ggml.token_type",
                value_type="arr",
                value=Container(type="i32", len=n, array=np.array(draw(st.lists(st.integers(1, 6), min_size=n, max_size=n)), "<i4")),
            ),
            Container(key="tokenizer.ggml.bos_token_id", value_type="u32", value=draw(st.integers(0, n - 1))),
        ]
    return out


def _alignments(profile: str) -> st.SearchStrategy[int | None]:
    """None (the default, ``DEFAULT_ALIGNMENT``) or a valid ``general.alignment``: a non-zero multiple of 8 (spec), a power of two
    from 8 (ggml; ggml itself also takes 1, 2 and 4, which the spec does not)."""
    if profile == "ggml":
        return st.one_of(st.none(), st.sampled_from([8, 16, 32, 64, 128, 256, 512, 1024]))
    return st.one_of(st.none(), st.integers(1, 128).map(lambda k: 8 * k))


@st.composite
def gguf_files(
    draw: Any,
    versions: tuple[int, ...] = (1, 2, 3),
    orders: tuple[str, ...] = ("little", "big"),
    nested: bool = True,
    tensor_types: tuple[str, ...] = TENSOR_TYPES,
    profile: str = "spec",
    standard: bool = True,
    allow_nan: bool = False,
    max_kv: int = 6,
    max_tensors: int = 4,
    finite: bool = True,
) -> Container:
    """A valid GGUF file as a container for ``GGUF.build`` (see the module docstring)."""
    if profile == "ggml":
        versions, nested = tuple(v for v in versions if v != 1) or (2, 3), False
    version = draw(st.sampled_from(versions))
    order = draw(st.sampled_from(orders))
    types = V1_VALUE_TYPES if version == 1 else ALL_VALUE_TYPES
    names = draw(
        st.lists(
            st.from_regex(r"[a-z][a-z0-9_.]{0,20}", fullmatch=True).filter(lambda n: not n.startswith("blk.")),
            max_size=max_tensors,
            unique=True,
        )
    )
    if standard and names and draw(st.booleans()):
        names[0] = f"blk.{draw(st.integers(0, 40))}.{names[0]}"[:63]
    tensors = [draw(tensor_info(n, tensor_types, order, finite)) for n in names]
    kvs = draw(st.lists(metadata_kv(types, 3 if nested else 1, allow_nan), max_size=max_kv, unique_by=lambda kv: kv["key"]))
    if standard and (draw(st.booleans()) or any(n.startswith("blk.") for n in names)):
        std = draw(standard_kvs(draw(st.sampled_from(ARCHITECTURES)), names))
        for kv in std:
            kvs.insert(draw(st.integers(0, len(kvs))), kv)
    alignment = draw(_alignments(profile))
    if alignment is not None:
        kvs.insert(draw(st.integers(0, len(kvs))), Container(key="general.alignment", value_type="u32", value=alignment))
    return Container(version=version, byte_order=order, metadata_kv=kvs, tensor_infos=tensors, tensor_data=None)


def gguf_bytes(**options: Any) -> st.SearchStrategy[bytes]:
    """``gguf_files(**options)`` built to bytes."""
    return gguf_files(**options).map(GGUF.build)
