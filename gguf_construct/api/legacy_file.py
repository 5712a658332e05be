"""Loaders and file objects for the formats before GGUF (GGML, GGMF, GGJT) and for rwkv.cpp files.

They follow the protocol every file object shares, so that ``info``, ``validate``, ``diff`` and friends work on
any format: ``.format`` ('ggml' | 'ggmf' | 'ggjt' | 'rwkv'), ``.path``, ``.metadata`` (key → plain Python or
numpy value: the hyper-parameters, the vocabulary as ``vocab.tokens`` (bytes: legacy tokens need not be UTF-8)
and ``vocab.scores``, whisper's ``mel_filters`` …) and ``.tensors`` (name → tensor with ``.name``, ``.shape`` in
ggml order, ``.type`` (a ``LegacyTensorType``: the ggml type name, with its era's block sizes), ``.nbytes``, ``.data`` (a zero-copy uint8
view of the memory map)
and ``.to_numpy()`` (float32 in numpy order, decoding retired block layouts too).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from functools import cache
from typing import Any

import numpy as np
from construct import Container
from numpy.typing import NDArray

from ..core.shapes import element_count
from ..formats.base import map_file
from ..formats.legacy.magic import legacy_format
from ..formats.legacy.schema import GGML, LegacyType, hparams, resolve_type
from ..formats.rwkv.schema import RWKV
from ..validation import raise_first
from .protocol import NamedType


class LegacyTensorType(NamedType):
    """A legacy tensor's ``type``: the ggml type name (``t.type == "q4_0"``, ``'q4_1_o'`` for rwkv.cpp's own) as
    a ``TensorType`` whose ``block_size`` and ``type_size`` are its era's block layout's, with ``layout`` (the
    ggml name for today's layouts, e.g. ``'q4_0.v1'`` for a retired one), ``retired`` and ``id`` (the id the
    file stores, in its era's numbering)."""

    layout: str
    retired: bool
    id: int

    @classmethod
    def of(cls, ltype: LegacyType) -> LegacyTensorType:
        return _legacy_tensor_type(ltype)


@cache
def _legacy_tensor_type(ltype: LegacyType) -> LegacyTensorType:
    return LegacyTensorType(ltype.ggml_name, ltype.elements, ltype.type_size, layout=ltype.layout, retired=ltype.retired, id=ltype.id)


class LegacyTensor:
    """One tensor record of a legacy or rwkv.cpp file."""

    __slots__ = ("name", "shape", "ltype", "type", "offset", "_data")

    def __init__(self, name: str, shape: tuple[int, ...], ltype: LegacyType, offset: int, data: Any):
        self.name = name
        self.shape = shape
        self.ltype = ltype
        #: the ggml type name ('f32', 'q4_0'; 'q4_1_o' for rwkv.cpp's own) with its era's sizes and layout
        self.type = LegacyTensorType.of(ltype)
        self.offset = offset  # of the data, from the start of the file
        self._data = data

    @property
    def layout(self) -> str:
        """The block layout: the ggml name for today's, e.g. 'q4_0.v1' for a retired one."""
        return self.ltype.layout

    @property
    def retired(self) -> bool:
        return self.ltype.retired

    @property
    def type_id(self) -> int:
        """The id stored in the file (its era's numbering)."""
        return self.ltype.id

    @property
    def n_elements(self) -> int:
        return element_count(self.shape)

    @property
    def nbytes(self) -> int:
        return len(self._data)

    @property
    def data(self) -> NDArray[np.uint8]:
        out = np.frombuffer(self._data, dtype=np.uint8)
        out.flags.writeable = False
        return out

    def to_numpy(self, dtype: Any = np.float32) -> NDArray[Any]:
        """The values as float32 in numpy order (ggml's shape reversed), whatever the block layout's era."""
        values = dequantize_legacy(self.data, self.ltype)
        out = values.reshape(self.shape[::-1]) if self.shape else values.reshape(())
        return out if np.dtype(dtype) == out.dtype else out.astype(dtype)

    def __repr__(self) -> str:
        return f"LegacyTensor({self.name!r}, shape={list(self.shape)}, type={self.layout}, nbytes={self.nbytes})"


def dequantize_legacy(data: Any, ltype: LegacyType) -> NDArray[Any]:
    """Flat float32 values of a legacy tensor's bytes, in the layout of its era."""
    if ltype.retired:
        from ..quants.retired import dequantize_retired  # the codecs load when a tensor is first decoded

        return dequantize_retired(data, ltype.layout)
    from ..quants import dequantize

    return dequantize(data, ltype.layout)


class _Tensors(Mapping[str, LegacyTensor]):
    """Tensors by name in file order (a duplicated name keeps its first record; validation reports it)."""

    def __init__(self, tensors: list[LegacyTensor]):
        self._list = tensors
        self._by_name: dict[str, LegacyTensor] = {}
        for t in tensors:
            self._by_name.setdefault(t.name, t)

    def __getitem__(self, name: str) -> LegacyTensor:
        return self._by_name[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._by_name)

    def __len__(self) -> int:
        return len(self._by_name)

    def records(self) -> list[LegacyTensor]:
        """Every record, duplicates included, in file order."""
        return list(self._list)


class LegacyFile:
    """A parsed GGML/GGMF/GGJT or rwkv.cpp file over a read-only memory map."""

    def __init__(self, container: Container, fmt: str, path: str | None, metadata: dict[str, Any], tensors: list[LegacyTensor]):
        self.container = container
        self.format = fmt
        self.path = path
        self.metadata: dict[str, Any] = metadata
        self.tensors = _Tensors(tensors)

    @property
    def version(self) -> int | None:
        """The container's version (None for unversioned 'ggml')."""
        version = self.container.get("version")
        return None if version is None else int(version)

    @property
    def profile(self) -> str:
        """The hyper-parameter profile ('llama', 'whisper', …; 'rwkv' for rwkv.cpp files)."""
        return str(self.container.get("profile", "rwkv"))

    @property
    def type_table(self) -> str:
        """Which era's numbering and block layouts the tensor types follow (schema/legacy.json)."""
        return str(self.container["type_table"])

    @property
    def byte_order(self) -> str:
        return "little"

    def describe(self) -> str:
        """'GGJT v3 (llama)', 'GGML (whisper)', 'rwkv.cpp v101 (RWKV v5.2)'."""
        if self.format == "rwkv":
            return f"rwkv.cpp v{self.version} (RWKV {self.metadata['architecture']})"
        return f"{self.format.upper()}{f' v{self.version}' if self.version is not None else ''} ({self.profile})"

    def close(self) -> None:
        self.container = Container()

    def __enter__(self) -> LegacyFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"LegacyFile({self.describe()}, {len(self.metadata)} keys, {len(self.tensors)} tensors)"


def legacy_metadata(c: Container) -> dict[str, Any]:
    """Hyper-parameters and the other header sections of a parsed GGML-family file, as plain values."""
    md: dict[str, Any] = hparams(c)
    for key in ("model_type",):
        if c.get(key) is not None:
            md[key] = c[key]["text"]
    for key in ("mel_filters",):
        if c.get(key) is not None:
            m = c[key]
            dims = [v for k, v in m.items() if not k.startswith("_") and k != "data"]
            md[key] = m["data"].reshape(dims[0], dims[1]) if dims[0] * dims[1] == len(m["data"]) else m["data"]
    if c.get("window") is not None:
        md["window"] = c["window"]["data"]
    if c.get("tdt_durations") is not None:
        md["tdt_durations"] = c["tdt_durations"]
    if c.get("encoder") is not None:
        md["encoder"] = c["encoder"].reshape(-1, 3)
    if c.get("vocab") is not None:
        md["vocab.tokens"] = c["vocab"].texts
        if c["vocab"].scores is not None:
            md["vocab.scores"] = c["vocab"].scores
    return md


def from_container(c: Container, path: str | None = None) -> LegacyFile:
    """A LegacyFile over a parsed GGML/GGMF/GGJT container."""
    tensors = [
        LegacyTensor(
            r["name"], tuple(int(d) for d in r["ne"]), resolve_type(c["type_table"], int(r["type"])), int(r["data_offset"]), r["data"]
        )
        for r in c["tensors"]
    ]
    return LegacyFile(c, c["format"], path, legacy_metadata(c), tensors)


def rwkv_architecture(names: set[str]) -> str:
    """RWKV v4.0, v5.1, v5.2, v6.0 or v7.0, from which parameters exist (rwkv.cpp's own rule: RWKV/rwkv.cpp, rwkv_model_loading.inc)."""
    arch = "v4.0"
    if "blocks.0.att.ln_x.weight" in names:
        arch = "v5.2" if "blocks.0.att.gate.weight" in names else "v5.1"
    if "blocks.0.att.time_maa_x" in names:
        arch = "v6.0"
    if "blocks.0.att.r_k" in names:
        arch = "v7.0"
    return arch


def rwkv_from_container(c: Container, path: str | None = None) -> LegacyFile:
    """A LegacyFile over a parsed rwkv.cpp container."""
    tensors = [
        LegacyTensor(
            p["key"],
            tuple(int(d) for d in p["shape"]),
            resolve_type(c["type_table"], int(p["data_type"])),
            int(p["data_offset"]),
            p["data"],
        )
        for p in c["parameters"]
    ]
    md: dict[str, Any] = {k: int(c[k]) for k in ("n_vocab", "n_embed", "n_layer", "data_type")}
    md["architecture"] = rwkv_architecture({t.name for t in tensors})
    return LegacyFile(c, "rwkv", path, md, tensors)


def _check(issues: list[Any], strict: bool) -> None:
    if strict:
        raise_first(issues)


def load_legacy(
    path: str | os.PathLike[str], *, strict: bool = True, profile: str = "spec", hparams: str | None = None, **_: Any
) -> LegacyFile:
    """Open a GGML/GGMF/GGJT file (memory-mapped). ``hparams`` names the hyper-parameter profile ('llama',
    'whisper', …); by default it is detected. ``strict`` validates (``profile`` 'spec' or 'ggml') and raises the
    first error."""
    view = map_file(path)
    c = GGML.parse(view, **({"profile": hparams} if hparams else {}))
    if strict:
        from ..validation.legacy_checks import check_legacy

        _check(check_legacy(c, profile), strict)
    return from_container(c, os.fspath(path))


def load_rwkv(path: str | os.PathLike[str], *, strict: bool = True, profile: str = "spec", **_: Any) -> LegacyFile:
    """Open an rwkv.cpp file (memory-mapped); ``strict`` validates and raises the first error."""
    view = map_file(path)
    c = RWKV.parse(view)
    if strict:
        from ..validation.legacy_checks import check_rwkv

        _check(check_rwkv(c, profile), strict)
    return rwkv_from_container(c, os.fspath(path))


def open_legacy(data: Any, *, hparams: str | None = None) -> LegacyFile:
    """A LegacyFile over bytes already in memory (any legacy format or rwkv.cpp)."""
    if legacy_format(bytes(memoryview(data)[:8])) == "rwkv":
        return rwkv_from_container(RWKV.parse(data))
    return from_container(GGML.parse(data, **({"profile": hparams} if hparams else {})))
