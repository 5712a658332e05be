"""The format tables of ``schema/``, loaded once: one source of truth for type ids, names and sizes.

The JSON files live in the repository's ``schema/`` folder and are copied into the wheel as
``gguf_construct/schema``; this module finds them in either place.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

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
        table: dict[str, Any] = json.load(f)
    return table


@dataclass(frozen=True)
class GGMLType:
    """A ggml tensor type: ``block_size`` elements are stored in ``type_size`` bytes.

    ``status`` is 'active', 'removed' (ggml dropped it: no sizes) or 'unknown' (an id found in a file that
    neither ggml's table nor the user's knows: ``GGMLType.unknown(43)``, named ``unknown(43)``, no sizes).
    ``origin`` says where the record comes from: 'ggml' (``schema/ggml_types.json``), 'user'
    (``GGUF_CONSTRUCT_TYPES``) or 'file'.
    """

    id: int
    name: str
    block_size: int
    type_size: int
    status: str
    origin: str = "ggml"

    @classmethod
    def unknown(cls, type_id: int) -> GGMLType:
        """The record of an id no table defines: same kind of object as a known type, without sizes."""
        return cls(int(type_id), f"unknown({int(type_id)})", 0, 0, "unknown", "file")

    @property
    def removed(self) -> bool:
        return self.status == "removed"

    @property
    def known(self) -> bool:
        return self.status != "unknown"

    @property
    def sized(self) -> bool:
        """Whether the block and byte sizes are known (not for removed or unknown types)."""
        return self.block_size > 0 and self.type_size > 0

    def nbytes(self, n_elements: int) -> int:
        """Bytes needed for ``n_elements`` values (a whole number of blocks)."""
        if not self.sized:
            from .errors import UnsupportedTypeError

            raise UnsupportedTypeError("tensor.type", f"ggml type {self.id} ({self.name}) has no known size")
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


_R = TypeVar("_R", bound="GGMLType | ValueType")


class _Table(dict[int, _R]):
    """An id → record dict that is also searchable by name (case-insensitive)."""

    def __init__(self, records: Iterable[_R]) -> None:
        records = list(records)
        super().__init__((r.id, r) for r in records)
        self.by_name: dict[str, _R] = {r.name.lower(): r for r in records}

    def lookup(self, key: int | str | _R) -> _R:
        """The record for an id, a name, or a record; KeyError when unknown."""
        if isinstance(key, (GGMLType, ValueType)):
            return key
        if isinstance(key, str):
            return self.by_name[key.lower()]
        return self[int(key)]


#: Environment variable naming a JSON file of extra ggml types (``{"types": [records]}``, the record format of
#: ``schema/ggml_types.json``), merged into ``GGML_TYPES`` at import: new types without a release.
USER_TYPES_ENV = "GGUF_CONSTRUCT_TYPES"
_TYPE_FIELDS = {"id": int, "name": str, "block_size": int, "type_size": int, "status": str}
_TYPE_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*\Z")


def user_types(path: str | os.PathLike[str], known: list[GGMLType]) -> list[GGMLType]:
    """The records of a user type file, checked against ``known``: every field present with its type, an id
    in u32, a plain name, sizes of at least 1, and no clash (the same id under another name or with other
    sizes, or the same name under another id). A record equal to a known one is accepted and changes nothing.
    Raises ``InvalidValueError`` (rule ``types.user``) naming the file, the record and the field."""
    from .errors import InvalidValueError

    def fail(message: str, where: str = "") -> InvalidValueError:
        return InvalidValueError("types.user", f"{message} ({USER_TYPES_ENV}={os.fspath(path)})", path=where)

    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, ValueError, RecursionError) as e:
        raise fail(f"cannot read the type table: {e}") from None
    records = doc.get("types") if isinstance(doc, dict) else None
    if not isinstance(records, list):
        raise fail('the file must hold {"types": [records]}')
    by_id = {t.id: t for t in known}
    by_name = {t.name.lower(): t for t in known}
    out: list[GGMLType] = []
    for i, r in enumerate(records):
        where = f"types[{i}]"
        if not isinstance(r, dict):
            raise fail("a record must be an object", where)
        r = {"status": "active", **r}
        for field, kind in _TYPE_FIELDS.items():
            if not isinstance(r.get(field), kind) or isinstance(r.get(field), bool):
                raise fail(f"{field} must be a {kind.__name__}", f"{where}.{field}")
        if set(r) - set(_TYPE_FIELDS):
            raise fail(f"unknown fields {sorted(set(r) - set(_TYPE_FIELDS))}", where)
        if not 0 <= r["id"] < 2**32 or not _TYPE_NAME.match(r["name"]) or r["status"] not in ("active", "removed"):
            raise fail("id must be a u32, name a plain identifier, status 'active' or 'removed'", where)
        if r["status"] == "active" and (r["block_size"] < 1 or r["type_size"] < 1):
            raise fail("block_size and type_size must be at least 1", where)
        t = GGMLType(**r, origin="user")
        same_id, same_name = by_id.get(t.id), by_name.get(t.name.lower())
        if same_id is not None and (same_id.name, same_id.block_size, same_id.type_size) != (t.name, t.block_size, t.type_size):
            raise fail(f"id {t.id} is {same_id.name} ({same_id.block_size} per {same_id.type_size} bytes) already", f"{where}.id")
        if same_name is not None and same_name.id != t.id:
            raise fail(f"name {t.name!r} is id {same_name.id} already", f"{where}.name")
        if same_id is None:
            by_id[t.id] = by_name[t.name.lower()] = t
            out.append(t)
    return out


def _ggml_types() -> list[GGMLType]:
    """ggml's table, plus the user's (``GGUF_CONSTRUCT_TYPES``) when set."""
    known = [GGMLType(**r) for r in _load("ggml_types.json")["types"]]
    path = os.environ.get(USER_TYPES_ENV)
    return known + user_types(path, known) if path else known


GGML_TYPES: _Table[GGMLType] = _Table(_ggml_types())
VALUE_TYPES: _Table[ValueType] = _Table(ValueType(**r) for r in _load("value_types.json")["types"])
FILE_TYPES: dict[int, str] = {r["id"]: r["name"] for r in _load("file_types.json")["file_types"]}



def ggml_type_of(value: int | str | GGMLType) -> GGMLType:
    """The record of a tensor type as a file holds it (an id, or the schema's enum name); an id no table
    defines gives ``GGMLType.unknown(id)``. A name nobody defines raises ``KeyError``."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool) and int(value) not in GGML_TYPES:
        return GGMLType.unknown(int(value))
    return GGML_TYPES.lookup(value)


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


@cache
def template_rules() -> dict[str, Any]:
    """``schema/template_rules.json``: the rules of chat template scanning and the names they look for."""
    return _load("template_rules.json")


def quantize_rules() -> dict[str, Any]:
    """llama-quantize's default choice of which tensors to quantize and to what (``schema/quantize.json``)."""
    return _load("quantize.json")
