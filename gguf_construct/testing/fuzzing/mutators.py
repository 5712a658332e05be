"""Mutations of a file's bytes: blind ones (flips, interesting values, cuts, splices) and schema-aware ones that
hit the fields readers trust (counts, lengths, types, dimensions, offsets), found from the parsed file, or put one
quantity a reader derives from them at an arithmetic boundary (``testing.boundaries``), or set one count or length
past what the file holds, in place (``testing.overruns``).

``mutate(data, rng)`` returns ``(mutated, description)``; the description says what was changed and where, so
that a reproducer can say how it was made.
"""

from __future__ import annotations

import random
import struct
from collections.abc import Callable
from functools import lru_cache

from ...errors import FormatError
from ..boundaries import Base, boundary_file
from ..overruns import count_overrun

INTERESTING_32 = (
    0,
    1,
    2,
    7,
    8,
    13,
    31,
    32,
    63,
    64,
    255,
    256,
    0x7FFF,
    0x8000,
    0xFFFF,
    0x10000,
    0x7FFFFFFF,
    0x80000000,
    0xFFFFFFFE,
    0xFFFFFFFF,
)
INTERESTING_64 = (*INTERESTING_32, 2**32, 2**40, 2**62, 2**63 - 1, 2**63, 2**64 - 2, 2**64 - 1)


def _flip(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    i = rng.randrange(len(data))
    bit = 1 << rng.randrange(8)
    return data[:i] + bytes([data[i] ^ bit]) + data[i + 1 :], f"flip bit {bit:#04x} of byte {i}"


def _byte(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    i = rng.randrange(len(data))
    b = rng.choice((0x00, 0x01, 0x02, 0x7F, 0x80, 0xFF, rng.randrange(256)))
    return data[:i] + bytes([b]) + data[i + 1 :], f"byte {i} = {b:#04x}"


def _word(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    size = rng.choice((4, 8))
    if len(data) < size:
        return _byte(data, rng)
    i = rng.randrange(len(data) - size + 1)
    value = rng.choice(INTERESTING_64 if size == 8 else INTERESTING_32)
    order = rng.choice("<>")
    packed = struct.pack(order + ("Q" if size == 8 else "I"), value)
    return data[:i] + packed + data[i + size :], f"u{size * 8} at {i} = {value:#x}"


def _cut(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    n = rng.randrange(len(data))
    return data[:n], f"truncate to {n} bytes"


def _delete(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    i = rng.randrange(len(data))
    n = rng.randint(1, min(64, len(data) - i))
    return data[:i] + data[i + n :], f"delete {n} bytes at {i}"


def _duplicate(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    i = rng.randrange(len(data))
    n = rng.randint(1, min(64, len(data) - i))
    return data[: i + n] + data[i : i + n] + data[i + n :], f"repeat {n} bytes at {i}"


@lru_cache(maxsize=256)
def _fields(data: bytes) -> tuple[int, list[tuple[str, int, str]]] | None:
    """(alignment, the named fields) of a parsed file, or None when it does not parse. Cached: a campaign mutates
    the same seed and pool files again and again."""
    from ...formats.gguf.offsets import Layout

    layout = Layout(data)
    try:
        return layout.c.alignment, layout.fields()
    except FormatError:
        return None


def _field(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    """Overwrite a field the schema names (a count, length, value type, n_dims, dimension, ggml type or offset)."""
    parsed = _fields(data)
    if parsed is None:
        return _word(data, rng)
    alignment, fields = parsed
    name, at, fmt = rng.choice(fields)
    size = struct.calcsize(fmt)
    old = struct.unpack_from(fmt, data, at)[0]
    value = rng.choice((*(INTERESTING_64 if size == 8 else INTERESTING_32), old + 1, max(0, old - 1), old * 2, old + alignment))
    value &= (1 << (8 * size)) - 1
    return data[:at] + struct.pack(fmt, value) + data[at + size :], f"{name} {old} -> {value}"


def _boundary(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    """The file with one derived quantity (an element count, a padded size, a running offset, a string or array
    length, a record count) at a 32/63/64-bit boundary; a field mutation when it is not a GGUF file we parse."""
    base = _base(data)
    if base is None:
        return _field(data, rng)
    made = boundary_file(rng, base=base)
    return made.data, f"boundary {made.label}"


def _overrun(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    """One count or length (n_dims, a record count, an array count, a string length) set past the items present or
    the declared limit, nothing after it laid out again; a field mutation when it is not a GGUF file we parse."""
    made = count_overrun(data, rng)
    return made if made is not None else _field(data, rng)


@lru_cache(maxsize=64)
def _base(data: bytes) -> Base | None:
    """The keys and small tensors of a parsed little-endian v2/v3 file, to plant a boundary in; None otherwise."""
    from ...formats.gguf.schema import GGUF

    try:
        c = GGUF.parse(data)
    except (FormatError, ValueError, OverflowError):
        return None
    if c.byte_order != "little" or c.version not in (2, 3):
        return None
    return Base.of(list(c.metadata_kv), [(t.name, list(t.dimensions), str(t.type)) for t in c.tensor_infos])


MUTATORS: dict[str, Callable[[bytes, random.Random], tuple[bytes, str]]] = {
    "flip": _flip,
    "byte": _byte,
    "word": _word,
    "cut": _cut,
    "delete": _delete,
    "duplicate": _duplicate,
    "field": _field,
    "boundary": _boundary,
    "overrun": _overrun,
}
_WEIGHTS = {"flip": 2, "byte": 2, "word": 2, "cut": 1, "delete": 1, "duplicate": 1, "field": 6, "boundary": 3, "overrun": 2}


def mutate(data: bytes, rng: random.Random, rounds: int = 1) -> tuple[bytes, str]:
    """``data`` changed ``rounds`` times by weighted random mutators; the description lists each change."""
    notes = []
    for _ in range(rounds):
        if not data:
            break
        name = rng.choices(list(_WEIGHTS), weights=list(_WEIGHTS.values()))[0]
        data, note = MUTATORS[name](data, rng)
        notes.append(note)
    return data, "; ".join(notes)
