"""Validation of safetensors files (and Ollama tensor blobs): every problem as an ``Issue``.

What both the safetensors library and MLX reject is an error: a header length of 0, above 100,000,000 or past
the end of the file; a header that is not UTF-8 JSON or not an object; ``__metadata__`` that is not an object
of strings; an entry without ``dtype``/``shape``/``data_offsets``; an unknown dtype; a negative dimension;
``end < begin``; ``end - begin != prod(shape) * itemsize``; a tensor past the end of the data region. Overlapping
tensors are an error too (the safetensors library rejects them; MLX reads aliases).

What MLX accepts and the safetensors library rejects is a warning under profile ``spec`` (the default, which is
what Ollama's MLX runner reads) and an error under profile ``hf``: gaps between tensors (or a first tensor not
at 0), bytes after the last tensor, a repeated ``__metadata__``, NUL bytes padding the header. A duplicate
tensor key is a warning under both (both readers take the last one). Sources: the readers' checks in
``huggingface/safetensors`` ``safetensors/src/tensor.rs`` at 24b0b28 (package 0.8.0) and ``ml-explore/mlx``
``mlx/io/safetensors.cpp`` at 846d176 (mlx 0.32.4).
"""

from __future__ import annotations

from typing import Any

from ..core import rules
from ..errors import FormatError
from ..formats.safetensors.schema import METADATA_KEY, SAFETENSORS
from .issue import Issue, Severity, parse_then_check, raise_first
from .profiles import SafetensorsProfile

__all__ = ["check_safetensors", "raise_first", "validate_safetensors_bytes"]


def validate_safetensors_bytes(data: Any, profile: SafetensorsProfile | str = "spec") -> list[Issue]:
    """Every rule ``data`` breaks as a safetensors file (profile 'spec' or 'hf'; other names mean 'spec')."""
    return parse_then_check(lambda: SAFETENSORS.parse(data), lambda c: check_safetensors(c, profile))


def validate_safetensors_source(src: Any, profile: SafetensorsProfile | str = "spec") -> list[Issue]:
    """``validate_safetensors_bytes`` for a file read by ranges (a ``sources.byte_source.ByteSource``): the header
    only, the tensor data is not fetched."""
    return parse_then_check(lambda: src.parse_header(SAFETENSORS, "data"), lambda c: check_safetensors(c, profile))


def check_safetensors(c: Any, profile: SafetensorsProfile | str = "spec") -> list[Issue]:
    """Every rule a parsed safetensors container breaks (its header is parsed once and shared with the reader)."""
    lenient: Severity = "error" if profile == "hf" else "warning"
    header = c.header
    try:
        top = header.json
    except FormatError as e:
        return [Issue.from_error(e)]
    out: list[Issue] = []
    start = int(c.data_offset)
    region = len(c.data)

    if header.padding.strip(b" "):
        out.append(
            Issue(
                rules.HEADER_PADDING,
                "header padded with NUL bytes (the safetensors library reads only spaces)",
                "header",
                header.offset + len(header.raw) - len(header.padding),
                lenient,
            )
        )

    # __metadata__
    seen: dict[str, int] = {}
    for key, _ in top.pairs if len(top.pairs) != len(top) else ():  # only a header with a repeated key counts
        seen[key] = seen.get(key, 0) + 1
    if seen.get(METADATA_KEY, 0) > 1:
        out.append(
            Issue(
                rules.METADATA_DUPLICATE,
                f"{METADATA_KEY} occurs {seen[METADATA_KEY]} times (the last one is read)",
                "header",
                header.key_offset(METADATA_KEY),
                lenient,
            )
        )
    try:
        header.metadata  # noqa: B018 - checks every value is a string
    except FormatError as e:
        out.append(Issue.from_error(e))
    for key, n in seen.items():
        if key != METADATA_KEY and n > 1:
            out.append(
                Issue(
                    rules.TENSOR_DUPLICATE,
                    f"tensor {key!r} occurs {n} times (the last one is read)",
                    f"header[{key!r}]",
                    header.key_offset(key),
                    "warning",
                )
            )

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
            out.append(
                Issue(
                    rules.TENSOR_BOUNDS,
                    f"data_offsets [{begin}, {end}] end past the data region ({region} bytes)",
                    f"header[{name!r}]",
                    start + begin,
                )
            )
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
            out.append(
                Issue(
                    rules.TENSOR_OVERLAP,
                    f"tensor {name!r} [{begin}, {end}] overlaps {last_name!r}, which ends at {covered}",
                    f"header[{name!r}]",
                    start + begin,
                )
            )
        elif begin > covered:
            what = f"after {last_name!r}" if last_name else "before the first tensor"
            out.append(
                Issue(
                    rules.DATA_GAP,
                    f"{begin - covered} unused bytes {what} (data region offset {covered})",
                    "data",
                    start + covered,
                    lenient,
                )
            )
        if end > covered:
            covered, last_name = end, name
    if region > covered and (spans or region):
        out.append(Issue(rules.DATA_TRAILING, f"{region - covered} bytes after the last tensor", "data", start + covered, lenient))
    return out
