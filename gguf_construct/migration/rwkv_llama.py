"""rwkv.cpp v6/v7 files ↔ llama.cpp's ``rwkv6``/``rwkv7`` GGUF architectures, driven by schema/rwkv_llama.json.

The table says, for every llama.cpp tensor, which rwkv.cpp parameter(s) it holds and its shape on each side. Every
mapping keeps the bytes: a rename, a reshape that only changes ``ne`` of contiguous data (a block-quantized tensor
keeps its blocks as long as the new first dimension is a whole number of blocks), or parts stacked along the last
axis (their bytes concatenated). No tensor needs a transpose: rwkv.cpp's converter already transposed the LoRA
matrices into the orientation llama.cpp expects (ggml-org/llama.cpp:
src/models/rwkv6.cpp). So quantized tensors are copied bit for bit,
and exporting a migrated file gives the rwkv.cpp file back byte for byte.

The sizes llama.cpp needs as keys (head size, LoRA ranks, feed-forward length) are read off the tensors, checked
against every tensor's shape, and written with the types llama.cpp's loader demands (it refuses any other).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
from construct import Container

from ..api.fileio import write_atomic
from ..api.gguf_file import GGUFFile
from ..api.legacy_file import LegacyFile, LegacyTensor, load_rwkv
from ..api.metadata import Metadata
from ..core import rules
from ..core.shapes import element_count
from ..core.table_records import RwkvLlamaTable
from ..core.tables import FILE_TYPES, GGML_TYPES, load_table
from ..formats.legacy.schema import legacy_tables
from ..formats.rwkv.schema import RWKV
from ..quants import block_dtype
from .rwkv_vocab import rwkv_tokenizer
from .steps import MigrationReport, PlannedTensor, finish_gguf


def table() -> RwkvLlamaTable:
    return load_table("rwkv_llama")


# -- the table, expanded for one file ----------------------------------------------------------------------------
@dataclass(frozen=True)
class TensorEntry:
    """One llama.cpp tensor of one block: its name, its rwkv.cpp parts and both sides' symbolic shapes."""

    gguf: str
    rwkv: tuple[str, ...]
    shape: tuple[Any, ...]
    rwkv_shape: tuple[Any, ...] | None
    bid: int | None
    block0: dict[str, Any] | None = None  # block 0 only: {"from": rwkv.cpp parameter to copy, "shape": block 0's shape}
    export_only: bool = False
    rescaled: bool = False


def entries(variant: str, n_layer: int) -> list[TensorEntry]:
    """Every tensor of a ``variant`` ('v6.0' | 'v7.0') model with ``n_layer`` blocks, in table order."""
    spec = table().tensors
    out: list[TensorEntry] = []
    for raw in spec["common"] + spec[variant]:
        blocks: Iterable[int | None] = range(n_layer) if "{bid}" in raw["gguf"] else (None,)
        for bid in blocks:

            def sub(s: str, b: int | None = bid) -> str:
                return s if b is None else s.replace("{bid}", str(b))

            out.append(
                TensorEntry(
                    sub(raw["gguf"]),
                    tuple(sub(r) for r in raw["rwkv"]),
                    tuple(raw["shape"]),
                    tuple(raw["rwkv_shape"]) if "rwkv_shape" in raw else None,
                    bid,
                    raw.get("block0") if bid == 0 else None,
                    raw.get("export_only", False),
                    raw.get("rescaled", False),
                )
            )
    return out


def resolve(shape: Iterable[Any], sizes: dict[str, int]) -> list[int]:
    """A symbolic shape (``["d", "5*tm", 1]``) with the model's sizes put in."""
    out = []
    for dim in shape:
        if isinstance(dim, int):
            out.append(dim)
            continue
        factor, _, name = dim.rpartition("*")
        out.append((int(factor) if factor else 1) * sizes[name])
    return out


def variant_of(architecture: object) -> str | None:
    """'v6.0' for 'rwkv6', 'v7.0' for 'rwkv7'; None for other architectures."""
    return next((v for v, arch in table().architectures.items() if arch == architecture), None)


def check_reshape(name: str, type_name: str, shape: list[int]) -> None:
    """A block-quantized tensor keeps its bytes under a new shape only if its first dimension is whole blocks."""
    block = GGML_TYPES.lookup(type_name).block_size
    if shape and shape[0] % block:
        raise rules.MIGRATE_RESHAPE.error(
            f"{name}: {type_name} data in blocks of {block} cannot take the shape {shape} without re-quantizing"
        )


# -- sizes -------------------------------------------------------------------------------------------------------
def sizes_from_rwkv(f: LegacyFile, variant: str) -> dict[str, int]:
    """The model's sizes: d, n_vocab, n_layer from the header, the rest read off the tensors (table "symbols")."""
    md = f.metadata
    sizes = {"d": md["n_embed"], "n_vocab": md["n_vocab"], "n_layer": md["n_layer"]}
    for symbol, rule in table().symbols[variant].items():
        t = f.tensors.get(rule["tensor"])
        if t is None or len(t.shape) <= rule["ne"]:
            if "else" in rule:
                sizes[symbol] = sizes[rule["else"]]
                continue
            raise rules.MIGRATE_MISSING.error(
                f"rwkv.cpp parameter {rule['tensor']!r} (needed for {symbol}) is missing or has too few dimensions"
            )
        value, divide = t.shape[rule["ne"]], rule.get("divide", 1)
        if value % divide or value == 0:
            raise rules.MIGRATE_SHAPE.error(f"{rule['tensor']}: ne[{rule['ne']}] = {value} is not a positive multiple of {divide}")
        sizes[symbol] = value // divide
    if sizes["d"] % sizes["head_size"]:
        raise rules.MIGRATE_SHAPE.error(f"n_embed {sizes['d']} is not a multiple of the head size {sizes['head_size']}")
    sizes["n_head"] = sizes["d"] // sizes["head_size"]
    return sizes


def metadata_rows(variant: str) -> list[list[Any]]:
    spec = table().metadata
    return spec["common"] + spec[variant]


def sizes_from_gguf(g: GGUFFile, variant: str, arch: str) -> dict[str, int]:
    """The same sizes read back from a GGUF file's keys (the table's metadata rows, in reverse)."""
    sizes: dict[str, int] = {}
    for key, _, value in metadata_rows(variant):
        if isinstance(value, str):
            got = g.metadata.get(key.format(arch=arch))
            if not isinstance(got, (int, np.integer)) or got <= 0:
                raise rules.EXPORT_METADATA.error(f"{key.format(arch=arch)} is missing or not a positive integer")
            sizes[value] = int(got)
    emb = g.tensors.get("token_embd.weight")
    if emb is None or len(emb.shape) != 2:
        raise rules.EXPORT_MISSING.error("no two-dimensional token_embd.weight")
    sizes["n_vocab"] = int(emb.shape[1])
    if sizes["d"] % sizes["head_size"]:
        raise rules.EXPORT_METADATA.error(f"embedding length {sizes['d']} is not a multiple of the head size {sizes['head_size']}")
    sizes["n_head"] = sizes["d"] // sizes["head_size"]
    return sizes


def file_type_of(types: Iterable[tuple[str, int]]) -> tuple[str, int]:
    """llama.cpp's ``general.file_type`` from (type, element count) pairs: the non-F32 type holding most elements
    (``MOSTLY_<TYPE>``; table "file_types" for k-quants), else ``ALL_F32``; returned with that ggml type's name."""
    counts: dict[str, int] = {}
    for name, n in types:
        if name != "f32":
            counts[name] = counts.get(name, 0) + n
    main = max(counts, key=lambda k: counts[k]) if counts else "f32"
    label = "ALL_F32" if main == "f32" else table().file_types["k_quants"].get(main, f"MOSTLY_{main.upper()}")
    ids = [i for i, n in FILE_TYPES.items() if n == label]
    if not ids:
        raise rules.MIGRATE_FILE_TYPE.error(f"no general.file_type stands for {main}")
    return main, ids[0]


# -- rwkv.cpp → GGUF ---------------------------------------------------------------------------------------------
def _plan(e: TensorEntry, parts: list[LegacyTensor], sizes: dict[str, int], report: MigrationReport) -> PlannedTensor:
    """The GGUF tensor ``e`` from its rwkv.cpp ``parts``, their bytes kept (shapes checked against the sizes)."""
    shape = resolve(e.shape, sizes)
    types = {p.type for p in parts}
    if len(types) != 1 or any(p.retired for p in parts):
        raise rules.MIGRATE_TYPE.error(
            f"{e.gguf}: {', '.join(p.name for p in parts)} are {sorted({p.layout for p in parts})}; it needs one type in today's layout"
        )
    (kind,) = types
    if kind.lower() not in GGML_TYPES.by_name or GGML_TYPES.lookup(kind).removed:
        raise rules.MIGRATE_TYPE.error(f"{parts[0].name}: rwkv.cpp type {kind} has no GGUF counterpart")
    for p in parts:
        want = resolve(e.rwkv_shape, sizes) if e.rwkv_shape is not None else shape
        if e.rwkv_shape is None and list(p.shape) != want or element_count(p.shape) != element_count(want):
            raise rules.MIGRATE_SHAPE.error(f"{p.name} has shape {list(p.shape)}; llama.cpp's {e.gguf} needs {want} from it", path=p.name)
    if e.rwkv_shape is not None:
        check_reshape(e.gguf, kind, shape)
    report.copied += 1
    if len(parts) == 1:
        source: Any = parts[0]._data
    else:
        source = lambda: b"".join(bytes(p.data) for p in parts)  # noqa: E731
    return PlannedTensor(e.gguf, shape, kind, source, lambda: np.concatenate([p.to_numpy().reshape(-1) for p in parts]), "copied")


def migrate_rwkv_llama(
    f: LegacyFile,
    dst: str | os.PathLike[str],
    *,
    vocab: str | os.PathLike[str] | None = None,
    name: str | None = None,
    progress: bool = False,
    **_: Any,
) -> MigrationReport:
    """An rwkv.cpp v6/v7 file → GGUF v3 of llama.cpp's rwkv6/rwkv7 architecture, with an ``rwkv`` tokenizer."""
    variant = f.metadata["architecture"]
    arch = table().architectures[variant]
    n_layer = f.metadata["n_layer"]
    sizes = sizes_from_rwkv(f, variant)
    plan = [e for e in entries(variant, n_layer) if not e.export_only]
    owner = {r: e for e in plan for r in e.rwkv}
    report = MigrationReport(os.fspath(dst), f"GGUF v3 ({arch})")
    records = f.tensors.records()
    if len(records) != len(f.tensors):
        raise rules.MIGRATE_DUPLICATE.error("a parameter name occurs twice")
    unknown = [t.name for t in records if t.name not in owner]
    if unknown:
        raise rules.MIGRATE_TENSOR_NAME.error(
            f"rwkv.cpp parameter {unknown[0]!r} has no place in llama.cpp's {arch}"
            + (f" (and {len(unknown) - 1} more)" if len(unknown) > 1 else "")
        )
    missing = [r for e in plan if not e.block0 for r in e.rwkv if r not in f.tensors]
    if missing:
        raise rules.MIGRATE_MISSING.error(f"{arch} needs rwkv.cpp parameter {missing[0]!r}, which the file lacks")
    synthesised: dict[str, TensorEntry] = {}
    for e in plan:
        if e.block0:
            e0 = TensorEntry(e.gguf, e.rwkv, tuple(e.block0["shape"]), e.rwkv_shape, 0)
            owner[e.rwkv[0]] = e0
            have = f.tensors.get(e.rwkv[0])
            if have is None or element_count(have.shape) != element_count(resolve(e0.shape, sizes)):
                synthesised[e.block0["from"]] = TensorEntry(e.gguf, (e.block0["from"],), e0.shape, e.rwkv_shape, 0)
                if have is not None:
                    report.notices.append(
                        f"{have.name} {list(have.shape)}: a dummy that neither program uses, and not the shape "
                        "llama.cpp wants in block 0; dropped (an export will not restore it)"
                    )
    planned: list[PlannedTensor] = []
    done: set[str] = set()
    for t in records:  # file order, a stack at its first part: export then restores rwkv.cpp's order
        e = owner[t.name]
        if e.gguf in done:
            continue
        done.add(e.gguf)
        if e.bid == 0 and e.gguf in {s.gguf for s in synthesised.values()}:
            continue
        planned.append(_plan(e, [f.tensors[r] for r in e.rwkv], sizes, report))
        for r in e.rwkv:
            if r in synthesised:
                s = synthesised[r]
                done.add(s.gguf)
                planned.append(_plan(s, [f.tensors[r]], sizes, report))
                report.notices.append(
                    f"{s.gguf}: llama.cpp requires it and never uses it (the file has none in "
                    f"block 0): copied from {r}, as llama.cpp's converter does"
                )
    main, ftype = file_type_of((p.type, element_count(p.shape)) for p in planned)
    header = legacy_tables().rwkv.types[int(f.container["version"])].get(int(f.container["data_type"]))
    if header != main:
        report.notices.append(f"the header's data_type says {header}, the tensors are mostly {main}: general.file_type follows the tensors")
    md = Metadata([])
    md.set("general.architecture", arch)
    if name:
        md.set("general.name", name)
    md.set("general.file_type", ftype, type="u32")
    if main not in ("f32", "f16", "bf16"):
        md.set("general.quantization_version", 2, type="u32")
    for key, kind, value in metadata_rows(variant):
        md.set(key.format(arch=arch), sizes[value] if isinstance(value, str) else value, type=kind)
    report.notices.append(f"tokenizer: {rwkv_tokenizer(md, sizes['n_vocab'], vocab)}")
    return finish_gguf(dst, md, planned, report, progress=progress)


# -- GGUF → rwkv.cpp ---------------------------------------------------------------------------------------------
def _rescaled(data: np.ndarray, type_name: str, factor: int, name: str) -> bytes:
    """``data`` multiplied by a power of two, exactly: float values, or the f16 scales of a legacy block type."""
    if type_name in ("f32", "f16"):
        values = data.view(np.float32 if type_name == "f32" else np.float16)
        with np.errstate(over="raise"):
            try:
                return (values * values.dtype.type(factor)).astype(values.dtype).tobytes()
            except FloatingPointError:
                raise rules.EXPORT_RESCALE.error(f"{name}: undoing the rescaling overflows {type_name}") from None
    blocks = data.view(block_dtype(type_name)).copy()
    fields = [n for n in ("d", "m") if n in (blocks.dtype.names or ())]
    if type_name not in ("q4_0", "q4_1", "q5_0", "q5_1", "q8_0") or not fields:
        raise rules.EXPORT_RESCALE.error(
            f"{name}: undoing the HF converter's rescaling of {type_name} data is not supported (f32, f16, q4_0-q8_0 are)"
        )
    with np.errstate(over="raise"):
        try:
            for n in fields:
                blocks[n] = blocks[n] * np.float16(factor)
        except FloatingPointError:
            raise rules.EXPORT_RESCALE.error(f"{name}: undoing the rescaling overflows the f16 block scales") from None
    return blocks.tobytes()


def export_rwkv_llama(g: GGUFFile, dst: str | os.PathLike[str]) -> MigrationReport:
    """A GGUF file of llama.cpp's rwkv6/rwkv7 architecture → rwkv.cpp version 101.

    Stacks are split back into their parts and reshapes undone; block 0's synthesised value-residual tensors are
    dropped; tensors that llama.cpp's HF converter divided by 2^(block // rescale_every_n_layers) are multiplied
    back (exact for floats and for the f16 scales of the legacy block types)."""
    arch = g.metadata.get("general.architecture")
    variant = variant_of(arch)
    if variant is None:
        raise rules.EXPORT_ARCHITECTURE.error(f"architecture {arch!r} is not rwkv6 or rwkv7")
    sizes = sizes_from_gguf(g, variant, str(arch))
    rescale = g.metadata.get(f"{arch}.rescale_every_n_layers", 0)
    if not isinstance(rescale, (int, np.integer)) or isinstance(rescale, bool) or rescale < 0:
        raise rules.EXPORT_METADATA.error(f"{arch}.rescale_every_n_layers is {rescale!r}, not a count of layers")
    by_name = {e.gguf: e for e in entries(variant, sizes["n_layer"])}
    gguf_of = {e.rwkv[0]: e.gguf for e in by_name.values() if len(e.rwkv) == 1 and not e.export_only}
    ids = legacy_tables().rwkv.ids(101)
    params: list[Container] = []
    for t in g.tensors.values():
        e = by_name.get(t.name)
        if e is None:
            raise rules.EXPORT_TENSOR_NAME.error(f"tensor {t.name!r} has no rwkv.cpp parameter")
        if e.block0:  # a copy of its 'from' was made for llama.cpp; anything else is the file's own block-0 tensor
            source = g.tensors.get(gguf_of[e.block0["from"]])
            if source is not None and source.type.name == t.type.name and bytes(source.data) == bytes(t.data):
                continue
            e = TensorEntry(e.gguf, e.rwkv, tuple(e.block0["shape"]), e.rwkv_shape, 0)
        kind = t.type.name
        if kind not in ids:
            raise rules.EXPORT_TYPE.error(f"tensor {t.name!r} is {kind}, which rwkv.cpp cannot store")
        want = resolve(e.shape, sizes)
        if list(t.shape) != want and element_count(t.shape) != element_count(want):
            raise rules.EXPORT_SHAPE.error(f"tensor {t.name!r} has shape {list(t.shape)}, {arch} expects {want}")
        data = np.asarray(t.data, dtype=np.uint8)
        if e.rescaled and rescale > 0 and e.bid is not None and e.bid // rescale:
            data = np.frombuffer(_rescaled(data, kind, 2 ** (e.bid // rescale), t.name), np.uint8)
        part_bytes = len(data) // len(e.rwkv)
        for i, key in enumerate(e.rwkv):
            shape = resolve(e.rwkv_shape, sizes) if e.rwkv_shape is not None else list(t.shape)
            if e.rwkv_shape is not None:
                check_reshape(key, kind, shape)
            if not 1 <= len(shape) <= 3:
                raise rules.EXPORT_SHAPE.error(f"{key}: rwkv.cpp stores 1 to 3 dimensions, not {shape}")
            params.append(Container(key=key, data_type=ids[kind], shape=shape, data=data[i * part_bytes : (i + 1) * part_bytes]))
    seen = [p["key"] for p in params]
    needed = [r for e in by_name.values() if not e.export_only and not e.block0 for r in e.rwkv]
    missing = sorted(set(needed) - set(seen))
    if missing or len(seen) != len(set(seen)):
        raise rules.EXPORT_MISSING.error(
            f"rwkv.cpp needs {missing[0]!r}, which the file lacks" if missing else "two tensors give the same rwkv.cpp parameter"
        )
    ftype = g.metadata.get("general.file_type")
    label = FILE_TYPES.get(int(ftype)) if isinstance(ftype, (int, np.integer)) else None
    main_type = "f32" if label == "ALL_F32" else (label or "").removeprefix("MOSTLY_").lower()
    if main_type not in ids:
        main_type = file_type_of((t.type.name, element_count(t.shape)) for t in g.tensors.values())[0]
    obj = Container(
        version=101, n_vocab=sizes["n_vocab"], n_embed=sizes["d"], n_layer=sizes["n_layer"], data_type=ids[main_type], parameters=params
    )
    write_atomic(dst, lambda out: RWKV.build_stream(obj, out))
    back = load_rwkv(dst, strict=True)
    if [(t.name, list(t.shape), bytes(t.data)) for t in back.tensors.records()] != [
        (p["key"], list(p["shape"]), bytes(p["data"])) for p in params
    ]:
        os.unlink(dst)
        raise rules.EXPORT_VERIFY.error("the exported file reads back differently")
    return MigrationReport(os.fspath(dst), f"rwkv.cpp v101 (RWKV {variant})", tensors=len(params), copied=len(params))


__all__ = ["entries", "export_rwkv_llama", "file_type_of", "migrate_rwkv_llama", "variant_of"]
