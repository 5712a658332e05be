"""Validation of safetensors files (and Ollama tensor blobs): every problem as an ``Issue``.

What both the safetensors library and MLX reject is an error: a header length of 0, above 100,000,000 or past
the end of the file; a header that is not UTF-8 JSON or not an object; ``__metadata__`` that is not an object
of strings; an entry without ``dtype``/``shape``/``data_offsets``; an unknown dtype; a negative dimension;
``end < begin``; ``end - begin != prod(shape) * itemsize``; a tensor past the end of the data region. Overlapping
tensors are an error too (the safetensors library rejects them; MLX reads aliases).

What MLX accepts and the safetensors library rejects is a warning under profile ``spec`` (the default, which is
what Ollama's MLX runner reads) and an error under profile ``hf``: gaps between tensors (or a first tensor not
at 0), bytes after the last tensor, a repeated ``__metadata__``, NUL bytes padding the header. A duplicate
tensor key is a warning under both (both readers take the last one). Source: ``../shared/reference/ollama-blobs.md`` section 1.4.
"""

from __future__ import annotations

from typing import Any

from . import errors
from .errors import FormatError
from .formats.safetensors import METADATA_KEY, SAFETENSORS
from .validation import Issue

PROFILES = ("spec", "hf")

_CLASSES = {"tensor.dtype": errors.UnsupportedTypeError, "header.truncated": errors.TruncatedError, "tensor.duplicate": errors.DuplicateError}


def raise_first(issues: list[Issue]) -> None:
    """Raise the first error among ``issues`` as its FormatError subclass (warnings pass)."""
    for issue in issues:
        if issue.severity == "error":
            cls = _CLASSES.get(issue.rule)
            raise cls(issue.rule, issue.message, path=issue.path, offset=issue.offset) if cls else issue.error()


def validate_safetensors_bytes(data: Any, profile: str = "spec") -> list[Issue]:
    """Every rule ``data`` breaks as a safetensors file (profile 'spec' or 'hf'; other names mean 'spec')."""
    try:
        c = SAFETENSORS.parse(data)
    except FormatError as e:
        return [Issue(e.rule, e.message, e.path, e.offset)]
    return check_safetensors(c, profile)


def check_safetensors(c: Any, profile: str = "spec") -> list[Issue]:
    """Every rule a parsed safetensors container breaks (its header is parsed once and shared with the reader)."""
    lenient = "error" if profile == "hf" else "warning"
    header = c.header
    try:
        top = header.json
    except FormatError as e:
        return [Issue(e.rule, e.message, e.path, e.offset)]
    out: list[Issue] = []
    start = int(c.data_offset)
    region = len(c.data)

    if header.padding.strip(b" "):
        out.append(Issue("header.padding", "header padded with NUL bytes (the safetensors library reads only spaces)", "header", header.offset + len(header.raw) - len(header.padding), lenient))

    # __metadata__
    seen: dict[str, int] = {}
    for key, _ in top.pairs if len(top.pairs) != len(top) else ():  # only a header with a repeated key counts
        seen[key] = seen.get(key, 0) + 1
    if seen.get(METADATA_KEY, 0) > 1:
        out.append(Issue("metadata.duplicate", f"{METADATA_KEY} occurs {seen[METADATA_KEY]} times (the last one is read)", "header", header.key_offset(METADATA_KEY), lenient))
    try:
        header.metadata  # noqa: B018 - checks every value is a string
    except FormatError as e:
        out.append(Issue(e.rule, e.message, e.path, e.offset))
    for key, n in seen.items():
        if key != METADATA_KEY and n > 1:
            out.append(Issue("tensor.duplicate", f"tensor {key!r} occurs {n} times (the last one is read)", f"header[{key!r}]", header.key_offset(key), "warning"))

    # entries on their own, and their placement: one vectorised pass decides the common case (no problem)
    table = header.sound
    if table is not None and table.placed(region):
        return out
    spans = []
    checked = header.problems
    for name, value in top.items():
        if name == METADATA_KEY:
            continue
        problems = checked[name]
        for rule, message in problems:
            out.append(Issue(rule, message, f"header[{name!r}]", header.key_offset(name)))
        if problems:
            continue
        begin, end = value["data_offsets"]
        if end > region:
            out.append(Issue("tensor.bounds", f"data_offsets [{begin}, {end}] end past the data region ({region} bytes)", f"header[{name!r}]", start + begin))
            continue
        spans.append((begin, end, name))

    # placement: overlaps, gaps, trailing bytes
    spans.sort()
    covered = 0
    last_name = None
    for begin, end, name in spans:
        if begin == end:
            continue
        if begin < covered:
            out.append(Issue("tensor.overlap", f"tensor {name!r} [{begin}, {end}] overlaps {last_name!r}, which ends at {covered}", f"header[{name!r}]", start + begin))
        elif begin > covered:
            what = f"after {last_name!r}" if last_name else "before the first tensor"
            out.append(Issue("data.gap", f"{begin - covered} unused bytes {what} (data region offset {covered})", "data", start + covered, lenient))
        if end > covered:
            covered, last_name = end, name
    if region > covered and (spans or region):
        out.append(Issue("data.trailing", f"{region - covered} bytes after the last tensor", "data", start + covered, lenient))
    return out
