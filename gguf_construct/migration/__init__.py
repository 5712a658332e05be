"""Legacy model files to GGUF v3, and back where the types allow.

- :func:`migrate` — GGML/GGMF/GGJT (llama, whisper.cpp, ggml examples) and rwkv.cpp files → GGUF v3 (RWKV v6/v7
  to llama.cpp's rwkv6/rwkv7, v4/v5 to the spec's rwkv); GGUF v1/v2 → v3. Verified by reopening before it is
  renamed into place.
- :func:`export` — GGUF → GGJT v3 (llama) or rwkv.cpp v101 (rwkv, rwkv6, rwkv7).

Imports: the library (``api`` and below); never ``convert``, ``testing`` or ``cli``.
"""

from __future__ import annotations

import importlib
import os
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .steps import MigrationReport


def migrate(
    src: str | os.PathLike[str], dst: str | os.PathLike[str], *, hparams: str | None = None, progress: bool = False, **options: Any
) -> MigrationReport:
    """Write ``src`` (any legacy format, rwkv.cpp, or GGUF v1/v2) as GGUF v3 at ``dst``.

    ``options``: ``context_length``, ``eps``, ``gqa`` (llama, as llama.cpp's migrator has them), ``name``;
    ``vocab`` (rwkv.cpp v6/v7: a World vocabulary file; default: bytes for 256-token models, else the shipped one).
    ``hparams`` names the hyper-parameter profile of an unversioned 'ggml' file (detected otherwise).
    """
    from ..api.fileio import reading
    from .steps import check_distinct_paths

    check_distinct_paths(src, dst, options.get("vocab"))
    with reading([src, options.get("vocab")]):
        return _migrate(src, dst, hparams=hparams, progress=progress, **options)


def _migrate(
    src: str | os.PathLike[str], dst: str | os.PathLike[str], *, hparams: str | None, progress: bool, **options: Any
) -> MigrationReport:
    from ..api.gguf_file import load_gguf
    from ..api.legacy_file import load_legacy, load_rwkv
    from ..api.registry import detect
    from .steps import MigrationReport

    fmt = detect(src)
    if fmt == "gguf":
        g = load_gguf(src, strict=True)
        g.save(dst, version=3)
        return MigrationReport(os.fspath(dst), "GGUF v3", tensors=len(g.tensors), copied=len(g.tensors))
    if fmt == "rwkv":
        from .rwkv_cpp import migrate_rwkv
        from .rwkv_llama import migrate_rwkv_llama, table

        f = load_rwkv(src, strict=True)
        if f.metadata["architecture"] in table().architectures:
            return migrate_rwkv_llama(f, dst, progress=progress, **options)
        return migrate_rwkv(f, dst, progress=progress, **options)
    f = load_legacy(src, strict=True, hparams=hparams)
    if f.profile == "llama":
        from .llama import migrate_llama

        return migrate_llama(f, dst, progress=progress, **options)
    from .llama import migrate_example

    return migrate_example(f, dst, progress=progress, **options)


def export(src: str | os.PathLike[str], dst: str | os.PathLike[str], to: str) -> MigrationReport:
    """Write a GGUF file as GGJT v3 (``to='ggjt'``) or rwkv.cpp v101 (``to='rwkv'``: architectures rwkv, rwkv6, rwkv7)."""
    from ..api.fileio import reading
    from ..api.gguf_file import load_gguf
    from .steps import check_distinct_paths

    check_distinct_paths(src, dst)
    with reading([src]):
        return _export(load_gguf(src, strict=True), dst, to)


def _export(g: Any, dst: str | os.PathLike[str], to: str) -> MigrationReport:
    if to == "ggjt":
        from .ggjt import export_ggjt

        return export_ggjt(g, dst)
    if to == "rwkv":
        from .rwkv_cpp import export_rwkv
        from .rwkv_llama import export_rwkv_llama, variant_of

        if variant_of(g.metadata.get("general.architecture")) is not None:
            return export_rwkv_llama(g, dst)
        return export_rwkv(g, dst)
    raise ValueError(f"export to 'ggjt' or 'rwkv', not {to!r}")


#: Public name -> the module that defines it, imported on first access (as in the package root), so that
#: importing the package (``import gguf_construct`` does) loads none of the migrators.
_LAZY: dict[str, str] = {"MigrationReport": "steps"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["MigrationReport", "export", "migrate"]
