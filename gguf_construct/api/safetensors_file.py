"""``SafetensorsFile``: a memory-mapped safetensors file (an Ollama tensor blob, an MLX or HF file) as tensors.

The file is parsed with the ``SAFETENSORS`` schema; every tensor is a zero-copy view of the memory map (MLX
writes unpadded headers, so views may be misaligned: numpy reads them anyway). Ollama's quantized "combined"
layout — ``{name}`` (U32 codes), ``{name}.scale``, ``{name}.bias`` and optionally ``{name}.global_scale`` —
is exposed as one logical ``QuantizedTensor`` whose ``to_numpy()`` dequantizes (``gguf_construct.quants.mlx``);
the parts stay reachable through ``entries``. Quantization parameters are resolved as Ollama's runner does
(``ollama/ollama`` ``x/mlxrunner/model/root.go`` at fb30760): per-tensor ``__metadata__`` keys, then the blob's
``quant_type``/``group_size``, then the shapes, with a model-wide hint breaking the affine ties.

Shapes follow the common protocol: ``.shape`` in ggml order (fastest-varying first), ``to_numpy()`` in numpy
order.
"""

from __future__ import annotations

import math
import os
from collections.abc import ItemsView, Iterator, Mapping, ValuesView
from dataclasses import dataclass
from functools import cache, cached_property
from typing import Any

import numpy as np
from construct import Container
from numpy.typing import NDArray

from ..core import rules
from ..errors import FormatError, InvalidValueError
from ..formats.base import map_file
from ..formats.safetensors.schema import SAFETENSORS, Entry, EntryTable, dtypes, tensor_array
from ..quants import mlx as mq
from .fileio import mapped_files, reading, write_atomic
from .protocol import NamedType

#: Companion suffixes of a quantized tensor in Ollama's combined layout.
SCALE, BIAS, GLOBAL_SCALE = ".scale", ".bias", ".global_scale"
FLOAT_SCALES = ("BF16", "F16", "F32")


class SafetensorsDType(NamedType):
    """A safetensors dtype as ``tensor.type``: the file's string (``t.type == "BF16"``) with the table's record
    (``schema/safetensors_dtypes.json``): ``bits`` per element, ``numpy`` (the little-endian numpy dtype string,
    None where numpy has none), and as a ``TensorType`` the smallest whole-byte block (F4: 2 elements in 1
    byte, F6: 4 in 3)."""

    bits: int
    numpy: str | None

    @classmethod
    def of(cls, name: str) -> SafetensorsDType:
        """The dtype named ``name`` (an unknown name gets no sizes: a lenient reader's view of a bad entry)."""
        return _dtype(name)


@cache
def _dtype(name: str) -> SafetensorsDType:
    d = dtypes().get(name)
    if d is None:
        return SafetensorsDType(name, 0, 0, bits=0, numpy=None)
    block = 8 // math.gcd(d.bits, 8)
    return SafetensorsDType(name, block, d.bits * block // 8, bits=d.bits, numpy=d.numpy)


class OllamaQuantType(NamedType):
    """An Ollama ``quant_type`` (int4, int8, nvfp4, mxfp4, mxfp8) as a quantized tensor's ``type``: the string
    (``t.type == "int4"``) with its MLX ``mode``, ``bits`` and this tensor's ``group_size``; as a
    ``TensorType`` a block is one group, and ``type_size`` its bytes: codes, scale and bias."""

    mode: str
    bits: int
    group_size: int

    @classmethod
    def of(cls, params: QuantParams, scale_dtype: str, bias: bool) -> OllamaQuantType:
        scale_bytes = _dtype(scale_dtype).bits // 8
        size = params.group_size * params.bits // 8 + scale_bytes * (2 if bias else 1)
        return cls(params.quant_type, params.group_size, size, mode=params.mode, bits=params.bits, group_size=params.group_size)


def float_array(entry: Entry, raw: NDArray[Any]) -> NDArray[np.float32]:
    """A plain tensor's values as float32 (BF16 and the F8 formats decoded; integers converted)."""
    if entry.dtype == "BF16":
        return np.asarray(mq.bf16_to_f32(raw), np.float32)
    tables = {"F8_E4M3": mq.e4m3_table, "F8_E5M2": mq.e5m2_table, "F8_E8M0": mq.e8m0_table}
    if entry.dtype in tables:
        return np.asarray(tables[entry.dtype]()[raw], np.float32)
    if dtypes()[entry.dtype].numpy is None:
        raise rules.TENSOR_DTYPE.error(f"{entry.name}: no float decoding for {entry.dtype}")
    if raw.dtype.kind == "c":  # a real view would drop the imaginary parts silently
        raise rules.TENSOR_COMPLEX.error(f"{entry.name}: {entry.dtype} values are complex; ask for them with to_numpy(dtype=None)")
    return raw.astype(np.float32)


class SafetensorsTensor:
    """One plain tensor: ``name``, ``shape`` (ggml order), ``type`` (the dtype string), ``nbytes``, ``data``."""

    def __init__(self, entry: Entry, region: NDArray[np.uint8]):
        self.entry = entry
        self._region = region  # the whole data region as one read-only uint8 array: slicing it is cheap

    @property
    def name(self) -> str:
        return self.entry.name

    @property
    def type(self) -> SafetensorsDType:
        """The dtype: the header's string (``t.type == "F32"``), a ``TensorType`` with the table's record."""
        return _dtype(self.entry.dtype)

    @property
    def nbytes(self) -> int:
        return self.entry.nbytes

    @property
    def shape(self) -> tuple[int, ...]:
        """Dimensions in ggml order (the file's numpy shape reversed)."""
        return tuple(reversed(self.entry.shape))

    @property
    def offset(self) -> int:
        """Where the data starts, from the start of the data region."""
        return self.entry.begin

    @property
    def n_elements(self) -> int:
        return self.entry.n_elements

    def array(self) -> NDArray[Any]:
        """The stored values as a read-only numpy view in numpy order (BF16 as uint16, F8 as uint8)."""
        return tensor_array(self.entry, self._region)

    @property
    def data(self) -> NDArray[Any]:
        """The tensor's bytes: a read-only uint8 view of the memory map."""
        return self._region[self.entry.begin : self.entry.end]

    def to_numpy(self, dtype: Any = np.float32) -> NDArray[Any]:
        """The values as float32 (or ``dtype``), numpy order; complex tensors (C64) only as themselves
        (``dtype=None`` or a complex dtype)."""
        if self.entry.dtype == "C64" and (dtype is None or np.dtype(dtype).kind == "c"):
            out = self.array()
            return out if dtype is None else out.astype(dtype)
        out = float_array(self.entry, self.array())
        return out if dtype is None or np.dtype(dtype) == out.dtype else out.astype(dtype)

    def __repr__(self) -> str:
        return f"SafetensorsTensor({self.name!r}, {self.type}, shape={list(self.entry.shape)})"


class TableTensor(SafetensorsTensor):
    """A plain tensor made from row ``i`` of a header's ``EntryTable``: its ``Entry`` is made only when asked
    for (``data`` slices the region from the offsets), so touching every tensor of a big header stays cheap."""

    def __init__(self, table: EntryTable, i: int, region: np.ndarray):  # noqa: D107 - no super(): entry is lazy
        self._table, self._i, self._region = table, i, region
        self._span = table.offsets[i]  # [begin, end]: what data slices, without making the Entry

    @cached_property
    def entry(self) -> Entry:  # type: ignore[override]
        return self._table.entry(self._i)

    @property
    def data(self) -> np.ndarray:
        begin, end = self._span
        return self._region[begin:end]


@dataclass(frozen=True)
class QuantParams:
    """How a combined tensor is quantized: the Ollama quant_type and MLX mode, bits, group size."""

    quant_type: str
    mode: str
    bits: int
    group_size: int
    source: str  # 'tensor metadata', 'blob metadata', 'shapes'


class QuantizedTensor(SafetensorsTensor):
    """A quantized weight with its companions, as one logical tensor of shape ``[..., K]`` (numpy order)."""

    def __init__(self, entry: Entry, region: NDArray[np.uint8], parts: dict[str, Entry], params: QuantParams):
        super().__init__(entry, region)
        self.parts = parts  # 'weight', 'scale', optionally 'bias' and 'global_scale' → Entry
        self.params = params

    @property
    def type(self) -> OllamaQuantType:  # type: ignore[override]  # a logical tensor's type is its quantization, not a dtype
        """The Ollama quant_type (int4, int8, nvfp4, mxfp4, mxfp8), with its mode, bits and group size."""
        return OllamaQuantType.of(self.params, self.parts["scale"].dtype, "bias" in self.parts)

    @property
    def logical_shape(self) -> tuple[int, ...]:
        w = self.entry.shape
        return (*w[:-1], w[-1] * 32 // self.params.bits)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(reversed(self.logical_shape))

    @property
    def n_elements(self) -> int:
        n = 1
        for d in self.logical_shape:
            n *= d
        return n

    @property
    def nbytes(self) -> int:
        """Bytes of all parts (codes, scales, biases, global scale)."""
        return sum(e.nbytes for e in self.parts.values())

    def part(self, role: str) -> NDArray[Any] | None:
        """A part's stored values ('weight', 'scale', 'bias', 'global_scale') as a numpy view, or None."""
        e = self.parts.get(role)
        return None if e is None else tensor_array(e, self._region)

    def stored(self, role: str) -> NDArray[Any]:
        """A part the tensor has (every one has 'weight' and 'scale'; affine ones 'bias') as a numpy view."""
        return tensor_array(self.parts[role], self._region)

    @property
    def global_scale(self) -> NDArray[Any] | None:
        """Ollama's ``.global_scale`` as float32: a scalar, or one factor per row (shape ``[rows, 1]``)."""
        g = self.part("global_scale")
        if g is None:
            return None
        g = np.asarray(g, dtype=np.float32).reshape(-1)
        return g.reshape(()) if g.size == 1 else g.reshape(-1, 1)

    def to_numpy(self, dtype: Any = np.float32, *, mlx_rounding: bool = False) -> NDArray[Any]:
        """The dequantized values ``[..., K]``, bit-exact with ``mx.dequantize`` (see ``quants.mlx``); Ollama's
        ``.global_scale`` multiplies the result as its runner does."""
        p, scale = self.params, self.parts["scale"]
        bias = self.part("bias")
        out = mq.dequantize_mlx(
            p.mode,
            self.stored("weight"),
            self.stored("scale"),
            bias,
            bits=p.bits,
            group_size=p.group_size,
            scale_dtype=scale.dtype,
            mlx_rounding=mlx_rounding,
        )
        g = self.global_scale
        if g is not None:
            rows = out.reshape(-1, out.shape[-1])
            if g.ndim and g.shape[0] != rows.shape[0]:
                raise rules.QUANT_GLOBAL_SCALE.error(f"{self.name}: {g.shape[0]} global scales for {rows.shape[0]} rows")
            out = (rows * g).reshape(out.shape)
        return out if dtype is None or np.dtype(dtype) == out.dtype else out.astype(dtype)

    def __repr__(self) -> str:
        return f"QuantizedTensor({self.name!r}, {self.type} g{self.params.group_size}, shape={list(self.logical_shape)})"


def infer_params(weight: Entry, scale: Entry, bias: Entry | None, metadata: Mapping[str, str], hint: str | None = None) -> QuantParams:
    """Quantization parameters for ``weight``: per-tensor metadata, blob metadata, then the shapes."""
    name = weight.name
    for keys, source in (
        ((f"{name}.quant_type", f"{name}.group_size"), "tensor metadata"),
        (("quant_type", "group_size"), "blob metadata"),
    ):
        qt_name = metadata.get(keys[0])
        if qt_name:
            qt = mq.quant_type(qt_name)
            g = metadata.get(keys[1])
            try:
                group = int(g) if g not in (None, "") else qt.group_size
            except ValueError:
                raise rules.QUANT_GROUP_SIZE.error(f"group_size {g!r} is not an integer", path=f"__metadata__[{keys[1]!r}]") from None
            return QuantParams(qt.name, qt.mode, qt.bits, group, source)
    wcols, scols = weight.shape[-1] if weight.shape else 0, scale.shape[-1] if scale.shape else 0
    if not scols or wcols % scols:
        raise rules.QUANT_SHAPE.error(f"{name}: cannot infer the quantization from {wcols} words and {scols} scales per row")
    ratio = wcols // scols  # = group_size * bits / 32
    if bias is None and scale.dtype == "U8":
        for qt_name in ("nvfp4", "mxfp4", "mxfp8"):
            qt = mq.quant_type(qt_name)
            if qt.group_size * qt.bits // 32 == ratio:
                return QuantParams(qt.name, qt.mode, qt.bits, qt.group_size, "shapes")
    if bias is not None:
        order = ["int4", "int8"]
        if hint and mq.quant_types().get(hint.lower()) and mq.quant_type(hint).mode == "affine":
            order.sort(key=lambda n: n != mq.quant_type(hint).name)
        for qt_name in order:
            qt = mq.quant_type(qt_name)
            group = ratio * 32 // qt.bits
            if ratio * 32 % qt.bits == 0 and group in mq.modes()["affine"].group_sizes:
                return QuantParams(qt.name, qt.mode, qt.bits, group, "shapes")
    raise rules.QUANT_SHAPE.error(f"{name}: {wcols} words and {scols} scales per row match no quantization")


def _check_companions(w: Entry, parts: dict[str, Entry], p: QuantParams) -> None:
    if len(w.shape) < 2 or 0 in w.shape:  # mx.quantize takes matrices (ndim >= 2); groups of no values are no groups
        raise rules.QUANT_SHAPE.error(f"{w.name}: quantized weights of shape {list(w.shape)}: at least 2 dimensions, none 0")
    k = w.shape[-1] * 32 // p.bits if w.shape else 0
    want = (*w.shape[:-1], k // p.group_size if p.group_size else 0)
    for role in ("scale", "bias"):
        e = parts.get(role)
        if e is not None and e.shape != want:
            raise rules.QUANT_SHAPE.error(
                f"{e.name}: shape {list(e.shape)}, {p.quant_type} g{p.group_size} of {list(w.shape)} words needs {list(want)}"
            )
    mode = mq.modes()[p.mode]
    if mode.bias != ("bias" in parts):
        raise rules.QUANT_BIAS.error(f"{w.name}: {p.mode} {'needs' if mode.bias else 'has no'} a .bias tensor")
    if mode.scale == "float" and parts["scale"].dtype not in FLOAT_SCALES or mode.scale != "float" and parts["scale"].dtype != "U8":
        raise rules.QUANT_SCALE_DTYPE.error(f"{parts['scale'].name}: {p.mode} scales are not {parts['scale'].dtype}")
    if "bias" in parts and parts["bias"].dtype != parts["scale"].dtype:
        raise rules.QUANT_SCALE_DTYPE.error(f"{w.name}: bias dtype {parts['bias'].dtype} differs from scale dtype {parts['scale'].dtype}")
    mq.check_params(p.mode, p.bits, p.group_size)


def group_tensors(
    entries: Mapping[str, Entry], region: NDArray[np.uint8], metadata: Mapping[str, str], hint: str | None = None
) -> dict[str, SafetensorsTensor]:
    """Logical tensors: each U32 ``{name}`` with a ``{name}.scale`` becomes one QuantizedTensor that takes its
    companions; everything else stays a plain tensor (a ``.scale`` without a U32 partner is an ordinary tensor)."""
    taken: set[str] = set()
    out: dict[str, SafetensorsTensor] = {}
    for name, e in entries.items():
        scale = entries.get(name + SCALE)
        if e.dtype == "U32" and scale is not None:
            parts = {"weight": e, "scale": scale}
            for role, suffix in (("bias", BIAS), ("global_scale", GLOBAL_SCALE)):
                if name + suffix in entries:
                    parts[role] = entries[name + suffix]
            params = infer_params(e, scale, parts.get("bias"), metadata, hint)
            _check_companions(e, parts, params)
            out[name] = QuantizedTensor(e, region, parts, params)
            taken.update(p.name for p in parts.values() if p is not e)
    return {n: (out[n] if n in out else SafetensorsTensor(e, region)) for n, e in entries.items() if n not in taken}


class TensorMap(Mapping[str, SafetensorsTensor]):
    """Read-only name → tensor mapping, in file (header) order."""

    def __init__(self, tensors: dict[str, SafetensorsTensor]):
        self._t = tensors

    def __getitem__(self, name: str) -> SafetensorsTensor:
        return self._t[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._t)

    def __len__(self) -> int:
        return len(self._t)

    def __repr__(self) -> str:
        return f"TensorMap({len(self)})"


class LazyTensorMap(TensorMap):
    """A TensorMap over a header's ``EntryTable``: each tensor object is made on first access (a header of
    60k entries opens without 60k objects), then kept."""

    def __init__(self, table: EntryTable, region: np.ndarray):
        super().__init__({})
        self._table, self._region = table, region
        self._index: dict[str, int] | None = None

    def __getitem__(self, name: str) -> SafetensorsTensor:
        t = self._t.get(name)
        if t is None:
            if self._index is None:
                self._index = {n: i for i, n in enumerate(self._table.names)}
            t = self._t[name] = TableTensor(self._table, self._index[name], self._region)
        return t

    def __iter__(self) -> Iterator[str]:
        return iter(self._table.names)

    def __len__(self) -> int:
        return len(self._table.names)

    def __contains__(self, name: object) -> bool:  # without making the tensor, as Mapping's would
        if self._index is None:
            self._index = {n: i for i, n in enumerate(self._table.names)}
        return name in self._index

    def each(self) -> Iterator[SafetensorsTensor]:
        """Every tensor in header order, made as it is reached (no name lookups)."""
        made, table, region = self._t, self._table, self._region
        if not made:  # the first pass (the common case): nothing to look up
            for i, name in enumerate(table.names):
                yield made.setdefault(name, TableTensor(table, i, region))
            return
        for i, name in enumerate(table.names):
            t = made.get(name)
            if t is None:
                t = made[name] = TableTensor(table, i, region)
            yield t

    def values(self) -> ValuesView[SafetensorsTensor]:
        return _LazyValues(self)

    def items(self) -> ItemsView[str, SafetensorsTensor]:
        return _LazyItems(self)


class _LazyValues(ValuesView[SafetensorsTensor]):
    """``values()`` of a LazyTensorMap: a real view (len, in), iterated without a lookup per name."""

    _mapping: LazyTensorMap

    def __iter__(self) -> Iterator[SafetensorsTensor]:
        return self._mapping.each()


class _LazyItems(ItemsView[str, SafetensorsTensor]):
    _mapping: LazyTensorMap

    def __iter__(self) -> Iterator[tuple[str, SafetensorsTensor]]:
        return zip(self._mapping, self._mapping.each())


class SafetensorsFile:
    """A parsed safetensors file: ``metadata`` (``__metadata__``), ``tensors`` (logical), ``entries`` (every
    stored tensor), ``header``, ``container`` (the schema's parse result)."""

    format = "safetensors"

    def __init__(self, container: Container, source: memoryview | None = None, path: str | None = None, *, hint: str | None = None):
        self._container = container
        self._view = source
        self.path = path
        header = container.header
        self.header = header
        region = container.data
        table = header.table
        past = np.flatnonzero(table.end > len(region))
        if len(past):
            e = table.entry(int(past[0]))
            raise rules.TENSOR_BOUNDS.error(
                f"data_offsets [{e.begin}, {e.end}] end past the data region ({len(region)} bytes)",
                path=f"header[{e.name!r}]",
                offset=header.key_offset(e.name),
            )
        region = np.frombuffer(region, dtype=np.uint8) if len(region) else np.empty(0, np.uint8)
        region.flags.writeable = False
        self.entries: TensorMap = LazyTensorMap(table, region)
        self.metadata: dict[str, str] = header.metadata or {}
        # a quantized weight needs a companion named {name}.scale: without one, the logical tensors are the stored ones
        maybe_quantized = SCALE + "\0" in "\0".join(table.names) + "\0"
        self.tensors: TensorMap = (
            TensorMap(group_tensors(header.entries, region, self.metadata, hint)) if maybe_quantized else LazyTensorMap(table, region)
        )

    @property
    def container(self) -> Container:
        return self._container

    @property
    def data_offset(self) -> int:
        return int(self._container.data_offset)

    @property
    def quant_type(self) -> str | None:
        """The blob-level ``quant_type``, if any."""
        return self.metadata.get("quant_type") or None

    def to_bytes(self) -> bytes:
        """The file rebuilt through the schema (the same bytes it was parsed from)."""
        return bytes(SAFETENSORS.build(self._container))

    def close(self) -> None:
        self._view = None

    def __enter__(self) -> SafetensorsFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"SafetensorsFile({self.path!r}, {len(self.entries)} stored tensors, {len(self.tensors)} logical)"


def from_bytes(
    data: Any, *, strict: bool = True, path: str | None = None, hint: str | None = None, profile: str = "spec"
) -> SafetensorsFile:
    """A SafetensorsFile over bytes already in memory (or a memory map); ``strict`` runs validation first."""
    container = SAFETENSORS.parse(data)  # framing errors raise their own class (TruncatedError, LimitError ...)
    container.header.json  # noqa: B018 - and so do header errors
    if strict:
        from ..validation.safetensors_checks import check_safetensors, raise_first

        raise_first(check_safetensors(container, profile))
    try:
        return SafetensorsFile(container, data if isinstance(data, memoryview) else None, path, hint=hint)
    except FormatError:
        raise
    except (ValueError, TypeError, KeyError, IndexError, OverflowError) as e:
        raise InvalidValueError(f"internal.{type(e).__name__}", str(e)) from None


def load_safetensors(
    path: str | os.PathLike[str], *, strict: bool = True, hint: str | None = None, profile: str = "spec", **_: Any
) -> SafetensorsFile:
    """Open a safetensors file through a read-only memory map (``strict`` validates; warnings pass)."""
    return from_bytes(map_file(path), strict=strict, path=os.fspath(path), hint=hint, profile=profile)


def save_safetensors(
    path: str | os.PathLike[str],
    tensors: Any,
    metadata: Mapping[str, str] | None = None,
    *,
    style: str = "safetensors",
    verify: Any = None,
    durable: bool | None = None,
) -> None:
    """Write a safetensors file atomically, laid out as ``style``'s writer does ('safetensors', 'mlx',
    'ollama'); ``tensors`` maps names to numpy arrays or ``{dtype, shape, data}`` (see ``formats.safetensors.schema.header_and_sources``).
    Before the rename the file must load strictly (and pass ``verify(temp_path)`` when given); a target that is
    the file of a tensor view given (``output.input``) is refused. ``durable``: see ``fileio.durability``."""
    obj = Container(tensors=tensors, metadata=metadata, style=style)
    sources = [v.get("data") if isinstance(v, Mapping) else v for v in (tensors.values() if isinstance(tensors, Mapping) else [])]

    def check(tmp: str) -> None:
        load_safetensors(tmp, strict=True)
        if verify is not None:
            verify(tmp)

    with reading(mapped_files(sources)):  # never over a file the tensors are copied from
        write_atomic(path, lambda f: SAFETENSORS.build_stream(obj, f), check, durable=durable)
