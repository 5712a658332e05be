"""The formats before GGUF — unversioned GGML, GGMF v1, GGJT v1–v3 — as construct declarations.

Layout (llama.cpp's ``llama_file_loader``, ``ggml-org/llama.cpp`` ``llama.cpp`` at dadbed99e; the unversioned form
as the ggml examples' loaders read it, ``ggml-org/ggml`` ``examples/gpt-2/main.cpp`` at effcfa6, and
``ggml-org/whisper.cpp`` ``whisper.cpp`` at e693074)::

    u32 magic                        'ggml' | 'ggmf' | 'ggjt' (stored as the u32, so 'lmgg' | 'fmgg' | 'tjgg' on disk)
    u32 version                      absent for 'ggml'; 1 for 'ggmf'; 1, 2, 3 for 'ggjt'
    hyper-parameters …               a *profile*: llama.cpp's, whisper.cpp's, the ggml examples' (legacy_profiles.py)
    vocab[]: {len, text, score?}     score only in GGMF/GGJT (and replit)
    tensors[] until end of file: {n_dims, name_len, type, ne[n_dims], name, _padding (GGJT: to 32 bytes from the
                                  start of the file), data}

Nothing in a 'ggml' file names its profile: ``GGML.parse(data, profile="whisper")`` chooses one, and without it
each profile is tried in turn and the first that reads the whole file with plausible hyper-parameters is kept.
The magic and the version are checked by the declaration's fields (``Magic``, ``Version``), once.
The per-tensor type ids mean different block layouts in different eras (GGJT version, or ``ftype // 1000`` for
the ggml examples); the schema sizes tensor data from the era's table (``type_table``) and keeps it as a
zero-copy view: decoding old layouts is :mod:`gguf_construct.quants.retired`'s job.

The parse result is a ``Container`` in the loaders' field names plus ``format`` ('ggml'|'ggmf'|'ggjt'),
``profile`` and ``type_table``; building it gives the same bytes back (``name_len``, ``n_dims`` and vocab counts
are recomputed, GGJT padding is computed from the position).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np
from construct import Computed, Construct, Container, If, Int32sl, Int32ul, Rebuild, SizeofError, Struct, Tell, len_, this

from ...core import rules
from ...core.shapes import element_count
from ...core.tables import GGML_TYPES
from ...errors import FormatError
from ..base import FileConstruct, as_stream, context_path, guarded, readable_path
from ..fields import AlignPadding, Magic, Version
from .hparams import HPARAM_BLOCKS, PROFILE_FIELDS
from .legacy_fields import Dims, LegacyName, UntilEOF, encoded_len
from .magic import HPARAM_PROFILES, legacy_tables

MAGICS: dict[str, bytes] = {name: m.bytes.encode() for name, m in legacy_tables().magics.items()}
CONTAINERS = ("ggml", "ggmf", "ggjt")
MAGIC_NAMES: dict[bytes, str] = {MAGICS[c]: c for c in CONTAINERS}
#: The versions each container has (none for 'ggml').
VERSIONS: dict[str, list[int]] = {c: [v for v in legacy_tables().magics[c].versions if v is not None] for c in ("ggmf", "ggjt")}


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
    from ...quants.retired import RETIRED

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
        raise rules.TENSOR_TYPE.error(f"type id {type_id} is not defined in {describe_table(table)}", path=where, offset=offset)
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
    (the quantization version) for the ggml examples and whisper.cpp (ggml-org/ggml: include/ggml.h,
    ``GGML_QNT_VERSION_FACTOR``)."""
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
        raise rules.HPARAMS_FTYPE.error(
            f"quantization version {qntvr} (ftype {hparams.get('ftype')}) is not 0, 1 or 2", path="hparams.ftype"
        )
    return ("pre_v2", "v2", "current")[qntvr]


# -- custom fields ----------------------------------------------------------------------------------------
def _find(context: Any, key: str) -> Any:
    """``key`` in this context or the nearest enclosing one."""
    while context is not None:
        if key in context:
            return context[key]
        context = context.get("_")
    raise KeyError(key)


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
            raise rules.TENSOR_BLOCKS.error(
                f"{n} elements are not whole {t.elements}-element blocks of {t.layout}", path=readable_path(path), offset=at
            )
        return t.nbytes(n)

    def _parse(self, stream, context, path):
        s = as_stream(stream)
        n = self._size(context, path, s.pos)
        s.need(n, rules.TENSOR_DATA, f"tensor {context.get(self.fields[2])!r}", path)
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


# -- declarations ----------------------------------------------------------------------------------------
#: One tensor record (ggerganov/llama.cpp, llama.cpp, llama_file_loader::read_tensor_metadata, commit dadbed99e;
#: the ggml examples and whisper.cpp write the same): GGJT pads to 32 bytes from the start of the file before
#: the data.
TENSOR_RECORD = Struct(
    "_offset" / Tell,
    "n_dims" / Rebuild(Int32sl, len_(this.ne)),
    "name_len" / Rebuild(Int32sl, lambda ctx: encoded_len(ctx.name)),
    "type" / Int32sl,
    "ne" / Dims("n_dims"),
    "name" / LegacyName("name_len", rules.TENSOR_NAME, least=1),
    "_padding" / AlignPadding(legacy_tables().ggjt_alignment, this._.format == "ggjt", rules.TENSOR_PADDING),
    "data_offset" / Tell,
    "data" / TensorData(),
)


@cache
def ggml_layout(profile: str, detecting: bool = False) -> Struct:
    """The declaration of a legacy file of hyper-parameter ``profile`` (``legacy_profiles``), in any of the
    profile's containers: the magic names the container ('ggml' has no version, 'ggmf' and 'ggjt' do).

    ``detecting``: the profile is a guess, so it is abandoned as soon as its hyper-parameters are implausible,
    before the vocabulary and tensors are read (ten guesses must not each read a hostile file to its end).
    """
    containers = legacy_tables().profiles[profile]["containers"]
    body = list(PROFILE_FIELDS[profile])
    if detecting:
        last = max(i for i, field in enumerate(body) if field.name in HPARAM_BLOCKS)
        body.insert(last + 1, "_plausible" / Computed(_require_plausible))
    return Struct(
        "magic" / Magic(*(MAGICS[c] for c in containers)),
        "format" / Computed(lambda ctx: MAGIC_NAMES[bytes(ctx.magic)]),
        "version" / If(this.format != "ggml", Version(Int32ul, lambda ctx: VERSIONS[ctx.format], this.format)),
        *body,
        "type_table" / Computed(lambda ctx: table_for(ctx.format, ctx.version, profile, hparams(ctx))),
        "tensors" / UntilEOF(TENSOR_RECORD, 12, rules.TENSOR_TRUNCATED),
    )


def _require_plausible(ctx: Any) -> bool:
    if not plausible(ctx):
        raise rules.HPARAMS_IMPLAUSIBLE.error("hyper-parameters out of range for this profile", path="hparams")
    return True


def hparam_items(ctx: Any) -> Iterator[tuple[str, str, Any]]:
    """``(block, name, value)`` of every hyper-parameter of a parsed (or parsing) legacy container, in file order."""
    for block in HPARAM_BLOCKS:
        if ctx.get(block):
            yield from ((block, k, v) for k, v in ctx[block].items() if not k.startswith("_"))


def hparams(ctx: Any) -> dict[str, Any]:
    """Every hyper-parameter of a legacy container as one ``{name: value}`` (the blocks flattened)."""
    return {k: v for _, k, v in hparam_items(ctx)}


# -- the whole-file construct -------------------------------------------------------------------------------
def plausible(c: Container) -> bool:
    """Hyper-parameters a real file could have: integers in 0..2**24 (ftype up to the quantization version
    folding), floats finite; used to choose among profiles that all read the bytes."""
    for k, v in hparams(c).items():
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
        fmt = MAGIC_NAMES.get(bytes(s.view[start : start + 4]))  # a look, to choose the profiles to try
        wanted = context.get("profile")
        profiles = legacy_tables().profiles
        if wanted and (wanted not in profiles or (fmt is not None and fmt not in profiles[wanted]["containers"])):
            raise rules.HEADER_PROFILE.error(f"profile {wanted!r} does not exist for {fmt} files (layouts: {', '.join(HPARAM_PROFILES)})")
        if wanted:
            candidates = [wanted]
        elif fmt is None:
            candidates = ["llama"]  # every container: its magic field reports what the file is not
        else:
            candidates = [p for p in legacy_tables().detect_order if fmt in profiles[p]["containers"]]
        failures = []
        for profile in candidates:
            s.pos = start
            try:
                obj = guarded(lambda p=profile: ggml_layout(p, not wanted)._parsereport(s, context, path), s)
            except FormatError as e:
                failures.append((profile, e))
                continue
            obj.pop("_plausible", None)
            if wanted or plausible(obj):
                obj["profile"] = profile
                return obj
            failures.append((profile, rules.HPARAMS_IMPLAUSIBLE.error("hyper-parameters out of range", path="hparams")))
        if len(failures) == 1:
            raise failures[0][1]
        detail = "; ".join(f"{p}: {e.describe()}" for p, e in failures)
        raise rules.HEADER_MAGIC.error(
            f"the {fmt} magic, but no hyper-parameter profile reads the file ({detail})", path="magic", offset=start
        )

    def _build(self, obj, stream, context, path):
        fmt = obj.get("format") or next((f for f in CONTAINERS if obj.get("magic") == MAGICS[f]), None)
        if fmt is None:
            raise ValueError("give format='ggml'|'ggmf'|'ggjt'")
        profile = obj.get("profile") or "llama"
        ggml_layout(profile)._build(
            Container(obj, magic=MAGICS[fmt], version=obj.get("version") if fmt != "ggml" else None), stream, context, path
        )
        return obj


#: The llama.cpp-family formats before GGUF (GGML, GGMF v1, GGJT v1–v3) with every documented profile.
GGML = GGMLConstruct()
