"""Counts and lengths a reader trusts past what the file holds: one count changed in place, nothing after it laid
out again.

The boundary generator and the strategies write records the way their counts say. A reader trusts a count before
it reads what the count covers: ``n_dims`` says how many dimensions follow, ``tensor_count`` and
``metadata_kv_count`` how many records, an array's count how many elements, a length how many bytes. When the count
says more than is there, the reader parses the bytes that follow as the next fields (a fifth dimension is read
from the type and offset, a record past the last one from the data section), or it allocates what the count claims
before finding the bytes missing.

``count_fields`` lists every such count of a parsed file with the number of items present and the limit the format
declares (``GGML_MAX_DIMS`` for ``n_dims``). ``overrun_values`` are the values tried for one: the present number
or the limit plus a log-spaced overrun (1, 2, 3, then 16 to 2**32 by factors of 16), and the 32/63/64-bit
boundaries the field can hold. ``count_overrun`` patches one of them in and leaves every other byte as it was; it
can keep to the record a generator planted (the last tensor, the last key, the header), so that a quantity put at
an arithmetic boundary is also read under a count that says more.
"""

from __future__ import annotations

import functools
import random
import re
from collections.abc import Iterator
from dataclasses import dataclass

from ..errors import FormatError
from ..formats.gguf.offsets import GGML_MAX_DIMS, Layout

__all__ = ["OVERRUNS", "CountField", "count_fields", "count_overrun", "count_overruns", "overrun_values"]

#: How far past the items present (or the declared limit) a count is set: one and a few items, then log-spaced
#: from 16 to 2**32, so a count or length can claim a little more than the file holds or far more.
OVERRUNS = (1, 2, 3, *(16**k for k in range(1, 9)))
_BOUNDARY_BITS = (31, 32, 63, 64)


@dataclass(frozen=True)
class CountField:
    """One count or length of a parsed file: where it is, its struct format, how many items are present, and the
    most the format allows (None: no declared limit)."""

    name: str
    at: int
    fmt: str
    present: int
    limit: int | None = None

    @property
    def bits(self) -> int:
        return 32 if self.fmt[-1] == "I" else 64


def _utf8_len(text: str | bytes) -> int:
    return len(text.encode("utf-8", "surrogateescape")) if isinstance(text, str) else len(text)


def count_fields(layout: Layout) -> list[CountField]:
    """Every count and length of the file in ``layout``: the header's record counts, each key's length, each string
    value's length and array's count, each tensor name's length and each tensor's ``n_dims``."""
    c, count, u32 = layout.c, layout.count_fmt, layout.order + "I"
    out = [
        CountField("tensor_count", layout.header("tensor_count"), count, len(c.tensor_infos)),
        CountField("metadata_kv_count", layout.header("metadata_kv_count"), count, len(c.metadata_kv)),
    ]
    for i, kv in enumerate(c.metadata_kv):
        at = layout.kv(i)
        out.append(CountField(f"metadata_kv[{i}].key length", at["key_length"], count, _utf8_len(kv.key)))
        if "array_count" in at:
            out.append(CountField(f"metadata_kv[{i}].value.len", at["array_count"], count, len(kv.value.array)))
        elif str(kv.value_type) == "str":
            out.append(CountField(f"metadata_kv[{i}].value length", at["value"], count, _utf8_len(kv.value)))
    for i, ti in enumerate(c.tensor_infos):
        at = layout.tensor(i)
        out.append(CountField(f"tensor_infos[{i}].name length", at["name_length"], count, _utf8_len(ti.name)))
        out.append(CountField(f"tensor_infos[{i}].n_dimensions", at["n_dims"], u32, len(ti.dimensions), GGML_MAX_DIMS))
    return out


def overrun_values(field: CountField) -> list[int]:
    """The values tried for ``field``: past the items present and past the declared limit by each of ``OVERRUNS``,
    and each 32/63/64-bit boundary (one below, at, one above) the field can hold; never the present value."""
    top = 2**field.bits
    starts = {field.present} | ({field.limit} if field.limit is not None else set())
    values = {s + k for s in starts for k in OVERRUNS}
    values |= {2**b + d for b in _BOUNDARY_BITS if b <= field.bits for d in (-1, 0, 1)}
    return sorted(v for v in values if 0 <= v < top and v != field.present)


@functools.lru_cache(maxsize=64)  # a campaign overruns the same seed and pool files again and again
def _fields(data: bytes) -> tuple[Layout, list[CountField]] | None:
    layout = Layout(data)
    try:
        return layout, count_fields(layout)
    except (FormatError, ValueError, OverflowError):
        return None


def _kind(name: str) -> str:
    """A field's kind: its name without the record's index (``tensor_infos[].n_dimensions``)."""
    return re.sub(r"\[\d+\]", "[]", name)


def _last_record(layout: Layout, record: str) -> str:
    """The name prefix of the last record of a table (``tensor_infos[3].``), or the header's (no prefix)."""
    if record == "header":
        return "(header)"
    n = len(layout.c.tensor_infos if record == "tensor" else layout.c.metadata_kv)
    return f"{'tensor_infos' if record == 'tensor' else 'metadata_kv'}[{n - 1}]."


def count_overrun(data: bytes, rng: random.Random, record: str | None = None) -> tuple[bytes, str] | None:
    """``data`` with one count or length set past what the file holds: a kind of count drawn first (n_dims, a
    record count, an array count, a length), then one of that kind, then a value of ``overrun_values`` (a small
    overrun half the time). ``record`` ('tensor', 'kv' or 'header') keeps to the counts of the last tensor, the last
    key or the header: where a generator planted the record it aimed at. None when ``data`` is not a GGUF file we
    parse (or has no such record)."""
    parsed = _fields(data)
    if parsed is None:
        return None
    layout, fields = parsed
    if record is not None:
        prefix = _last_record(layout, record)
        fields = [f for f in fields if f.name.startswith(prefix) or (prefix == "(header)" and "[" not in f.name)]
        if not fields:
            return None
    kinds: dict[str, list[CountField]] = {}
    for f in fields:
        kinds.setdefault(_kind(f.name), []).append(f)
    field = rng.choice(kinds[rng.choice(sorted(kinds))])
    values = overrun_values(field)
    small = [v for v in values if v - field.present in OVERRUNS[:3] or (field.limit is not None and v - field.limit in OVERRUNS[:3])]
    value = rng.choice(small if small and rng.random() < 0.5 else values)
    return layout.patch(field.at, field.fmt, value), f"overrun {field.name} {field.present} -> {value}"


def count_overruns(data: bytes) -> Iterator[tuple[CountField, int, bytes]]:
    """Every overrun of ``data`` in order: (the field, its new value, the patched bytes); none when ``data`` is not
    a GGUF file we parse."""
    parsed = _fields(data)
    if parsed is None:
        return
    layout, fields = parsed
    for field in fields:
        for value in overrun_values(field):
            yield field, value, layout.patch(field.at, field.fmt, value)
