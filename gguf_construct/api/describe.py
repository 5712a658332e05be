"""What a loaded model file is, as data: the summary ``info`` shows (architecture, parameters, size by tensor type,
``general.*``, tokenizer, chat template, the file name's components) and :func:`info_json`, the shape of
``info --json`` (also what the fuzzer compares with a command that prints it).

It works on any loaded file object of the common protocol (``format``, ``path``, ``metadata``, ``tensors``);
GGUF files add their header (version, byte order, alignment, data offset) and each key's GGUF type. The JSON
shape keeps the header fields, ``metadata`` (key, type, value; arrays as array_type, n, first/last) and
``tensors`` (name, type, shape, offset, nbytes; ``layout`` when a legacy file's blocks are in a retired layout),
and adds ``summary`` (with ``header_ftype`` for llama.cpp legacy files).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..core import rules
from ..core.tables import FILE_TYPES, GGMLType
from ..errors import FormatError
from ..validation import Issue, parameter_issue
from .metadata import MetadataField, first_last, infer_type, json_value
from .protocol import Tensor

#: Header facts a file object may have; a GGUF file has them all.
HEADER_FIELDS = ("version", "byte_order", "alignment", "data_offset")


# -- the pieces ---------------------------------------------------------------------------------------
def fields_of(f: Any) -> list[MetadataField]:
    """Every key with its type: GGUF's own types, else the type a GGUF file would give the value."""
    meta = f.metadata
    if hasattr(meta, "fields"):
        return list(meta.fields())
    out = []
    for key, value in meta.items():
        try:
            label = infer_type(value)
        except ValueError:
            label = type(value).__name__
        if label.startswith("arr["):
            out.append(MetadataField(key, "arr", value, label[4:-1]))
        else:
            out.append(MetadataField(key, label, value))
    return out


def type_name(t: Tensor) -> str:
    """A tensor type as its format spells it (ggml's ``q4_K``, safetensors' ``BF16``), or ``type 43 (unknown)``
    for a GGUF type id no table knows."""
    kind = t.type
    if isinstance(kind, GGMLType) and not kind.known:  # an id, not a name, is all the file says
        return f"type {kind.id} (unknown)"
    return kind.name


def reading_warnings(f: Any, path: str | None = None) -> list[Issue]:
    """What a lenient load let through that a reader of the summary must know: tensors of a type without
    sizes (their bytes are the range up to the next tensor; ``to_numpy`` cannot decode them) and a parameter
    count the files' size cannot hold (rule ``model.parameters``): warnings, ``validate`` judges. One error: a
    file cut short, whose tensors point past its end (``truncation_issue``), which ``info`` flags (exit 1)."""
    out: list[Issue] = []
    unsized: dict[str, list[Any]] = {}
    for t in f.tensors.values():
        if not t.type.sized:
            unsized.setdefault(type_name(t), []).append(t)
    for kind, ts in unsized.items():
        first = ts[0]
        removed = isinstance(first.type, GGMLType) and first.type.removed
        what = "removed from ggml" if removed else "unknown to this version's tables (GGUF_CONSTRUCT_TYPES can declare it)"
        out.append(
            Issue(
                rules.TENSOR_TYPE,
                f"{len(ts)} tensor(s) of {kind}, {what}: listed with the bytes up to the next tensor, not decodable "
                f"(first: {first.name!r} at offset {first.offset}, {int(first.nbytes):,} bytes)",
                severity="warning",
            )
        )
    cut = truncation_issue(f)
    if cut is not None:
        out.append(cut)
    paths = [str(p) for p in getattr(f, "shard_paths", None) or [path or getattr(f, "path", None)] if p]
    try:
        size = sum(os.path.getsize(p) for p in paths)
    except OSError:
        return out
    if paths:
        size -= getattr(f, "data_offset", 0) if len(paths) == 1 else 0
        tensors = list(f.tensors.values())
        places: list[tuple[str, int | None]] = [(f"tensors[{t.name!r}]", None) for t in tensors]
        issue = parameter_issue([t.shape for t in tensors], size, not unsized, places)
        if issue is not None:
            out.append(Issue(issue.rule, issue.message, issue.path, issue.offset, "warning"))
    return out


def short_tensors(f: Any) -> list[tuple[Any, int]]:
    """(tensor, bytes present) for every tensor whose data ends past the end of its file: a file cut short. Known
    without reading any tensor data (the lengths of the views or remote ranges); formats whose loaders already
    refuse such a file (legacy, rwkv.cpp, safetensors: ``tensor.data``, ``tensor.bounds``) give nothing here."""
    out = []
    for t in f.tensors.values():
        present = getattr(t, "bytes_present", None)
        if present is None or not t.type.sized:
            continue
        try:
            need = int(t.nbytes)
        except FormatError:  # an impossible shape: validate's to report
            continue
        if present < need:
            out.append((t, present))
    return out


def truncation_issue(f: Any) -> Issue | None:
    """An error naming the tensors whose data points past the end of the file (``tensor.bounds``), or None."""
    short = short_tensors(f)
    if not short:
        return None
    first, present = short[0]
    missing = sum(int(t.nbytes) - p for t, p in short)
    return Issue(
        rules.TENSOR_BOUNDS,
        f"the file is cut short: {len(short)} of {len(f.tensors)} tensors point past "
        f"its end, {_count(missing)} bytes of tensor data missing "
        f"(first: {first.name!r}, {present:,} of {_count(int(first.nbytes))} bytes present)",
        severity="error",
    )


def _count(n: int) -> str:
    """A byte count for a message: with thousands separators, or its order of magnitude when a crafted shape
    makes it absurd (messages never print an unbounded integer)."""
    return f"{n:,}" if n < ABSURD_COUNT else human_bytes(n).removesuffix(" B (implausible)").removeprefix("~") + " (implausible)"


def n_elements(t: Any) -> int:
    n = 1
    for d in t.shape:
        n *= int(d)
    return n


#: Counts from here on are no model's (a quadrillion): shown by order of magnitude, never digit by digit.
ABSURD_COUNT = 10**15


def human_bytes(n: float) -> str:
    if n >= ABSURD_COUNT * 1024:  # a crafted shape: more bytes than any disk holds
        return f"~2^{int(n).bit_length() - 1} B (implausible)"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1024
    return f"{n} B"


def human_count(n: int) -> str:
    """``1.23M``-style, with the exact count; an absurd count (a crafted shape) only as ``~10^N``, which
    needs no conversion of thousands of digits."""
    from ..core.naming import size_label

    if n >= ABSURD_COUNT:
        return f"~10^{int(n.bit_length() * 0.30103)} (implausible)"
    return f"{size_label(n)} ({n:,})" if n >= 1000 else str(n)


def size_by_type(f: Any) -> list[dict[str, Any]]:
    """Tensors, elements and bytes per tensor type, largest first."""
    groups: dict[str, dict[str, Any]] = {}
    for t in f.tensors.values():
        g = groups.setdefault(type_name(t), {"type": type_name(t), "tensors": 0, "elements": 0, "nbytes": 0})
        g["tensors"] += 1
        g["elements"] += n_elements(t)
        g["nbytes"] += int(t.nbytes)
    return sorted(groups.values(), key=lambda g: (-g["nbytes"], g["type"]))


def tokenizer_summary(meta: Mapping[str, Any]) -> dict[str, Any]:
    """The tokenizer at a glance: model, vocabulary size, merges, special token ids and their text."""
    out: dict[str, Any] = {}
    if "tokenizer.ggml.model" in meta:
        out["model"] = meta["tokenizer.ggml.model"]
    if "tokenizer.ggml.pre" in meta:
        out["pre"] = meta["tokenizer.ggml.pre"]
    tokens = meta.get("tokenizer.ggml.tokens")
    if tokens is not None:
        out["tokens"] = len(tokens)
    if "tokenizer.ggml.merges" in meta:
        out["merges"] = len(meta["tokenizer.ggml.merges"])
    for key in sorted(k for k in meta if k.startswith("tokenizer.ggml.") and k.endswith("_token_id")):
        token_id = meta[key]
        entry: dict[str, Any] = {"id": json_value(token_id)}
        if tokens is not None and isinstance(token_id, (int, np.integer)) and 0 <= int(token_id) < len(tokens):
            entry["text"] = tokens[int(token_id)]
        out[key[len("tokenizer.ggml.") : -len("_token_id")]] = entry
    if "tokenizer.huggingface.json" in meta:
        out["huggingface_json_bytes"] = len(str(meta["tokenizer.huggingface.json"]).encode("utf-8"))
    return out


def summary(f: Any, path: str | None = None) -> dict[str, Any]:
    """The model at a glance (JSON-ready): what ``info`` prints first."""
    from ..core.naming import disagreements, parameter_count, parse

    meta = f.metadata
    arch = meta.get("general.architecture")
    total = sum(int(t.nbytes) for t in f.tensors.values())
    out: dict[str, Any] = {
        "architecture": arch,
        "parameters": parameter_count(f),
        "tensor_bytes": total,
        "size_by_type": size_by_type(f),
    }
    ft = meta.get("general.file_type")
    if isinstance(ft, int) and not isinstance(ft, bool):
        out["file_type"] = FILE_TYPES.get(ft, str(ft))
    hint = header_ftype(f)
    if hint is not None:
        out["header_ftype"] = hint
    out["general"] = {k: json_value(v) for k, v in meta.items() if k.startswith("general.") and _small(v)}
    if isinstance(arch, str):
        out["hyperparameters"] = {k[len(arch) + 1 :]: json_value(v) for k, v in meta.items() if k.startswith(arch + ".") and _small(v)}
    tok = tokenizer_summary(meta)
    if tok:
        out["tokenizer"] = tok
    template = meta.get("tokenizer.chat_template")
    if isinstance(template, str):
        out["chat_template"] = template
    name = os.path.basename(path or getattr(f, "path", None) or "")
    if name and getattr(f, "format", "gguf") == "gguf":  # the naming convention is GGUF's
        parsed = parse(name)
        out["name"] = parsed.as_dict() if parsed else None
        out["name_warnings"] = disagreements(parsed, f) if parsed and out["parameters"] < ABSURD_COUNT else []
    shards = getattr(f, "shard_paths", None)
    if shards:
        out["shards"] = [str(p) for p in shards]
    if getattr(f, "format", "gguf") == "rwkv":
        out["rwkv_version"] = f.metadata["architecture"]
    warnings = reading_warnings(f, path)
    out["warnings"] = [i.line() for i in warnings if i.severity != "error"]
    out["errors"] = [i.line() for i in warnings if i.severity == "error"]  # a truncated file
    if any(i.rule == "model.parameters" for i in warnings):
        out["parameters_plausible"] = False
        out["name_warnings"] = []  # comparing the name's size label with an absurd count says nothing
    return out


def header_ftype(f: Any) -> dict[str, Any] | None:
    """A llama.cpp legacy file's header ``ftype`` (a ``llama_ftype``) with its name. It is a hint only: quantize
    chose types per tensor (e.g. Q6_K ``output.weight`` in "MOSTLY_Q4_0" files), so ``info`` lists the tensors'
    own types beside it."""
    if getattr(f, "format", "gguf") == "gguf" or getattr(f, "profile", None) != "llama":
        return None
    from ..formats.legacy.schema import legacy_tables

    ft = f.metadata.get("ftype")
    if legacy_tables().profiles["llama"]["ftype"] != "llama" or not isinstance(ft, int):
        return None
    return {"id": ft, "name": FILE_TYPES.get(ft, "unknown")}


def layout_name(t: Any) -> str:
    """A tensor's type, or its era's block layout when that layout is retired ('q4_0.v1', 'q4_2')."""
    return t.layout if getattr(t, "retired", False) else type_name(t)


def _small(value: Any) -> bool:
    """Scalars and short arrays go into the summary (a vocabulary does not)."""
    if isinstance(value, (str, bytes, int, float, np.generic)):
        return True
    try:
        return len(value) <= 64
    except TypeError:
        return True


# -- JSON --------------------------------------------------------------------------------------------
def info_json(f: Any, full: bool = False, path: str | None = None, summarized: dict[str, Any] | None = None) -> dict[str, Any]:
    """``{"format", "version", "byte_order", "alignment", "data_offset", "metadata", "tensors", "summary"}``
    (the header fields are null for formats that have no such thing). ``metadata`` and ``tensors`` are objects
    keyed by name, in file order, as ``hash --json`` keys its tensors: ``.metadata["general.name"].value``.
    ``summarized``: the summary, when the caller has made it (default: :func:`summary`)."""
    metadata: dict[str, dict[str, Any]] = {}
    for field in fields_of(f):
        if field.type != "arr":
            metadata[field.key] = {"type": field.type, "value": json_value(field.value)}
            continue
        entry: dict[str, Any] = {"type": "arr", "array_type": field.array_type, "n": len(field.value)}
        if field.array_type == "str":
            entry["first"], entry["last"] = first_last(field.value)
        if full:
            entry["values"] = json_value(field.value)
        metadata[field.key] = entry
    tensors = {
        t.name: {"type": type_name(t), "shape": [int(d) for d in t.shape], "offset": getattr(t, "offset", None), "nbytes": int(t.nbytes)}
        | ({"layout": t.layout} if getattr(t, "retired", False) else {})
        for t in f.tensors.values()
    }
    out: dict[str, Any] = {"format": getattr(f, "format", "gguf")}
    out.update({k: getattr(f, k, None) for k in HEADER_FIELDS})
    out.update(metadata=metadata, tensors=tensors, summary=summary(f, path) if summarized is None else summarized)
    return out
