"""The GGUF naming convention: ``<BaseName>-<SizeLabel>-<FineTune>-<Version>-<Encoding>-<Type>-<Shard>.gguf``.

``parse(filename)`` applies the specification's own regular expression (the seed spec, 'Validating Above Naming
Convention'); it needs at least BaseName, SizeLabel and Version in that order and returns None otherwise.
``format(...)`` joins the components back, replacing spaces by dashes as the spec says. ``from_metadata``
derives the name a file's metadata implies (``general.basename``, ``general.size_label`` or the counted
parameters, ``general.finetune``, ``general.version``, ``general.file_type``, ``split.*``), and
``disagreements`` lists where a file's name and its metadata differ.

Shard names (``-00001-of-00003.gguf``) are also recognised on their own by ``shard_of``: gguf-split writes them
after any prefix, whether or not the rest follows the convention.
"""

from __future__ import annotations

import builtins
import os
import re
from dataclasses import dataclass
from typing import Any

#: The specification's expression, verbatim in Python's syntax (``(?P<name>...)``; ASCII classes as in
#: JavaScript). Its BaseName part matches a segment like ``- `` in two ways, so a long name of such segments
#: takes exponential time: ``NAME_PATTERN`` is the same language with that part unambiguous.
_AFTER_BASENAME = (  # the parts after BaseName, the same in both expressions
    r"-(?:(?P<SizeLabel>(?:\d+x)?(?:\d+\.)?\d+[A-Za-z](?:-[A-Za-z]+(\d+\.)?\d+[A-Za-z]+)?)(?:-(?P<FineTune>[A-Za-z0-9\s-]+))?)?"
    r"-(?:(?P<Version>v\d+(?:\.\d+)*))"
    r"(?:-(?P<Encoding>(?!LoRA|vocab)[\w_]+))?"
    r"(?:-(?P<Type>LoRA|vocab))?"
    r"(?:-(?P<Shard>\d{5}-of-\d{5}))?\.gguf\Z"
)
SPEC_PATTERN = re.compile(
    r"^(?P<BaseName>[A-Za-z0-9\s]*(?:(?:-(?:(?:[A-Za-z\s][A-Za-z0-9\s]*)|(?:[0-9\s]*)))*))" + _AFTER_BASENAME, re.ASCII
)
# A BaseName segment after a dash is empty, or starts with a letter or space (then any of [A-Za-z0-9\s]), or
# is digits and spaces: split by the first character, the alternatives no longer overlap.
NAME_PATTERN = re.compile(r"^(?P<BaseName>[A-Za-z0-9\s]*(?:-(?:[A-Za-z\s][A-Za-z0-9\s]*|[0-9][0-9\s]*)?)*)" + _AFTER_BASENAME, re.ASCII)
SHARD_PATTERN = re.compile(r"^(?P<prefix>.*)-(?P<no>\d{5})-of-(?P<count>\d{5})\.gguf\Z", re.ASCII | re.DOTALL)
#: File names are at most 255 bytes on common file systems; longer input is not a file name (and the
#: specification's expression backtracks heavily on long hostile names).
MAX_NAME = 255
#: The single-letter scales of a size label.
SCALES = {"K": 10**3, "M": 10**6, "B": 10**9, "T": 10**12, "Q": 10**15}


@dataclass(frozen=True)
class ModelName:
    """The components of a conventional file name (None where absent)."""

    base_name: str
    size_label: str | None
    fine_tune: str | None
    version: str
    encoding: str | None = None
    type: str | None = None
    shard: str | None = None

    @property
    def shard_no(self) -> int | None:
        """1-based shard number (``00003-of-00009`` → 3)."""
        return int(self.shard[:5]) if self.shard else None

    @property
    def shard_count(self) -> int | None:
        return int(self.shard[-5:]) if self.shard else None

    @property
    def expert_count(self) -> int:
        """The ``<n>x`` of a size label such as ``8x7B`` (0 when there is none)."""
        m = re.match(r"(\d+)x", self.size_label or "")
        return int(m.group(1)) if m else 0

    @property
    def parameters(self) -> float | None:
        """The parameter count a size label states (per expert for ``8x7B``): ``3.8B`` → 3.8e9."""
        m = re.match(r"(?:\d+x)?((?:\d+\.)?\d+)([A-Za-z])", self.size_label or "")
        if not m or m.group(2).upper() not in SCALES:
            return None
        return float(m.group(1)) * SCALES[m.group(2).upper()]

    def filename(self) -> str:
        return format(self.base_name, self.size_label, self.fine_tune, self.version, self.encoding, self.type, self.shard)

    def as_dict(self) -> dict[str, Any]:
        """The components under the specification's names (BaseName, SizeLabel, ...)."""
        return {
            "BaseName": self.base_name,
            "SizeLabel": self.size_label,
            "FineTune": self.fine_tune,
            "Version": self.version,
            "Encoding": self.encoding,
            "Type": self.type,
            "Shard": self.shard,
        }


def parse(filename: str | os.PathLike[str]) -> ModelName | None:
    """The components of a file name (a path's last part), or None when it does not follow the convention."""
    name = os.path.basename(os.fspath(filename))
    if len(name) > MAX_NAME:
        return None
    m = NAME_PATTERN.match(name)
    if m is None:
        return None
    g = m.groupdict()
    return ModelName(g["BaseName"], g["SizeLabel"], g["FineTune"], g["Version"] or "v1.0", g["Encoding"], g["Type"], g["Shard"])


def format(
    base_name: str,
    size_label: str | None = None,
    fine_tune: str | None = None,
    version: str | None = None,
    encoding: str | None = None,
    type: str | None = None,
    shard: tuple[int, int] | str | None = None,
) -> str:
    """``Base-Name-SizeLabel-FineTune-vX.Y-Encoding-Type-0000N-of-0000M.gguf`` from the components present.

    Spaces become dashes (BaseName, FineTune); a version without its ``v`` gets one; ``shard`` is
    ``(number, total)`` with a 1-based number, or the ``00001-of-00003`` text.
    """
    parts = [_dashed(base_name)]
    if size_label:
        parts.append(_dashed(size_label))
    if fine_tune:
        parts.append(_dashed(fine_tune))
    if version:
        parts.append(version if version.startswith("v") else f"v{version}")
    if encoding:
        parts.append(_dashed(encoding))
    if type:
        if type not in ("LoRA", "vocab"):
            raise ValueError(f"type is 'LoRA' or 'vocab', not {type!r}")
        parts.append(type)
    if shard is not None:
        parts.append(shard if isinstance(shard, str) else shard_suffix(*shard))
    return "-".join(parts) + ".gguf"


def shard_suffix(number: int, total: int) -> str:
    """``00003-of-00009``: 1-based, five digits each (gguf-split's ``%05d-of-%05d``)."""
    if not 1 <= number <= total <= 99999:
        raise ValueError(f"shard {number} of {total}: need 1 <= number <= total <= 99999")
    return f"{number:05d}-of-{total:05d}"


def shard_of(filename: str | os.PathLike[str]) -> tuple[str, int, int] | None:
    """(prefix, number, total) for a gguf-split shard name ``prefix-00002-of-00005.gguf``, else None."""
    m = SHARD_PATTERN.match(os.fspath(filename))
    if m is None:
        return None
    number, total = int(m.group("no")), int(m.group("count"))
    if not 1 <= number <= total:
        return None  # 00001-of-00000, 00003-of-00002: no set has such a shard
    return m.group("prefix"), number, total


def _dashed(text: str) -> str:
    return "-".join(text.strip().split())


# -- deriving a name from metadata ---------------------------------------------------------------------
def size_label(parameters: int, expert_count: int = 0, min_digits: int = 2) -> str:
    """A size label from a parameter count: ``8x7.2B`` style, with at least ``min_digits`` significant digits.

    The scale is the largest of K, M, B, T the count exceeds (K below a million), as llama.cpp's convert script
    labels models; ``expert_count`` > 0 prefixes ``<n>x`` (``parameters`` is then the count per expert).
    """
    n = abs(int(parameters))
    scale, letter = next(((v, k) for k, v in (("T", 10**12), ("B", 10**9), ("M", 10**6)) if n > v), (10**3, "K"))
    scaled = n / scale
    digits = max(min_digits - len(str(round(scaled)).lstrip("0")), 0)
    label = builtins.format(scaled, f".{digits}f") + letter
    return f"{expert_count}x{label}" if expert_count > 0 else label


def encoding_of(file_type: Any) -> str | None:
    """The Encoding a ``general.file_type`` implies: ``MOSTLY_Q4_K_M`` → ``Q4_K_M``, ``ALL_F32`` → ``F32``."""
    from .tables import FILE_TYPES  # the JSON tables load when a name is checked, not on import

    if not isinstance(file_type, int) or isinstance(file_type, bool) or file_type not in FILE_TYPES:
        return None
    return re.sub(r"^(MOSTLY|ALL)_", "", FILE_TYPES[file_type])


def parameter_count(f: Any) -> int:
    """Elements in all tensors of a loaded file."""
    total = 0
    for t in f.tensors.values():
        n = 1
        for d in t.shape:
            n *= int(d)
        total += n
    return total


def from_metadata(f: Any) -> ModelName:
    """The name a loaded file's metadata implies (its size label counted from the tensors when not stated)."""
    meta = f.metadata

    def text(key: str) -> str | None:
        value = meta.get(key)
        return value if isinstance(value, str) and value.strip() else None

    base = text("general.basename") or text("general.name") or "ggml-model"
    label = text("general.size_label")
    if label is None and len(f.tensors):
        arch = text("general.architecture")
        experts = meta.get(f"{arch}.expert_count") if arch else None
        experts = experts if isinstance(experts, int) and not isinstance(experts, bool) else 0
        label = size_label(parameter_count(f) // max(experts, 1), experts)
    version = text("general.version")
    shard = None
    no, count = meta.get("split.no"), meta.get("split.count")
    if isinstance(no, int) and isinstance(count, int) and 0 <= no < count <= 99999:
        shard = shard_suffix(no + 1, count)
    kind = "vocab" if not len(f.tensors) else ("LoRA" if text("general.type") == "adapter" else None)
    return ModelName(
        _dashed(base),
        label,
        _dashed(text("general.finetune") or "") or None,
        version or "v1.0",
        encoding_of(meta.get("general.file_type")),
        kind,
        shard,
    )


def disagreements(parsed: ModelName, f: Any) -> list[str]:
    """Where a file's name says something its metadata contradicts (only components both state are compared)."""
    meta = f.metadata
    out = []

    def stated(key: str) -> str | None:
        value = meta.get(key)
        return value.strip() if isinstance(value, str) and value.strip() else None

    pairs = [
        ("BaseName", parsed.base_name, stated("general.basename"), lambda a, b: a.lower() == _dashed(b).lower()),
        ("SizeLabel", parsed.size_label, stated("general.size_label"), lambda a, b: a.lower() == _dashed(b).lower()),
        ("FineTune", parsed.fine_tune, stated("general.finetune"), lambda a, b: a.lower() == _dashed(b).lower()),
        ("Version", parsed.version if parsed.version else None, stated("general.version"), lambda a, b: a.lstrip("vV") == b.lstrip("vV")),
        ("Encoding", parsed.encoding, encoding_of(meta.get("general.file_type")), lambda a, b: a.upper() == b.upper()),
    ]
    for component, named, meant, same in pairs:
        if named and meant and not same(named, meant):
            out.append(f"the name's {component} is {named!r}, the metadata says {meant!r}")
    if parsed.size_label and not stated("general.size_label") and len(f.tensors) and parsed.parameters:
        counted = parameter_count(f) / max(parsed.expert_count, 1)
        if not 0.5 <= counted / parsed.parameters <= 2:
            out.append(
                f"the name's SizeLabel {parsed.size_label!r} is far from the "
                f"{size_label(int(counted), parsed.expert_count)} parameters counted"
            )
    if parsed.shard:
        no, count = meta.get("split.no"), meta.get("split.count")
        if isinstance(no, int) and isinstance(count, int) and (no + 1, count) != (parsed.shard_no, parsed.shard_count):
            out.append(f"the name says shard {parsed.shard}, split.no/split.count say {no + 1} of {count}")
    if parsed.type == "vocab" and len(f.tensors):
        out.append(f"the name says vocab-only, the file has {len(f.tensors)} tensors")
    return out
