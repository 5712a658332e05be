"""The format tables of ``schema/``, loaded once: one source of truth for type ids, names, sizes and limits.

The JSON files live in the repository's ``schema/`` folder and are copied into the wheel as
``gguf_construct/schema``; this module finds them in either place. ``load_table(name)`` gives one file as a
frozen, typed record (``load_table("limits").limits[0].value``); nested parts that are themselves small
languages (legacy hyper-parameter sections, rwkv tensor maps) are read-only mappings and tuples. Nothing else
reads the JSON: a value the tables hold is never typed again in code.
"""

from __future__ import annotations

import json
import os
import re
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache, partial
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal, TypeVar, overload

import numpy as np

from ..errors import InvalidValueError, UnsupportedTypeError

if TYPE_CHECKING:  # the records no file reader needs (``table_records``, imported by ``load_table`` when asked for)
    from .table_records import (
        ArchTensorsTable,
        ForkTypesTable,
        MemoryTable,
        MigrateTable,
        MlxQuantTypesTable,
        QuantizeTable,
        RwkvLlamaTable,
        SafetensorsDtypesTable,
    )

_HERE = Path(__file__).resolve().parents[1]


def schema_dir() -> Path:
    """The folder holding the schema tables (inside the installed package, or the source checkout's)."""
    for candidate in (_HERE / "schema", _HERE.parent / "schema"):
        if (candidate / "ggml_types.json").is_file():
            return candidate
    raise RuntimeError("gguf_construct: the schema tables are missing from the installation")


@cache
def _load(name: str) -> Any:
    """One JSON file, deep-frozen (objects as read-only mappings, arrays as tuples): shared, so never mutable."""
    with open(schema_dir() / name, encoding="utf-8") as f:
        return _freeze(json.load(f))


def _freeze(value: Any) -> Any:
    if isinstance(value, dict):
        return MappingProxyType({k: _freeze(v) for k, v in value.items()})
    if isinstance(value, list):
        return tuple(_freeze(v) for v in value)
    return value


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
    #: The numpy dtype code (no byte order) of a plain numeric type whose values numpy holds as they are.
    numpy: str | None = None

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
    struct: str | None = None

    @property
    def int_range(self) -> tuple[int, int] | None:
        """(least, most) of an integer type, from its numpy dtype; None for the others."""
        if self.numpy is None or np.dtype(self.numpy).kind not in "iu":
            return None
        info = np.iinfo(np.dtype(self.numpy))
        return int(info.min), int(info.max)

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class StandardKey:
    """A standardized metadata key; ``pattern`` may hold ``{arch}`` and ``{id}`` placeholders."""

    key: str
    type: str
    accept: tuple[str, ...] = ()
    required: bool = False
    note: str = ""
    #: The value a reader assumes when the key is absent (None: no default).
    default: Any = None

    @property
    def types(self) -> tuple[str, ...]:
        """Every type a reader must accept for this key."""
        return (self.type, *(t for t in self.accept if t != self.type))


# -- one typed record per schema file ----------------------------------------------------------------------
@dataclass(frozen=True)
class FileType:
    """A ``general.file_type`` value (llama.cpp's llama_ftype)."""

    id: int
    name: str
    status: str


@dataclass(frozen=True)
class FileTypesTable:
    source: str
    file_types: tuple[FileType, ...]


@dataclass(frozen=True)
class GGMLTypesTable:
    source: str
    types: tuple[GGMLType, ...]
    max_dims: int
    max_dims_source: str


@dataclass(frozen=True)
class KeysTable:
    source: str
    keys: tuple[StandardKey, ...]
    #: architecture → the keys (without the ``{arch}.`` prefix) the spec requires for it
    architectures: Mapping[str, tuple[str, ...]]
    #: hyperparameters llama.cpp reads as one value or an array (``per_layer``: one per layer; ``fixed``: key → length)
    layer_arrays: Mapping[str, Any]


@dataclass(frozen=True)
class LegacyMagic:
    """A legacy container magic: as the bytes on disk, as the little-endian u32, and its versions."""

    bytes: str
    u32: int
    versions: tuple[int | None, ...]
    note: str


@dataclass(frozen=True)
class RwkvTypes:
    """rwkv.cpp's type ids per file version (100, 101) and the ids it removed."""

    magic: str
    versions: tuple[int, ...]
    types: Mapping[int, Mapping[int, str]]
    removed: Mapping[int, str]
    note: str

    def ids(self, version: int) -> Mapping[str, int]:
        """Layout name → rwkv.cpp type id in ``version``."""
        return {name: i for i, name in self.types[version].items()}


@dataclass(frozen=True)
class LegacyTable:
    """``schema/legacy.json``: GGML/GGMF/GGJT magics, hyper-parameter profiles, per-era type tables, rwkv.cpp."""

    source: str
    magics: Mapping[str, LegacyMagic]
    ggjt_alignment: int
    llama_loader_types: frozenset[int]
    llama_loader_types_note: str
    max_n_dims: int
    max_n_dims_note: str
    #: profile name → its record (containers, note, max_dims, ftype, quant_era), read-only; the fields each
    #: profile reads are construct Structs in ``formats/legacy/hparams.py``
    profiles: Mapping[str, Mapping[str, Any]]
    profiles_note: str
    detect_order: tuple[str, ...]
    #: era → id → layout name; ``current`` is not here (it is ``ggml_types.json``)
    type_tables: Mapping[str, Mapping[int, str]]
    type_tables_note: str
    rwkv: RwkvTypes


@dataclass(frozen=True)
class Limit:
    """A named resource limit (``limits.<name>``) and its default."""

    name: str
    value: int
    unit: str
    doc: str


@dataclass(frozen=True)
class LimitsTable:
    source: str
    limits: tuple[Limit, ...]


@dataclass(frozen=True)
class TemplateRules:
    """What a chat template may not do (``gguf_construct.security.chat_templates``): rule ids and the names they look for."""

    source: str
    keys: str
    max_template_bytes: int
    rules: Mapping[str, str]
    introspection_attributes: tuple[str, ...]
    global_objects: tuple[str, ...]
    #: str methods whose format fields reach attributes
    format_methods: tuple[str, ...]
    #: what a template may make a renderer do: max_loop_iterations, max_repeat_chars, max_number_bits
    limits: Mapping[str, int]
    attribute_callables: tuple[str, ...]
    #: the known-safe subset: statements, filters (with their attribute arguments), tests, methods, globals and
    #: attribute names (read by ``gguf_construct.security.templates.table``)
    allowlist: Mapping[str, Any]


@dataclass(frozen=True)
class RuleRow:
    """One rejection rule of ``schema/rules.json``: the FormatError subclass's name, a key of ``sources``, one
    line of documentation, and (when no generated input breaks it) why."""

    class_name: str
    spec: str
    doc: str
    breaker: str | None = None
    #: "request": the refusal is about what was asked (arguments, paths, environment, network), not a model's bytes
    fault: str = "input"


@dataclass(frozen=True)
class RulesTable:
    """Every rule id an input can be rejected with (``limit.*`` and ``template.*`` come from their own tables)."""

    source: str
    sources: Mapping[str, str]
    rules: Mapping[str, RuleRow]
    #: limit name → why no breaker crafts an input for it
    limit_breaker: Mapping[str, str]
    template_breaker: str | None


@dataclass(frozen=True)
class ValueTypesTable:
    source: str
    types: tuple[ValueType, ...]


def _int_keys(m: Mapping[str, Any]) -> Mapping[int, Any]:
    return MappingProxyType({int(k): v for k, v in m.items()})


def _legacy(d: Mapping[str, Any]) -> LegacyTable:
    rwkv = d["rwkv"]
    return LegacyTable(
        source=d["source"],
        magics=MappingProxyType({name: LegacyMagic(**m) for name, m in d["magics"].items()}),
        ggjt_alignment=d["ggjt_alignment"],
        llama_loader_types=frozenset(d["llama_loader_types"]),
        llama_loader_types_note=d["llama_loader_types_note"],
        max_n_dims=d["max_n_dims"],
        max_n_dims_note=d["max_n_dims_note"],
        profiles=d["profiles"],
        profiles_note=d["profiles_note"],
        detect_order=d["detect_order"],
        type_tables=MappingProxyType({k: _int_keys(v) for k, v in d["type_tables"].items() if isinstance(v, Mapping)}),
        type_tables_note=d["type_tables_note"],
        rwkv=RwkvTypes(
            rwkv["magic"],
            rwkv["versions"],
            _int_keys({v: _int_keys(t) for v, t in rwkv["types"].items()}),
            _int_keys(rwkv["removed"]),
            rwkv["note"],
        ),
    )


def _later(stem: str, d: Mapping[str, Any]) -> Any:
    """The record of a table no file reader needs (its classes live in ``table_records``, imported here)."""
    from . import table_records

    return table_records.BUILDERS[stem](d)


_BUILDERS: dict[str, Any] = {
    "arch_tensors": partial(_later, "arch_tensors"),
    "file_types": lambda d: FileTypesTable(d["source"], tuple(FileType(**r) for r in d["file_types"])),
    "fork_types": partial(_later, "fork_types"),
    "ggml_types": lambda d: GGMLTypesTable(d["source"], tuple(GGMLType(**r) for r in d["types"]), d["max_dims"], d["max_dims_source"]),
    "keys": lambda d: KeysTable(d["source"], tuple(StandardKey(**k) for k in d["keys"]), d["architectures"], d["layer_arrays"]),
    "legacy": _legacy,
    "limits": lambda d: LimitsTable(d["source"], tuple(Limit(**r) for r in d["limits"])),
    "memory": partial(_later, "memory"),
    "migrate": partial(_later, "migrate"),
    "mlx_quant_types": partial(_later, "mlx_quant_types"),
    "quantize": partial(_later, "quantize"),
    "rules": lambda d: RulesTable(
        d["source"],
        d["sources"],
        MappingProxyType(
            {k: RuleRow(r["class"], r["spec"], r["doc"], r.get("breaker"), r.get("fault", "input")) for k, r in d["rules"].items()}
        ),
        d["limit_breaker"],
        d["template_breaker"],
    ),
    "rwkv_llama": partial(_later, "rwkv_llama"),
    "safetensors_dtypes": partial(_later, "safetensors_dtypes"),
    "template_rules": lambda d: TemplateRules(**d),
    "value_types": lambda d: ValueTypesTable(d["source"], tuple(ValueType(**r) for r in d["types"])),
}

#: The name of every table ``load_table`` knows (the files of ``schema/`` without ``.json``).
TABLE_NAMES: tuple[str, ...] = tuple(_BUILDERS)
TableName = Literal[
    "arch_tensors",
    "file_types",
    "fork_types",
    "ggml_types",
    "keys",
    "legacy",
    "limits",
    "memory",
    "migrate",
    "mlx_quant_types",
    "quantize",
    "rules",
    "rwkv_llama",
    "safetensors_dtypes",
    "template_rules",
    "value_types",
]


@overload
def load_table(name: Literal["arch_tensors"]) -> ArchTensorsTable: ...
@overload
def load_table(name: Literal["file_types"]) -> FileTypesTable: ...
@overload
def load_table(name: Literal["fork_types"]) -> ForkTypesTable: ...
@overload
def load_table(name: Literal["ggml_types"]) -> GGMLTypesTable: ...
@overload
def load_table(name: Literal["keys"]) -> KeysTable: ...
@overload
def load_table(name: Literal["legacy"]) -> LegacyTable: ...
@overload
def load_table(name: Literal["limits"]) -> LimitsTable: ...
@overload
def load_table(name: Literal["memory"]) -> MemoryTable: ...
@overload
def load_table(name: Literal["migrate"]) -> MigrateTable: ...
@overload
def load_table(name: Literal["mlx_quant_types"]) -> MlxQuantTypesTable: ...
@overload
def load_table(name: Literal["quantize"]) -> QuantizeTable: ...
@overload
def load_table(name: Literal["rules"]) -> RulesTable: ...
@overload
def load_table(name: Literal["rwkv_llama"]) -> RwkvLlamaTable: ...
@overload
def load_table(name: Literal["safetensors_dtypes"]) -> SafetensorsDtypesTable: ...
@overload
def load_table(name: Literal["template_rules"]) -> TemplateRules: ...
@overload
def load_table(name: Literal["value_types"]) -> ValueTypesTable: ...
@overload
def load_table(name: str) -> Any: ...
def load_table(name: str) -> Any:
    """``schema/<name>.json`` as its frozen, typed record, read once (``name`` with or without ``.json``).
    KeyError for a name that is no table."""
    stem = name[:-5] if name.endswith(".json") else name
    if stem not in _BUILDERS:
        raise KeyError(f"no schema table {name!r} (tables: {', '.join(TABLE_NAMES)})")
    return _table(stem)


@cache
def _table(stem: str) -> Any:
    return _BUILDERS[stem](_load(stem + ".json"))


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


class UserTypesWarning(UserWarning):
    """The ``GGUF_CONSTRUCT_TYPES`` file cannot be used: the built-in table is used alone."""


def _ggml_types() -> list[GGMLType]:
    """ggml's table, plus the user's (``GGUF_CONSTRUCT_TYPES``) when set. A user table that cannot be used (not
    readable, not JSON, a record that clashes) is a ``UserTypesWarning`` naming the rule, the file and the record,
    and the built-in table alone is used: an environment variable must not stop every import of the package."""
    known = list(load_table("ggml_types").types)
    path = os.environ.get(USER_TYPES_ENV)
    if not path:
        return known
    try:
        return known + user_types(path, known)
    except InvalidValueError as e:
        warnings.warn(f"{e.describe()}; using the built-in type table only", UserTypesWarning, stacklevel=2)
        return known


GGML_TYPES: _Table[GGMLType] = _Table(_ggml_types())
VALUE_TYPES: _Table[ValueType] = _Table(load_table("value_types").types)
FILE_TYPES: dict[int, str] = {r.id: r.name for r in load_table("file_types").file_types}
#: value type name → (least, most) for every integer value type (derived from ``schema/value_types.json``).
INT_RANGES: Mapping[str, tuple[int, int]] = MappingProxyType({vt.name: r for vt in VALUE_TYPES.values() if (r := vt.int_range)})
#: The alignment of a GGUF file without ``general.alignment`` (``schema/keys.json``).
DEFAULT_ALIGNMENT: int = next(k.default for k in load_table("keys").keys if k.key == "general.alignment")
#: The most dimensions a ggml tensor has (GGML_MAX_DIMS, ``schema/ggml_types.json``).
GGML_MAX_DIMS: int = load_table("ggml_types").max_dims


def ggml_type_of(value: int | str | GGMLType) -> GGMLType:
    """The record of a tensor type as a file holds it (an id, or the schema's enum name); an id no table
    defines gives ``GGMLType.unknown(id)``. A name nobody defines raises ``KeyError``."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool) and int(value) not in GGML_TYPES:
        return GGMLType.unknown(int(value))
    return GGML_TYPES.lookup(value)


STR = VALUE_TYPES.lookup("str")
ARR = VALUE_TYPES.lookup("arr")
BOOL = VALUE_TYPES.lookup("bool")


def standard_keys() -> list[StandardKey]:
    return list(load_table("keys").keys)


@cache
def _key_patterns() -> list[tuple[re.Pattern[str] | str, StandardKey]]:
    """Each standard key in table order: a regex for a key with ``{arch}``/``{id}`` placeholders, else the key
    itself (compared as a string: compiling a regex for each of them cost ``set`` more than its edit)."""
    out: list[tuple[re.Pattern[str] | str, StandardKey]] = []
    for k in standard_keys():
        if "{" not in k.key:
            out.append((k.key, k))
            continue
        rx = re.escape(k.key).replace(r"\{arch\}", "(?P<arch>[a-z0-9_-]+)").replace(r"\{id\}", "[0-9]+")
        out.append((re.compile(rx + "$"), k))
    return out


def standard_key(key: str, architecture: str | None = None) -> StandardKey | None:
    """The registry entry for a concrete key, or None. ``{arch}`` keys match only ``architecture``'s prefix."""
    for rx, k in _key_patterns():
        if isinstance(rx, str):
            if rx == key:
                return k
            continue
        m = rx.match(key)
        if m and (architecture is None or m.groupdict().get("arch") in (None, architecture)):
            return k
    return None


def architecture_required_keys(architecture: str) -> list[str]:
    """The keys the spec requires for an architecture (empty for architectures it does not describe)."""
    return [f"{architecture}.{k}" for k in load_table("keys").architectures.get(architecture, ())]


def template_rules() -> TemplateRules:
    """``schema/template_rules.json``: the rules of chat template scanning and the names they look for."""
    return load_table("template_rules")


def quantize_rules() -> QuantizeTable:
    """llama-quantize's default choice of which tensors to quantize and to what (``schema/quantize.json``)."""
    return load_table("quantize")
