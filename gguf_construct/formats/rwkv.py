"""rwkv.cpp's model format (versions 100 and 101) as a construct declaration (reference §5.1)::

    u32 magic = 'ggmf' ('fmgg' on disk: the magic GGMF v1 uses too; the version tells them apart)
    u32 version                      100: quantized data in the pre-GGJT-v2 layouts; 101: today's layouts
    u32 n_vocab, n_embed, n_layer
    u32 data_type                    the file's main type, an rwkv.cpp type id
    parameters[] until end of file: {i32 dim_count, i32 key_length, i32 data_type, i32 shape[dim_count],
                                     u8 key[key_length], u8 data[]}      no alignment, no padding

rwkv.cpp numbers its types like ggml up to Q4_1 and one higher from Q4_2 on (it inserted Q4_1_O at 4):
``schema/legacy.json`` holds both versions' tables, and the parse result's ``type_table`` names the one used.
"""

from __future__ import annotations

import struct
from functools import cache
from typing import Any

from construct import Computed, Const, Container, Int32sl, Int32ul, Rebuild, Struct, Tell, len_, this

from ..errors import TruncatedError, UnknownFormatError, UnsupportedTypeError
from .base import FileConstruct, as_stream
from .ggml import Dims, LegacyName, TensorData, UntilEOF, encoded_len, legacy_tables

MAGIC = legacy_tables().rwkv.magic.encode()
VERSIONS: tuple[int, ...] = legacy_tables().rwkv.versions


@cache
def rwkv_layout(version: int) -> Struct:
    """The declaration of one rwkv.cpp file version."""
    parameter = Struct(
        "_offset" / Tell,
        "dim_count" / Rebuild(Int32sl, len_(this.shape)),
        "key_length" / Rebuild(Int32sl, lambda ctx: encoded_len(ctx.key)),
        "data_type" / Int32sl,
        "shape" / Dims("dim_count"),
        "key" / LegacyName("key_length", "parameter.key", least=1),
        "data_offset" / Tell,
        "data" / TensorData("data_type", "shape", "key"),
    )
    return Struct(
        "magic" / Const(MAGIC),
        "version" / Const(version, Int32ul),
        "n_vocab" / Int32ul,
        "n_embed" / Int32ul,
        "n_layer" / Int32ul,
        "data_type" / Int32ul,
        "type_table" / Computed(f"rwkv{version}"),
        "parameters" / UntilEOF(parameter, 12, "parameter.truncated"),
    )


def read_header(view: Any) -> int:
    """The version of an rwkv.cpp file; UnknownFormatError / UnsupportedTypeError otherwise."""
    head = bytes(memoryview(view)[:8])
    if len(head) < 8:
        raise TruncatedError("header.truncated", f"{len(head)} bytes: too short for magic and version", offset=0)
    if head[:4] != MAGIC:
        raise UnknownFormatError("header.magic", f"magic {head[:4]!r} is not {MAGIC!r}", path="magic", offset=0)
    (version,) = struct.unpack_from("<I", head, 4)
    if version not in VERSIONS:
        raise UnsupportedTypeError("header.version", f"rwkv.cpp version {version} is not 100 or 101", path="version", offset=4)
    return version


class RWKVConstruct(FileConstruct):
    """A whole rwkv.cpp file, either version."""

    what = "an rwkv.cpp file"

    def _parse(self, stream, context, path):
        s = as_stream(stream)
        version = read_header(s.view[s.pos :])
        return rwkv_layout(version)._parsereport(s, context, path)

    def _build(self, obj, stream, context, path):
        version = int(obj.get("version", 101))
        if version not in VERSIONS:
            raise ValueError(f"cannot build rwkv.cpp version {version}")
        rwkv_layout(version)._build(Container(obj, magic=MAGIC), stream, context, path)
        return obj


#: rwkv.cpp's model file format, versions 100 and 101.
RWKV = RWKVConstruct()
