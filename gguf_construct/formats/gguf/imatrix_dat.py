"""llama.cpp's legacy importance-matrix file (``imatrix.dat``), as ``save_imatrix_legacy`` in
tools/imatrix/imatrix.cpp writes it and ``common/imatrix-loader.cpp`` reads it::

    i32 n_entries
    entries[n_entries]: {i32 len, u8 name[len], i32 ncall, i32 nval, f32 values[nval]}
                         values = (sum of squared activations / count) * ncall, per column (and per expert)
    optional trailer:   {i32 chunk_count, i32 len, u8 dataset[len]}    (the loader accepts files without it)

The GGUF-based successor is an ordinary GGUF file (``general.type = "imatrix"``, ``imatrix.*`` keys, tensors
``<name>.in_sum2`` and ``<name>.counts``): see :mod:`gguf_construct.convert.imatrix`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ...core.rules import Rule

import numpy as np
from construct import Construct, Int32sl, Rebuild, Struct, len_, this

from ...core import rules
from ..base import FileConstruct, as_stream, readable_path
from ..fields import CheckedArray
from ..legacy.legacy_fields import LegacyName


class Float32Values(Construct):
    """``f32 values[count]`` with the count from a sibling field, checked against the bytes left; a numpy array."""

    def __init__(self, count: str, rule: str | Rule):
        super().__init__()
        self.count = count
        self.rule = rule

    def _parse(self, stream, context, path):
        s = as_stream(stream)
        n = int(context[self.count])
        if n < 0:
            raise self.rule.error(f"count {n} is negative", path=readable_path(path), offset=s.pos - 4)
        s.need(4 * n, self.rule, f"{n} float32 values", path)
        out = np.frombuffer(s.view[s.pos : s.pos + 4 * n], "<f4").astype(np.float32)
        s.pos += 4 * n
        return out

    def _build(self, obj, stream, context, path):
        stream.write(np.asarray(obj, "<f4").tobytes())
        return obj


class BytesLeft(Construct):
    """How many bytes follow (reads nothing, writes nothing): lets an optional trailer be declared."""

    def _parse(self, stream, context, path):
        s = as_stream(stream)
        return s.size - s.pos

    def _build(self, obj, stream, context, path):
        return obj


ENTRY = Struct(
    "name_len" / Rebuild(Int32sl, lambda c: len(c.name.encode("utf-8"))),
    "name" / LegacyName("name_len", rules.IMATRIX_NAME),
    "ncall" / Int32sl,
    "nval" / Rebuild(Int32sl, len_(this.values)),
    "values" / Float32Values("nval", rules.IMATRIX_VALUES),
)

TRAILER = Struct(
    "chunk_count" / Int32sl,
    "dataset_len" / Rebuild(Int32sl, lambda c: len(c.dataset.encode("utf-8"))),
    "dataset" / LegacyName("dataset_len", rules.IMATRIX_DATASET),
)


class ImatrixDat(FileConstruct):
    """The whole legacy file: ``Container(entries=[...], trailer=Container(chunk_count, dataset) | None)``."""

    what = "an imatrix.dat file"
    body = Struct(
        "n_entries" / Rebuild(Int32sl, len_(this.entries)),
        "entries" / CheckedArray(this.n_entries, ENTRY, 12, rules.IMATRIX_ENTRIES),
        "bytes_left" / BytesLeft(),
    )

    def _parse(self, stream, context, path):
        out = self.body._parsereport(stream, context, path)
        out.trailer = TRAILER._parsereport(stream, context, path) if out.bytes_left else None
        s = as_stream(stream)
        if s.pos != s.size:
            raise rules.IMATRIX_TRAILING.error(f"{s.size - s.pos} bytes after the trailer", offset=s.pos)
        del out["bytes_left"]
        return out

    def _build(self, obj, stream, context, path):
        self.body._build(dict(obj, bytes_left=0), stream, context, path)
        if obj.get("trailer") is not None:
            TRAILER._build(obj["trailer"], stream, context, path)
        return obj


IMATRIX_DAT = ImatrixDat()
