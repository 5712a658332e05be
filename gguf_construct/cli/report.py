"""What ``info`` shows: a summary of the model (architecture, parameters, size by tensor type, ``general.*``,
tokenizer, chat template, the file name's components) and every key and tensor, as text, JSON or Markdown.

It works on any loaded file object of the common protocol (``format``, ``path``, ``metadata``, ``tensors``);
GGUF files add their header (version, byte order, alignment, data offset) and each key's GGUF type. The JSON
shape keeps the header fields, ``metadata`` (key, type, value; arrays as array_type, n, first/last) and
``tensors`` (name, type, shape, offset, nbytes; ``layout`` when a legacy file's blocks are in a retired layout),
and adds ``summary`` (with ``header_ftype`` for llama.cpp legacy files).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..api.metadata import MetadataField, first_last, infer_type, json_value
from ..api.protocol import Tensor
from ..core import rules
from ..core.tables import FILE_TYPES, GGMLType
from ..errors import FormatError
from ..validation import Issue, parameter_issue

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
        from ..migration.rwkv_cpp import migration_target

        out["rwkv_version"] = f.metadata["architecture"]
        out["migrates_to"] = migration_target(f.metadata["architecture"])
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
def info_json(f: Any, full: bool = False, path: str | None = None) -> dict[str, Any]:
    """``{"format", "version", "byte_order", "alignment", "data_offset", "metadata", "tensors", "summary"}``
    (the header fields are null for formats that have no such thing). ``metadata`` and ``tensors`` are objects
    keyed by name, in file order, as ``hash --json`` keys its tensors: ``.metadata["general.name"].value``."""
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
    out.update(metadata=metadata, tensors=tensors, summary=summary(f, path))
    return out


# -- text ----------------------------------------------------------------------------------------------
def _short(value: Any, width: int = 72, f32: bool = False) -> str:
    """A value for one line: a float32 (an np.float32, or a Python float from an f32 field: ``f32``) as its
    shortest float32 digits, any other float as itself (an f64 of 1e300 is not ``inf``)."""
    if isinstance(value, np.float32) or (f32 and isinstance(value, float)):
        text = str(np.float32(value))
    elif isinstance(value, np.generic) and not isinstance(value, np.bool_):
        text = repr(value.item())
    else:
        text = repr(value)
    return text if len(text) <= width else text[: width - 3] + "..."


def header_line(f: Any) -> str:
    fmt = getattr(f, "format", "gguf")
    if fmt == "gguf" and hasattr(f, "version"):
        return f"GGUF v{f.version}, {f.byte_order}-endian, alignment {f.alignment}, data at byte {f.data_offset}"
    extra = ", ".join(f"{k.replace('_', ' ')} {getattr(f, k)}" for k in HEADER_FIELDS if getattr(f, k, None) is not None)
    return fmt + (f", {extra}" if extra else "")


def _template_preview(template: str, lines: int = 6) -> list[str]:
    rows = template.splitlines() or [""]
    shown = [f"    | {r[:110]}" for r in rows[:lines]]
    if len(rows) > lines:
        shown.append(f"    | ... ({len(rows) - lines} more lines, {len(template)} characters)")
    return shown


def summary_text(s: dict[str, Any]) -> list[str]:
    lines = ["model:"]
    lines.append(f"  architecture      {s['architecture'] if s['architecture'] is not None else '(none)'}")
    for key in ("general.name", "general.basename", "general.size_label", "general.finetune", "general.version"):
        if key in s["general"]:
            lines.append(f"  {key[8:]:17s} {s['general'][key]}")
    lines.append(f"  parameters        {human_count(s['parameters'])}")
    if "file_type" in s:
        lines.append(f"  file type         {s['file_type']}")
    if "header_ftype" in s:
        lines.append(f"  header ftype      {s['header_ftype']['id']} ({s['header_ftype']['name']}): a hint; the tensors' own types follow")
    lines.append(f"  tensor data       {human_bytes(s['tensor_bytes'])} ({s['tensor_bytes']:,} bytes)")
    lines += [f"  {e}" for e in s.get("errors", [])]  # "error: [tensor.bounds] the file is cut short ..."
    for g in s["size_by_type"]:
        share = 100 * g["nbytes"] / s["tensor_bytes"] if s["tensor_bytes"] else 0.0
        lines.append(
            f"    {g['type']:10s} {g['tensors']:5d} tensors {human_count(g['elements']):>22s} "
            f"elements {human_bytes(g['nbytes']):>12s} {share:5.1f}%"
        )
    if s.get("hyperparameters"):
        lines.append("  hyperparameters   " + ", ".join(f"{k}={_short(v, 24, f32=True)}" for k, v in s["hyperparameters"].items()))
    tok = s.get("tokenizer")
    if tok:
        parts = [f"{k} {tok[k]}" for k in ("model", "pre", "tokens", "merges") if k in tok]
        parts += [f"{k} {v['id']}" + (f" {v['text']!r}" if "text" in v else "") for k, v in tok.items() if isinstance(v, dict)]
        lines.append("  tokenizer         " + ", ".join(parts))
    if "chat_template" in s:
        lines.append("  chat template:")
        lines += _template_preview(s["chat_template"])
    if "name" in s:
        n = s["name"]
        if n is None:
            lines.append("  file name         does not follow the GGUF naming convention")
        else:
            lines.append("  file name         " + ", ".join(f"{k} {v}" for k, v in n.items() if v is not None))
        lines += [f"  warning: {w}" for w in s["name_warnings"]]
    if s.get("shards"):
        lines.append(f"  shards            {len(s['shards'])}: " + ", ".join(os.path.basename(p) for p in s["shards"]))
    if "migrates_to" in s:
        lines.append(f"  RWKV version      {s['rwkv_version']}; `migrate` writes {s['migrates_to']}")
    return lines


def info_text(f: Any, path: str, full: bool = False) -> str:
    """The readable report: header, model summary, metadata with types, tensors with shapes and sizes."""
    s = summary(f, path)
    lines = [f"{path}", f"  {header_line(f)}", f"  {len(f.metadata)} metadata keys, {len(f.tensors)} tensors", ""]
    lines += summary_text(s)
    lines += ["", "metadata:"]
    for field in fields_of(f):
        if field.type == "arr":
            n = len(field.value)
            if full:
                shown = _short(json_value(field.value), 10**9)
            elif (field.array_type == "str" or isinstance(field.value, np.ndarray)) and n:
                shown = f"[{_short(field.value[0], 32)} ... {_short(field.value[-1], 32)}]"
            else:
                shown = ""
            lines.append(f"  {field.key:48s} {field.type_label:10s} n={n} {shown}")
        else:
            value = field.value
            if field.key == "general.file_type" and isinstance(value, int) and value in FILE_TYPES:
                shown = f"{value} ({FILE_TYPES[value]})"
            else:
                shown = _short(value, 10**9 if full else 72, f32=field.type == "f32") if field.type == "f32" or not full else repr(value)
            lines.append(f"  {field.key:48s} {field.type_label:10s} {shown}")
    if len(f.tensors):
        lines += ["", "tensors:"]
        for t in f.tensors.values():
            off = getattr(t, "offset", None)
            lines.append(f"  {t.name:48s} {layout_name(t):8s} {str(list(t.shape)):24s} offset {str(off):>12} {int(t.nbytes):>12} bytes")
        lines.append(f"  {len(f.tensors)} tensors, {s['tensor_bytes']} bytes of data")
    return "\n".join(lines)


# -- Markdown -------------------------------------------------------------------------------------------
def _code(text: str) -> str:
    """``text`` as inline code, fenced with one more backtick than it contains, pipes escaped for tables."""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}".replace("|", "\\|").replace("\n", "\\n")


def _md_value(field: MetadataField) -> str:
    if field.type == "arr":
        items = field.value
        n = len(items)
        head = [items[i] for i in range(min(n, 5 if field.array_type == "str" else 7))] if field.array_type != "arr" else []
        shown = [_code(_clip(v, 30)) if isinstance(v, str) else _short(v, 24) for v in head]
        return f"[ {', '.join(shown)}{', ...' if n > len(shown) else ''} ]"
    if field.type == "str":
        return _code(_clip(field.value, 60))
    return _short(field.value, 40, f32=field.type == "f32")


def _clip(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n // 2] + "…" + text[-n // 2 :]


def info_markdown(f: Any, path: str) -> str:
    """A Markdown report like gguf-py's ``gguf_dump --markdown``: summary, key-value table, tensor table."""
    s = summary(f, path)
    out = [f"# {os.path.basename(path)}", "", f"- Format: {header_line(f)}"]
    out.append(f"- Architecture: {s['architecture']}")
    out.append(f"- Parameters: {human_count(s['parameters'])}")
    if "file_type" in s:
        out.append(f"- File type: {s['file_type']}")
    if "header_ftype" in s:
        out.append(f"- Header ftype (a hint, not the tensor types): {s['header_ftype']['id']} ({s['header_ftype']['name']})")
    out.append(f"- Tensor data: {human_bytes(s['tensor_bytes'])} in {len(f.tensors)} tensors")
    if s.get("name"):
        out.append("- File name: " + ", ".join(f"{k} {_code(str(v))}" for k, v in s["name"].items() if v is not None))
    out += [f"- Warning: {w}" for w in s.get("name_warnings", [])]
    if s["size_by_type"]:
        out += ["", "## Size by tensor type", "", "| Type | Tensors | Elements | Bytes | Share |", "|:--|--:|--:|--:|--:|"]
        for g in s["size_by_type"]:
            share = 100 * g["nbytes"] / s["tensor_bytes"] if s["tensor_bytes"] else 0.0
            out.append(f"| {g['type']} | {g['tensors']} | {g['elements']:,} | {g['nbytes']:,} | {share:.1f}% |")
    if "chat_template" in s:
        fence = "`" * max(3, 1 + max((len(m) for m in re.findall(r"`+", s["chat_template"])), default=0))
        out += ["", "## Chat template", "", f"{fence}jinja", s["chat_template"], fence]
    fields = fields_of(f)
    out += ["", "## Key-value metadata", "", f"There are {len(fields)} key-value pairs in this file.", ""]
    out += ["| POS | TYPE | Count | Key | Value |", "|--:|:--|--:|:--|:--|"]
    for i, field in enumerate(fields, 1):
        count = len(field.value) if field.type == "arr" else 1
        out.append(f"| {i} | {field.type_label} | {count} | {field.key} | {_md_value(field)} |")
    if len(f.tensors):
        out += ["", "## Tensors", "", "| # | Name | Type | Shape | Elements | Bytes | Offset |", "|--:|:--|:--|:--|--:|--:|--:|"]
        for i, t in enumerate(f.tensors.values()):
            shape = " × ".join(str(int(d)) for d in t.shape)
            off = getattr(t, "offset", None)
            out.append(
                f"| {i} | {t.name} | {type_name(t)} | {shape} | {n_elements(t):,} | {int(t.nbytes):,} | {'' if off is None else hex(off)} |"
            )
    return "\n".join(out) + "\n"


# -- many files ----------------------------------------------------------------------------------------
def summary_row(f: Any, path: str) -> dict[str, Any]:
    """One row of the many-files table."""
    s = summary(f, path)
    return {
        "file": path,
        "format": getattr(f, "format", "gguf"),
        "architecture": s["architecture"],
        "parameters": s["parameters"],
        "tensors": len(f.tensors),
        "tensor_bytes": s["tensor_bytes"],
        "main_type": s["size_by_type"][0]["type"] if s["size_by_type"] else None,
        "name_warnings": len(s.get("name_warnings", [])),
        "warnings": s["warnings"],
        "errors": s["errors"],
    }


def table(rows: list[list[str]], header: list[str], right: set[int] = frozenset()) -> str:  # type: ignore[assignment]
    """A plain aligned text table."""
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    fmt = [(lambda s, w: str(s).rjust(w)) if i in right else (lambda s, w: str(s).ljust(w)) for i in range(len(header))]
    lines = ["  ".join(fmt[i](h, widths[i]) for i, h in enumerate(header)).rstrip()]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(fmt[i](c, widths[i]) for i, c in enumerate(r)).rstrip() for r in rows]
    return "\n".join(lines)
