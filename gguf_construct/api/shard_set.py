"""gguf-split shard sets: split a model into shards, open a set as one model, merge it back.

llama.cpp's conventions (``tools/gguf-split``, gguf-py's ``GGUFWriter``): shards are named
``<prefix>-00001-of-00003.gguf`` (1-based); the first shard carries all the model's metadata, every shard carries
``split.no`` (u16, 0-based), ``split.count`` (u16) and ``split.tensors.count`` (i32, the tensors of all shards),
appended after the first shard's own keys; tensors keep their order across the shards. Merging drops the three
keys again, so ``merge(split(f))`` is ``f`` byte for byte when ``f`` was laid out the usual way.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from construct import Container

from ..core import rules
from ..core.naming import shard_of, shard_suffix
from ..formats.gguf.schema import DEFAULT_ALIGNMENT, GGUF, align_offset
from .fileio import check_output, files_of, reading, verify_gguf_output, write_atomic
from .gguf_file import GGUFFile, load_gguf
from .metadata import Metadata, StandardKeys
from .tensors import Tensors

SPLIT_KEYS = ("split.no", "split.count", "split.tensors.count")


def shard_paths(path: str | os.PathLike[str]) -> list[Path] | None:
    """Every shard of the set ``path`` belongs to (by name), or None when ``path`` is not a shard name."""
    p = Path(path)
    found = shard_of(p.name)
    if found is None:
        return None
    prefix, _, count = found
    return [p.with_name(f"{prefix}-{shard_suffix(i, count)}.gguf") for i in range(1, count + 1)]


def is_first_shard(path: str | os.PathLike[str]) -> bool:
    found = shard_of(Path(path).name)
    return found is not None and found[1] == 1 and found[2] > 1


class ShardedGGUF(GGUFFile):
    """A gguf-split set as one model: the first shard's header and metadata (less the ``split.*`` keys) and the
    tensors of every shard in order, each a zero-copy view of its own shard's memory map. ``save`` writes the
    merged file; ``shards`` are the opened shards, ``shard_paths`` their paths. Tensor offsets stay relative to
    each tensor's own shard."""

    def __init__(self, shards: list[GGUFFile], paths: list[Path]):
        first = shards[0]
        self._container = first.container
        self._view = first._view
        self.path = os.fspath(paths[0])
        self.shards = shards
        self.shard_paths = paths
        self._kvs = [first.metadata.record(k) for k in first.metadata if k not in SPLIT_KEYS]
        self.metadata = Metadata(self._kvs)
        self.tensors = Tensors.joined([s.tensors for s in shards], first.byte_order)

    @property
    def meta(self) -> StandardKeys:
        return StandardKeys(self.metadata)

    def close(self) -> None:
        for s in self.shards:
            s.close()
        self._view = None

    def __repr__(self) -> str:
        return f"ShardedGGUF({len(self.shards)} shards, {len(self.metadata)} keys, {len(self.tensors)} tensors)"


def _split_value(f: GGUFFile, key: str, path: Any) -> int:
    value = f.metadata.get(key)
    if not isinstance(value, int) or isinstance(value, bool):
        raise rules.SPLIT_KEYS.error(f"{key} is missing or not an integer", path=os.fspath(path))
    return int(value)


def load_shards(path: str | os.PathLike[str], *, strict: bool = True, profile: str = "spec") -> ShardedGGUF:
    """Open the shard set ``path`` (any shard's name) as one model, checking the set is whole and consistent:
    every shard present, ``split.no`` its position, ``split.count`` the number of shards, ``split.tensors.count``
    the tensors of all shards, one byte order, no tensor name twice."""
    paths = shard_paths(path)
    if paths is None:
        raise ValueError(f"{path}: not a shard name (<prefix>-00001-of-00003.gguf)")
    missing = [p for p in paths if not p.is_file()]
    if missing:
        raise rules.SPLIT_MISSING.error(f"shard {missing[0].name} of {len(paths)} is missing", path=os.fspath(missing[0]))
    shards = [load_gguf(p, strict=strict, profile=profile) for p in paths]
    return join_shards(shards, paths)


def open_gguf(
    path: str | os.PathLike[str], *, strict: bool = True, profile: str = "spec", byte_order: str | None = None, **_: Any
) -> GGUFFile:
    """GGUF's opener for ``gguf_construct.load``: the first shard of a gguf-split set (``*-00001-of-0000N.gguf``,
    N > 1) opens the whole set as one model (``load_shards``), any other file alone (``load_gguf``)."""
    if is_first_shard(path) and byte_order is None:
        return load_shards(path, strict=strict, profile=profile)
    return load_gguf(path, strict=strict, profile=profile, byte_order=byte_order)


def join_shards(shards: list[GGUFFile], paths: list[Any]) -> ShardedGGUF:
    """The opened shards of a set (local paths or URLs, in order) as one model, after checking the set is whole
    and consistent (see ``load_shards``)."""
    total = 0
    for i, (s, p) in enumerate(zip(shards, paths)):
        name = _name(p)
        if _split_value(s, "split.no", p) != i:
            raise rules.SPLIT_NO.error(f"{name} has split.no = {s.metadata['split.no']}, its name says {i}", path=os.fspath(p))
        if _split_value(s, "split.count", p) != len(paths):
            raise rules.SPLIT_COUNT.error(
                f"{name} has split.count = {s.metadata['split.count']}, the set has {len(paths)} shards", path=os.fspath(p)
            )
        if s.byte_order != shards[0].byte_order:
            raise rules.SPLIT_BYTE_ORDER.error(
                f"{name} is {s.byte_order}-endian, the first shard {shards[0].byte_order}-endian", path=os.fspath(p)
            )
        total += len(s.tensors)
    declared = _split_value(shards[0], "split.tensors.count", paths[0])
    if declared != total:
        raise rules.SPLIT_TENSORS_COUNT.error(
            f"split.tensors.count = {declared}, the shards hold {total} tensors", path=os.fspath(paths[0])
        )
    merged = ShardedGGUF(shards, paths)
    if len(set(merged.tensors)) != len(merged.tensors):
        raise rules.SPLIT_DUPLICATE.error("a tensor name occurs in two shards", path=os.fspath(paths[0]))
    return merged


def _name(path: Any) -> str:
    """A shard's file name (the last part of a path or URL)."""
    return str(os.fspath(path)).replace(os.sep, "/").rsplit("/", 1)[-1]


def plan(
    f: GGUFFile, *, max_size: int | None = None, max_tensors: int | None = None, no_tensor_first_split: bool = False
) -> list[list[str]]:
    """Tensor names per shard, as gguf-split plans them: a new shard starts when the next tensor would take
    the current one past ``max_tensors`` tensors or ``max_size`` bytes of (32-byte padded) tensor data; a shard
    always takes at least one tensor. ``no_tensor_first_split`` leaves the first shard with metadata only."""
    if not max_size and not max_tensors:
        raise ValueError("give max_size or max_tensors")
    shards: list[list[str]] = [[]] if no_tensor_first_split else []
    current: list[str] = []
    size = 0
    for t in f.tensors.values():
        # gguf-split counts each tensor padded to GGUF's default alignment, whatever the file's own
        # (llama.cpp tools/gguf-split/gguf-split.cpp, split_strategy: GGML_PAD(ggml_nbytes(t), 32))
        n = align_offset(t.nbytes, DEFAULT_ALIGNMENT)  # a type without sizes: its byte range in the file
        if current and ((max_tensors and len(current) >= max_tensors) or (max_size and size + n > max_size)):
            shards.append(current)
            current, size = [], 0
        current.append(t.name)
        size += n
    if current or not shards:
        shards.append(current)
    return shards


def split(
    f: GGUFFile,
    prefix: str | os.PathLike[str],
    *,
    max_size: int | None = None,
    max_tensors: int | None = None,
    no_tensor_first_split: bool = False,
    durable: bool | None = None,
) -> list[Path]:
    """Write ``f`` as shards ``<prefix>-0000N-of-0000M.gguf`` (each atomically, fsynced as ``durable`` says:
    see ``fileio.durability``); their paths."""
    if any(k in f.metadata for k in SPLIT_KEYS):
        raise ValueError("the file is a shard already (it has split.* keys): merge it first")
    groups = plan(f, max_size=max_size, max_tensors=max_tensors, no_tensor_first_split=no_tensor_first_split)
    if len(groups) > 65535:
        raise ValueError(f"{len(groups)} shards: split.count is a u16")
    whole = f.to_container()
    by_name = {ti["name"]: ti for ti in whole["tensor_infos"]}
    paths = [Path(f"{os.fspath(prefix)}-{shard_suffix(i + 1, len(groups))}.gguf") for i in range(len(groups))]
    for path in paths:  # all of them before the first is written
        check_output(path, files_of(f), what="the shard")
    for i, names in enumerate(groups):
        keys = Metadata([Container(kv) for kv in whole["metadata_kv"]] if i == 0 else [])
        keys.set("split.no", i, type="u16")
        keys.set("split.count", len(groups), type="u16")
        keys.set("split.tensors.count", len(f.tensors), type="i32")
        shard = Container(
            version=whole["version"],
            byte_order=whole["byte_order"],
            metadata_kv=[keys.record(k) for k in keys],
            tensor_infos=[by_name[n] for n in names],
            tensor_data=None,
        )
        with reading(files_of(f)):
            write_atomic(paths[i], lambda out, shard=shard: GGUF.build_stream(shard, out), verify_gguf_output, durable=durable)
    return paths


def merge(first_shard: str | os.PathLike[str], output: str | os.PathLike[str]) -> ShardedGGUF:
    """Write the set ``first_shard`` belongs to as one file (atomically); the opened set."""
    paths = shard_paths(first_shard) or [Path(first_shard)]
    check_output(output, paths)  # any shard, by any name (a symlink, a hard link)
    merged = load_shards(first_shard, strict=False)
    with reading(paths):
        merged.save(output)
    return merged
