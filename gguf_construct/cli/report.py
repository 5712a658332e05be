"""What ``info`` shows, as text, JSON and Markdown: a summary of the model and every key and tensor. The data and
the JSON shape are ``api.describe``'s (below ``cli``, so the fuzzer compares it too); this module adds the one
note that needs the migration layer (what ``migrate`` makes of an rwkv.cpp file).
"""

from __future__ import annotations

import os
import re
from typing import Any

import numpy as np

from ..api import describe
from ..api.describe import (  # noqa: F401  (HEADER_FIELDS .. type_name: used by other commands through this module)
    ABSURD_COUNT,
    HEADER_FIELDS,
    fields_of,
    header_ftype,
    human_bytes,
    human_count,
    layout_name,
    n_elements,
    reading_warnings,
    size_by_type,
    type_name,
)
from ..api.metadata import MetadataField, json_value
from ..core.tables import FILE_TYPES


def summary(f: Any, path: str | None = None) -> dict[str, Any]:
    """``api.describe.summary`` with, for an rwkv.cpp file, what ``migrate`` turns it into (``migrates_to``)."""
    out = describe.summary(f, path)
    if "rwkv_version" in out:
        from ..migration.rwkv_cpp import migration_target  # only for rwkv.cpp files: the migration tables load slowly

        out["migrates_to"] = migration_target(out["rwkv_version"])
    return out


def info_json(f: Any, full: bool = False, path: str | None = None) -> dict[str, Any]:
    """``info --json``: ``api.describe.info_json`` with this module's :func:`summary`."""
    return describe.info_json(f, full, path, summarized=summary(f, path))


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
