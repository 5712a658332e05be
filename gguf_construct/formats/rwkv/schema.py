"""rwkv.cpp's model format (versions 100 and 101) as a construct declaration (RWKV/rwkv.cpp: rwkv_file_format.inc)::

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

from construct import Computed, Container, Int32sl, Int32ul, Rebuild, Struct, Tell, len_, this

from ...core import rules
from ..base import FileConstruct, as_stream
from ..fields import Magic, Version
from ..legacy.legacy_fields import Dims, LegacyName, UntilEOF, encoded_len
from ..legacy.schema import TensorData, legacy_tables

MAGIC = legacy_tables().rwkv.magic.encode()
VERSIONS: tuple[int, ...] = legacy_tables().rwkv.versions


#: One rwkv.cpp file (RWKV/rwkv.cpp, rwkv_file_format.inc and rwkv_model_loading.inc, commit 4358e70).
RWKV_LAYOUT = Struct(
    "magic" / Magic(MAGIC),
    "version" / Version(Int32ul, VERSIONS, "rwkv.cpp"),
    "n_vocab" / Int32ul,
    "n_embed" / Int32ul,
    "n_layer" / Int32ul,
    "data_type" / Int32ul,
    "type_table" / Computed(lambda ctx: f"rwkv{ctx.version}"),
    "parameters"
    / UntilEOF(
        Struct(
            "_offset" / Tell,
            "dim_count" / Rebuild(Int32sl, len_(this.shape)),
            "key_length" / Rebuild(Int32sl, lambda ctx: encoded_len(ctx.key)),
            "data_type" / Int32sl,
            "shape" / Dims("dim_count"),
            "key" / LegacyName("key_length", rules.PARAMETER_KEY, least=1),
            "data_offset" / Tell,
            "data" / TensorData("data_type", "shape", "key"),
        ),
        12,
        rules.PARAMETER_TRUNCATED,
    ),
)


def rwkv_layout(version: int) -> Struct:
    """The declaration of an rwkv.cpp file (one for both versions: the version field chooses the type table)."""
    return RWKV_LAYOUT


class RWKVConstruct(FileConstruct):
    """A whole rwkv.cpp file, either version."""

    what = "an rwkv.cpp file"

    def _parse(self, stream, context, path):
        return RWKV_LAYOUT._parsereport(as_stream(stream), context, path)

    def _build(self, obj, stream, context, path):
        RWKV_LAYOUT._build(Container(obj, magic=MAGIC, version=int(obj.get("version", 101))), stream, context, path)
        return obj


#: rwkv.cpp's model file format, versions 100 and 101.
RWKV = RWKVConstruct()
