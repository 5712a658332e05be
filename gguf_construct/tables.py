"""The format tables of ``schema/``, loaded once: one source of truth for type ids, names and sizes.

The JSON files live in the repository's ``schema/`` folder and are copied into the wheel as
``gguf_construct/schema``; this module finds them in either place.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent


def schema_dir() -> Path:
    """The folder holding the schema tables (inside the installed package, or the source checkout's)."""
    for candidate in (_HERE / "schema", _HERE.parent / "schema"):
        if (candidate / "ggml_types.json").is_file():
            return candidate
    raise RuntimeError("gguf_construct: the schema tables are missing from the installation")


@cache
def _load(name: str) -> dict[str, Any]:
    with open(schema_dir() / name, encoding="utf-8") as f:
        return json.load(f)


@dataclass(frozen=True)
class GGMLType:
    """A ggml tensor type: ``block_size`` elements are stored in ``type_size`` bytes."""

    id: int
    name: str
    block_size: int
    type_size: int
    status: str

    @property
    def removed(self) -> bool:
        return self.status == "removed"

    def nbytes(self, n_elements: int) -> int:
        """Bytes needed for ``n_elements`` values (a whole number of blocks)."""
        return n_elements // self.block_size * self.type_size

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class ValueType:
    """A GGUF metadata value type."""

    id: int
    name: str
    spec_name: str
    size: int | None
    numpy: str | None
    since: int

    def __str__(self) -> str:
        return self.name


class _Table(dict):
    """An id → record dict that is also searchable by name (case-insensitive)."""

    def __init__(self, records):
        records = list(records)
        super().__init__((r.id, r) for r in records)
        self.by_name = {r.name.lower(): r for r in records}

    def lookup(self, key: int | str | Any):
        """The record for an id, a name, or a record; KeyError when unknown."""
        if isinstance(key, (GGMLType, ValueType)):
            return key
        if isinstance(key, str):
            return self.by_name[key.lower()]
        return self[int(key)]


GGML_TYPES: _Table = _Table(GGMLType(**r) for r in _load("ggml_types.json")["types"])
VALUE_TYPES: _Table = _Table(ValueType(**r) for r in _load("value_types.json")["types"])
FILE_TYPES: dict[int, str] = {r["id"]: r["name"] for r in _load("file_types.json")["file_types"]}

STR = VALUE_TYPES.lookup("str")
ARR = VALUE_TYPES.lookup("arr")
BOOL = VALUE_TYPES.lookup("bool")


@dataclass(frozen=True)
class StandardKey:
    """A standardized metadata key; ``pattern`` may hold ``{arch}`` and ``{id}`` placeholders."""

    key: str
    type: str
    accept: tuple[str, ...] = ()
    required: bool = False
    note: str = ""

    @property
    def types(self) -> tuple[str, ...]:
        """Every type a reader must accept for this key."""
        return (self.type, *(t for t in self.accept if t != self.type))


@cache
def standard_keys() -> list[StandardKey]:
    return [StandardKey(**{**k, "accept": tuple(k.get("accept", ()))}) for k in _load("keys.json")["keys"]]


@cache
def _key_patterns() -> list[tuple[re.Pattern[str], StandardKey]]:
    out = []
    for k in standard_keys():
        rx = re.escape(k.key).replace(r"\{arch\}", "(?P<arch>[a-z0-9_-]+)").replace(r"\{id\}", "[0-9]+")
        out.append((re.compile(rx + "$"), k))
    return out


def standard_key(key: str, architecture: str | None = None) -> StandardKey | None:
    """The registry entry for a concrete key, or None. ``{arch}`` keys match only ``architecture``'s prefix."""
    for rx, k in _key_patterns():
        m = rx.match(key)
        if m and (architecture is None or m.groupdict().get("arch") in (None, architecture)):
            return k
    return None


def architecture_required_keys(architecture: str) -> list[str]:
    """The keys the spec requires for an architecture (empty for architectures it does not describe)."""
    return [f"{architecture}.{k}" for k in _load("keys.json")["architectures"].get(architecture, [])]


def quantize_rules() -> dict[str, Any]:
    """llama-quantize's default choice of which tensors to quantize and to what (``schema/quantize.json``)."""
    return _load("quantize.json")
