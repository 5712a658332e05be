"""The safetensors file format (HF safetensors, MLX, Ollama's tensor blobs) as a construct declaration.

``SAFETENSORS`` parses a whole file into a ``Container``::

    header_size   u64 little-endian: N, the header's length in bytes
    header        N bytes of UTF-8 JSON (may end in padding): a ``Header`` keeping the exact bytes,
                  parsed into a dict only when asked (``header.json``, ``header.entries``, ``header.metadata``)
    data_offset   computed: 8 + N, where the data region starts in the file
    data          the data region, a zero-copy memoryview; each tensor's ``data_offsets`` [begin, end) count
                  from its start

and builds such a container back to the same bytes (the header's key order, spacing and padding are kept
because its bytes are). Building from a fresh object (``tensors`` and ``metadata``, no ``header``) lays out
the header and the data the way one of three writers does (``style``, declared in ``safetensors_writer.py``):

- ``"safetensors"``: the HF library — ``__metadata__`` first, data sorted by dtype (descending enum order)
  then name, keys in data order, header padded with spaces to a multiple of 8;
- ``"mlx"``: ``mx.save_safetensors`` — every key sorted, entry fields sorted (``data_offsets, dtype, shape``),
  ``"__metadata__":null`` when there is none, no padding, data in the order given;
- ``"ollama"``: Ollama's Go writer — keys sorted, entry fields ``dtype, shape, data_offsets``, Go's JSON
  escapes, padded with spaces to a multiple of 8, data in the order given.

Sources: the writers in ``huggingface/safetensors`` ``safetensors/src/tensor.rs`` at 24b0b28, ``ml-explore/mlx``
``mlx/io/safetensors.cpp`` at 846d176 and ``ollama/ollama`` ``x/safetensors/extractor.go`` at fb30760; the
dtypes come from ``schema/safetensors_dtypes.json``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from itertools import chain
from operator import itemgetter
from typing import Any, NamedTuple

import numpy as np
from construct import Construct, Container, Int64ul, Rebuild, SizeofError, Struct, Tell, this

from ...core import rules
from ...core.limits import breach, limit
from ...core.shapes import INTP_MAX, NUMPY_MAX_DIMS, element_count, shape_problem
from ...errors import InvalidValueError
from ..base import FileConstruct, as_stream, tensor_bytes
from ..fields import Remainder
from .dtypes import METADATA_KEY, dtypes
from .writers import header_and_sources

#: The largest header the safetensors library reads (it rejects N > 100,000,000; MLX already N >= 100,000,000).
MAX_HEADER_SIZE = 100_000_000
ENTRY_FIELDS = ("dtype", "shape", "data_offsets")


# -- the header ------------------------------------------------------------------------------------------
class Entry(NamedTuple):
    """One tensor entry of the header: dtype, shape (numpy order) and [begin, end) in the data region (a named
    tuple: made per tensor on first access, so it must be cheap)."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    begin: int
    end: int

    @property
    def nbytes(self) -> int:
        return self.end - self.begin

    @property
    def n_elements(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n


@dataclass(frozen=True)
class EntryTable:
    """Every tensor entry of a header as columns, checked at once: names and the JSON values in header order,
    ``begin``/``end`` as int64 arrays. ``entry(i)`` makes one ``Entry``."""

    names: list[str]
    dtypes: list[str]
    shapes: list[list[int]]
    offsets: list[list[int]]
    begin: np.ndarray
    end: np.ndarray

    def entry(self, i: int) -> Entry:
        # tuple.__new__ skips the named tuple's Python-level __new__ (a third of the cost of a tensor access)
        return tuple.__new__(Entry, (self.names[i], self.dtypes[i], tuple(self.shapes[i]), *self.offsets[i]))

    @classmethod
    def of(cls, entries: Mapping[str, Entry]) -> EntryTable:
        es = list(entries.values())
        begin = np.array([e.begin for e in es], np.int64)
        end = np.array([e.end for e in es], np.int64)
        return cls([e.name for e in es], [e.dtype for e in es], [list(e.shape) for e in es], [[e.begin, e.end] for e in es], begin, end)

    def placed(self, region: int) -> bool:
        """True when the non-empty tensors tile ``[0, region)`` exactly: no overlap, gap, trailing bytes or
        tensor past the end (what ``check_safetensors`` would otherwise report one by one)."""
        if len(self.end) and int(self.end.max()) > region:
            return False
        full = self.begin != self.end
        begin, end = self.begin[full], self.end[full]
        order = np.lexsort((end, begin))
        begin, end = begin[order], end[order]
        covered = np.maximum.accumulate(end) if len(end) else end
        before = np.concatenate(([0], covered[:-1]))
        return bool(np.array_equal(begin, before)) and (int(covered[-1]) if len(covered) else 0) == region


#: Elements per tensor (as log2) up to which the vectorised entry check decides alone: its int64 products and
#: byte sizes (elements × up to 64 bits) cannot overflow; bigger tensors take the exact per-entry check.
_LOG2_ELEMENTS_FAST = 56


_ENTRY_FIELDS = itemgetter(*ENTRY_FIELDS)


@cache
def _dtype_bits() -> dict[str, int]:
    return {name: d.bits for name, d in dtypes().items()}


def sound_table(top: Mapping[str, Any]) -> EntryTable | None:
    """The tensor entries of a parsed header as an ``EntryTable`` when every one is sound on its own (what
    ``entry_problems`` checks: known dtype, a shape of ints numpy can hold, ``0 <= begin <= end`` spanning
    exactly the bytes of the shape) — decided with a few list and numpy passes instead of per-entry Python.
    None when some entry may be wrong: the caller runs ``entry_problems`` to say what."""
    names, values = list(top), list(top.values())  # C-speed passes (map, itemgetter) rather than comprehensions
    if METADATA_KEY in top:
        at = names.index(METADATA_KEY)
        del names[at], values[at]
    try:
        fields = list(map(_ENTRY_FIELDS, values))
        names_dtypes, shapes, offsets = (list(column) for column in zip(*fields)) if fields else ([], [], [])
        bits = np.fromiter(map(_dtype_bits().__getitem__, names_dtypes), np.int64, len(names_dtypes))
    except (KeyError, TypeError, IndexError):
        return None
    if not {list} >= set(map(type, shapes)) | set(map(type, offsets)) or not {2} >= set(map(len, offsets)):
        return None
    flat_offsets, flat_dims = list(chain.from_iterable(offsets)), list(chain.from_iterable(shapes))
    if not {int} >= set(map(type, flat_offsets)) | set(map(type, flat_dims)):
        return None  # bools, floats, strings, nulls
    try:
        pairs = np.array(flat_offsets, np.int64).reshape(-1, 2)
        dims = np.array(flat_dims, np.int64)
    except OverflowError:
        return None
    begin, end = pairs[:, 0], pairs[:, 1]
    ndim = np.fromiter(map(len, shapes), np.int64, len(shapes))
    if len(names) and (int(ndim.max()) > min(limit("dimensions"), NUMPY_MAX_DIMS) or (begin < 0).any() or (end < begin).any()):
        return None
    if len(dims) and (int(dims.min()) < 0 or int(dims.max()) > INTP_MAX):
        return None
    rows = np.repeat(np.arange(len(names)), ndim)
    log2 = np.bincount(rows, weights=np.log2(np.maximum(dims, 1)), minlength=len(names))
    if len(names) and float(log2.max()) > _LOG2_ELEMENTS_FAST:
        return None
    padded = np.ones((len(names), int(ndim.max()) if len(names) else 0), np.int64)
    padded[rows, np.arange(len(dims)) - np.repeat(np.cumsum(ndim) - ndim, ndim)] = dims
    total_bits = padded.prod(axis=1) * bits
    if (total_bits % 8).any() or not np.array_equal(total_bits // 8, end - begin):
        return None
    return EntryTable(names, names_dtypes, shapes, offsets, begin, end)


class _Object(dict):
    """A JSON object that remembers its (key, value) pairs in file order, duplicates included."""

    __slots__ = ("pairs",)  # no per-object __dict__: a header of 60k entries is 60k of these
    pairs: list[tuple[str, Any]]


def _object(pairs: list[tuple[str, Any]]) -> _Object:
    out = _Object(pairs)
    out.pairs = pairs
    return out


def _every_pair_kept(top: dict[str, Any], counted: Any) -> bool:
    """True when the parsed ``top`` holds every object and key/value pair the text has (``counted``, a
    ``untrusted.Structure``): all objects are ``top`` or its values, and no key was repeated in any of them."""
    inner = [v for v in top.values() if type(v) is dict]
    return 1 + len(inner) == counted.objects and len(top) + sum(map(len, inner)) == counted.pairs


def _is_int(x: Any) -> bool:
    return type(x) is int


#: data_offsets are u64 in the safetensors library (a larger number is not one it can read)
OFFSET_MAX = 2**64 - 1


def entry_problems(name: str, value: Any) -> list[tuple[str, str]]:
    """(rule, message) for everything wrong with one tensor entry on its own (not its place in the data)."""
    if _entry_is_sound(value):  # the common case, decided without building messages
        return []
    if not isinstance(value, dict):
        return [("header.entry", f"entry is a JSON {_kind(value)}, not an object")]
    missing = [f for f in ENTRY_FIELDS if f not in value]
    if missing:
        return [("header.entry", f"entry has no {', '.join(missing)}")]
    out: list[tuple[str, str]] = []
    dtype, shape, offsets = value["dtype"], value["shape"], value["data_offsets"]
    known = dtypes().get(dtype) if isinstance(dtype, str) else None
    if known is None:
        out.append(("tensor.dtype", f"unknown dtype {dtype!r} (dtype names are case-sensitive)"))
    if not isinstance(shape, list) or not all(_is_int(d) for d in shape):
        out.append(("tensor.shape", f"shape {json.dumps(shape)} is not a list of integers"))
    elif any(d < 0 for d in shape):
        out.append(("tensor.shape", f"shape {shape} has a negative dimension"))
    elif shape_problem(shape):
        out.append(shape_problem(shape))  # type: ignore[arg-type]
    if not isinstance(offsets, list) or len(offsets) != 2 or not all(_is_int(o) for o in offsets):
        out.append(("tensor.data_offsets", f"data_offsets {json.dumps(offsets)} is not a pair of integers"))
    elif offsets[0] < 0 or offsets[1] < offsets[0]:
        out.append(("tensor.data_offsets", f"data_offsets {offsets}: need 0 <= begin <= end"))
    elif offsets[1] > OFFSET_MAX:
        out.append(("tensor.data_offsets", f"data_offsets {offsets}: past {OFFSET_MAX}, the largest u64"))
    if out or known is None:
        return out
    n = element_count(shape)
    size = known.nbytes(n)
    if size is None:
        out.append(("tensor.size", f"{n} elements of {dtype} do not fill whole bytes"))
    elif offsets[1] - offsets[0] != size:
        out.append(("tensor.size", f"data_offsets {offsets} span {offsets[1] - offsets[0]} bytes; shape {shape} of {dtype} needs {size}"))
    return out


def _entry_is_sound(value: Any) -> bool:
    """True for an entry with a known dtype, a shape of ints >= 0 and offsets that span exactly its bytes."""
    try:
        dtype, shape, (begin, end) = value["dtype"], value["shape"], value["data_offsets"]
        known = dtypes()[dtype]
    except (KeyError, TypeError, ValueError):
        return False
    if type(shape) is not list or type(begin) is not int or type(end) is not int or not 0 <= begin <= end <= OFFSET_MAX:
        return False
    if len(shape) > NUMPY_MAX_DIMS:
        return False
    n = 1
    for d in shape:
        if type(d) is not int or d < 0 or d > INTP_MAX:
            return False
        n *= d
    return known.nbytes(n) == end - begin and shape_problem(shape) is None


def _kind(x: Any) -> str:
    return {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}.get(type(x), "number")


class Header(Mapping[str, Any]):
    """The JSON header: its exact bytes (``raw``), parsed into a dict on first use.

    As a mapping it is the parsed top-level object (the last value wins for a duplicate key, as both MLX and
    the safetensors library read it). ``entries`` and ``metadata`` check what they return and raise a
    FormatError naming the tensor, the rule and the key's byte offset.
    """

    def __init__(self, raw: bytes, offset: int = 8):
        self.raw = bytes(raw)
        self.offset = offset  # where the header starts in the file
        self._json: _Object | None = None
        self._problems: dict[str, list[tuple[str, str]]] | None = None
        self._entries: dict[str, Entry] | None = None
        self._sound: EntryTable | None | bool = False  # False: not decided yet
        self._table: EntryTable | None = None
        self._finds = 0  # key_offset searches so far: each rescans the header, so they are rationed

    # -- the parsed object ------------------------------------------------------------------------------
    @property
    def text(self) -> str:
        try:
            return self.raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise rules.HEADER_UTF8.error(f"header is not UTF-8 ({e.reason})", path="header", offset=self.offset + e.start) from None

    @property
    def json(self) -> _Object:
        """The top-level JSON object (``pairs`` lists its keys in file order, duplicates included)."""
        if self._json is None:
            from ...core.untrusted import loads, loads_counted

            self.text  # noqa: B018 -- a header that is not UTF-8 is reported as such (header.utf8)
            body = self.raw.rstrip(b" \0")
            try:
                value, counted = loads_counted(body, what="header", path="header", offset=self.offset)
                if isinstance(value, dict) and _every_pair_kept(value, counted):
                    value = _object(list(value.items()))
                else:  # duplicate keys, or objects deeper than entries: parse again keeping every pair
                    value = loads(body, what="header", path="header", offset=self.offset, object_pairs_hook=_object)
            except InvalidValueError as e:
                raise rules.HEADER_JSON.error(e.message, path=e.path, offset=e.offset) from None
            if not isinstance(value, _Object):  # every JSON object is one (object_pairs_hook)
                raise rules.HEADER_OBJECT.error(f"header is a JSON {_kind(value)}, not an object", path="header", offset=self.offset)
            self._json = value
        return self._json

    @property
    def padding(self) -> bytes:
        """The bytes after the JSON text (spaces from the HF and Go writers; none from MLX)."""
        body = self.raw.rstrip(b" \0")
        return self.raw[len(body) :]

    def __getitem__(self, key: str) -> Any:
        return self.json[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.json)

    def __len__(self) -> int:
        return len(self.json)

    #: How many ``key_offset`` searches one header gets: each is a scan of the header, so an error message per
    #: entry for 60k bad entries must not rescan it 60k times; later ones report no offset.
    MAX_KEY_SEARCHES = 64

    def key_offset(self, key: str) -> int | None:
        """The file offset of ``key``'s first occurrence as a JSON string in the header (None if not found, or
        when this header's ration of searches is spent)."""
        self._finds += 1
        if self._finds > self.MAX_KEY_SEARCHES:
            return None
        at = self.raw.find(json.dumps(key, ensure_ascii=False).encode())
        return None if at < 0 else self.offset + at

    def duplicates(self) -> list[str]:
        """Top-level keys that occur more than once."""
        seen: set[str] = set()
        out = []
        for k, _ in self.json.pairs:
            if k in seen and k not in out:
                out.append(k)
            seen.add(k)
        return out

    # -- checked views -----------------------------------------------------------------------------------
    @property
    def metadata(self) -> dict[str, str] | None:
        """``__metadata__`` (None when absent or null); every value must be a string."""
        md = self.json.get(METADATA_KEY)
        if md is None:
            return None
        where: dict[str, Any] = dict(path=f"header.{METADATA_KEY}", offset=self.key_offset(METADATA_KEY))
        if not isinstance(md, dict):
            raise rules.METADATA_OBJECT.error(f"{METADATA_KEY} is a JSON {_kind(md)}, not an object", **where)
        for k, v in md.items():
            if not isinstance(v, str):
                raise rules.METADATA_VALUE.error(f"{METADATA_KEY}[{k!r}] is a JSON {_kind(v)}, not a string", **where)
        return dict(md)

    @property
    def problems(self) -> dict[str, list[tuple[str, str]]]:
        """Tensor name → what is wrong with its entry on its own (``entry_problems``), for every tensor key."""
        if self._problems is None:
            if self.sound is not None:
                self._problems = dict.fromkeys(self.sound.names, [])
            else:
                self._problems = {name: entry_problems(name, value) for name, value in self.json.items() if name != METADATA_KEY}
        return self._problems

    @property
    def sound(self) -> EntryTable | None:
        """The entries as an ``EntryTable`` when every one is sound on its own (vectorised check), else None."""
        if self._sound is False:
            self._sound = sound_table(self.json)
        return self._sound if isinstance(self._sound, EntryTable) else None  # False: not computed yet

    @property
    def table(self) -> EntryTable:
        """Every tensor entry as columns, each checked on its own; the first bad entry raises (as ``entries``)."""
        if len(self.json) - (METADATA_KEY in self.json) > limit("tensor_count"):
            raise breach("tensor_count", f"{len(self.json)} tensor entries", path="header", offset=self.offset)
        if self.sound is not None:
            return self.sound
        if self._table is None:
            self._table = EntryTable.of(self._checked_entries())
        return self._table

    @property
    def entries(self) -> dict[str, Entry]:
        """Tensor name → Entry in header order (duplicates: the last one), each entry checked on its own."""
        if self._entries is None:
            table = self.table
            self._entries = {name: table.entry(i) for i, name in enumerate(table.names)}
        return self._entries

    def _checked_entries(self) -> dict[str, Entry]:
        """The per-entry check: raises for the first bad entry, with its own message."""
        out = {}
        for name, value in self.json.items():
            if name == METADATA_KEY:
                continue
            problems = entry_problems(name, value)  # stops at the first bad entry: no list of 60k messages
            if problems:
                rule, message = problems[0]
                raise rules.rule(rule).error(message, path=f"header[{name!r}]", offset=self.key_offset(name))
            begin, end = value["data_offsets"]
            out[name] = Entry(name, value["dtype"], tuple(value["shape"]), begin, end)
        return out

    def __repr__(self) -> str:
        return f"Header({len(self.raw)} bytes)"


class HeaderJSON(Construct):
    """``N`` bytes of JSON: parses to a ``Header`` (exact bytes, lazily decoded); builds a Header's bytes, or
    encodes a plain dict compactly."""

    def __init__(self, length: Any):
        super().__init__()
        self.length = length

    def _parse(self, stream, context, path):
        s = as_stream(stream)
        n = context.header_size
        if n == 0:
            raise rules.HEADER_SIZE.error("header length is 0 (the header must hold at least '{}')", path="header_size", offset=0)
        if n > limit("header_bytes"):
            raise breach("header_bytes", f"header length {n}", path="header_size", offset=0)
        s.need(n, rules.HEADER_SIZE, f"a header of {n} bytes", "header_size")
        start = s.pos
        raw = bytes(s.view[start : start + n])
        s.pos += n
        return Header(raw, start)

    def _build(self, obj, stream, context, path):
        stream.write(header_bytes(obj))
        return obj

    def _sizeof(self, context, path):
        raise SizeofError("the header has no fixed size", path=path)


def header_bytes(obj: Any) -> bytes:
    """The bytes of a header given as a Header, bytes or a dict (encoded compactly, no padding)."""
    if isinstance(obj, Header):
        return obj.raw
    if isinstance(obj, (bytes, bytearray, memoryview)):
        return bytes(obj)
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode()


class DataRegion(Remainder):
    """The bytes after the header as a zero-copy memoryview; built from a buffer, or from a list of tensor
    data sources written back to back (each bytes-like, a numpy array, or a callable returning one)."""

    def _build(self, obj, stream, context, path):
        if isinstance(obj, list):
            for source in obj:
                stream.write(tensor_bytes(source))
            return obj
        return super()._build(obj, stream, context, path)


SAFETENSORS_LAYOUT = Struct(
    "header_size" / Rebuild(Int64ul, lambda ctx: len(header_bytes(ctx.header))),
    "header" / HeaderJSON(this.header_size),
    "data_offset" / Tell,
    "data" / DataRegion(),
)


class SafetensorsConstruct(FileConstruct):
    """A whole safetensors file: ``SAFETENSORS_LAYOUT`` with the parse guarded and fresh objects laid out."""

    what = "a safetensors file"

    def _parse(self, stream, context, path):
        s = as_stream(stream)
        if s.remaining < 8:
            raise rules.HEADER_TRUNCATED.error(
                f"a safetensors file starts with an 8-byte header length; {s.remaining} bytes given", path="header_size", offset=s.pos
            )
        return SAFETENSORS_LAYOUT._parsereport(s, context, path)

    def _build(self, obj, stream, context, path):
        if obj.get("header") is None:
            raw, sources = header_and_sources(obj["tensors"], obj.get("metadata"), obj.get("style", "safetensors"))
            obj = Container(header=Header(raw), data=sources)
        elif obj.get("data") is None:
            obj = Container(obj, data=b"")
        return SAFETENSORS_LAYOUT._build(obj, stream, context, path)


#: The safetensors file format: ``SAFETENSORS.parse(b)``, ``SAFETENSORS.build(container)``.
SAFETENSORS = SafetensorsConstruct()


def looks_like_safetensors(head: bytes) -> bool:
    """True for a prefix that starts like a safetensors file: a header length in (0, limit], then ``{``
    (after optional whitespace, which both readers accept)."""
    if len(head) < 9:
        return False
    n = int.from_bytes(head[:8], "little")
    if not 0 < n <= MAX_HEADER_SIZE:
        return False
    body = head[8 : 8 + n].lstrip(b" \t\r\n")
    return body[:1] == b"{"


def tensor_array(entry: Entry, data: memoryview | np.ndarray) -> np.ndarray:
    """A tensor's values as a read-only numpy view of the data region (BF16 as uint16, F8/F4/F6 as uint8;
    sub-byte dtypes as flat bytes)."""
    d = dtypes()[entry.dtype]
    if isinstance(data, np.ndarray):  # the region as uint8 already
        buf = data[entry.begin : entry.end]
    else:
        buf = np.frombuffer(data, dtype=np.uint8, count=entry.nbytes, offset=entry.begin) if entry.nbytes else np.empty(0, np.uint8)
    if d.bits < 8 or d.bits % 8:
        out = buf
    else:
        out = buf.view(d.storage).reshape(entry.shape)
    out.flags.writeable = False
    return out
