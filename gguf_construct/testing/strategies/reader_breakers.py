"""GGUF files aimed at what breaks readers, one named class at a time, each inside an otherwise valid file.

Readers check a header, then trust fields that must agree with each other: tensor offsets equal to the running
sum of padded tensor sizes, counts equal to the records present. A blind mutation that changes one field breaks
that agreement and is refused early. Each class here changes what it targets and keeps the rest consistent:

- sizes are computed as ggml computes them (``ggml_nbytes`` in ggml-org/ggml src/ggml.c, in 64-bit ``size_t``,
  wrapping), and offsets are the running sum of those padded sizes (``gguf_init_from_file_impl`` in
  ggml-org/ggml src/gguf.cpp checks ``offset == running sum``), so a file whose sizes wrap passes that check;
- the data section holds as many bytes as the (wrapped) sum says, so a reader that reads it all gets that far.

Quantities at the boundaries of 32/63/64-bit arithmetic (sizes, sums, lengths) are the general generator's,
``gguf_construct.testing.boundaries``; the classes here are the other shapes that broke readers.

``READER_BREAKERS[name].make(rng)`` returns a file's bytes; ``reader_breaker(name, seed)`` is the same by name
and seed; ``reader_breaking_gguf()`` is a hypothesis strategy drawing ``(name, bytes)``. The fuzz command and the
coverage-guided mutators (``gguf_construct.testing.fuzzing.structured``) draw from the same table.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from construct import Container
from hypothesis import strategies as st

from ...core.tables import DEFAULT_ALIGNMENT, GGML_TYPES
from ...formats.gguf.offsets import GGML_MAX_DIMS, SIZE_T, Layout, ggml_nbytes, padded_offsets
from ...formats.gguf.schema import GGUF

__all__ = [
    "GGML_MAX_DIMS",
    "LLAMA_MAX_LAYERS",
    "READER_BREAKERS",
    "ReaderBreaker",
    "ggml_nbytes",
    "padded_offsets",
    "reader_breaker",
    "reader_breaking_gguf",
]

LLAMA_MAX_LAYERS = 512  # ggml-org/llama.cpp src/llama-hparams.h: the fixed per-layer tables' length
# the ggml types whose block is one element (name, as the tables spell them)
_PLAIN = ("f32", "f16", "bf16", "i8", "i16", "i32", "i64", "f64")


def _product(dims: Sequence[int]) -> int:
    out = 1
    for d in dims:
        out *= d
    return out


# -- a valid file around the break ------------------------------------------------------------------------------
def _kv(key: str | bytes, value_type: str, value: Any) -> Container:
    return Container(key=key, value_type=value_type, value=value)


def _array(element_type: str, items: Sequence[Any]) -> Container:
    return Container(type=element_type, len=len(items), array=list(items))


def _base_kvs(rng: random.Random, block_count: int = 1) -> list[Container]:
    return [
        _kv("general.architecture", "str", "llama"),
        _kv("general.name", "str", rng.choice(["tiny", "m", "x" * rng.randrange(1, 40)])),
        _kv("llama.block_count", "u32", block_count),
        _kv("llama.context_length", "u32", rng.choice([64, 2048])),
        _kv("llama.embedding_length", "u32", 8),
    ]


def _small_tensors(rng: random.Random) -> list[tuple[str, list[int], str]]:
    out = [("token_embd.weight", [32, rng.randrange(1, 4)], rng.choice(("f32", "f16", "q8_0")))]
    if rng.random() < 0.5:
        out.append(("output_norm.weight", [rng.choice((1, 8, 32))], "f32"))
    return out


def build(
    kvs: Sequence[Container],
    tensors: Sequence[tuple[str | bytes, Sequence[int], str]],
    *,
    offsets: Sequence[int] | None = None,
    alignment: int = DEFAULT_ALIGNMENT,
    data_size: int | None = None,
    version: int = 3,
) -> bytes:
    """A GGUF file through the schema: tensors at ``offsets`` (by default the running sum of padded, wrapping
    sizes) and a zero data section of ``data_size`` bytes (by default the final sum, capped at 1 MiB)."""
    named = [(n, list(d), t) for n, d, t in tensors]
    expected, total = padded_offsets(named, alignment)  # type: ignore[arg-type]
    offsets = list(expected if offsets is None else offsets)
    size = min(total, 1 << 20) if data_size is None else data_size
    infos = [Container(name=n, dimensions=d, type=t, offset=o) for (n, d, t), o in zip(named, offsets)]
    c = Container(version=version, byte_order="little", metadata_kv=list(kvs), tensor_infos=infos, tensor_data=bytes(size))
    return GGUF.build(c)


# -- the classes ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ReaderBreaker:
    """One class of file that broke a real reader: ``make(rng)`` builds one, ``what`` says what it aims at."""

    name: str
    what: str
    make: Callable[[random.Random], bytes]


READER_BREAKERS: dict[str, ReaderBreaker] = {}


def _breaker(name: str, what: str) -> Callable[[Callable[[random.Random], bytes]], Callable[[random.Random], bytes]]:
    def register(make: Callable[[random.Random], bytes]) -> Callable[[random.Random], bytes]:
        READER_BREAKERS[name] = ReaderBreaker(name, what, make)
        return make

    return register


def _with_tensor(rng: random.Random, name: str, dims: Sequence[int], ggml_type: str, **kw: Any) -> bytes:
    """The base file with one more tensor, placed first or last among the small valid ones."""
    tensors = _small_tensors(rng)
    tensors.insert(rng.randrange(len(tensors) + 1), (name, list(dims), ggml_type))
    return build(_base_kvs(rng), tensors, **kw)


@_breaker("ne-product-overflow", "dimensions each below 2**63 whose product overflows int64 (and uint64)")
def _ne_product(rng: random.Random) -> bytes:
    ggml_type = rng.choice(_PLAIN)
    dims: list[int] = []
    while len(dims) < 2 or _product(dims) < 2**63:
        dims = [rng.choice((2**32 + 1, 2**31, 3 * 2**21, 2**40 + 7, 2**62 + 1)) for _ in range(rng.choice((2, 3, 4)))]
    return _with_tensor(rng, "blk.0.ffn_up.weight", dims, ggml_type)


@_breaker("row-size-overflow", "ne0 whose row size (ne0 / block size * type size) overflows 64 bits")
def _row_size(rng: random.Random) -> bytes:
    ggml_type = rng.choice(("f32", "i32", "f64", "i64"))  # type_size / block_size > 2: the only ones that can
    t = GGML_TYPES.lookup(ggml_type)
    blocks = rng.randrange(SIZE_T // t.type_size + 1, (2**63 - 1) // t.block_size)
    return _with_tensor(rng, "blk.0.attn_q.weight", [blocks * t.block_size], ggml_type)


@_breaker("zero-dim", "a dimension of zero (the tensor has no data; the offsets after it stay consistent)")
def _zero_dim(rng: random.Random) -> bytes:
    n_dims = rng.randint(1, 4)
    dims = [rng.choice((1, 8, 32)) for _ in range(n_dims)]
    dims[rng.randrange(n_dims)] = 0
    return _with_tensor(rng, "blk.0.attn_k.weight", dims, rng.choice(("f32", "q8_0")) if dims[0] % 32 == 0 else "f32")


@_breaker("negative-dim", "a dimension with the top bit set: negative as int64")
def _negative_dim(rng: random.Random) -> bytes:
    dims = [32, rng.choice((2**64 - 1, 2**63, 2**64 - 32))]
    rng.shuffle(dims)
    return _with_tensor(rng, "blk.0.attn_v.weight", dims, "f32")


@_breaker("n-dims-over-max", "n_dims past GGML_MAX_DIMS, with every dimension present (all 1 past the fourth)")
def _n_dims_over(rng: random.Random) -> bytes:
    dims = [8, 1, 1, 1] + [1] * rng.randint(1, 12)
    return _with_tensor(rng, "blk.0.ffn_down.weight", dims, "f32")


@_breaker("n-dims-zero", "n_dims = 0: a scalar, with its one element's bytes present")
def _n_dims_zero(rng: random.Random) -> bytes:
    return _with_tensor(rng, "blk.0.scale", [], "f32")


@_breaker("offset-past-end", "a tensor whose offset plus size passes the end of the data (offset aligned)")
def _offset_past_end(rng: random.Random) -> bytes:
    tensors = _small_tensors(rng)
    offsets, total = padded_offsets(tensors)
    i = rng.randrange(len(tensors))
    offsets[i] = rng.choice((total, total + DEFAULT_ALIGNMENT * rng.randint(1, 100), 2**64 - DEFAULT_ALIGNMENT, 2**63))
    return build(_base_kvs(rng), tensors, offsets=offsets, data_size=total)


@_breaker("offset-overlap", "two tensors whose data overlap (the second starts inside the first)")
def _offset_overlap(rng: random.Random) -> bytes:
    tensors = [("token_embd.weight", [64, 4], "f32"), ("output.weight", [64, 2], "f32")]
    offsets, total = padded_offsets(tensors)
    offsets[1] = rng.choice((0, DEFAULT_ALIGNMENT, 64 * 4 * 4 - DEFAULT_ALIGNMENT))
    return build(_base_kvs(rng), tensors, offsets=offsets, data_size=total)


def _patched(data: bytes, field: Callable[[Layout], tuple[int, str]], value: int) -> bytes:
    layout = Layout(data)
    at, fmt = field(layout)
    return layout.patch(at, fmt, value)


@_breaker("huge-string-count", "a string length far past the bytes left (a key, a value or a tensor name)")
def _huge_string(rng: random.Random) -> bytes:
    data = build(_base_kvs(rng), _small_tensors(rng))
    where = rng.choice(("key", "value", "name"))
    huge = rng.choice((2**64 - 1, 2**63, 2**40, 2**32 + 1, 10**9))
    if where == "name":
        return _patched(data, lambda b: (b.tensor(0)["name_length"], "Q"), huge)
    return _patched(data, lambda b: (b.kv(1)["key_length" if where == "key" else "value"], "Q"), huge)


@_breaker("huge-array-count", "an array count far past the bytes left, for arrays of numbers and of strings")
def _huge_array(rng: random.Random) -> bytes:
    element = rng.choice(("u8", "f32", "i32", "str", "u64"))
    items = ["a", "b"] if element == "str" else [1, 2]
    kvs = _base_kvs(rng)
    kvs.insert(
        rng.randrange(1, len(kvs) + 1),
        _kv("tokenizer.ggml.tokens" if element == "str" else "llama.some_array", "arr", _array(element, items)),
    )
    data = build(kvs, _small_tensors(rng))
    i = next(j for j, kv in enumerate(kvs) if kv.value_type == "arr")
    return _patched(data, lambda b: (b.kv(i)["array_count"], "Q"), rng.choice((2**64 - 1, 2**62, 2**32, 10**9, 2**61 + 1)))


@_breaker("alignment-wrong-type", "general.alignment stored as another type than u32")
def _alignment_type(rng: random.Random) -> bytes:
    vt, value = rng.choice(
        [("u64", 32), ("i32", 32), ("u8", 32), ("u16", 32), ("f32", 32.0), ("str", "32"), ("bool", True), ("arr", _array("u32", [32]))]
    )
    kvs = _base_kvs(rng)
    kvs.insert(rng.randrange(len(kvs) + 1), _kv("general.alignment", vt, value))
    return build(kvs, _small_tensors(rng))


def ggml_pad(x: int, n: int) -> int:
    """``GGML_PAD(x, n)`` as ggml computes it, ``(x + n - 1) & ~(n - 1)`` in ``size_t``: the next multiple of ``n``
    when ``n`` is a power of two; something else when it is not (0 for every ``x`` when ``n`` is 0)."""
    return (x + n - 1) & ~(n - 1) & (SIZE_T - 1)


def ggml_offsets(tensors: Sequence[tuple[str, Sequence[int], str]], alignment: int) -> list[int]:
    """The offsets ggml's reader expects under any alignment value: the running sum of ``ggml_pad``-ed sizes."""
    out, total = [], 0
    for _, dims, ggml_type in tensors:
        out.append(total)
        total = (total + ggml_pad(ggml_nbytes(dims, ggml_type), alignment)) % SIZE_T
    return out


@_breaker("alignment-absurd", "general.alignment 0, not a power of two, or huge (offsets as ggml pads with that value)")
def _alignment_absurd(rng: random.Random) -> bytes:
    alignment = rng.choice((0, 1, 3, 7, 24, 48, 1000, 2**31, 2**32 - 1))
    kvs = _base_kvs(rng)
    kvs.insert(rng.randrange(len(kvs) + 1), _kv("general.alignment", "u32", alignment))
    tensors = _small_tensors(rng)
    offsets = ggml_offsets(tensors, alignment)
    if alignment and alignment <= 1 << 20:
        return build(kvs, tensors, alignment=alignment, offsets=offsets)
    # 0 or huge: the schema cannot lay the file out by it, so it is laid out with the default and the value patched in
    kvs = [kv if kv.key != "general.alignment" else _kv(kv.key, "u32", DEFAULT_ALIGNMENT) for kv in kvs]
    i = next(j for j, kv in enumerate(kvs) if kv.key == "general.alignment")
    return _patched(build(kvs, tensors, offsets=offsets), lambda b: (b.kv(i)["value"], "I"), alignment)


@_breaker("duplicate-key", "the same key twice, with the same or another value type")
def _duplicate_key(rng: random.Random) -> bytes:
    kvs = _base_kvs(rng)
    original = kvs[rng.randrange(len(kvs))]
    copy = rng.choice([_kv(original.key, original.value_type, original.value), _kv(original.key, "u64", 7), _kv(original.key, "str", "x")])
    kvs.insert(rng.randrange(len(kvs) + 1), copy)
    return build(kvs, _small_tensors(rng))


# standard keys and the wrong-typed values put under them (gguf-py constants.py / llama.cpp's loader types)
_WRONG_TYPED = [
    ("tokenizer.ggml.scores", "arr", _array("u8", [1, 2, 3])),
    ("tokenizer.ggml.scores", "arr", _array("str", ["a", "b", "c"])),
    ("tokenizer.ggml.token_type", "arr", _array("f32", [1.0, 1.0, 1.0])),
    ("tokenizer.ggml.tokens", "arr", _array("i32", [1, 2, 3])),
    ("tokenizer.ggml.merges", "arr", _array("u8", [1, 2])),
    ("llama.context_length", "str", "2048"),
    ("llama.rope.freq_base", "arr", _array("u8", [0, 0, 128, 63])),
    ("llama.attention.layer_norm_rms_epsilon", "u8", 1),
    ("general.architecture", "u32", 1),
    ("tokenizer.ggml.bos_token_id", "f32", 1.0),
    ("llama.feed_forward_length", "arr", _array("f32", [1.0])),
]


@_breaker("standard-key-wrong-type", "a standard key holding another type than readers read (an array of u8 where floats are read)")
def _standard_key_type(rng: random.Random) -> bytes:
    key, vt, value = rng.choice(_WRONG_TYPED)
    kvs = [kv for kv in _base_kvs(rng) if kv.key != key]
    kvs.insert(rng.randrange(1, len(kvs) + 1) if key != "general.architecture" else 0, _kv(key, vt, value))
    if key.startswith("tokenizer.ggml.") and key != "tokenizer.ggml.tokens":
        kvs.append(_kv("tokenizer.ggml.model", "str", "llama"))
        kvs.append(_kv("tokenizer.ggml.tokens", "arr", _array("str", ["a", "b", "c"])))
    return build(kvs, _small_tensors(rng))


@_breaker("empty-key", "a key of length 0 (alone, or beside the same standard keys)")
def _empty_key(rng: random.Random) -> bytes:
    kvs = _base_kvs(rng)
    kvs.insert(rng.randrange(len(kvs) + 1), rng.choice([_kv("", "u32", 1), _kv("", "str", "v")]))
    return build(kvs, _small_tensors(rng))


@_breaker("block-count-past-limit", "{arch}.block_count past the layer limit of a consumer's fixed tables (llama.cpp: 512)")
def _block_count(rng: random.Random) -> bytes:
    count = rng.choice((LLAMA_MAX_LAYERS + 1, 4096, 2**31, 2**32 - 1))
    return build(_base_kvs(rng, block_count=count), _small_tensors(rng))


_BAD_BYTE_TOKENS = ("<0x-1>", "<0x>", "<0x100>", "<0xZZ>", "<0x 1>", "<0x+1>", "<0xFFFFFFFFFFFFFFFF>", "<0x1", "0x41>")


@_breaker("byte-token", "a BYTE-type vocabulary token that is not <0xNN> (such as <0x-1>)")
def _byte_token(rng: random.Random) -> bytes:
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{i:02X}>" for i in range(4)]
    bad = rng.choice(_BAD_BYTE_TOKENS)
    tokens.insert(rng.randrange(3, len(tokens) + 1), bad)
    types = [2, 3, 3] + [6] * (len(tokens) - 3)  # UNKNOWN, CONTROL, CONTROL, then BYTE
    kvs = _base_kvs(rng) + [
        _kv("tokenizer.ggml.model", "str", "llama"),
        _kv("tokenizer.ggml.tokens", "arr", _array("str", tokens)),
        _kv("tokenizer.ggml.scores", "arr", _array("f32", [0.0] * len(tokens))),
        _kv("tokenizer.ggml.token_type", "arr", _array("i32", types)),
    ]
    return build(kvs, _small_tensors(rng))


# -- access by name -------------------------------------------------------------------------------------------
def reader_breaker(name: str, seed: int | random.Random = 0) -> bytes:
    """One file of class ``name`` (a key of ``READER_BREAKERS``), drawn from ``seed``."""
    rng = seed if isinstance(seed, random.Random) else random.Random(seed)
    try:
        return READER_BREAKERS[name].make(rng)
    except KeyError:
        raise KeyError(f"no reader-breaker class {name!r}; the classes: {', '.join(READER_BREAKERS)}") from None


def reader_breaking_gguf(names: Sequence[str] | None = None) -> st.SearchStrategy[tuple[str, bytes]]:
    """``(class name, file bytes)`` drawn from ``names`` (default: every class)."""
    chosen = list(names or READER_BREAKERS)
    return st.tuples(st.sampled_from(chosen), st.randoms(use_true_random=False)).map(lambda p: (p[0], reader_breaker(p[0], p[1])))
