"""What every migration shares: tensors planned into GGUF types, the atomic write, the verification.

A tensor whose layout is today's is copied bit for bit (a zero-copy view of the input's memory map). A retired
layout is re-encoded into today's layout of its type when that changes no value (:func:`quants.retired.to_current`),
else written as F16 when every value survives that, else as F32 — with a notice either way. Data is produced one
tensor at a time while the file is written, so memory stays at one tensor.

Every migration writes to a temporary file beside the target, reopens it, validates it with the 'ggml' profile,
compares every tensor's dequantized values with the input's bit for bit (and the metadata that was meant to be
written), and only then renames it into place: a failed check leaves no output and never touches the input.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from construct import Container

from ..api.fileio import check_output, write_atomic
from ..api.gguf_file import load_gguf
from ..api.legacy_file import LegacyTensor
from ..api.metadata import Metadata
from ..core import rules
from ..core.progress import progress as show_progress
from ..core.table_records import MigrateTable
from ..core.tables import GGML_TYPES, load_table
from ..formats.gguf.schema import GGUF
from ..validation import check_keys


def migrate_tables() -> MigrateTable:
    """schema/migrate.json: key and tensor-name maps."""
    return load_table("migrate")


@dataclass
class MigrationReport:
    """What a migration or export did: the output, its format, and every notice (re-encodings, fallbacks)."""

    output: str
    format: str
    tensors: int = 0
    copied: int = 0
    reencoded: int = 0
    widened: int = 0
    notices: list[str] = field(default_factory=list)

    def summary(self) -> str:
        parts = [f"{self.tensors} tensors"]
        if self.tensors:
            parts.append(f"{self.copied} copied bit for bit")
        if self.reencoded:
            parts.append(f"{self.reencoded} re-encoded losslessly into today's layout")
        if self.widened:
            parts.append(f"{self.widened} written as F16/F32")
        return f"{self.output}: {self.format}, " + ", ".join(parts) + "; verified"


# -- names ----------------------------------------------------------------------------------------------------
class NameMap:
    """Tensor names from one naming to another, by patterns with a ``{bid}`` block index (schema/migrate.json)."""

    def __init__(self, pairs: Sequence[Sequence[str]]):
        self.rules = [(self._rx(a), a, b, tuple(rest[0].split()) if rest else ()) for a, b, *rest in pairs]
        self.back = [(self._rx(b), b, a, cond) for _, a, b, cond in self.rules]

    @staticmethod
    def _rx(pattern: str) -> re.Pattern[str]:
        return re.compile(re.escape(pattern).replace(r"\{bid\}", r"(?P<bid>[0-9]+)") + r"\Z")

    def _apply(self, rules: list, name: str, variant: str | None) -> str | None:
        for rx, _, target, cond in rules:
            m = rx.match(name)
            if m and (not cond or variant is None or variant in cond):
                return target.replace("{bid}", m.group("bid")) if "bid" in m.groupdict() else target
        return None

    def forward(self, name: str, variant: str | None = None) -> str | None:
        return self._apply(self.rules, name, variant)

    def backward(self, name: str, variant: str | None = None) -> str | None:
        return self._apply(self.back, name, variant)


# -- tensors ----------------------------------------------------------------------------------------------------
@dataclass
class PlannedTensor:
    """One output tensor: GGUF name, ggml shape, type, a data source, and the input values it must reproduce."""

    name: str
    shape: list[int]
    type: str
    source: Any  # bytes-like or a callable returning one
    expected: Callable[[], np.ndarray]
    how: str  # 'copied' | 'reencoded' | 'widened'


def plan_tensor(t: LegacyTensor, name: str, report: MigrationReport) -> PlannedTensor:
    """How ``t`` goes into GGUF (see the module docstring); 0-dimensional tensors get the shape [1]."""
    shape = list(t.shape) or [1]
    if not t.retired:
        report.copied += 1
        return PlannedTensor(name, shape, t.type.name, t._data, t.to_numpy, "copied")
    from ..quants.retired import to_current

    if to_current(t.data, t.layout) is not None:
        report.reencoded += 1
        return PlannedTensor(name, shape, t.type.name, lambda: to_current(t.data, t.layout)[1], t.to_numpy, "reencoded")  # type: ignore[index]
    values = t.to_numpy().reshape(-1)
    with np.errstate(all="ignore"):
        as_f16 = values.astype("<f2")
    exact = np.array_equal(as_f16.astype(np.float32).view(np.uint32), values.view(np.uint32))
    kind = "f16" if exact else "f32"
    report.widened += 1
    report.notices.append(f"{t.name}: {t.layout} blocks have no lossless counterpart in today's {t.type}; written as {kind.upper()}")
    if exact:
        return PlannedTensor(name, shape, "f16", lambda: t.to_numpy().reshape(-1).astype("<f2"), t.to_numpy, "widened")
    return PlannedTensor(name, shape, "f32", lambda: t.to_numpy().reshape(-1).astype("<f4"), t.to_numpy, "widened")


def write_gguf(
    path: str | os.PathLike[str],
    metadata: Metadata,
    tensors: list[PlannedTensor],
    *,
    version: int = 3,
    progress: bool = False,
    verify: Any = None,
) -> None:
    """Build GGUF ``version`` into ``path`` atomically, producing each tensor's data only as it is written;
    ``verify(temp_path)`` runs before the rename."""
    bar = iter(show_progress(range(len(tensors)), len(tensors), "writing", unit="tensor")) if progress and tensors else None

    def source(p: PlannedTensor) -> Any:
        def produce() -> Any:
            if bar is not None:
                next(bar, None)
            return p.source() if callable(p.source) else p.source

        return produce

    infos = [Container(name=p.name, dimensions=p.shape, type=p.type, offset=None, data=source(p)) for p in tensors]
    obj = Container(version=version, byte_order="little", metadata_kv=list(metadata._kvs), tensor_infos=infos, tensor_data=None)
    write_atomic(path, lambda f: GGUF.build_stream(obj, f), verify)


def same_values(a: np.ndarray, b: np.ndarray) -> bool:
    """Bit-for-bit equality of float32 arrays (NaN payloads included)."""
    a, b = np.ascontiguousarray(a, np.float32).reshape(-1), np.ascontiguousarray(b, np.float32).reshape(-1)
    return a.shape == b.shape and np.array_equal(a.view(np.uint32), b.view(np.uint32))


def verify_gguf(path: str | os.PathLike[str], metadata: Metadata, tensors: list[PlannedTensor]) -> None:
    """Reopen a written GGUF file: 'ggml'-profile validation with the standard keys, the metadata as meant, every
    tensor's values. Whether llama.cpp's loader would run the model (``tensor.architecture``) is the input's to
    answer, not the migration's: a partial model migrates as it is, and ``validate`` says what it lacks."""
    from ..api.registry import validate_file

    errors = [i for i in validate_file(path, "ggml") if i.severity == "error" and i.rule != rules.TENSOR_ARCHITECTURE.id]
    out = load_gguf(path, strict=False)
    errors += [i for i in check_keys(out) if i.severity == "error"]
    if errors:
        raise rules.MIGRATE_VERIFY.error(f"the output fails validation: {errors[0].line()}")
    for f in metadata.fields():
        got = out.metadata.field(f.key)
        if got.type_label != f.type_label or not _equal(got.value, f.value):
            raise rules.MIGRATE_VERIFY.error(f"metadata {f.key!r} reads back differently")
    if list(out.tensors) != [p.name for p in tensors]:
        raise rules.MIGRATE_VERIFY.error("the output's tensors differ from the plan")
    for p in tensors:
        t = out.tensors[p.name]
        if list(t.shape) != p.shape or not same_values(t.to_numpy(), p.expected()):
            raise rules.MIGRATE_VERIFY.error(f"tensor {p.name!r} does not reproduce the input's values")


def _equal(a: Any, b: Any) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        a, b = np.asarray(a), np.asarray(b)
        return a.shape == b.shape and a.tobytes() == b.astype(a.dtype).tobytes()
    if hasattr(a, "tolist") and not isinstance(a, (int, float)):
        a = a.tolist()
    if hasattr(b, "tolist") and not isinstance(b, (int, float)):
        b = b.tolist()
    if isinstance(a, float) and isinstance(b, float):
        return np.float32(a).tobytes() == np.float32(b).tobytes() or a == b
    return a == b


def finish_gguf(
    dst: str | os.PathLike[str], metadata: Metadata, tensors: list[PlannedTensor], report: MigrationReport, *, progress: bool = False
) -> MigrationReport:
    """Write to a temporary file beside ``dst``, verify it, rename it into place. A file with quantized tensors gets
    ``general.quantization_version`` = GGML_QNT_VERSION: every block is written in today's layout (``plan_tensor``)."""
    from ..quants.quantize.policy import quantization_version

    if any(GGML_TYPES.lookup(p.type).block_size > 1 for p in tensors):
        metadata.set("general.quantization_version", quantization_version(), type="u32")
    write_gguf(dst, metadata, tensors, progress=progress, verify=lambda tmp: verify_gguf(tmp, metadata, tensors))
    report.tensors = len(tensors)
    return report


def required_int(md: Any, key: str, lo: int, hi: int, rule: rules.Rule, target: str) -> int:
    """An integer hyper-parameter the export target needs: present, an integer, in ``lo..hi`` (the range of
    the target's field); MigrationError naming the key and the range otherwise."""
    value = md.get(key) if key in md else None
    if value is None:
        raise rule.error(f"{target} needs {key}, which the file does not have")
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise rule.error(f"{target} needs {key} as an integer, not {type(value).__name__}")
    if not lo <= int(value) <= hi:
        raise rule.error(f"{key} = {int(value)} does not fit {target}'s field ({lo}..{hi})")
    return int(value)


def check_distinct_paths(src: Any, dst: Any, *more: Any) -> None:
    """Refuse an output that is the input (or any of ``more``: a vocabulary file, ...): ``fileio.check_output``."""
    check_output(dst, [src, *more])
