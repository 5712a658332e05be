"""Readers reduced to one comparable view: ours, gguf-py's ``GGUFReader``, ggml's C reader (through ggml-python),
and any command that takes a path and prints ``gguf-construct info --json``'s shape.

A view is plain JSON data::

    {"version", "alignment", "data_offset",
     "kv": [[key, type_label, value]],                  # arr[T] values as lists; floats as IEEE bit patterns
     "tensors": [[name, type, shape, offset, nbytes]],  # shape in ggml order, offset from the data section
     "dequant": {name: digest}}                         # sha1 of the float32 values, when the reader can make them

Any entry may be the string "unknown" (a tensor's shape too) when a reader does not expose it. A reader that
refuses the file raises; the worker reports the exception's type and message as the rejection (a
:class:`ReaderRefused` carries a C reader's own reason). Each adapter runs in a worker process speaking the line
protocol (see :mod:`.worker` and :mod:`.targets`), so that a hang, a crash or a huge allocation stays there.

Every adapter is one :class:`ReaderAdapter` in :data:`ADAPTERS`: its reading function, the package it needs, the
format it reads, which of our readers it is compared with and under which profile. Adding a reader is adding a
function and one record (docs/howto/fuzz.md, "Adding a built-in reader").
"""

from __future__ import annotations

import hashlib
import json
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypedDict

import numpy as np

from ...core.tables import VALUE_TYPES


class ReaderRefused(ValueError):
    """A reader refused the file and said why (the reason is the reader's, not a line of this module)."""


class View(TypedDict, total=False):
    """What a reader saw in a file it accepts (any entry may be :data:`UNKNOWN`; see the module's docstring)."""

    version: Any
    alignment: Any
    data_offset: Any
    kv: Any  # [[key, type_label, value]]
    tensors: Any  # [[name, type, shape, offset, nbytes]]
    dequant: dict[str, str]  # name → digest of the float32 values
    byte_order: str  # ours only: triage reads it
    n_vocab: int  # llama.cpp only


class AnswerLine(TypedDict, total=False):
    """One line of the protocol's answers: ``{"ok": true, "view": ...}`` or ``{"ok": false, "error", "rule", "where"}``."""

    ok: bool
    view: View
    error: str
    rule: str | None
    where: str


#: Tensors larger than this are not dequantized for comparison (keeps a run fast; the view notes the skip).
DEQUANT_LIMIT = 1 << 20
#: What a view holds where a reader does not expose a value.
UNKNOWN = "unknown"
#: Value type name → numpy dtype code (``schema/value_types.json``); a bool is compared as its raw byte.
_NUMPY = {**{vt.name: vt.numpy for vt in VALUE_TYPES.values() if vt.numpy}, "bool": "u1"}


def scalar_value(value: Any, vtype: str) -> Any:
    """A scalar in comparable form: floats as bit patterns (NaN payloads kept), bools as 0/1."""
    if hasattr(value, "bits"):
        return int(value.bits)
    if vtype == "f32":
        return struct.unpack("<I", struct.pack("<f", float(value)))[0]
    if vtype == "f64":
        return struct.unpack("<Q", struct.pack("<d", float(value)))[0]
    if vtype in ("bool",) or vtype in _NUMPY:
        return int(value)
    return value


def array_values(values: Any, etype: str | None) -> list[Any] | None:
    """Array elements in comparable form (None for nested arrays, whose readers disagree on shape by design)."""
    if etype is None or etype == "arr":
        return None
    if etype == "str":
        return [str(v) for v in values]
    arr = np.asarray(values, dtype="<" + _NUMPY[etype]) if len(values) else np.zeros(0, "<" + _NUMPY[etype])
    if etype in ("f32", "f64"):
        return arr.view("<u" + str(arr.itemsize)).tolist()
    return [int(v) for v in arr.tolist()]


def digest(values: np.ndarray) -> str:
    """sha1 of float32 values, NaNs included bit for bit."""
    return hashlib.sha1(np.ascontiguousarray(values, dtype=np.float32).tobytes()).hexdigest()


# -- ours ------------------------------------------------------------------------------------------------
def read_ours(path: str, profile: GGUFProfile = "spec", *, strict: bool = True, dequantize: bool = True) -> View:
    """gguf_construct.load(strict=True) under ``profile``: what we accept, and what we see in it.

    ``strict=False`` loads leniently instead; ``dequantize=False`` leaves ``dequant`` empty (faster)."""
    from ...api.registry import load
    from ...formats.fields import StringArray

    f = load(path, format="gguf", strict=strict, profile=profile)
    kvs = []
    for field in f.metadata.fields():
        if field.type == "arr":
            items = field.value.tolist() if isinstance(field.value, StringArray) else field.value
            kvs.append([field.key, field.type_label, array_values(items, field.array_type)])
        else:
            kvs.append([field.key, field.type, scalar_value(field.value, field.type)])
    tensors, dequant = [], {}
    for t in f.tensors.values():
        tensors.append([t.name, t.type.name.lower(), list(t.shape), t.offset, t.nbytes])
        if dequantize and t.nbytes <= DEQUANT_LIMIT:
            dequant[t.name] = digest(t.to_numpy())
    return View(
        version=f.version,
        alignment=f.alignment,
        data_offset=f.data_offset,
        kv=kvs,
        tensors=tensors,
        dequant=dequant,
        byte_order=f.byte_order,  # a cause triage names (not compared)
    )


# -- gguf-py ---------------------------------------------------------------------------------------------
def read_gguf_py(path: str, profile: str = "spec", *, dequantize: bool = True) -> View:
    """gguf-py's GGUFReader, plus ``gguf.quants.dequantize`` for the types it knows (unless ``dequantize=False``)."""
    from gguf import GGUFReader, GGUFValueType
    from gguf import quants as gq

    names = {
        GGUFValueType.UINT8: "u8",
        GGUFValueType.INT8: "i8",
        GGUFValueType.UINT16: "u16",
        GGUFValueType.INT16: "i16",
        GGUFValueType.UINT32: "u32",
        GGUFValueType.INT32: "i32",
        GGUFValueType.FLOAT32: "f32",
        GGUFValueType.BOOL: "bool",
        GGUFValueType.STRING: "str",
        GGUFValueType.ARRAY: "arr",
        GGUFValueType.UINT64: "u64",
        GGUFValueType.INT64: "i64",
        GGUFValueType.FLOAT64: "f64",
    }
    r = GGUFReader(path)
    kvs = []
    for key, field in r.fields.items():
        if key.startswith("GGUF."):
            continue  # the reader's pseudo-fields for the header
        vtype = names[field.types[0]]
        if vtype == "arr":
            etype = names[field.types[1]] if len(field.types) > 1 else None
            if etype == "str":
                value = [bytes(field.parts[i]).decode("utf-8") for i in field.data]
            elif etype in (None, "arr"):
                value = None
            else:
                value = array_values(np.concatenate([field.parts[i] for i in field.data]) if field.data else [], etype)
            kvs.append([key, f"arr[{etype}]" if etype else "arr[None]", value])
        elif vtype == "str":
            kvs.append([key, vtype, bytes(field.parts[-1]).decode("utf-8")])
        else:
            kvs.append([key, vtype, scalar_value(field.parts[-1][0], vtype)])
    tensors, dequant = [], {}
    for t in r.tensors:
        shape = [int(d) for d in t.shape]
        tensors.append([t.name, t.tensor_type.name.lower(), shape, int(t.data_offset) - int(r.data_offset), int(t.n_bytes)])
        if dequantize and int(t.n_bytes) <= DEQUANT_LIMIT:
            try:
                values = gq.dequantize(np.asarray(t.data), t.tensor_type)
            except NotImplementedError:
                continue
            dequant[t.name] = digest(np.asarray(values, dtype=np.float32).reshape(-1))
    return {
        "version": int(r.fields["GGUF.version"].parts[-1][0]),
        "alignment": int(r.alignment),
        "data_offset": int(r.data_offset),
        "kv": kvs,
        "tensors": tensors,
        "dequant": dequant,
    }


# -- ggml (C) --------------------------------------------------------------------------------------------
def read_ggml(path: str, profile: str = "ggml", *, dequantize: bool = True) -> View:
    """ggml's ``gguf_init_from_file`` (no_alloc) through ggml-python; tensors dequantized with ggml's to_float
    (unless ``dequantize=False``)."""
    import ctypes

    import ggml

    ctx, why = _ggml_open(ggml, path)
    if not ctx:
        raise ReaderRefused(f"gguf_init_from_file returned NULL: {why}")
    try:
        kvs = []
        for i in range(ggml.gguf_get_n_kv(ctx)):
            key = ggml.gguf_get_key(ctx, i).decode("utf-8")
            vtype = ggml.gguf_type_name(ggml.gguf_get_kv_type(ctx, i)).decode()
            if vtype == "arr":
                etype = ggml.gguf_type_name(ggml.gguf_get_arr_type(ctx, i)).decode()
                n = ggml.gguf_get_arr_n(ctx, i)
                if etype == "str":
                    value: Any = [ggml.gguf_get_arr_str(ctx, i, j).decode("utf-8") for j in range(n)]
                else:
                    size = np.dtype(_NUMPY[etype]).itemsize
                    raw = ctypes.string_at(ggml.gguf_get_arr_data(ctx, i), n * size) if n else b""
                    value = array_values(np.frombuffer(raw, dtype=_NUMPY[etype]), etype)
                kvs.append([key, f"arr[{etype}]", value])
            elif vtype == "str":
                kvs.append([key, vtype, ggml.gguf_get_val_str(ctx, i).decode("utf-8")])
            else:
                kvs.append([key, vtype, scalar_value(getattr(ggml, f"gguf_get_val_{vtype}")(ctx, i), vtype)])
        tensors, dequant = [], {}
        data_offset = ggml.gguf_get_data_offset(ctx)
        blob = b""
        if dequantize:
            with open(path, "rb") as f:
                blob = f.read()
        for i in range(ggml.gguf_get_n_tensors(ctx)):
            name = ggml.gguf_get_tensor_name(ctx, i).decode("utf-8")
            type_id = ggml.gguf_get_tensor_type(ctx, i)
            offset, nbytes = ggml.gguf_get_tensor_offset(ctx, i), ggml.gguf_get_tensor_size(ctx, i)
            tensors.append([name, ggml.ggml_type_name(type_id).decode().lower(), UNKNOWN, offset, nbytes])
            traits = ggml.ggml_get_type_traits(type_id).contents
            n_values = nbytes // traits.type_size * traits.blck_size if traits.type_size else 0
            if dequantize and nbytes <= DEQUANT_LIMIT and traits.to_float and data_offset + offset + nbytes <= len(blob):
                raw = np.frombuffer(blob, np.uint8, count=nbytes, offset=data_offset + offset).copy()
                out = np.empty(n_values, np.float32)
                traits.to_float(raw.ctypes.data_as(ctypes.c_void_p), out.ctypes.data_as(ctypes.POINTER(ctypes.c_float)), n_values)
                dequant[name] = digest(out)
        return {
            "version": ggml.gguf_get_version(ctx),
            "alignment": ggml.gguf_get_alignment(ctx),
            "data_offset": data_offset,
            "kv": kvs,
            "tensors": tensors,
            "dequant": dequant,
        }
    finally:
        ggml.gguf_free(ctx)


def _ggml_open(ggml: Any, path: str) -> tuple[Any, str]:
    """``gguf_init_from_file`` with its C stderr captured: (context or NULL, ggml's first log line: the specific
    reason; the last one is a generic "failed to read ..." shared by unrelated causes)."""
    return _with_stderr(lambda: ggml.gguf_init_from_file(str(path).encode(), ggml.gguf_init_params(no_alloc=True, ctx=None)))


#: Where a worker's readers write their C stderr while they read a file (set by the fuzzer, which reads it back
#: when the reader dies there: an assertion message or a sanitizer report is in it). A temporary file otherwise.
C_LOG_ENV = "GGUF_CONSTRUCT_FUZZ_C_LOG"


def _with_stderr(call: Callable[[], Any], marker: str = "", path: str = "") -> tuple[Any, str]:
    """``call()`` with the C stderr captured: its result and the first log line (containing ``marker``, if given,
    outside the file's ``path``, which a reader may print), function name prefix removed. The log goes to the file
    named by ``$GGUF_CONSTRUCT_FUZZ_C_LOG`` when set, so that what a reader printed before dying (``GGML_ASSERT``, a
    sanitizer report) reaches the fuzzer's triage."""
    import os
    import tempfile

    named = os.environ.get(C_LOG_ENV)
    with open(named, "w+b") if named else tempfile.TemporaryFile() as log:
        saved = os.dup(2)
        os.dup2(log.fileno(), 2)
        try:
            result = call()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        log.seek(0)
        text = log.read().decode("utf-8", "replace")
        if named:
            log.truncate(0)
    lines = [line for line in text.strip().splitlines() if line.strip() and marker in (line.replace(path, "") if path else line)]
    return result, (lines[0].split(": ", 1)[-1] if lines else "")


# -- llama.cpp (vocab-only load) ----------------------------------------------------------------------------
_LLAMA: dict[str, Any] = {}


def read_llama_cpp(path: str, profile: str = "ggml") -> View:
    """llama.cpp's model loader through llama-cpp-python, ``vocab_only``: the header, metadata, architecture and
    vocabulary checks of a real load, without tensor data. The view has the metadata as llama.cpp prints it
    (strings) and the vocabulary size; what it does not expose is "unknown"."""
    import llama_cpp

    if not _LLAMA:
        llama_cpp.llama_backend_init()
        _LLAMA["params"] = llama_cpp.llama_model_default_params()
        _LLAMA["params"].vocab_only = True
    model, why = _with_stderr(lambda: llama_cpp.llama_model_load_from_file(str(path).encode(), _LLAMA["params"]), "error", str(path))
    if not model:
        raise ReaderRefused(why.removeprefix("error loading model: ") or "llama_model_load_from_file returned NULL")
    try:
        vocab = llama_cpp.llama_model_get_vocab(model)
        n_vocab = llama_cpp.llama_vocab_n_tokens(vocab)
    finally:
        llama_cpp.llama_model_free(model)
    return {
        "version": UNKNOWN,
        "alignment": UNKNOWN,
        "data_offset": UNKNOWN,
        "kv": UNKNOWN,
        "tensors": UNKNOWN,
        "dequant": {},
        "n_vocab": n_vocab,
    }


# -- safetensors --------------------------------------------------------------------------------------------
def read_safetensors(path: str, profile: str = "spec", *, dequantize: bool = True) -> View:
    """The safetensors library's ``safe_open`` (numpy): metadata, dtype, shape (numpy order) and byte size of each
    tensor, and the values of those numpy can hold. It does not expose offsets: they are "unknown"."""
    from safetensors import safe_open

    kvs, tensors, dequant = [], [], {}
    with safe_open(path, framework="numpy") as f:
        for key, value in sorted((f.metadata() or {}).items()):
            kvs.append([key, "str", value])
        for name in f.keys():  # noqa: SIM118 - safe_open is no dict
            part = f.get_slice(name)
            dtype, shape = part.get_dtype(), [int(d) for d in part.get_shape()]
            nbytes = UNKNOWN
            tensors.append([name, dtype.lower(), shape, UNKNOWN, nbytes])
            if dequantize and dtype in _SAFETENSORS_NUMPY:
                values = f.get_tensor(name)
                tensors[-1][4] = int(values.nbytes)
                if values.nbytes <= DEQUANT_LIMIT:
                    dequant[name] = digest(values.astype(np.float32).reshape(-1))
    return {"version": UNKNOWN, "alignment": UNKNOWN, "data_offset": UNKNOWN, "kv": kvs, "tensors": tensors, "dequant": dequant}


#: safetensors dtypes whose values both sides turn into float32 the same way (numpy holds them).
_SAFETENSORS_NUMPY = {"F64", "F32", "F16", "I64", "I32", "I16", "I8", "U8", "U16", "U32", "U64", "BOOL"}


def read_ours_safetensors(path: str, profile: str = "spec", *, dequantize: bool = True) -> View:
    """Ours, for safetensors files: the stored tensors (not the MLX/Ollama logical ones), as :func:`read_safetensors`
    sees them."""
    from ...api.registry import load

    f = load(path, format="safetensors", strict=True, profile="hf" if profile == "hf" else "spec")
    kvs = [[k, "str", v] for k, v in sorted(f.metadata.items())]
    tensors, dequant = [], {}
    for t in f.entries.values():
        name, dtype = t.name, str(t.type)
        tensors.append([name, dtype.lower(), [int(d) for d in reversed(t.shape)], int(t.offset), int(t.nbytes)])  # numpy order
        if dequantize and dtype in _SAFETENSORS_NUMPY and t.nbytes <= DEQUANT_LIMIT:
            dequant[name] = digest(np.asarray(t.array()).astype(np.float32).reshape(-1))
    return {"version": UNKNOWN, "alignment": UNKNOWN, "data_offset": f.data_offset, "kv": kvs, "tensors": tensors, "dequant": dequant}


# -- any command printing info --json ----------------------------------------------------------------------
def info_view(info: dict[str, Any]) -> View:
    """``gguf-construct info --json`` output (or a command imitating it) as a view (no dequantized values);
    metadata and tensors keyed by name (``{key: {type, value}}``, ``{name: {type, shape, ...}}``) or as lists of
    ``{key, type, value}`` and ``{name, type, shape, ...}``."""
    metadata = info.get("metadata") or []
    if isinstance(metadata, dict):
        metadata = [{"key": k, **v} if isinstance(v, dict) else {"key": k, "value": v} for k, v in metadata.items()]
    listed = info.get("tensors") or []
    if isinstance(listed, dict):
        listed = [{"name": k, **v} for k, v in listed.items() if isinstance(v, dict)]
    kvs = []
    for m in metadata:
        if m.get("type") == "arr":
            kvs.append([m["key"], f"arr[{m.get('array_type')}]", {"n": m.get("n"), "first": m.get("first"), "last": m.get("last")}])
        else:
            kvs.append([m["key"], m.get("type", UNKNOWN), m.get("value", UNKNOWN)])
    tensors = [
        [
            t["name"],
            str(t.get("type", UNKNOWN)).lower(),
            list(t["shape"]) if t.get("shape") is not None else UNKNOWN,
            t.get("offset", UNKNOWN),
            t.get("nbytes", UNKNOWN),
        ]
        for t in listed
    ]
    return View(
        version=info.get("version", UNKNOWN),
        alignment=info.get("alignment", UNKNOWN),
        data_offset=info.get("data_offset", UNKNOWN),
        kv=kvs,
        tensors=tensors,
        dequant={},
    )


def read_ours_info(path: str, profile: GGUFProfile = "spec") -> View:
    """Ours, in the info --json shape (to compare with a command printing that shape)."""
    from ...api.describe import info_json
    from ...api.registry import load

    f = load(path, strict=True, profile=profile)
    return info_view(json.loads(json.dumps(info_json(f), default=str)))


def read_ours_metadata(path: str, profile: GGUFProfile = "spec") -> View:
    """Ours without dequantization: for readers that give no dequantized values to compare (faster)."""
    return read_ours(path, profile, dequantize=False)


@dataclass(frozen=True)
class ReaderAdapter:
    """A reader the worker can run: ``read(path, profile)`` gives its :class:`View` or raises.

    ``module`` is the Python module it needs (imported before the worker caps its memory; None: ours alone),
    ``install`` how to get it, ``fmt`` the format it reads, ``ours`` which of our adapters it is compared with
    and ``profile`` our validation profile against it. ``other``: offered as ``fuzz --against`` (ours are not).
    ``c_strings``: it hands strings out as C does, up to the first NUL (triage compares them so)."""

    name: str
    read: Callable[..., View]
    fmt: str = "gguf"
    module: str | None = None
    install: str = ""
    ours: str = "ours"
    profile: str = "spec"
    other: bool = True
    c_strings: bool = False


_EXTRA = "pip install 'gguf-construct[fuzz]'"

#: Every adapter, by name.
ADAPTERS: dict[str, ReaderAdapter] = {
    a.name: a
    for a in (
        ReaderAdapter("ours", read_ours, other=False),
        ReaderAdapter("ours-metadata", read_ours_metadata, other=False),
        ReaderAdapter("ours-info", read_ours_info, other=False),
        ReaderAdapter("ours-safetensors", read_ours_safetensors, fmt="safetensors", other=False),
        ReaderAdapter("gguf-py", read_gguf_py, module="gguf", install=_EXTRA),
        ReaderAdapter("ggml", read_ggml, module="ggml", install=_EXTRA, profile="ggml", c_strings=True),
        # llama.cpp's loader gives no dequantized values to compare: ours skips making them
        ReaderAdapter(
            "llama.cpp",
            read_llama_cpp,
            module="llama_cpp",
            install="pip install llama-cpp-python",
            ours="ours-metadata",
            profile="ggml",
            c_strings=True,
        ),
        ReaderAdapter(
            "safetensors",
            read_safetensors,
            fmt="safetensors",
            module="safetensors",
            install="pip install safetensors",
            ours="ours-safetensors",
        ),
    )
}
#: The names ``fuzz --against`` accepts besides commands.
OTHERS = tuple(name for name, a in ADAPTERS.items() if a.other)


if TYPE_CHECKING:  # at the end: the fuzz findings name lines of this module
    from ...validation.profiles import GGUFProfile
