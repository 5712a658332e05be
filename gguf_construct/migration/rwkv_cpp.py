"""rwkv.cpp (versions 100 and 101) → GGUF v3, and GGUF → rwkv.cpp version 101.

RWKV v4 and v5 have no llama.cpp architecture (ggml-org/llama.cpp: src/llama-arch.cpp), so they go to the GGUF specification's ``rwkv``
architecture (``rwkv.architecture_version`` 4 or 5) with llama.cpp's RWKV tensor names where it has one and the
same naming style for the v4/v5-only parameters (schema/migrate.json). Shapes and bytes are unchanged (retired
version-100 layouts are re-encoded as in :mod:`.common`), so exporting back to rwkv.cpp gives the input again.
v6 and v7 files go to llama.cpp's ``rwkv6``/``rwkv7`` instead (:mod:`.rwkv_llama`).
"""

from __future__ import annotations

import os
from typing import Any

from construct import Container

from ..api.fileio import write_atomic
from ..api.gguf_file import GGUFFile
from ..api.legacy_file import LegacyFile
from ..api.metadata import Metadata
from ..core import rules
from ..formats.legacy.schema import legacy_tables
from ..formats.rwkv.schema import RWKV
from .steps import MigrationReport, NameMap, PlannedTensor, finish_gguf, migrate_tables, plan_tensor, required_int

#: ggml type → llama.cpp's general.file_type for a file "mostly" of that type.
FILE_TYPE_OF = {"f32": 0, "f16": 1, "q4_0": 2, "q4_1": 3, "q8_0": 7, "q5_0": 8, "q5_1": 9}


def migration_target(variant: str) -> str:
    """Where ``migrate`` puts an rwkv.cpp file of RWKV ``variant`` ('v4.0' … 'v7.0'), in words (for info and notices)."""
    from .rwkv_llama import table

    arch = table().architectures.get(variant)
    if arch:
        return f"llama.cpp's '{arch}' architecture"
    version = migrate_tables().rwkv.architectures.get(variant)
    if version is None:
        return "nothing: this RWKV version has no GGUF architecture"
    return (
        f"the GGUF specification's 'rwkv' architecture (rwkv.architecture_version {version}): "
        "llama.cpp has no RWKV v4/v5 architecture, so llama.cpp cannot run it"
    )


def rwkv_names() -> NameMap:
    return NameMap(migrate_tables().rwkv.tensor_names)


def migrate_rwkv(
    f: LegacyFile,
    dst: str | os.PathLike[str],
    *,
    context_length: int | None = None,
    name: str | None = None,
    progress: bool = False,
    **_: Any,
) -> MigrationReport:
    spec = migrate_tables().rwkv
    variant = f.metadata["architecture"]
    if variant not in spec.architectures:
        raise rules.MIGRATE_RWKV_VERSION.error(f"RWKV {variant}: no GGUF architecture for it")
    report = MigrationReport(os.fspath(dst), f"GGUF v3 (rwkv {variant})")
    report.notices.append(f"RWKV {variant} goes to {migration_target(variant)}")
    header_type = f.container["data_type"]
    table = legacy_tables().rwkv.types[int(f.container["version"])]
    main = table.get(header_type, "").split(".")[0]
    if main not in FILE_TYPE_OF:
        raise rules.MIGRATE_FILE_TYPE.error(f"header data_type {header_type} ({main or 'unknown'}) has no GGUF file type")
    names, planned = rwkv_names(), []
    for t in f.tensors.records():
        target = names.forward(t.name, variant)
        if target is None:
            raise rules.MIGRATE_TENSOR_NAME.error(f"rwkv.cpp parameter {t.name!r} has no GGUF name")
        planned.append(plan_tensor(t, target, report))
    ffn = f.tensors.get("blocks.0.ffn.key.weight")
    md = Metadata([])
    md.set("general.architecture", "rwkv")
    if name:
        md.set("general.name", name)
    md.set("general.file_type", FILE_TYPE_OF[main])
    if main not in ("f32", "f16"):
        md.set("general.quantization_version", 2)
    md.set("rwkv.architecture_version", spec.architectures[variant])
    md.set("rwkv.context_length", context_length or spec.context_length)
    md.set("rwkv.embedding_length", f.metadata["n_embed"])
    md.set("rwkv.block_count", f.metadata["n_layer"])
    if ffn is not None and len(ffn.shape) == 2:
        md.set("rwkv.feed_forward_length", ffn.shape[1])
    md.set("rwkv.vocab_size", f.metadata["n_vocab"], type="u32")
    if f.version == 100 and main not in ("f32", "f16"):
        report.notices.append("version-100 quantized data re-encoded into today's layouts")
    return finish_gguf(dst, md, planned, report, progress=progress)


def export_rwkv(g: GGUFFile, dst: str | os.PathLike[str]) -> MigrationReport:
    """A GGUF file written by :func:`migrate_rwkv` (architecture 'rwkv', version 4/5) → rwkv.cpp version 101."""
    md = g.metadata
    if md.get("general.architecture") != "rwkv" or md.get("rwkv.architecture_version") not in (4, 5):
        raise rules.EXPORT_ARCHITECTURE.error(
            "only GGUF files of the architectures rwkv (version 4 or 5), rwkv6 and rwkv7 export to rwkv.cpp"
        )
    variant = "v5.2" if "blk.0.time_mix_gate.weight" in g.tensors else ("v5.1" if md["rwkv.architecture_version"] == 5 else "v4.0")
    ids = legacy_tables().rwkv.ids(101)
    file_type = md.get("general.file_type")
    main = {v: k for k, v in FILE_TYPE_OF.items()}.get(file_type) if isinstance(file_type, int) else None
    if main is None:
        raise rules.EXPORT_FILE_TYPE.error(f"general.file_type {md.get('general.file_type')} has no rwkv.cpp type")
    names, params = rwkv_names(), []
    for t in g.tensors.values():
        key = names.backward(t.name, variant)
        if key is None:
            raise rules.EXPORT_TENSOR_NAME.error(f"tensor {t.name!r} has no rwkv.cpp name")
        if t.type.name not in ids or not 1 <= len(t.shape) <= 3:
            raise rules.EXPORT_TYPE.error(f"tensor {t.name!r} ({t.type.name}, {len(t.shape)} dims) cannot be stored by rwkv.cpp")
        params.append(Container(key=key, data_type=ids[t.type.name], shape=list(t.shape), data=t.data))
    emb = g.tensors.get("token_embd.weight")
    if emb is None:
        raise rules.EXPORT_MISSING.error("no token_embd.weight")
    if len(emb.shape) != 2:
        raise rules.EXPORT_SHAPE.error(f"token_embd.weight has shape {list(emb.shape)}: rwkv.cpp needs a 2-D embedding (n_embed, n_vocab)")
    u32 = 2**32 - 1  # rwkv.cpp's header fields are u32
    n_vocab = required_int(md, "rwkv.vocab_size", 1, u32, rules.EXPORT_HPARAMS, "rwkv.cpp") if "rwkv.vocab_size" in md else emb.shape[1]
    n_embed = required_int(md, "rwkv.embedding_length", 1, u32, rules.EXPORT_HPARAMS, "rwkv.cpp")
    n_layer = required_int(md, "rwkv.block_count", 1, u32, rules.EXPORT_HPARAMS, "rwkv.cpp")
    for p in params:
        if any(d > 2**31 - 1 for d in p["shape"]):
            raise rules.EXPORT_SHAPE.error(f"parameter {p['key']!r} shape {p['shape']}: rwkv.cpp stores extents as i32")
    obj = Container(version=101, n_vocab=n_vocab, n_embed=n_embed, n_layer=n_layer, data_type=ids[main], parameters=params)

    def verify(tmp: str) -> None:
        back = RWKV.parse_file(tmp)
        if [p["key"] for p in back["parameters"]] != [p["key"] for p in params]:
            raise rules.EXPORT_VERIFY.error("the exported file reads back differently")

    write_atomic(dst, lambda out: RWKV.build_stream(obj, out), verify)
    return MigrationReport(os.fspath(dst), "rwkv.cpp v101", tensors=len(params), copied=len(params))


__all__ = ["PlannedTensor", "export_rwkv", "migrate_rwkv", "migration_target"]
