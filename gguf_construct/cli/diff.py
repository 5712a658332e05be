"""``diff A B``: what differs between two model files: header, metadata (keys added, removed, changed in type
or value) and tensor infos (added, removed, type or shape changed), then per-tensor value differences after
dequantization (max absolute, max relative to the largest |A| value, RMS relative), so a requantized or
migrated file can be judged by how far its weights moved. Works across formats (GGUF against GGJT, say).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from typing import Any

import numpy as np

from ..api.metadata import json_value
from .report import HEADER_FIELDS, fields_of, type_name
from .shared import EXIT_BAD, EXIT_OK, command


def _same_value(a: Any, b: Any) -> bool:
    """Equal values, NaN equal to NaN, arrays of arrays compared element by element (``==`` on a list of numpy
    arrays is ambiguous, so nested arrays would otherwise always differ)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same_value(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same_value(x, y) for x, y in zip(a, b))
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        a, b = np.asarray(a), np.asarray(b)
        return a.shape == b.shape and bool(np.array_equal(a, b, equal_nan=a.dtype.kind == "f" and b.dtype.kind == "f"))
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    try:
        return bool(a == b)
    except (TypeError, ValueError):
        return False


def value_stats(a: np.ndarray, b: np.ndarray) -> dict[str, Any]:
    """Max |a-b|, that over max |a|, RMS(a-b)/RMS(a), and the count of positions where only one is NaN."""
    a = a.reshape(-1).astype(np.float64)
    b = b.reshape(-1).astype(np.float64)
    nan_a, nan_b = np.isnan(a), np.isnan(b)
    nan_mismatch = int(np.count_nonzero(nan_a != nan_b))
    ok = ~(nan_a | nan_b)
    d = np.abs(a[ok] - b[ok])
    max_abs = float(d.max()) if d.size else 0.0
    scale = float(np.abs(a[ok]).max()) if d.size else 0.0
    rms_a = float(np.sqrt(np.mean(a[ok] ** 2))) if d.size else 0.0
    rms_d = float(np.sqrt(np.mean(d**2))) if d.size else 0.0
    return {
        "max_abs": max_abs,
        "max_rel": max_abs / scale if scale else (0.0 if max_abs == 0 else math.inf),
        "rms_rel": rms_d / rms_a if rms_a else (0.0 if rms_d == 0 else math.inf),
        "nan_mismatch": nan_mismatch,
    }


#: bytes compared at a time: two tensors' data are compared without copying either
COMPARE_CHUNK = 16 << 20


def same_bytes(a: Any, b: Any) -> bool:
    """Whether two byte buffers (zero-copy views of mapped files) hold the same bytes, compared a chunk at a time."""
    va, vb = np.frombuffer(a, np.uint8), np.frombuffer(b, np.uint8)
    if len(va) != len(vb):
        return False
    return all(np.array_equal(va[i : i + COMPARE_CHUNK], vb[i : i + COMPARE_CHUNK]) for i in range(0, len(va), COMPARE_CHUNK))


def _same_data(a: Any, b: Any, one_file: bool) -> bool:
    if one_file:
        return len(a.data) == len(b.data)
    return same_bytes(a.data, b.data)


def diff_files(fa: Any, fb: Any, *, values: bool = True, data: bool = True, one_file: bool = False) -> dict[str, Any]:
    """Every difference between two loaded files, as JSON-ready data. ``data`` False: headers only (metadata and
    tensor infos; tensors of the same type and shape count as identical; no tensor's bytes are read, not even to compare the
    values of tensors whose types differ). ``one_file``: both
    were opened from one unchanged local file, so a tensor's bytes are its own: each tensor's data is still taken
    (a view of the map, nothing read), so that data past the file's end is reported as by a full diff."""
    header = {
        k: [getattr(fa, k, None), getattr(fb, k, None)] for k in ("format", *HEADER_FIELDS) if getattr(fa, k, None) != getattr(fb, k, None)
    }
    ma = {x.key: x for x in fields_of(fa)}
    mb = {x.key: x for x in fields_of(fb)}
    metadata: dict[str, Any] = {
        "only_a": [{"key": k, "type": ma[k].type_label} for k in ma if k not in mb],
        "only_b": [{"key": k, "type": mb[k].type_label} for k in mb if k not in ma],
        "changed": [],
    }
    for k in ma:
        if k in mb and (ma[k].type_label != mb[k].type_label or not _same_value(ma[k].value, mb[k].value)):
            metadata["changed"].append(
                {"key": k, "type": [ma[k].type_label, mb[k].type_label], "value": [_brief(ma[k].value), _brief(mb[k].value)]}
            )
    ta, tb = fa.tensors, fb.tensors
    tensors: dict[str, Any] = {
        "only_a": [n for n in ta if n not in tb],
        "only_b": [n for n in tb if n not in ta],
        "changed": [],
        "identical": 0,
    }
    for name in ta:
        if name not in tb:
            continue
        a, b = ta[name], tb[name]
        entry: dict[str, Any] = {"name": name}
        if type_name(a).casefold() != type_name(b).casefold():  # one type as two formats spell it (f16, F16) is one
            entry["type"] = [type_name(a), type_name(b)]
        if tuple(a.shape) != tuple(b.shape):
            entry["shape"] = [list(a.shape), list(b.shape)]
        if "type" not in entry and "shape" not in entry and (not data or _same_data(a, b, one_file)):
            tensors["identical"] += 1
            continue
        if data and values and int(np.prod(a.shape, dtype=object)) == int(np.prod(b.shape, dtype=object)):
            try:
                entry["values"] = value_stats(a.to_numpy(), b.to_numpy())
            except (ValueError, NotImplementedError, KeyError) as e:
                entry["values"] = {"error": str(e)}
        elif "type" not in entry and "shape" not in entry:
            entry["bytes"] = "different"
        tensors["changed"].append(entry)
    same = not (
        header
        or metadata["only_a"]
        or metadata["only_b"]
        or metadata["changed"]
        or tensors["only_a"]
        or tensors["only_b"]
        or tensors["changed"]
    )
    return {"same": same, "header": header, "metadata": metadata, "tensors": tensors}


def _brief(value: Any) -> Any:
    v = json_value(value)
    if isinstance(v, list) and len(v) > 8:
        return {"n": len(v), "first": v[:3], "last": v[-3:]}
    if isinstance(v, str) and len(v) > 200:
        return v[:197] + "..."
    return v


def diff_text(d: dict[str, Any], a: str, b: str) -> str:
    lines = [f"--- {a}", f"+++ {b}"]
    for k, (x, y) in d["header"].items():
        lines.append(f"~ {k}: {x} -> {y}")
    m = d["metadata"]
    if m["only_a"] or m["only_b"] or m["changed"]:
        lines.append("metadata:")
        lines += [f"  - {e['key']} ({e['type']})" for e in m["only_a"]]
        lines += [f"  + {e['key']} ({e['type']})" for e in m["only_b"]]
        for e in m["changed"]:
            t = e["type"][0] if e["type"][0] == e["type"][1] else f"{e['type'][0]} -> {e['type'][1]}"
            lines.append(
                f"  ~ {e['key']} ({t}): {json.dumps(e['value'][0], ensure_ascii=False)} -> {json.dumps(e['value'][1], ensure_ascii=False)}"
            )
    t = d["tensors"]
    lines.append(f"tensors: {t['identical']} identical")
    lines += [f"  - {n}" for n in t["only_a"]]
    lines += [f"  + {n}" for n in t["only_b"]]
    for e in t["changed"]:
        parts = []
        if "type" in e:
            parts.append(f"type {e['type'][0]} -> {e['type'][1]}")
        if "shape" in e:
            parts.append(f"shape {e['shape'][0]} -> {e['shape'][1]}")
        v = e.get("values")
        if v and "error" in v:
            parts.append(f"values not compared: {v['error']}")
        elif v:
            parts.append(
                f"max abs {v['max_abs']:.6g}, max rel {v['max_rel']:.6g}, rms rel {v['rms_rel']:.6g}"
                + (f", {v['nan_mismatch']} NaN mismatches" if v["nan_mismatch"] else "")
            )
        elif e.get("bytes"):
            parts.append("bytes differ")
        lines.append(f"  ~ {e['name']}: " + "; ".join(parts))
    lines.append("same" if d["same"] else "different")
    return "\n".join(lines)


def file_identity(path: str) -> tuple[int, int, int, int] | None:
    """A local path's file as (device, inode, size, modification time); None for a URL or an unreadable path."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def same_file(*identities: tuple[int, int, int, int] | None) -> bool:
    """Whether every identity (``file_identity``, taken before and after both files were opened) is of one
    unchanged local file: its tensors are then the same bytes, and none is read. Taken only after the opens, a
    path replaced between them would pass for one file."""
    return identities[0] is not None and all(i == identities[0] for i in identities)


def _cmd_diff(args: argparse.Namespace) -> int:
    from ..api.registry import load

    before = file_identity(args.a), file_identity(args.b)
    args.file = args.a
    fa = load(args.a, strict=False)
    args.file = args.b
    fb = load(args.b, strict=False)
    one_file = same_file(*before, file_identity(args.a), file_identity(args.b))
    d = diff_files(fa, fb, values=not args.no_values, data=not args.header_only, one_file=one_file)
    if args.json:
        json.dump({"a": args.a, "b": args.b, **d}, sys.stdout, ensure_ascii=False, indent=1, default=str)
        sys.stdout.write("\n")
    else:
        print(diff_text(d, args.a, args.b))
    return EXIT_OK if d["same"] else EXIT_BAD


def register(sub: argparse._SubParsersAction) -> None:
    p = command(
        sub,
        "diff",
        _cmd_diff,
        description=(
            "Compare A and B: header fields, metadata keys (- only in A, + only in B, ~ changed type or value), tensor "
            "infos, and for tensors whose bytes differ the value differences after dequantization: max |A-B|, that "
            "relative to max |A|, and RMS(A-B)/RMS(A). Exit 0 when the files are the same, 1 when they differ."
        ),
    )
    p.add_argument("a", metavar="A", help="a model file or URL (any format gguf-construct reads)")
    p.add_argument("b", metavar="B", help="the model file or URL to compare it with")
    p.add_argument("--no-values", action="store_true", help="do not dequantize tensors to compare values")
    p.add_argument(
        "--header-only",
        action="store_true",
        help="compare headers only: metadata and tensor infos, no tensor bytes (O(header) at any file size)",
    )
    p.add_argument("--json", action="store_true", help="print JSON")
