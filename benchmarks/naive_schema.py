"""A naive construct schema for GGUF v2/v3 (little-endian), written the obvious way with stock pieces.

It is the baseline the issue names ("a naive construct schema parses a 102,400-token vocabulary in 2.3 s"):
every array element goes through Switch, PascalString and Struct. Benchmarks only; not part of the package.
"""

from construct import (
    Array,
    Const,
    Flag,
    Float32l,
    Float64l,
    GreedyBytes,
    Int8sl,
    Int8ul,
    Int16sl,
    Int16ul,
    Int32sl,
    Int32ul,
    Int64sl,
    Int64ul,
    LazyBound,
    PascalString,
    Struct,
    Switch,
    this,
)

String = PascalString(Int64ul, "utf8")


def _value(type_field):
    return Switch(
        type_field,
        {0: Int8ul, 1: Int8sl, 2: Int16ul, 3: Int16sl, 4: Int32ul, 5: Int32sl, 6: Float32l, 7: Flag, 8: String,
         9: LazyBound(lambda: ArrayValue), 10: Int64ul, 11: Int64sl, 12: Float64l},
    )  # fmt: skip


ArrayValue = Struct("type" / Int32ul, "len" / Int64ul, "array" / Array(this.len, _value(this.type)))

KV = Struct("key" / String, "value_type" / Int32ul, "value" / _value(this.value_type))
TensorInfo = Struct("name" / String, "n_dimensions" / Int32ul, "dimensions" / Array(this.n_dimensions, Int64ul), "type" / Int32ul, "offset" / Int64ul)

NaiveGGUF = Struct(
    "magic" / Const(b"GGUF"),
    "version" / Int32ul,
    "tensor_count" / Int64ul,
    "metadata_kv_count" / Int64ul,
    "metadata_kv" / Array(this.metadata_kv_count, KV),
    "tensor_infos" / Array(this.tensor_count, TensorInfo),
    "rest" / GreedyBytes,
)
