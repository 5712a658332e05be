"""What every loaded model file offers, whatever its format: the ``ModelFile``, ``Tensor`` and ``TensorType``
protocols, and the ``Literal`` names ``load`` takes.

``info``, ``diff``, ``hash``, ``dequant``, ``convert`` and ``quantize`` are written against these protocols only,
so they work on GGUF (``GGUFFile``, ``ShardedGGUF``), the legacy formats and rwkv.cpp (``LegacyFile``),
safetensors (``SafetensorsFile``, ``RemoteSafetensorsFile``) and Ollama models (``OllamaModel``) alike; a test
checks every one of those classes against them, statically (mypy) and on real files.

``tensor.type`` is a ``TensorType`` in every format: GGUF's ``GGMLType`` record, and for the formats whose
files name their types with strings, a ``NamedType``, which is that string (``t.type == "F32"``) and the record
(``t.type.name``, ``.block_size``, ``.type_size``) at once. Cross-format code reads ``t.type.name`` and the
sizes; ``str(t.type)`` is the name everywhere.
"""

from __future__ import annotations

import inspect
import sys
import typing
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar, runtime_checkable

from ..validation.profiles import GGUFProfile, LegacyProfile, OllamaProfile, Profile, SafetensorsProfile

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

#: The formats ``detect`` names and ``load(format=...)`` accepts.
FormatName = Literal["gguf", "ggml", "ggmf", "ggjt", "rwkv", "safetensors", "ollama"]
#: The formats ``LegacyFile`` opens.
LegacyFormatName = Literal["ggml", "ggmf", "ggjt", "rwkv"]
#: A file's byte order (GGUF has both; every other format is little-endian).
ByteOrder = Literal["little", "big"]


@runtime_checkable
class TensorType(Protocol):
    """A tensor's type: its name as its format spells it, and its storage as ``block_size`` elements in
    ``type_size`` bytes (both 0 for a type whose sizes are unknown: ``sized`` is False)."""

    @property
    def name(self) -> str: ...

    @property
    def block_size(self) -> int: ...

    @property
    def type_size(self) -> int: ...

    @property
    def sized(self) -> bool: ...


@runtime_checkable
class Tensor(Protocol):
    """One tensor of a model file. ``shape`` is in ggml order (the fastest-varying dimension first);
    ``to_numpy`` returns the values in numpy order (the shape reversed). ``offset`` is where the data starts in
    the format's own frame of reference (GGUF: the data section; legacy and rwkv.cpp: the file; safetensors:
    the data region), None for a tensor added but not yet written. ``data`` is the stored bytes as a read-only
    uint8 array (a view of the memory map for local files)."""

    @property
    def name(self) -> str: ...

    @property
    def shape(self) -> tuple[int, ...]: ...

    @property
    def type(self) -> TensorType: ...

    @property
    def nbytes(self) -> int: ...

    @property
    def n_elements(self) -> int: ...

    @property
    def offset(self) -> int | None: ...

    @property
    def data(self) -> npt.NDArray[np.uint8]: ...

    def to_numpy(self, dtype: Any = ...) -> npt.NDArray[Any]: ...


@runtime_checkable
class ModelFile(Protocol):
    """A loaded model file: ``format`` (a ``FormatName``), ``path`` (None for one opened from bytes),
    ``metadata`` (key → value) and ``tensors`` (name → ``Tensor``, in file order); a context manager whose
    ``close`` drops the memory map."""

    @property
    def format(self) -> str: ...

    @property
    def path(self) -> str | None: ...

    @property
    def metadata(self) -> Mapping[str, Any]: ...

    @property
    def tensors(self) -> Mapping[str, Tensor]: ...

    def close(self) -> None: ...

    def __enter__(self) -> ModelFile: ...

    def __exit__(self, *exc: object) -> None: ...


class _StaticProtocolMeta(type(Protocol)):  # type: ignore[misc]
    """``isinstance`` against a runtime protocol that looks members up without running them, as Python 3.12
    does (``inspect.getattr_static``): on 3.11 it calls ``hasattr``, which runs every property, so checking a
    remote tensor against ``Tensor`` fetched its data."""

    def __instancecheck__(cls, instance: Any) -> bool:
        attrs = typing._get_protocol_attrs(cls)  # type: ignore[attr-defined]
        missing = object()
        return all(inspect.getattr_static(instance, name, missing) is not missing for name in attrs)


if sys.version_info < (3, 12):
    for _protocol in (TensorType, Tensor, ModelFile):
        _protocol.__class__ = _StaticProtocolMeta  # type: ignore[method-assign]


#: the validation profiles (``validation.profiles``), re-exported beside the other names ``load`` takes
__all__ = [
    "ByteOrder",
    "FormatName",
    "GGUFProfile",
    "LegacyFormatName",
    "LegacyProfile",
    "ModelFile",
    "NamedType",
    "OllamaProfile",
    "Profile",
    "SafetensorsProfile",
    "Tensor",
    "TensorType",
]

_T = TypeVar("_T", bound="NamedType")


class NamedType(str):
    """A ``TensorType`` for formats that name their types with strings (safetensors dtypes, Ollama quant types,
    legacy ggml names): the name itself, so comparing, hashing, printing and JSON see the string, plus the
    record's fields as attributes. Subclasses add their format's own fields."""

    block_size: int
    type_size: int

    def __new__(cls: type[_T], name: str, block_size: int, type_size: int, **fields: Any) -> _T:
        self = super().__new__(cls, name)
        self.block_size = block_size
        self.type_size = type_size
        self.__dict__.update(fields)
        return self

    @property
    def name(self) -> str:
        return str.__str__(self)

    @property
    def sized(self) -> bool:
        return self.block_size > 0 and self.type_size > 0

    def nbytes(self, n_elements: int) -> int | None:
        """Bytes for ``n_elements`` values; None when they do not fill whole blocks (or the sizes are unknown)."""
        if not self.sized or n_elements % self.block_size:
            return None
        return n_elements // self.block_size * self.type_size

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return _rebuild, (type(self), self.name, dict(self.__dict__))


def _rebuild(cls: type[_T], name: str, fields: dict[str, Any]) -> _T:
    return cls(name, **fields)
