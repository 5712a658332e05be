"""Conversion between safetensors tensors (plain files, Ollama blobs, manifests) and GGUF, verified by values.

``to_gguf(tensors, metadata)`` returns a new ``GGUFFile`` and a report: each tensor goes to the GGUF type that
holds it losslessly — mxfp4 → MXFP4, nvfp4 → NVFP4, int4 affine → Q4_1 when the per-group conditions hold
(``encode``), plain F32/F16/BF16/F64/I8–I64 as they are — and otherwise to the smallest of BF16 and F32 (F16
and F32 for a plain F16 input) that holds every dequantized value exactly, with a notice. ``from_gguf`` goes
back: MXFP4 → mxfp4, NVFP4 → nvfp4, Q4_1 → int4 (F16 scales and biases), plain types as they are, the rest
dequantized to BF16 or F32 with a notice. The file's ``__metadata__`` travels as ``safetensors.metadata`` (exact
JSON, beside one readable ``safetensors.<key>`` per entry) and is written back. A GGUF file's keys travel the other
way as typed ``gguf:<key>`` entries (``gguf_keys_json``), so GGUF → safetensors → GGUF gives back every key, with
its type, in order; ``general.file_type`` and ``general.quantization_version`` are left out (with a notice) when a
tensor changed type on the way, as they would describe types the file no longer has, and written anew on the way
back.

Every conversion is verified: the input is dequantized (``to_numpy``, exact float32) and compared with the
dequantized output (ggml's decoder for GGUF, MLX's for blobs), NaN-aware; a difference raises
``VerificationError``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..api.gguf_file import GGUFFile, new
from ..errors import VerificationError
from ..quants import block_dtype, dequantize
from ..quants import mlx as mq
from . import encode
from .gguf_keys_json import REDESCRIBE, TENSOR_ORDER, encode_keys, is_gguf_entry, ordered, restore_keys

PLAIN_TYPES = {"F32": "f32", "F16": "f16", "BF16": "bf16", "F64": "f64", "I8": "i8", "I16": "i16", "I32": "i32", "I64": "i64"}
BACK_TYPES = {v: k for k, v in PLAIN_TYPES.items()}
_KEY_PART = re.compile(r"[^a-z0-9_]+")


@dataclass
class ConversionReport:
    """What a conversion did: one line per tensor (name → target), and notices for fallbacks and skips."""

    targets: dict[str, str] = field(default_factory=dict)
    notices: list[str] = field(default_factory=list)
    verified: int = 0

    def summary(self) -> str:
        counts: dict[str, int] = {}
        for t in self.targets.values():
            counts[t] = counts.get(t, 0) + 1
        kinds = ", ".join(f"{n} {t}" for t, n in sorted(counts.items()))
        return f"{len(self.targets)} tensors ({kinds}); {self.verified} verified equal by value"


def verify(name: str, expected: np.ndarray, got: np.ndarray) -> None:
    """Raise VerificationError unless the two float arrays hold the same values (NaN equals NaN)."""
    if expected.shape != got.shape or not np.array_equal(expected.reshape(-1), got.reshape(-1), equal_nan=True):
        diff = "shape" if expected.shape != got.shape else f"max |difference| {np.nanmax(np.abs(expected - got))}"
        raise VerificationError(f"{name}: converted values differ from the input ({diff})")


# -- safetensors → GGUF ----------------------------------------------------------------------------------
def encode_tensor(t: Any) -> tuple[encode.Encoded, str | None]:
    """(the GGUF encoding of one logical tensor, a notice when it fell back or None)."""
    from ..api.safetensors_file import QuantizedTensor  # the safetensors reader loads only for a safetensors input

    if isinstance(t, QuantizedTensor):
        p = t.params
        codes = mq.unpack_codes(t.stored("weight"), p.bits)
        shape = encode.ggml_shape(t.logical_shape)
        got: np.ndarray | str
        if p.mode == "mxfp4":
            got, target = encode.mxfp4_to_ggml(codes, t.stored("scale")), "mxfp4"
        elif p.mode == "nvfp4":
            got, target = encode.nvfp4_to_ggml(codes, t.stored("scale"), "global_scale" in t.parts), "nvfp4"
        elif p.mode == "affine" and p.bits == 4:
            scale_dtype = t.parts["scale"].dtype
            s = mq.float_values(t.stored("scale"), scale_dtype)
            b = mq.float_values(t.stored("bias"), scale_dtype)
            got, target = encode.affine4_to_q4_1(codes, s, b, p.group_size), "q4_1"
        else:
            got, target = f"no GGUF type holds {p.quant_type}", ""
        if not isinstance(got, str):
            return encode.Encoded(target, shape, got), None
        kind, data = encode.exact_float(t.to_numpy(), ("bf16", "f32"))
        return encode.Encoded(kind, shape, data), f"{t.name}: {p.quant_type} → {kind.upper()} ({got})"
    dtype = t.type
    shape = encode.ggml_shape(t.entry.shape)
    if dtype in PLAIN_TYPES:
        return encode.Encoded(PLAIN_TYPES[dtype], shape, np.ascontiguousarray(t.array())), None
    kind, data = encode.exact_float(t.to_numpy(), ("bf16", "f32"))
    return encode.Encoded(kind, shape, data), f"{t.name}: {dtype} has no GGUF type → {kind.upper()}"


#: the GGUF key holding a safetensors file's ``__metadata__`` exactly (a JSON object of strings, in file order)
METADATA_KEY = "safetensors.metadata"
#: ``__metadata__`` keys that describe the tensors' quantization: rewritten from the tensors on the way back
QUANT_KEYS = ("quant_type", "group_size")


def model_metadata(metadata: Mapping[str, str], tensors: Any = ()) -> dict[str, str]:
    """The ``__metadata__`` entries about the model: those describing the quantization of the quantized tensors in
    ``tensors`` (a mapping of name to tensor, or names) left out, as they follow the tensors, which a conversion may
    change; every other entry as it is."""
    from ..api.safetensors_file import QuantizedTensor

    items = tensors.items() if isinstance(tensors, Mapping) else ((n, None) for n in tensors)
    quantized = [n for n, t in items if t is None or isinstance(t, QuantizedTensor)]
    describing = {f"{n}.{k}" for n in quantized for k in QUANT_KEYS} | (set(QUANT_KEYS) if quantized else set())
    return {k: str(v) for k, v in metadata.items() if k not in describing}


def metadata_keys(metadata: Mapping[str, str], tensors: Any = ()) -> dict[str, str]:
    """``__metadata__`` entries as GGUF keys: each as ``safetensors.<key>`` (lower_snake_case, for reading in any
    GGUF tool) and all of them exactly as ``safetensors.metadata`` (JSON), which ``from_gguf`` writes back."""
    out = {}
    kept = model_metadata(metadata, tensors)
    for k, v in kept.items():
        part = _KEY_PART.sub("_", k.lower()).strip("_")
        if part and part != "metadata":
            out[f"safetensors.{part}"] = v
    if kept:
        out[METADATA_KEY] = json.dumps(kept, ensure_ascii=False)
    return out


def stored_metadata(f: GGUFFile) -> dict[str, str]:
    """The safetensors ``__metadata__`` a GGUF file converted from safetensors keeps (``metadata_keys``): the exact
    JSON when present, else its ``safetensors.<key>`` strings under their GGUF names."""
    raw = f.metadata.get(METADATA_KEY)
    if isinstance(raw, str):
        try:
            value = json.loads(raw)
        except ValueError:
            value = None
        if isinstance(value, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
            return value
    prefix = "safetensors."
    return {k[len(prefix) :]: v for k, v in f.metadata.items() if k.startswith(prefix) and k != METADATA_KEY and isinstance(v, str)}


def to_gguf(
    tensors: Mapping[str, Any], metadata: Mapping[str, str] | None = None, *, verify_values: bool = True
) -> tuple[GGUFFile, ConversionReport]:
    """A new GGUF file holding ``tensors`` (logical safetensors tensors), and the conversion report."""
    out = new()
    report = ConversionReport()
    metadata = metadata or {}
    restored = restore_keys(out.metadata, metadata)
    if not restored:  # a file written from GGUF gets its keys back as they were, and nothing else
        out.metadata["general.architecture"] = "unknown"
        for key, value in metadata_keys({k: v for k, v in metadata.items() if not is_gguf_entry(k)}, tensors).items():
            out.metadata[key] = value
    for name in ordered(metadata, TENSOR_ORDER, tensors) if restored else tensors:
        t = tensors[name]
        shape = t.entry.shape if not hasattr(t, "logical_shape") else t.logical_shape
        if len(shape) > 4 or any(d == 0 for d in shape):
            report.notices.append(f"{name}: shape {list(shape)} has no GGUF form (1-4 dimensions, none 0): skipped")
            continue
        enc, notice = encode_tensor(t)
        if notice:
            report.notices.append(notice)
        raw = np.ascontiguousarray(enc.data).view(np.uint8).reshape(-1)
        out.tensors.add(name, raw, ggml_type=enc.ggml_type, shape=enc.shape)
        report.targets[name] = enc.ggml_type
        if verify_values:
            got = dequantize(raw, enc.ggml_type).reshape(tuple(reversed(enc.shape)))
            verify(name, t.to_numpy().reshape(got.shape), got)
            report.verified += 1
    if not restored or REDESCRIBE in metadata:
        describe_types(out)
    return out, report


#: the keys ``describe_types`` writes: left out of a GGUF file's ``gguf:`` entries when a tensor changes type
TYPE_KEYS = frozenset({"general.file_type", "general.quantization_version"})


def describe_types(out: GGUFFile) -> None:
    """The keys llama.cpp's converters write about the tensors' types: ``general.file_type`` for the most common
    type (llama.cpp's loader guesses a file's type the same way; none for a type no llama_ftype names) and
    ``general.quantization_version`` when a tensor is quantized."""
    from ..quants.quantize.policy import file_type_of, quantization_version

    counts: dict[str, int] = {}
    for name in out.tensors:
        t = out.tensors[name].type
        counts[t.name] = counts.get(t.name, 0) + 1
    if not counts:
        return
    ftype = file_type_of(max(counts, key=counts.__getitem__))
    if ftype is not None:
        out.metadata.set("general.file_type", ftype, type="u32")
    if any(out.tensors[name].type.block_size > 1 for name in out.tensors):
        out.metadata.set("general.quantization_version", quantization_version(), type="u32")


# -- GGUF → safetensors ----------------------------------------------------------------------------------
#: ggml's FP4 types → (their MLX encoder, MLX's group size); the quant_type is the type's own name.
FP4_TO_MLX = {"mxfp4": (encode.ggml_mxfp4_to_mlx, 32), "nvfp4": (encode.ggml_nvfp4_to_mlx, 16)}


def decode_tensor(t: Any) -> tuple[dict[str, Any], dict[str, str] | None, str | None]:
    """(the safetensors entries for one GGUF tensor, its quantization metadata or None, a notice or None)."""
    name, ggml_type = t.name, t.type.name
    np_shape = tuple(reversed(t.shape))
    rows = int(np.prod(np_shape[:-1], dtype=np.int64)) if len(np_shape) > 1 else 1
    lead = np_shape[:-1]
    blocks = None
    if ggml_type in ("mxfp4", "nvfp4", "q4_1"):
        blocks = t.data.view(block_dtype(ggml_type, t.byte_order)).astype(block_dtype(ggml_type))
    if ggml_type in FP4_TO_MLX and blocks is not None:
        to_mlx, group = FP4_TO_MLX[ggml_type]
        got = to_mlx(blocks, rows)
        if not isinstance(got, str):
            packed, scales = got
            return {name: _u32(packed, lead), name + ".scale": _u8(scales, lead)}, {"quant_type": ggml_type, "group_size": str(group)}, None
        reason = got
    elif ggml_type == "q4_1" and blocks is not None:
        packed, scales, biases, group = encode.ggml_q4_1_to_mlx(blocks, rows)
        parts = {name: _u32(packed, lead), name + ".scale": scales.reshape(*lead, -1), name + ".bias": biases.reshape(*lead, -1)}
        return parts, {"quant_type": "int4", "group_size": str(group)}, None
    elif ggml_type in BACK_TYPES:
        values = t.to_numpy(dtype=None) if ggml_type in ("f64", "i8", "i16", "i32", "i64") else None
        if ggml_type == "bf16":
            return {name: {"dtype": "BF16", "shape": list(np_shape), "data": _native(t.data.view(_order(t, "u2")))}}, None, None
        if values is None:
            values = t.to_numpy()
            values = values.astype(np.float16) if ggml_type == "f16" else values
        return {name: np.ascontiguousarray(values).reshape(np_shape)}, None, None
    else:
        reason = f"{ggml_type} has no safetensors form"
    kind, data = encode.exact_float(t.to_numpy().reshape(-1), ("bf16", "f32"))
    entry = {"dtype": "BF16", "shape": list(np_shape), "data": data} if kind == "bf16" else data.reshape(np_shape)
    return {name: entry}, None, f"{name}: {ggml_type} → {kind.upper()} ({reason})"


def _order(t: Any, code: str) -> str:
    return ("<" if t.byte_order == "little" else ">") + code


def _native(a: np.ndarray) -> np.ndarray:
    return a.astype(a.dtype.newbyteorder("<"))


def _u32(packed: np.ndarray, lead: tuple[int, ...]) -> dict[str, Any]:
    words = np.ascontiguousarray(packed).reshape(*lead, -1)
    return {"dtype": "U32", "shape": [*lead, words.shape[-1] // 4], "data": words}


def _u8(a: np.ndarray, lead: tuple[int, ...]) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=np.uint8).reshape(*lead, -1)


def from_gguf(f: GGUFFile, *, per_tensor: bool = False) -> tuple[list[tuple[str, dict[str, Any], dict[str, str]]], ConversionReport]:
    """Safetensors content for every tensor of ``f``: a list of (name, entries, metadata) — one blob each when
    ``per_tensor`` (Ollama's layout), else one item holding everything — and the report."""
    report = ConversionReport()
    items = []
    for name in f.tensors:
        t = f.tensors[name]
        entries, quant, notice = decode_tensor(t)
        if notice:
            report.notices.append(notice)
        report.targets[name] = quant["quant_type"] if quant else next(iter(_dtypes(entries)))
        items.append((name, entries, quant))
    if per_tensor:
        return [(n, e, dict(q) if q else {}) for n, e, q in items], report
    merged: dict[str, Any] = {}
    quants = [q for _, _, q in items if q]
    metadata: dict[str, str] = stored_metadata(f)
    changed = any(n.startswith(f"{name}: ") for name in f.tensors for n in report.notices)
    if not _derived_from_safetensors(f):  # else its keys are the __metadata__ itself, and to_gguf makes them again
        metadata.update(encode_keys(f.metadata, TYPE_KEYS if changed else frozenset()))
        metadata[TENSOR_ORDER] = json.dumps(list(f.tensors), ensure_ascii=False)
    if changed:
        metadata[REDESCRIBE] = json.dumps(sorted(TYPE_KEYS & set(f.metadata)))
        report.notices.append(
            "general.file_type and general.quantization_version are not kept (a tensor changed type): written anew on the way back"
        )
    same = len({tuple(sorted(q.items())) for q in quants}) == 1
    for n, e, q in items:
        merged.update(e)
        if q and not same:
            metadata.update({f"{n}.quant_type": q["quant_type"], f"{n}.group_size": q["group_size"]})
    if same:
        metadata.update(quants[0])
    return [("", merged, metadata)], report


def _derived_from_safetensors(f: GGUFFile) -> bool:
    """Whether every key of ``f`` is one ``to_gguf`` writes for a safetensors file (its ``safetensors.*`` keys, the
    architecture "unknown", the type keys): converting back writes its ``__metadata__`` alone, so safetensors →
    GGUF → safetensors is exact as GGUF → safetensors → GGUF is."""
    return METADATA_KEY in f.metadata and all(
        k in TYPE_KEYS or k.startswith("safetensors.") or (k == "general.architecture" and f.metadata[k] == "unknown") for k in f.metadata
    )


def _dtypes(entries: Mapping[str, Any]) -> list[str]:
    from ..formats.safetensors.dtypes import dtype_for_numpy

    return [e["dtype"] if isinstance(e, dict) else dtype_for_numpy(e.dtype) for e in entries.values()]
