"""Tensor infos as an ordered mapping name → ``TensorInfo`` with zero-copy data views.

A tensor added from a numpy array takes its ggml type from the dtype and its ggml shape from the array's shape
reversed (ggml lists ne0, the fastest-varying dimension, first). Raw bytes need an explicit type and shape.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np
from construct import Container

from ..core import rules
from ..core.tables import GGML_TYPES, GGMLType, ggml_type_of
from ..formats.gguf.schema import MAX_TENSOR_NAME, tensor_bytes, tensor_nbytes

#: numpy dtype code → the ggml type that holds such values as they are (``schema/ggml_types.json``).
_DTYPE_TYPES = {t.numpy: t.name for t in GGML_TYPES.values() if t.numpy}


class TensorInfo:
    """One tensor: name, shape (ggml order), type, offset (relative to the data section), nbytes, data."""

    __slots__ = ("_info", "_data", "byte_order")

    def __init__(self, info: Container, data: Any, byte_order: str):
        self._info = info
        self._data = data
        self.byte_order = byte_order

    @property
    def name(self) -> str:
        return str(self._info["name"])

    @property
    def shape(self) -> tuple[int, ...]:
        """Dimensions in ggml order: ne0 (contiguous) first."""
        return tuple(int(d) for d in self._info["dimensions"])

    @property
    def type(self) -> GGMLType:
        """The ggml type. An id no table knows (a file loaded with strict=False) is ``GGMLType.unknown(id)``:
        named ``unknown(43)``, without sizes."""
        try:
            return ggml_type_of(self._info["type"])
        except (KeyError, ValueError, TypeError):
            raise rules.TENSOR_TYPE.error(
                f"unknown ggml type {self._info['type']!r}", path=self._path, offset=self._info.get("_offset")
            ) from None

    @property
    def _path(self) -> str:
        return f"tensor_infos[{self.name!r}]"

    @property
    def offset(self) -> int | None:
        """Offset of the data from the start of the data section, as in the file (None for a new tensor)."""
        off = self._info.get("offset")
        return None if off is None else int(off)

    @property
    def n_elements(self) -> int:
        return int(np.prod(self.shape, dtype=object)) if self.shape else 1

    @property
    def nbytes(self) -> int:
        """Bytes of data. For a type without sizes (unknown or removed) in a loaded file: the byte range from
        its offset to the next tensor's (``formats.gguf.schema.data_extents``), empty where that cannot be derived."""
        if self._data is not None and not self.type.sized:
            try:
                return len(self._data)  # a view, or a remote range: its length without fetching it
            except TypeError:
                return len(tensor_bytes(self._data))
        return tensor_nbytes(list(self.shape), self._info["type"])

    @property
    def bytes_present(self) -> int | None:
        """Bytes of data the file holds for this tensor, known without reading them (a view of the map, a remote
        range); None when only reading tells (data made on demand). Fewer than ``nbytes``: the file is cut short."""
        if isinstance(self._data, np.ndarray):
            return int(self._data.nbytes)
        try:
            return memoryview(self._data).nbytes
        except TypeError:
            pass
        try:
            return len(self._data)
        except TypeError:
            return None

    def _short(self, present: int) -> Exception:
        return rules.TENSOR_BOUNDS.error(
            f"only {present:,} of its {self.nbytes:,} bytes of data are in the file (the file is cut short)",
            path=self._path,
            offset=self._info.get("_offset"),
        )

    @property
    def data(self) -> np.ndarray:
        """The tensor's bytes as a read-only uint8 numpy array (a view of the memory map: nothing is copied).
        A tensor whose bytes end past the end of the file raises ``tensor.bounds`` (a ``LayoutError``): no reader
        of ``data`` (a hash, a copy, a dequantization) ever sees fewer bytes than the tensor has."""
        sized = self.type.sized
        present = self.bytes_present
        if sized and present is not None and present < self.nbytes:  # before a remote range is fetched
            raise self._short(present)
        out = np.frombuffer(tensor_bytes(self._data), dtype=np.uint8)
        if sized and len(out) != self.nbytes:
            raise self._short(len(out))
        out.flags.writeable = False
        return out

    def to_numpy(self, dtype: Any = np.float32) -> np.ndarray:
        """The values, dequantized and shaped in numpy order (ggml's shape reversed)."""
        from ..quants import dequantize  # the codecs and checks load when a tensor is first decoded
        from ..validation import raise_first, tensor_issues

        raise_first(tensor_issues(self._info, self._path))  # a leniently loaded file may hold any shape
        data = self.data  # whole, or tensor.bounds
        values = dequantize(data, self.type, byte_order=self.byte_order, dtype=dtype)
        return values.reshape(self.shape[::-1])

    def __repr__(self) -> str:
        return f"TensorInfo({self.name!r}, shape={list(self.shape)}, type={self.type.name}, offset={self.offset})"


def tensor_from(name: str, data: Any, ggml_type: Any = None, shape: Any = None) -> tuple[Container, Any]:
    """A new tensor info and its data source, from a numpy array or raw bytes with a ggml type and shape."""
    if isinstance(data, np.ndarray) and ggml_type is None:
        kind = data.dtype.newbyteorder("=").str[1:]
        if kind not in _DTYPE_TYPES:
            raise ValueError(f"no ggml type for numpy dtype {data.dtype}: give ggml_type and raw bytes")
        ggml_type = _DTYPE_TYPES[kind]
        shape = shape or tuple(reversed(data.shape)) or (1,)
        data = np.ascontiguousarray(data)
    t = GGML_TYPES.lookup(ggml_type)
    if shape is None:
        raise ValueError("raw tensor data needs a shape (ggml order, ne0 first)")
    shape = [int(d) for d in shape]
    if not 1 <= len(shape) <= 4 or any(d < 1 for d in shape):
        raise ValueError(f"shape {shape}: 1 to 4 dimensions, each at least 1")
    if shape[0] % t.block_size:
        raise ValueError(f"ne0 = {shape[0]} is not a multiple of {t.name}'s block size {t.block_size}")
    if callable(data):  # produced when the file is written (one tensor at a time); the writer checks its size
        return Container(name=name, dimensions=shape, type=t.name, offset=None), data
    size = len(tensor_bytes(data))
    if size != tensor_nbytes(shape, t.id):
        raise ValueError(f"{name}: {size} bytes given, shape {shape} of {t.name} needs {tensor_nbytes(shape, t.id)}")
    return Container(name=name, dimensions=shape, type=t.name, offset=None), data


class Tensors(Mapping[str, TensorInfo]):
    """The file's tensors in file order; ``add``, ``replace`` and ``del`` edit what ``save`` writes."""

    def __init__(self, infos: list[Container], sources: list[Any], byte_order: str):
        self._infos = infos
        self._sources = sources
        self._order = byte_order
        self._index: dict[str, int] | None = None  # name -> position, rebuilt after an edit

    @classmethod
    def joined(cls, parts: Sequence[Tensors], byte_order: str) -> Tensors:
        """The tensors of several files (a shard set) as one list, in order; the data stays where it is."""
        return cls([i for p in parts for i in p._infos], [s for p in parts for s in p._sources], byte_order)

    def _find(self, name: str) -> int:
        if self._index is None:
            self._index = {}
            for i, info in enumerate(self._infos):
                self._index.setdefault(info["name"], i)  # a duplicate name (an invalid file): the first wins
        return self._index[name]

    def _edited(self) -> None:
        self._index = None

    def __getitem__(self, name: str) -> TensorInfo:
        i = self._find(name)
        return TensorInfo(self._infos[i], self._sources[i], self._order)

    def __iter__(self) -> Iterator[str]:
        return (info["name"] for info in self._infos)

    def __len__(self) -> int:
        return len(self._infos)

    def add(self, name: str, data: Any, ggml_type: Any = None, shape: Any = None) -> None:
        """Append a tensor (numpy array, or bytes with ``ggml_type`` and ``shape``, or a callable returning such
        bytes when the file is saved); numeric arrays are converted to the file's byte order when saved."""
        if name in self:
            raise KeyError(f"tensor {name!r} exists: use replace()")
        info, source = tensor_from(name, data, ggml_type, shape)
        self._infos.append(info)
        self._sources.append(source)
        if self._index is not None:  # kept up to date: adding n tensors stays linear in n
            self._index[name] = len(self._infos) - 1

    def replace(self, name: str, data: Any, ggml_type: Any = None, shape: Any = None) -> None:
        i = self._find(name)
        self._infos[i], self._sources[i] = tensor_from(name, data, ggml_type, shape)

    def __delitem__(self, name: str) -> None:
        i = self._find(name)
        del self._infos[i]
        del self._sources[i]
        self._edited()

    def rename(self, old: str, new: str) -> None:
        """Give tensor ``old`` the name ``new``; its place, type, shape and data stay as they are."""
        i = self._find(old)
        if new in self:
            raise ValueError(f"a tensor {new!r} exists already")
        size = len(new.encode("utf-8"))
        if not 1 <= size <= MAX_TENSOR_NAME:
            raise ValueError(f"tensor names are 1 to {MAX_TENSOR_NAME} bytes; {new!r} has {size}")
        self._infos[i] = Container(self._infos[i], name=new)
        self._edited()  # a duplicate of ``old`` later in an invalid file would take its place: rebuild

    def __repr__(self) -> str:
        return f"Tensors({len(self)})"
