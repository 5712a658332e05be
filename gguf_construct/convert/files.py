"""``convert(IN, OUT)``: detect what the input and output are, convert, write atomically, verify.

Inputs: a GGUF file, a safetensors file (an Ollama blob, an MLX or HF file) or an Ollama manifest (its blobs
are checked against their sha256 digests). Outputs by name: ``*.gguf``; ``*.safetensors`` (one file, the
combined quantized layout); or a folder (``OUT/`` or an existing directory), which becomes an Ollama models
root holding one blob per tensor (Ollama's Go writer layout) and a manifest for ``model`` (``name[:tag]``).
GGUF to GGUF rewrites the byte order or version. After writing, the output is opened again and every tensor
compared by value with the input.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from construct import Container

from ..api.fileio import check_output, files_of, reading
from ..api.gguf_file import load_gguf
from ..api.registry import detect, load_url
from ..sources.urls import is_remote
from .safetensors_gguf import ConversionReport, from_gguf, to_gguf, verify


def output_kind(path: str | os.PathLike[str]) -> str:
    """'gguf', 'safetensors' or 'ollama' (a folder) from the output's name."""
    p = os.fspath(path)
    if p.endswith(".gguf"):
        return "gguf"
    if p.endswith(".safetensors"):
        return "safetensors"
    if p.endswith(os.sep) or Path(p).is_dir():
        return "ollama"
    raise ValueError(f"{p}: name the output *.gguf, *.safetensors, or a folder (OUT/) for an Ollama models root")


def open_input(path: str | os.PathLike[str], *, hint: str | None = None) -> tuple[str, Any]:
    """(kind, opened file) for a GGUF file, a safetensors file or an Ollama manifest, local or remote."""
    if is_remote(path):
        f = load_url(path, shards=False, hint=hint)  # type: ignore[arg-type]
        if f.format not in ("gguf", "safetensors", "ollama"):
            raise ValueError(f"{path}: cannot convert a {f.format} file")
        return f.format, f
    kind = detect(path)
    if kind == "gguf":
        return kind, load_gguf(path)
    if kind == "safetensors":
        from ..api.safetensors_file import load_safetensors

        return kind, load_safetensors(path, hint=hint)
    if kind == "ollama":
        from ..api.ollama_model import open_model

        return kind, open_model(path)
    raise ValueError(f"{path}: cannot convert a {kind} file")


def convert(
    src: str | os.PathLike[str],
    dst: str | os.PathLike[str],
    *,
    byte_order: str | None = None,
    version: int | None = None,
    style: str | None = None,
    model: str = "converted",
    hint: str | None = None,
    log: Callable[[str], None] | None = None,
) -> ConversionReport:
    """Convert ``src`` to ``dst`` (kinds detected), verify the values, return the report (notices also go to ``log``)."""
    folder = os.fspath(dst).endswith(os.sep) or os.path.isdir(dst)  # an Ollama models root: a folder of files
    check_output(dst, [src], folder=folder)
    kind, f = open_input(src, hint=hint)
    with reading(files_of(f)):  # an Ollama manifest's blobs too
        check_output(dst, folder=folder)
        return _convert(kind, f, dst, byte_order=byte_order, version=version, style=style, model=model, log=log)


def _convert(
    kind: str,
    f: Any,
    dst: str | os.PathLike[str],
    *,
    byte_order: str | None,
    version: int | None,
    style: str | None,
    model: str,
    log: Callable[[str], None] | None,
) -> ConversionReport:
    out = output_kind(dst)
    if kind == "gguf" and out == "gguf":
        if byte_order is None and version is None:
            raise ValueError("GGUF to GGUF: give a byte order and/or a version")
        report = ConversionReport(targets={n: f.tensors[n].type.name for n in f.tensors})
        # a byte-order change re-encodes every block: the values are compared before the rename
        f.save(dst, byte_order=byte_order, version=version, verify=lambda tmp: _check_gguf(tmp, f.tensors, report))
        return report
    if kind in ("safetensors", "ollama"):
        if out != "gguf":
            raise ValueError(f"{kind} input converts to GGUF (name the output *.gguf)")
        metadata = f.metadata if kind == "safetensors" else {}
        g, report = to_gguf(f.tensors, {k: v for k, v in metadata.items() if isinstance(v, str)})
        g.save(dst, byte_order=byte_order, version=version, verify=lambda tmp: _check_gguf(tmp, f.tensors, report))
    else:
        report = _gguf_to_safetensors(f, dst, out, style, model)
    for notice in report.notices:
        if log:
            log(notice)
    return report


def _check_gguf(dst: Any, tensors: Any, report: ConversionReport) -> None:
    """The written file (still the temporary one) loads strictly and holds the input's values."""
    written = load_gguf(dst)
    for name in report.targets:
        verify(name, tensors[name].to_numpy().reshape(-1), written.tensors[name].to_numpy().reshape(-1))
    report.verified = len(report.targets)


def _gguf_to_safetensors(f: Any, dst: Any, out: str, style: str | None, model: str) -> ConversionReport:
    from ..api.safetensors_file import from_bytes, load_safetensors, save_safetensors
    from ..formats.safetensors.schema import SAFETENSORS

    def check(got: Any) -> None:
        for name in report.targets:
            expected = f.tensors[name].to_numpy()
            verify(name, expected.reshape(-1), np.asarray(got[name].to_numpy()).reshape(-1))
        report.verified = len(report.targets)

    if out == "safetensors":
        items, report = from_gguf(f)
        _, entries, metadata = items[0]
        save_safetensors(
            dst,
            entries,
            metadata or None,
            style=style or "safetensors",
            verify=lambda tmp: check(load_safetensors(tmp, strict=True).tensors),
        )
    else:
        from ..api.ollama_model import write_model
        from ..api.safetensors_file import TensorMap

        items, report = from_gguf(f, per_tensor=True)
        blobs = [
            (name, SAFETENSORS.build(Container(tensors=entries, metadata=md or None, style=style or "ollama")))
            for name, entries, md in items
        ]
        got: dict[str, Any] = {}
        for _, blob in blobs:  # every blob checked before anything is written
            got.update(from_bytes(blob, strict=True).tensors)
        check(TensorMap(got))
        write_model(dst, model, blobs, {"model_format": "safetensors", "file_type": "", "source": "gguf-construct"})
    return report
