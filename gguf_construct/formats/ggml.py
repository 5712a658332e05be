"""The formats before GGUF — unversioned GGML, GGMF v1, GGJT v1–v3 — as construct declarations.

Layout (../shared/reference/legacy-formats.md §2, §4)::

    u32 magic                        'ggml' | 'ggmf' | 'ggjt' (stored as the u32, so 'lmgg' | 'fmgg' | 'tjgg' on disk)
    u32 version                      absent for 'ggml'; 1 for 'ggmf'; 1, 2, 3 for 'ggjt'
    hyper-parameters …               a *profile*: llama.cpp's, whisper.cpp's, the ggml examples' (schema/legacy.json)
    vocab[]: {len, text, score?}     score only in GGMF/GGJT (and replit)
    tensors[] until end of file: {n_dims, name_len, type, ne[n_dims], name, _padding (GGJT: to 32 bytes from the
                                  start of the file), data}

Nothing in a 'ggml' file names its profile: ``GGML.parse(data, profile="whisper")`` chooses one, and without it
each profile is tried in turn and the first that reads the whole file with plausible hyper-parameters is kept.
The per-tensor type ids mean different block layouts in different eras (GGJT version, or ``ftype // 1000`` for
the ggml examples); the schema sizes tensor data from the era's table (``type_table``) and keeps it as a
zero-copy view: decoding old layouts is :mod:`gguf_construct.quants.retired`'s job.

The parse result is a ``Container`` in the reference's field names plus ``format`` ('ggml'|'ggmf'|'ggjt'),
``profile`` and ``type_table``; building it gives the same bytes back (``name_len``, ``n_dims`` and vocab counts
are recomputed, GGJT padding is computed from the position).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np
from construct import (
    Computed,
    Const,
    Construct,
    Container,
    Float32l,
    Int32sl,
    Int32ul,
    Rebuild,
    SizeofError,
    Struct,
    Tell,
    len_,
    this,
)

from ..errors import FormatError, InvalidValueError, LimitError, TruncatedError, UnknownFormatError, UnsupportedTypeError
from ..limits import breach, limit
from ..shapes import element_count, shape_problem
from ..tables import GGML_TYPES, LegacyTable, load_table
from .base import FileConstruct, as_stream, context_path, guarded, readable_path
from .fields import AlignPadding, CheckedArray

#: Longest tensor name or token accepted (llama.cpp's migrator refuses names of 4096 bytes and more).
MAX_NAME_LENGTH = 4095


def legacy_tables() -> LegacyTable:
    """schema/legacy.json: magics, hyper-parameter profiles, per-era type tables, rwkv.cpp's types."""
    return load_table("legacy")


#: More dimensions than this cannot be honest in any legacy file (ggml has at most 4).
MAX_DIMS = legacy_tables().max_n_dims
MAGICS: dict[str, bytes] = {name: m.bytes.encode() for name, m in legacy_tables().magics.items()}
CONTAINERS = ("ggml", "ggmf", "ggjt")
PROFILES: tuple[str, ...] = tuple(legacy_tables().profiles)


# -- tensor types by era ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class LegacyType:
    """A tensor type id as one era's file means it: ``layout`` names the block layout ('q4_0.v1' for a retired
    one, the ggml name for today's), ``ggml_name`` the type it is a version of."""

    id: int
    layout: str
    ggml_name: str
    elements: int
    type_size: int
    retired: bool

    def nbytes(self, n_elements: int) -> int:
        return n_elements // self.elements * self.type_size


@cache
def legacy_type(layout: str, type_id: int) -> LegacyType:
    """The LegacyType of block layout ``layout`` (retired or current) stored under ``type_id``."""
    from ..quants.retired import RETIRED

    if layout in RETIRED:
        r = RETIRED[layout]
        return LegacyType(type_id, layout, r.ggml_name, r.elements, r.type_size, True)
    t = GGML_TYPES.lookup(layout)
    return LegacyType(type_id, t.name, t.name, t.block_size, t.type_size, False)


def type_table(name: str) -> dict[int, str]:
    """id → layout for a table of schema/legacy.json (``current`` is today's ggml ids)."""
    if name == "current":
        return {t.id: t.name for t in GGML_TYPES.values() if not t.removed}
    return dict(legacy_tables().type_tables[name])


def resolve_type(table: str, type_id: int, where: str = "", offset: int | None = None) -> LegacyType:
    """The type ``type_id`` means in ``table``; UnsupportedTypeError (naming the era) when it means nothing."""
    layouts = type_table(table) if not table.startswith("rwkv") else rwkv_type_table(int(table[4:]))
    if type_id not in layouts:
        raise UnsupportedTypeError("tensor.type", f"type id {type_id} is not defined in {describe_table(table)}", path=where, offset=offset)
    return legacy_type(layouts[type_id], type_id)


def rwkv_type_table(version: int) -> Mapping[int, str]:
    return legacy_tables().rwkv.types[version]


def describe_table(table: str) -> str:
    return {
        "pre_v2": "files before GGJT v2 (GGML, GGMF, GGJT v1, quantization version 0)",
        "pre_v2_ftype7": "files before GGJT v2 with header ftype 7 (2023-04-25/26 ids)",
        "v2": "GGJT v2 / quantization version 1 files",
        "current": "GGJT v3 / current ggml",
        "rwkv100": "rwkv.cpp version 100 files",
        "rwkv101": "rwkv.cpp version 101 files",
    }.get(table, table)


def table_for(fmt: str, version: int | None, profile: str, hparams: Any) -> str:
    """Which type table a file's tensors use: by container and version for llama.cpp, by ``ftype // 1000``
    (the quantization version) for the ggml examples and whisper.cpp (reference §3.7)."""
    era = legacy_tables().profiles[profile]["quant_era"]
    if era == "current":
        return "current"
    if era == "container":
        if fmt == "ggjt" and version == 3:
            return "current"
        if fmt == "ggjt" and version == 2:
            return "v2"
        return "pre_v2_ftype7" if int(hparams.get("ftype", -1)) == 7 else "pre_v2"
    qntvr = int(hparams.get("ftype", 0)) // 1000
    if qntvr not in (0, 1, 2):
        raise UnsupportedTypeError("hparams.ftype", f"quantization version {qntvr} (ftype {hparams.get('ftype')}) is not 0, 1 or 2", path="hparams.ftype")
    return ("pre_v2", "v2", "current")[qntvr]


# -- custom fields ----------------------------------------------------------------------------------------
def _find(context: Any, key: str) -> Any:
    """``key`` in this context or the nearest enclosing one."""
    while context is not None:
        if key in context:
            return context[key]
        context = context.get("_")
    raise KeyError(key)


class LegacyName(Construct):
    """``u8 name[name_len]``: UTF-8 text, no terminator; the length comes from a sibling field."""

    def __init__(self, length: Any, rule: str, text: bool = True, least: int = 0):
        super().__init__()
        self.length = length
        self.rule = rule
        self.text = text
        self.least = least  # 1 for tensor names: no reader can look up a tensor without a name

    def _parse(self, stream, context, path):
        s = as_stream(stream)
        n = self.length(context) if callable(self.length) else context[self.length]
        if n < self.least or n > MAX_NAME_LENGTH:
            raise LimitError(self.rule, f"length {n} is not in {self.least}..{MAX_NAME_LENGTH}", path=readable_path(path), offset=s.pos - 4)
        s.need(n, self.rule, "the name", path)
        body = s.view[s.pos : s.pos + n]
        if not self.text:
            s.pos += n
            return bytes(body)
        try:
            out = str(body, "utf-8")
        except UnicodeDecodeError as e:
            raise InvalidValueError(f"{self.rule}.utf8", f"invalid UTF-8 ({e.reason})", path=readable_path(path), offset=s.pos + e.start) from None
        s.pos += n
        return out

    def _build(self, obj, stream, context, path):
        stream.write(obj.encode("utf-8") if isinstance(obj, str) else bytes(obj))
        return obj

    def _sizeof(self, context, path):
        raise SizeofError("a name has no fixed size", path=path)


def encoded_len(obj: Any) -> int:
    return len(obj.encode("utf-8") if isinstance(obj, str) else bytes(obj))


class Dims(Construct):
    """``i32 ne[n_dims]``: the count checked (0..MAX_DIMS) before reading; every extent must be ≥ 0."""

    def __init__(self, count: Any):
        super().__init__()
        self.count = count

    def _parse(self, stream, context, path):
        s = as_stream(stream)
        n = context[self.count]
        if not 0 <= n <= MAX_DIMS:
            raise InvalidValueError("tensor.n_dims", f"n_dims {n} is not in 0..{MAX_DIMS}", path=readable_path(path), offset=s.pos - 12)
        s.need(4 * n, "tensor.truncated", f"{n} dimensions", path)
        ne = list(struct.unpack_from(f"<{n}i", s.view, s.pos))
        if any(d < 0 for d in ne):
            raise InvalidValueError("tensor.ne", f"negative dimension in {ne}", path=readable_path(path), offset=s.pos)
        problem = shape_problem(ne)
        if problem:
            raise InvalidValueError(problem[0], f"{ne}: {problem[1]}", path=readable_path(path), offset=s.pos)
        s.pos += 4 * n
        return ne

    def _build(self, obj, stream, context, path):
        stream.write(struct.pack(f"<{len(obj)}i", *obj))
        return obj

    def _sizeof(self, context, path):
        raise SizeofError("dimensions have no fixed size", path=path)


class TensorData(Construct):
    """A tensor's bytes, sized from its type (in the file's era, ``type_table``) and ``ne``: a zero-copy view.

    ``type_field``/``dims_field``/``name_field`` name the sibling fields (rwkv.cpp calls them data_type, shape, key).
    """

    def __init__(self, type_field: str = "type", dims_field: str = "ne", name_field: str = "name"):
        super().__init__()
        self.fields = (type_field, dims_field, name_field)

    def _size(self, context: Any, path: str, at: int | None) -> int:
        type_field, dims_field, _ = self.fields
        table = _find(context, "type_table")
        t = resolve_type(table, int(context[type_field]), readable_path(context_path(path, type_field)), at)
        n = element_count(context[dims_field])
        if n % t.elements:
            raise InvalidValueError("tensor.blocks", f"{n} elements are not whole {t.elements}-element blocks of {t.layout}",
                                    path=readable_path(path), offset=at)  # fmt: skip
        return t.nbytes(n)

    def _parse(self, stream, context, path):
        s = as_stream(stream)
        n = self._size(context, path, s.pos)
        s.need(n, "tensor.data", f"tensor {context.get(self.fields[2])!r}", path)
        out = s.view[s.pos : s.pos + n]
        s.pos += n
        return out

    def _build(self, obj, stream, context, path):
        n = self._size(context, path, None)
        data = obj if obj is not None else b""
        view = memoryview(np.ascontiguousarray(data)).cast("B") if isinstance(data, np.ndarray) else memoryview(data).cast("B")
        if len(view) != n:
            raise ValueError(f"tensor {context.get(self.fields[2])!r}: {len(view)} bytes of data, its type and shape need {n}")
        stream.write(view)
        return obj

    def _sizeof(self, context, path):
        raise SizeofError("tensor data has no fixed size", path=path)


class UntilEOF(CheckedArray):
    """``T items[]`` until the end of the input: no count anywhere, so a short final record is an error, never
    silently dropped. ``min_size`` is the smallest record, so a tail shorter than that is reported as such."""

    def __init__(self, subcon: Construct, min_size: int, rule: str):
        super().__init__(None, subcon, min_size, rule)

    def _parse(self, stream, context, path):
        s = as_stream(stream)
        out = []
        while s.pos < s.size:
            if s.size - s.pos < self.min_size:
                raise TruncatedError(self.rule, f"{s.size - s.pos} bytes after record {len(out)} are too few for another",
                                     path=readable_path(path), offset=s.pos)  # fmt: skip
            context._index = len(out)
            if len(out) >= limit("tensor_count"):
                raise breach("tensor_count", f"more than {len(out)} records", path=readable_path(path), offset=s.pos)
            s.charge(2, path)  # each record is a Container of some hundred bytes
            out.append(self.subcon._parsereport(s, context, context_path(path, len(out))))
        return out

    def _sizeof(self, context, path):
        raise SizeofError("records until the end have no fixed size", path=path)


class LegacyVocab(Sequence[Container]):
    """A legacy vocabulary: ``texts`` (raw bytes: legacy tokens need not be UTF-8) and ``scores`` (float32 numpy
    array, or None where the format has none). Item ``i`` is ``Container(text=…, score=…)`` as the spec has it."""

    __slots__ = ("texts", "scores")

    def __init__(self, texts: list[bytes], scores: np.ndarray | None):
        self.texts = texts
        self.scores = scores

    def __len__(self) -> int:
        return len(self.texts)

    def __getitem__(self, i):  # type: ignore[override]
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        return Container(text=self.texts[i], score=None if self.scores is None else float(self.scores[i]))

    def __iter__(self) -> Iterator[Container]:
        return (self[i] for i in range(len(self)))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, LegacyVocab):
            return NotImplemented
        same_scores = (self.scores is None and other.scores is None) or (
            self.scores is not None and other.scores is not None and np.array_equal(self.scores.view("<u4"), other.scores.view("<u4"))
        )
        return self.texts == other.texts and same_scores

    def __hash__(self) -> int:
        raise TypeError("LegacyVocab is unhashable")

    def __repr__(self) -> str:
        return f"LegacyVocab(n={len(self)}, scores={'yes' if self.scores is not None else 'no'})"

    @classmethod
    def of(cls, obj: Any, scored: bool) -> LegacyVocab:
        """A LegacyVocab from itself, a list of bytes/str, or a list of ``{text, score}`` records."""
        if isinstance(obj, LegacyVocab):
            return obj
        texts, scores = [], []
        for item in obj:
            if isinstance(item, (bytes, bytearray, str)):
                text, score = item, 0.0
            else:
                text, score = item["text"], item.get("score") or 0.0
            texts.append(text.encode("utf-8") if isinstance(text, str) else bytes(text))
            scores.append(score)
        return cls(texts, np.array(scores, dtype="<f4") if scored else None)


class VocabArray(Construct):
    """``{u32 len; u8 text[len]; f32 score?}[count]``: one tight loop, every length checked before it is used."""

    def __init__(self, count: Any, scored: Any):
        super().__init__()
        self.count = count
        self.scored = scored

    def _is_scored(self, context: Any) -> bool:
        return bool(self.scored(context) if callable(self.scored) else self.scored)

    def _parse(self, stream, context, path):
        s = as_stream(stream)
        n = self.count(context) if callable(self.count) else context[self.count]
        scored = self._is_scored(context)
        least = 8 if scored else 4
        if n < 0 or n * least > s.remaining:
            raise TruncatedError("vocab.count", f"{n} tokens need at least {max(n, 0) * least} bytes, {s.remaining} remain",
                                 path=readable_path(path), offset=s.pos)  # fmt: skip
        view, pos, size = s.view, s.pos, s.size
        unpack = struct.Struct("<I").unpack_from
        texts: list[bytes] = []
        score_at = np.empty(n if scored else 0, dtype=np.int64)
        for i in range(n):
            if pos + 4 > size:
                raise TruncatedError("vocab.truncated", f"token {i} of {n}: length past the end", path=readable_path(path), offset=pos)
            (length,) = unpack(view, pos)
            if length > MAX_NAME_LENGTH or pos + 4 + length + (4 if scored else 0) > size:
                raise TruncatedError("vocab.length", f"token {i} of {n} claims {length} bytes, {size - pos - 4} remain",
                                     path=readable_path(context_path(path, i)), offset=pos)  # fmt: skip
            pos += 4
            texts.append(bytes(view[pos : pos + length]))
            pos += length
            if scored:
                score_at[i] = pos
                pos += 4
        scores = None
        if scored:
            raw = np.frombuffer(view, dtype=np.uint8)
            scores = raw[score_at[:, None] + np.arange(4)].reshape(-1).view("<f4") if n else np.empty(0, "<f4")
        s.pos = pos
        return LegacyVocab(texts, scores)

    def _build(self, obj, stream, context, path):
        scored = self._is_scored(context)
        vocab = LegacyVocab.of(obj, scored)
        pack_len, pack_score = struct.Struct("<I").pack, struct.Struct("<f").pack
        parts = []
        scores = vocab.scores.view("<u4") if scored and vocab.scores is not None else None
        for i, text in enumerate(vocab.texts):
            parts.append(pack_len(len(text)))
            parts.append(text)
            if scored:
                parts.append(struct.pack("<I", int(scores[i])) if scores is not None else pack_score(0.0))
        stream.write(b"".join(parts))
        return obj

    def _sizeof(self, context, path):
        raise SizeofError("a vocabulary has no fixed size", path=path)


class NumpyArray(Construct):
    """``T values[count]`` of a fixed-size numeric type, as a read-only numpy view of the input."""

    def __init__(self, count: Any, dtype: str, rule: str):
        super().__init__()
        self.count = count
        self.dtype = np.dtype(dtype)
        self.rule = rule

    def _parse(self, stream, context, path):
        s = as_stream(stream)
        n = self.count(context)
        if n < 0 or n * self.dtype.itemsize > s.remaining:
            raise TruncatedError(self.rule, f"{n} values of {self.dtype.itemsize} bytes do not fit the {s.remaining} bytes left",
                                 path=readable_path(path), offset=s.pos)  # fmt: skip
        out = np.frombuffer(s.view, dtype=self.dtype, count=n, offset=s.pos)
        out.flags.writeable = False
        s.pos += n * self.dtype.itemsize
        return out

    def _build(self, obj, stream, context, path):
        stream.write(np.ascontiguousarray(obj, dtype=self.dtype).tobytes())
        return obj

    def _sizeof(self, context, path):
        raise SizeofError("a counted array has no fixed size", path=path)


# -- declarations ----------------------------------------------------------------------------------------
def tensor_record(aligned: bool) -> Struct:
    """One tensor record (reference §2.2, §4.1); ``aligned``: GGJT's 32-byte padding before the data."""
    return Struct(
        "_offset" / Tell,
        "n_dims" / Rebuild(Int32sl, len_(this.ne)),
        "name_len" / Rebuild(Int32sl, lambda ctx: encoded_len(ctx.name)),
        "type" / Int32sl,
        "ne" / Dims("n_dims"),
        "name" / LegacyName("name_len", "tensor.name", least=1),
        "_padding" / AlignPadding(legacy_tables().ggjt_alignment, aligned, "tensor.padding"),
        "data_offset" / Tell,
        "data" / TensorData(),
    )


def hparam(ctx: Any, name: str) -> Any:
    """A hyper-parameter by name, from whichever hyper-parameter block holds it."""
    while ctx is not None:
        for block in ("hparams", "hparams2"):
            if block in ctx and ctx[block] is not None and name in ctx[block]:
                return ctx[block][name]
        ctx = ctx.get("_")
    raise KeyError(name)


_SCALAR = {"i32": Int32sl, "u32": Int32ul, "f32": Float32l}


def _section(sec: dict[str, Any], fmt: str) -> list[Any]:
    """The construct fields of one profile section (schema/legacy.json)."""
    kind = sec["kind"]
    if kind == "hparams":
        return [sec.get("name", "hparams") / Struct(*(name / _SCALAR[t] for name, t in sec["fields"]))]
    if kind == "vocab":
        scored = {"versioned": fmt != "ggml", True: True, False: False}[sec["score"]]
        if sec["count"] == "stored":
            return ["vocab_count" / Rebuild(Int32sl, len_(this.vocab)), "vocab" / VocabArray("vocab_count", scored)]
        name = sec["count"]
        return ["vocab" / VocabArray(lambda ctx: hparam(ctx, name), scored)]
    if kind == "matrix":
        rows, cols = sec["rows"], sec["cols"]
        return [sec["name"] / Struct(
            rows / Int32sl, cols / Int32sl,
            "data" / NumpyArray(lambda ctx: ctx[rows] * ctx[cols] if ctx[rows] >= 0 and ctx[cols] >= 0 else -1, "<f4", f"{sec['name']}.size"),
        )]  # fmt: skip
    if kind == "vector":
        count = sec["count"]
        return [sec["name"] / Struct(count / Int32sl, "data" / NumpyArray(lambda ctx: ctx[count], "<f4", f"{sec['name']}.size"))]
    if kind == "u32_array":
        count = sec["count"]
        return [sec["name"] / NumpyArray(lambda ctx: hparam(ctx, count), "<u4", f"{sec['name']}.size")]
    if kind == "string":
        return [sec["name"] / Struct("length" / Rebuild(Int32sl, lambda ctx: encoded_len(ctx.text)), "text" / LegacyName("length", f"{sec['name']}.length"))]
    if kind == "i32_records":
        count, fields = sec["count"], sec["fields"]
        return [sec["name"] / NumpyArray(lambda ctx: hparam(ctx, count) * len(fields) if hparam(ctx, count) >= 0 else -1, "<i4", f"{sec['name']}.size")]
    raise ValueError(f"unknown section kind {kind!r} in schema/legacy.json")


@cache
def ggml_layout(fmt: str, version: int | None, profile: str, detecting: bool = False) -> Struct:
    """The declaration of one container ('ggml'|'ggmf'|'ggjt'), version and hyper-parameter profile.

    ``detecting``: the profile is a guess, so it is abandoned as soon as its hyper-parameters are implausible,
    before the vocabulary and tensors are read (ten guesses must not each read a hostile file to its end).
    """
    prof = legacy_tables().profiles[profile]
    fields: list[Any] = ["magic" / Const(MAGICS[fmt])]
    if fmt != "ggml":
        fields.append("version" / Const(int(version), Int32ul))  # type: ignore[arg-type]
    last_hparams = max((i for i, sec in enumerate(prof["sections"]) if sec["kind"] == "hparams"), default=-1)
    for i, sec in enumerate(prof["sections"]):
        fields += _section(sec, fmt)
        if detecting and i == last_hparams:
            fields.append("_plausible" / Computed(_require_plausible))
    fields += [
        "type_table" / Computed(lambda ctx: table_for(fmt, version, profile, _all_hparams(ctx))),
        "tensors" / UntilEOF(tensor_record(fmt == "ggjt"), 12, "tensor.truncated"),
    ]
    return Struct(*fields)


def _require_plausible(ctx: Any) -> bool:
    if not plausible(ctx):
        raise InvalidValueError("hparams.implausible", "hyper-parameters out of range for this profile", path="hparams")
    return True


def _all_hparams(ctx: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for block in ("hparams", "hparams2"):
        if ctx.get(block):
            out.update({k: v for k, v in ctx[block].items() if not k.startswith("_")})
    return out


# -- the whole-file construct -------------------------------------------------------------------------------
def read_header(view: Any) -> tuple[str, int | None]:
    """(container, version) of a legacy llama.cpp-family file; UnknownFormatError otherwise."""
    head = bytes(memoryview(view)[:8])
    if len(head) < 4:
        raise TruncatedError("header.truncated", f"{len(head)} bytes: too short for a magic", path="magic", offset=0)
    for fmt in CONTAINERS:
        if head[:4] == MAGICS[fmt]:
            if fmt == "ggml":
                return fmt, None
            if len(head) < 8:
                raise TruncatedError("header.truncated", "no version after the magic", path="version", offset=4)
            (version,) = struct.unpack_from("<I", head, 4)
            allowed = list(legacy_tables().magics[fmt].versions)
            if version not in allowed:
                raise UnsupportedTypeError("header.version", f"{fmt} version {version} is not one of {allowed}", path="version", offset=4)
            return fmt, version
    raise UnknownFormatError("header.magic", f"magic {head[:4]!r} is not 'lmgg', 'fmgg' or 'tjgg'", path="magic", offset=0)


def plausible(c: Container) -> bool:
    """Hyper-parameters a real file could have: integers in 0..2**24 (ftype up to the quantization version
    folding), floats finite; used to choose among profiles that all read the bytes."""
    for k, v in _all_hparams(c).items():
        if isinstance(v, float):
            if v != v or abs(v) > 1e6:
                return False
        elif not 0 <= v <= (3000 if k == "ftype" else 1 << 24):
            return False
    return True


class GGMLConstruct(FileConstruct):
    """A whole GGML/GGMF/GGJT file: picks the declaration from the magic, the version and the profile
    (``parse(data, profile="whisper")`` forces one; by default each is tried)."""

    what = "a GGML file"

    def _parse(self, stream, context, path):
        s = as_stream(stream)
        start = s.pos
        fmt, version = read_header(s.view[start:])
        wanted = context.get("profile")
        candidates = [wanted] if wanted else [p for p in legacy_tables().detect_order if fmt in legacy_tables().profiles[p]["containers"]]
        if wanted and fmt not in legacy_tables().profiles.get(wanted, {}).get("containers", ()):
            raise UnsupportedTypeError("header.profile", f"profile {wanted!r} does not exist for {fmt} files (profiles: {', '.join(PROFILES)})")
        failures = []
        for profile in candidates:
            s.pos = start
            try:
                obj = guarded(lambda p=profile: ggml_layout(fmt, version, p, not wanted)._parsereport(s, context, path), s)
            except FormatError as e:
                failures.append((profile, e))
                continue
            obj.pop("_plausible", None)
            if wanted or plausible(obj):
                obj["format"], obj["profile"] = fmt, profile
                obj.setdefault("version", None)
                return obj
            failures.append((profile, InvalidValueError("hparams.implausible", "hyper-parameters out of range", path="hparams")))
        if len(failures) == 1:
            raise failures[0][1]
        detail = "; ".join(f"{p}: {e.describe()}" for p, e in failures)
        raise UnknownFormatError("header.magic", f"the {fmt} magic, but no hyper-parameter profile reads the file ({detail})", path="magic", offset=start)

    def _build(self, obj, stream, context, path):
        fmt = obj.get("format") or next((f for f in CONTAINERS if obj.get("magic") == MAGICS[f]), None)
        if fmt is None:
            raise ValueError("give format='ggml'|'ggmf'|'ggjt'")
        version = obj.get("version") if fmt != "ggml" else None
        profile = obj.get("profile") or "llama"
        ggml_layout(fmt, version, profile)._build(Container(obj, magic=MAGICS[fmt]), stream, context, path)
        return obj


#: The llama.cpp-family formats before GGUF (GGML, GGMF v1, GGJT v1–v3) with every documented profile.
GGML = GGMLConstruct()
