"""``GGUFFile`` (``load_gguf``, ``from_bytes``, ``new``): a memory-mapped, lazy GGUF file that can be edited and saved.

Opening parses the header, the metadata and the tensor infos through the ``GGUF`` schema; arrays stay lazy and
tensor data stays in the memory map. ``save`` builds the same schema into a temporary file beside the target,
streaming each tensor's bytes from the map, then renames it into place: a failure never leaves a partial file
and the input is never modified (``gguf_construct.api.fileio``). Any format, by path or URL: ``gguf_construct.load``
(``registry.load``).
"""

from __future__ import annotations

import os
import re
import struct
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
from construct import Container

from ..core.limits import limits as limits_scope
from ..errors import FormatError, UnsupportedTypeError
from ..formats.gguf.schema import DEFAULT_ALIGNMENT, GGUF, ORDERS, data_extents, detect_byte_order, tensor_bytes
from ..formats.streaming import transformed
from .fileio import identity, mapped_files, reading, verify_gguf_output, write_atomic
from .metadata import Metadata, StandardKeys
from .tensors import Tensors

if TYPE_CHECKING:
    from ..formats.ollama.schema import Manifest
    from ..validation.issue import Severity


class GGUFFile:
    """A parsed GGUF file. ``metadata`` and ``tensors`` are live views that ``save`` writes back."""

    format = "gguf"
    #: a partial file's counts as its real header declares them (``readable_prefix``); None otherwise
    declared: dict[str, int] | None = None
    #: the manifest of a model opened as ``ollama://`` whose model blob is this file (``api.openers.ollama_registry``); else None
    manifest: Manifest | None = None
    #: (device, inode, size, mtime_ns) of the local file as opened: ``save`` over its own path replaces only that file
    opened: tuple[int, int, int, int] | None = None

    def __init__(self, container: Container, source: memoryview | None = None, path: str | None = None):
        self._container = container
        self._view = source
        self.path = path
        infos = [Container(ti) for ti in container.get("tensor_infos", [])]
        data = container.get("tensor_data")
        sources = [data[start:end] for start, end in data_extents(infos, len(data))] if data is not None else [None] * len(infos)
        self._kvs = list(container.get("metadata_kv", []))
        self.metadata = Metadata(self._kvs)
        self.tensors = Tensors(infos, sources, self.byte_order)

    # -- header facts --------------------------------------------------------------------------------
    @property
    def version(self) -> int:
        return int(self._container["version"])

    @property
    def byte_order(self) -> str:
        return str(self._container.get("byte_order", "little"))

    @property
    def alignment(self) -> int:
        return int(self._container.get("alignment", DEFAULT_ALIGNMENT))

    @property
    def data_offset(self) -> int:
        """Where the tensor data section starts, from the start of the file."""
        return int(self._container.get("data_offset", 0))

    @property
    def meta(self) -> StandardKeys:
        """Typed attribute access to the standard keys: ``f.meta.general.architecture``, ``f.meta.llm.context_length``."""
        return StandardKeys(self.metadata)

    @property
    def container(self) -> Container:
        """The schema's parse result this file was opened from."""
        return self._container

    # -- writing -------------------------------------------------------------------------------------
    def to_container(self, *, version: int | None = None, byte_order: str | None = None) -> Container:
        """The schema container ``save`` builds: current metadata and tensors, offsets left to the schema."""
        order = byte_order or self.byte_order
        version = self.version if version is None else version
        if version == 1:
            _check_v1(self)
        infos = []
        for info, source in zip(self.tensors._infos, self.tensors._sources):
            infos.append(
                Container(
                    name=info["name"],
                    dimensions=list(info["dimensions"]),
                    type=info["type"],
                    offset=None,
                    data=self._source_in(source, info["type"], order),
                )
            )
        return Container(version=version, byte_order=order, metadata_kv=list(self._kvs), tensor_infos=infos, tensor_data=None)

    def save(
        self,
        path: str | os.PathLike[str],
        *,
        version: int | None = None,
        byte_order: str | None = None,
        verify: Any = None,
        keep_valid: bool = True,
        durable: bool | None = None,
    ) -> None:
        """Write the file atomically: build into a temporary file beside ``path``, check that it reads back and,
        with ``keep_valid``, breaks no spec rule the file as opened did not (and ``verify(temp_path)`` when
        given), then rename it over ``path``; a failed check writes nothing. ``durable``: when the file is fsynced
        before its rename (None: when it replaces an existing file; True: always; see ``fileio.durability``)."""
        obj = self.to_container(version=version, byte_order=byte_order)
        already = self.broken_rules() if keep_valid else None

        def check(tmp: str) -> None:
            verify_gguf_output(tmp, already)
            if verify is not None:
                verify(tmp)

        with reading(self._copied_files()):  # the files tensors are copied from; its own file may be replaced (an edit)
            write_atomic(path, lambda f: GGUF.build_stream(obj, f), check, durable=durable, replaces=self._replaced_by(path))

    def _replaced_by(self, path: str | os.PathLike[str]) -> tuple[int, int, int, int] | None:
        """The signature ``path`` must still have when a save renames over it: the file as opened, when ``path``
        names it (its own path, or the same inode by another name); None for any other target."""
        if self.opened is None or self.path is None:
            return None
        same_name = os.path.abspath(os.fspath(path)) == os.path.abspath(self.path)
        return self.opened if same_name or identity(path) == self.opened[:2] else None

    def _copied_files(self) -> list[int]:
        """Descriptors of the mapped files this file's tensors are read from, other than its own: a ``save``
        over one of them would replace a file being copied (``new()`` with another file's tensors)."""
        own = {identity(fd) for fd in mapped_files([self._view])} if self._view is not None else set()
        return [fd for fd in mapped_files(self.tensors._sources) if identity(fd) not in own]

    def broken_rules(self, *, edited: bool = False) -> set[str]:
        """The spec rules the file as opened (``edited``: with the metadata as edited since, for a same-size
        in-place edit) breaks. A rewrite may keep them (``delete`` repairs one thing at a time, a lenient load
        opens what strict refuses) but must add none: see ``verify_gguf_output``."""
        from ..validation import check  # validation loads on first check: lenient reads (hash, info) skip it

        if not self._container.get("metadata_kv") and not self._container.get("tensor_infos"):
            return set()
        container = Container(self._container, metadata_kv=list(self._kvs)) if edited else self._container
        size = len(self._view) if self._view is not None else 2**63 - 1
        try:
            return {i.rule for i in check(container, size, "spec", unknown_types="warning") if i.severity == "error"}
        except FormatError as e:
            return {e.rule}

    def close(self) -> None:
        """Drop the references to the memory map (it is unmapped once no view of it is left)."""
        self._view = None

    def __enter__(self) -> GGUFFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"GGUFFile(v{self.version}, {self.byte_order}-endian, {len(self.metadata)} keys, {len(self.tensors)} tensors)"

    def _source_in(self, source: Any, ggml_type: Any, order: str) -> Any:
        """A tensor's data source in byte order ``order``: numpy arrays are cast, raw blocks are re-encoded
        through the block declarations when the file changes byte order (lazily, as the tensor is written)."""
        if isinstance(source, np.ndarray) and source.dtype.itemsize > 1:
            return np.ascontiguousarray(source, dtype=source.dtype.newbyteorder("<" if order == "little" else ">"))
        if order == self.byte_order:
            return source
        from ..quants import swap_byte_order

        # tensor_bytes reads a lazy (remote) source here; a mapped one is released after the swap
        return lambda: transformed(tensor_bytes(source), lambda data: swap_byte_order(data, ggml_type, self.byte_order, order))


def _check_v1(f: GGUFFile) -> None:
    for field in f.metadata.fields():
        if field.type in ("u64", "i64", "f64") or field.array_type in ("u64", "i64", "f64"):
            raise ValueError(f"GGUF v1 has no {field.type_label} values ({field.key})")


def load_gguf(
    path: str | os.PathLike[str],
    *,
    strict: bool = True,
    profile: str = "spec",
    byte_order: str | None = None,
    unknown_types: Severity = "error",
) -> GGUFFile:
    """Open a GGUF file through a read-only memory map (the byte source; ``gguf_from_source`` reads a remote one
    the same way).

    ``strict`` runs validation (``profile`` 'spec' or 'ggml') and raises the first error as a FormatError;
    without it only what the structure needs is checked and string arrays are decoded when read.
    ``unknown_types='warning'`` lets a strict load through tensor types no table knows (``validation.check``).
    """
    from ..sources.byte_source import MappedSource

    return gguf_from_source(MappedSource(path), strict=strict, profile=profile, byte_order=byte_order, unknown_types=unknown_types)


def gguf_from_source(
    src: Any, *, strict: bool = True, profile: str = "spec", byte_order: str | None = None, unknown_types: Severity = "error", **_: Any
) -> GGUFFile:
    """A GGUFFile over a ``sources.byte_source.ByteSource`` (a memory map or ranged reads): the header through ``GGUF``
    on the source's prefix, tensor data left where it is. A value of an unknown type raises with
    ``error.partial``, the keys before it (``readable_prefix``)."""
    try:
        container = src.parse_header(GGUF, "tensor_data", **({"byte_order": byte_order} if byte_order else {}))
    except UnsupportedTypeError as e:
        if e.rule == "value.type":
            e.partial = readable_prefix(src.view(), e, src.name)
        raise
    if strict:
        from ..validation import check, raise_first

        raise_first(check(container, src.size, profile=profile, unknown_types=unknown_types))
    rest = container.get("tensor_data")
    if rest is not None:
        container["tensor_data"] = src.lazy(src.size - len(rest), src.size)
    f = GGUFFile(container, src.view(), src.name)
    f.opened = getattr(src, "signature", None)
    return f


def readable_prefix(data: Any, error: FormatError, path: str | None = None) -> GGUFFile | None:
    """What can honestly be shown of a GGUF file whose metadata holds a value type no table knows.

    The length of such a value is unknown, so nothing after it can be located: not the later keys, not the
    tensor infos, not the data. What comes before it is sound. This is the file's own bytes up to the bad
    record, with the header's counts set to the records read (``tensor_count`` 0), parsed by the same
    declaration: a read-only ``GGUFFile`` with those keys and no tensors. ``load`` attaches it to the
    ``UnsupportedTypeError`` it raises (``error.partial``, with ``.declared``: the counts the real header
    declares); ``info`` prints it. None when there is nothing to show.
    """
    m = re.match(r"metadata_kv\[(\d+)\]", error.path or "")
    if m is None or error.offset is None:
        return None
    view = memoryview(data)
    order = ORDERS[detect_byte_order(bytes(view[:8]))]
    (version,) = struct.unpack_from(order + "I", view, 4)
    counts = order + ("QQ" if version >= 2 else "II")
    prefix = bytearray(view[: error.offset])
    n_tensors, n_kv = struct.unpack_from(counts, prefix, 8)
    struct.pack_into(counts, prefix, 8, 0, int(m.group(1)))
    try:
        partial = GGUFFile(GGUF.parse(bytes(prefix)), None, path)
    except FormatError:
        return None
    partial.declared = {"metadata_kv_count": n_kv, "tensor_count": n_tensors}  # what the real header says
    return partial


def from_bytes(data: Any, *, strict: bool = True, profile: str = "spec", limits: Mapping[str, int] | None = None) -> GGUFFile:
    """Like ``load`` for a file already in memory (``limits``: named resource limits for this call)."""
    try:
        with limits_scope(limits):
            container = GGUF.parse(data)
    except UnsupportedTypeError as e:
        if e.rule == "value.type":
            e.partial = readable_prefix(data, e)
        raise
    if strict:
        from ..validation import check, raise_first

        raise_first(check(container, len(memoryview(data)), profile=profile))
    return GGUFFile(container, None, None)


def new(*, version: int = 3, byte_order: str = "little") -> GGUFFile:
    """An empty GGUF file to fill with ``metadata`` and ``tensors`` and ``save``.

    What is whose: ``save`` never writes a file that breaks a structural rule of the spec (it checks the file it
    built before renaming it into place, and raises naming the rule); the keys are the caller's. A model file needs
    ``general.architecture``, the keys the spec requires of that architecture and, once a tensor is quantized,
    ``general.quantization_version`` (``validate --keys``, ``validation.check_keys``): ``save`` does not invent them,
    since only the caller knows the values. Every command of this package that writes through ``new`` (quantize,
    convert) supplies the keys llama.cpp's tools would write.
    """
    return GGUFFile(
        Container(version=version, byte_order=byte_order, metadata_kv=[], tensor_infos=[], tensor_data=None, alignment=DEFAULT_ALIGNMENT)
    )
