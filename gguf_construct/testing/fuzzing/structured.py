"""Structure-aware mutation for coverage-guided engines (libFuzzer through atheris, AFL++): the schema-driven
generators and field-aware mutators, exposed in the shapes those engines call.

A blind engine changes one byte at a time; a reader refuses most such files at a cross-check (an offset that no
longer equals the running sum of sizes, a count that no longer matches the records). ``mutate_structured`` works
on the parsed file instead: it changes a dimension, a type, a key or a value, then lays the file out again with
every offset the running sum of the (wrapping) padded sizes, so the reader gets past its checks to the code that
uses the numbers. With some probability it plants one derived quantity (an element count, a padded size, a running
offset, a string or array length...) at a 32/63/64-bit boundary in the parsed file (``testing.boundaries``), sets
one count or length past what the file holds without laying out what follows (``testing.overruns``), or
draws a whole file from a named class of
``gguf_construct.testing.strategies.reader_breakers`` instead, and it falls back to the byte-level mutators when the
input does not parse.

- ``mutate(data, max_size, seed)`` and ``crossover(a, b, max_size, seed)``: atheris' ``custom_mutator`` and
  ``custom_crossover`` (``atheris.Setup(argv, test_one, custom_mutator=mutate, custom_crossover=crossover)``);
- ``fuzz/native/afl_gguf_mutator.py`` wraps the same functions in AFL++'s Python custom-mutator API.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Callable
from typing import Any

from construct import Container

from ...core.tables import GGML_TYPES
from ...errors import FormatError
from ...formats.gguf.schema import GGUF
from ..boundaries import Base, boundary_file
from ..overruns import count_overrun
from ..strategies.reader_breakers import READER_BREAKERS, build, ggml_nbytes
from .mutators import INTERESTING_64
from .mutators import mutate as mutate_bytes

__all__ = ["crossover", "mutate", "mutate_structured"]

GENERATE_P = 0.1  # how often a whole file comes from a reader-breaker class instead of a mutation
BOUNDARY_P = 0.25  # how often the parsed file gets one derived quantity at an arithmetic boundary (testing.boundaries)
OVERRUN_P = 0.1  # how often one count of the parsed file is set past what it holds, in place (testing.overruns)
_DIM_VALUES = (*INTERESTING_64, 3, 32, 256, 2**31 - 1, 2**61, 2**62, 2**63 + 1)
_TYPES = tuple(t.name for t in GGML_TYPES.values() if not t.removed and t.type_size)


@functools.lru_cache(maxsize=64)  # an engine mutates the same queue entry many times in a row
def _parse(data: bytes) -> Container | None:
    try:
        c = GGUF.parse(data)
    except (FormatError, ValueError, OverflowError):
        return None
    return c if c.byte_order == "little" and c.version in (2, 3) else None


def _kvs(c: Container) -> list[Container]:
    return [Container(key=kv.key, value_type=str(kv.value_type), value=kv.value) for kv in c.metadata_kv]


def _tensors(c: Container) -> list[tuple[str | bytes, list[int], str]]:
    return [(t.name, [int(d) for d in t.dimensions], str(t.type)) for t in c.tensor_infos]


def _alignment(c: Container) -> int:
    a = int(c.get("alignment") or 32)
    return a if a > 0 and a & (a - 1) == 0 and a <= 1 << 16 else 32


# -- structured edits: each changes the parsed file; the file is then laid out again consistently ----------------
def _edit_dim(rng: random.Random, kvs: list[Container], tensors: list[Any]) -> str:
    if not tensors:
        return _add_tensor(rng, kvs, tensors)
    i = rng.randrange(len(tensors))
    name, dims, t = tensors[i]
    if not dims or rng.random() < 0.2:
        dims = dims + [rng.choice(_DIM_VALUES)] if len(dims) < 6 and rng.random() < 0.5 else dims[:-1]
    else:
        j = rng.randrange(len(dims))
        dims = list(dims)
        dims[j] = rng.choice((*_DIM_VALUES, dims[j] * 2, max(0, dims[j] - 1), dims[j] + 1)) & (2**64 - 1)
    tensors[i] = (name, dims, t)
    return f"tensor {i} dims -> {dims}"


def _edit_type(rng: random.Random, kvs: list[Container], tensors: list[Any]) -> str:
    if not tensors:
        return _add_tensor(rng, kvs, tensors)
    i = rng.randrange(len(tensors))
    name, dims, _ = tensors[i]
    t = GGML_TYPES.lookup(rng.choice(_TYPES))
    if dims and t.block_size > 1 and rng.random() < 0.8:  # keep ne0 a multiple of the block, as readers check
        dims = [max(1, dims[0] // t.block_size) * t.block_size, *dims[1:]]
    tensors[i] = (name, dims, t.name)
    return f"tensor {i} type -> {t.name}"


def _add_tensor(rng: random.Random, kvs: list[Container], tensors: list[Any]) -> str:
    big = rng.random() < 0.5
    dims = [rng.choice(_DIM_VALUES) if big else rng.choice((1, 8, 32, 256)) for _ in range(rng.randint(1, 4))]
    t = rng.choice(("f32", "f16", "q8_0", "q4_K", "i8", "f64"))
    b = GGML_TYPES.lookup(t).block_size
    dims[0] = max(1, dims[0] // b) * b & (2**64 - 1)
    names = {n for n, _, _ in tensors}
    name = next(f"blk.0.t{k}" for k in range(len(tensors) + 1) if f"blk.0.t{k}" not in names)
    tensors.insert(rng.randrange(len(tensors) + 1), (name, dims, t))
    return f"add tensor {name} {t} {dims}"


def _drop(rng: random.Random, kvs: list[Container], tensors: list[Any]) -> str:
    pool = [("kv", i) for i in range(len(kvs))] + [("tensor", i) for i in range(len(tensors))]
    if not pool:
        return _add_tensor(rng, kvs, tensors)
    kind, i = rng.choice(pool)
    (kvs if kind == "kv" else tensors).pop(i)
    return f"drop {kind} {i}"


def _duplicate(rng: random.Random, kvs: list[Container], tensors: list[Any]) -> str:
    if not kvs:
        kvs.append(Container(key="", value_type="u32", value=0))
        return "add empty key"
    kv = rng.choice(kvs)
    copy = Container(key=kv.key if rng.random() < 0.8 else "", value_type=kv.value_type, value=kv.value)
    kvs.insert(rng.randrange(len(kvs) + 1), copy)
    return f"duplicate key {kv.key!r}"


def _retype_kv(rng: random.Random, kvs: list[Container], tensors: list[Any]) -> str:
    """A key's value replaced by one of another type (a u8 array where floats are read, a string for a count)."""
    from ..strategies.reader_breakers import _WRONG_TYPED

    key, vt, value = rng.choice(_WRONG_TYPED)
    if kvs and rng.random() < 0.5:
        i = rng.randrange(len(kvs))
        key = kvs[i].key
        kvs[i] = Container(key=key, value_type=vt, value=value)
    else:
        kvs.insert(rng.randrange(len(kvs) + 1), Container(key=key, value_type=vt, value=value))
    return f"key {key!r} -> {vt}"


def _edit_count(rng: random.Random, kvs: list[Container], tensors: list[Any]) -> str:
    """A u32/u64 value (block_count, alignment, a token id) set to an interesting number."""
    ints = [i for i, kv in enumerate(kvs) if kv.value_type in ("u32", "u64", "i32")]
    if not ints:
        kvs.append(Container(key="llama.block_count", value_type="u32", value=rng.choice((513, 2**32 - 1))))
        return "add block_count"
    i = rng.choice(ints)
    bits = 64 if kvs[i].value_type == "u64" else 32
    value = rng.choice((0, 1, 3, 24, 513, 2**31 - 1, 2**31, 2**32 - 1, 2**63, 2**64 - 1)) & (2**bits - 1)
    if kvs[i].value_type == "i32" and value >= 2**31:
        value -= 2**32
    kvs[i] = Container(key=kvs[i].key, value_type=kvs[i].value_type, value=value)
    return f"key {kvs[i].key!r} = {value}"


_EDITS: dict[str, Callable[[random.Random, list[Container], list[Any]], str]] = {
    "dim": _edit_dim,
    "type": _edit_type,
    "add_tensor": _add_tensor,
    "drop": _drop,
    "duplicate": _duplicate,
    "retype": _retype_kv,
    "count": _edit_count,
}
_EDIT_WEIGHTS = {"dim": 5, "type": 2, "add_tensor": 2, "drop": 1, "duplicate": 1, "retype": 1, "count": 2}


def mutate_structured(data: bytes, rng: random.Random, max_size: int = 1 << 20) -> tuple[bytes, str]:
    """One structure-aware mutation of ``data``: a reader-breaker file, an edit of the parsed file laid out again
    with consistent offsets, or (when ``data`` does not parse) a byte-level mutation. Returns (bytes, what)."""
    if rng.random() < GENERATE_P:
        name = rng.choice(list(READER_BREAKERS))
        out = READER_BREAKERS[name].make(rng)
        if len(out) <= max_size:
            return out, f"generated {name}"
    c = _parse(data) if data else None
    if c is None:
        return mutate_bytes(data or b"GGUF", rng, rounds=rng.choice((1, 2)))
    roll = rng.random()
    if roll < OVERRUN_P:
        overrun = count_overrun(data, rng)
        if overrun is not None:
            return overrun
    kvs, tensors = _kvs(c), _tensors(c)
    if roll < OVERRUN_P + BOUNDARY_P:
        made = boundary_file(rng, base=Base.of(kvs, tensors))
        if len(made.data) <= max_size:
            return made.data, f"boundary {made.label}"
    notes = []
    for _ in range(rng.choice((1, 1, 2, 3))):
        edit = rng.choices(list(_EDIT_WEIGHTS), weights=list(_EDIT_WEIGHTS.values()))[0]
        notes.append(_EDITS[edit](rng, kvs, tensors))
    alignment = _alignment(c)
    try:
        out = build(kvs, tensors, alignment=alignment, data_size=_data_size(tensors, alignment, max_size), version=int(c.version))
    except (FormatError, ValueError, OverflowError, TypeError, KeyError):  # an edit the schema cannot lay out
        return mutate_bytes(data, rng)
    return out, "; ".join(notes)


def _data_size(tensors: list[Any], alignment: int, max_size: int) -> int:
    from ..strategies.reader_breakers import padded_offsets

    _, total = padded_offsets(tensors, alignment)
    if total <= max_size // 2:
        return total
    # the sum is too large to hold: the bytes of the tensors that fit, so a reader reads up to the big one
    return min(max_size // 2, sum(min(ggml_nbytes(d, t), 4096) for _, d, t in tensors))


def mutate(data: bytes, max_size: int, seed: int) -> bytes:
    """atheris ``custom_mutator``: one structure-aware mutation, at most ``max_size`` bytes."""
    out, _ = mutate_structured(bytes(data), random.Random(seed), max_size)
    return out[:max_size]


def crossover(data1: bytes, data2: bytes, max_size: int, seed: int) -> bytes:
    """atheris ``custom_crossover``: the metadata of one file with the tensors of the other, laid out again
    consistently; a byte splice when either does not parse."""
    rng = random.Random(seed)
    a, b = _parse(bytes(data1)), _parse(bytes(data2))
    if a is None or b is None:
        cut1, cut2 = rng.randrange(len(data1) + 1), rng.randrange(len(data2) + 1)
        return (bytes(data1[:cut1]) + bytes(data2[cut2:]))[:max_size]
    if rng.random() < 0.5:
        a, b = b, a
    kvs, tensors = _kvs(a), _tensors(b)
    tensors = list({t[0]: t for t in reversed(tensors)}.values())[::-1]  # one tensor per name, the first kept
    try:
        alignment = _alignment(a)
        return build(kvs, tensors, alignment=alignment, data_size=_data_size(tensors, alignment, max_size))[:max_size]
    except (FormatError, ValueError, OverflowError, TypeError, KeyError):
        return bytes(data1)[:max_size]
