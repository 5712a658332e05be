"""GGUF v1–v3 files broken in one labelled way: ``invalid_gguf()`` draws an ``InvalidFile(data, label, rules,
profile)``, a valid file from ``testing.strategies.valid_gguf`` broken in exactly one way. ``label`` names the security class
(``S1.n_kv`` … ``S17.block_index``: the known failures of GGUF readers, ``INVALID_CLASSES``) and ``rules`` the validation rule(s) that must
reject it
(``rules[0]`` is the usual one; truncation can end in several). Each break is made where the schema says the
field is: positions come from the offsets the parse recorded (``Layout``), not from fixed byte offsets.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np
from construct import Container
from hypothesis import strategies as st

from ...core.tables import DEFAULT_ALIGNMENT, GGML_TYPES, VALUE_TYPES
from ...formats.fields import MAX_ARRAY_DEPTH
from ...formats.gguf.offsets import Layout
from ...formats.gguf.schema import GGUF, align_offset
from .valid_gguf import ARCHITECTURES, gguf_files, text

__all__ = ["INVALID_CLASSES", "InvalidFile", "Layout", "invalid_gguf"]


# -- broken files --------------------------------------------------------------------------------------------
class InvalidFile(NamedTuple):
    """A file broken in one way: ``label`` names the class, ``rules`` the validation rules that reject it."""

    data: bytes
    label: str
    rules: tuple[str, ...]
    profile: str = "spec"

    @property
    def rule(self) -> str:
        return self.rules[0]


def _base(draw: Any, *, min_tensors: int = 0, versions: tuple[int, ...] = (1, 2, 3), **kw: Any) -> Layout:
    """A small valid file (any version, byte order, alignment) with at least ``min_tensors`` tensors."""
    kw.setdefault("max_kv", 4)
    kw.setdefault("tensor_types", ("f32", "f16", "q4_0", "q8_0", "i8", "q4_K"))
    c = draw(gguf_files(versions=versions, max_tensors=max(min_tensors, 3), **kw).filter(lambda c: len(c.tensor_infos) >= min_tensors))
    return Layout(GGUF.build(c))


def _with_kv(draw: Any, kv: Container, **kw: Any) -> Layout:
    """A valid base file with ``kv`` inserted at a random place among its records."""
    c = draw(gguf_files(versions=kw.pop("versions", (1, 2, 3)), max_kv=3, tensor_types=("f32", "q8_0"), max_tensors=2, **kw))
    c.metadata_kv.insert(draw(st.integers(0, len(c.metadata_kv))), kv)
    return Layout(GGUF.build(c))


def _remaining_after(layout: Layout, at: int) -> int:
    return len(layout.data) - at


# Each breaker takes hypothesis's ``draw`` and returns the broken bytes.
BREAKERS: dict[str, Callable[[Any], bytes]] = {}
#: Every label ``invalid_gguf`` can draw → (the rules that reject it, the validation profile that applies).
INVALID_CLASSES: dict[str, tuple[tuple[str, ...], str]] = {}


def breaker(label: str, *rules: str, profile: str = "spec") -> Callable[[Callable[[Any], bytes]], Callable[[Any], bytes]]:
    """Register a function making files broken in the class ``label``, rejected by ``rules`` under ``profile``."""

    def register(make: Callable[[Any], bytes]) -> Callable[[Any], bytes]:
        BREAKERS[label] = make
        INVALID_CLASSES[label] = (rules, profile)
        return make

    return register


HUGE = st.sampled_from([2**64 - 1, 2**63, 2**62 + 1, 2**32 + 1, 10**9, 2**40])
HUGE_V1 = st.sampled_from([2**32 - 1, 2**31, 10**9, 2**24 + 3])


def _huge(draw: Any, layout: Layout, at_least: int) -> int:
    """A count or length larger than ``at_least`` that fits the version's field."""
    return (
        max(at_least + 1, draw(HUGE_V1 if layout.width == 4 else HUGE))
        if at_least + 1 < 2 ** (8 * layout.width)
        else 2 ** (8 * layout.width) - 1
    )


@breaker("S1.n_kv", "header.n_kv")
def _s1_n_kv(draw: Any) -> bytes:
    b = _base(draw)
    return b.patch_count(b.header("metadata_kv_count"), _huge(draw, b, len(b.data)))


@breaker("S1.n_tensors", "header.n_tensors")
def _s1_n_tensors(draw: Any) -> bytes:
    b = _base(draw)
    return b.patch_count(b.header("tensor_count"), _huge(draw, b, len(b.data)))


@breaker("S2.key_length", "string.length")
def _s2_key(draw: Any) -> bytes:
    b = _with_kv(draw, Container(key="a.key", value_type="u8", value=1))
    i = draw(st.integers(0, len(b.c.metadata_kv) - 1))
    at = b.kv(i)["key_length"]
    return b.patch_count(at, _huge(draw, b, _remaining_after(b, at)))


@breaker("S2.string_value_length", "string.length")
def _s2_value(draw: Any) -> bytes:
    b = _with_kv(draw, Container(key="a.text", value_type="str", value=draw(text)))
    i = next(i for i, kv in enumerate(b.c.metadata_kv) if kv.key == "a.text")
    at = b.kv(i)["value"]
    return b.patch_count(at, _huge(draw, b, _remaining_after(b, at)))


@breaker("S2.tensor_name_length", "string.length")
def _s2_name(draw: Any) -> bytes:
    b = _base(draw, min_tensors=1)
    at = b.tensor(draw(st.integers(0, len(b.c.tensor_infos) - 1)))["name_length"]
    return b.patch_count(at, _huge(draw, b, _remaining_after(b, at)))


@breaker("S3.array_count", "array.length")
def _s3_array(draw: Any) -> bytes:
    etype = draw(st.sampled_from(["u8", "u32", "f64", "str", "bool", "arr"]))
    inner = Container(type="u8", len=1, array=np.array([1], "u1"))
    items = [inner] if etype == "arr" else ["ab"] if etype == "str" else np.zeros(2, VALUE_TYPES.lookup(etype).numpy)
    b = _with_kv(
        draw,
        Container(key="a.array", value_type="arr", value=Container(type=etype, len=len(items), array=items)),
        versions=(2, 3) if etype == "f64" else (1, 2, 3),
    )
    i = next(i for i, kv in enumerate(b.c.metadata_kv) if kv.key == "a.array")
    at = b.kv(i)["array_count"]
    return b.patch_count(at, _huge(draw, b, _remaining_after(b, at)))


@breaker("S4.nesting_depth", "limit.nesting")
def _s4_depth(draw: Any) -> bytes:
    value = Container(type="u8", len=1, array=np.array([7], "u1"))
    for _ in range(draw(st.integers(MAX_ARRAY_DEPTH, MAX_ARRAY_DEPTH + 40))):
        value = Container(type="arr", len=1, array=[value])
    return _with_kv(draw, Container(key="a.deep", value_type="arr", value=value)).data


@breaker("S5.value_type", "value.type")
def _s5_value_type(draw: Any) -> bytes:
    b = _with_kv(draw, Container(key="a.x", value_type="u32", value=7))
    i = draw(st.integers(0, len(b.c.metadata_kv) - 1))
    bad = draw(st.one_of(st.integers(len(VALUE_TYPES), 2**32 - 1), st.sampled_from([13, 99, 0xFFFFFFFF, 0x80000000])))
    return b.patch(b.kv(i)["value_type"], "I", bad)


@breaker("S5.array_element_type", "value.type")
def _s5_element_type(draw: Any) -> bytes:
    b = _with_kv(draw, Container(key="a.arr", value_type="arr", value=Container(type="u16", len=2, array=np.array([1, 2], "u2"))))
    i = next(i for i, kv in enumerate(b.c.metadata_kv) if kv.key == "a.arr")
    return b.patch(b.kv(i)["array_type"], "I", draw(st.integers(len(VALUE_TYPES), 2**32 - 1)))


@breaker("S5.v1_64bit_type", "value.type_v1")
def _s5_v1(draw: Any) -> bytes:
    """A 64-bit type (v2 and later) in a v1 file, as a scalar or as an array's element type, sized so that the
    file stays readable: the 8 bytes of a 4-character v1 string, or two u32 elements, become one value."""
    wide = draw(st.sampled_from(["u64", "i64", "f64"]).map(lambda n: VALUE_TYPES.lookup(n).id))
    if draw(st.booleans()):
        b = _with_kv(draw, Container(key="a.x", value_type="str", value="abcd"), versions=(1,))
        i = next(i for i, kv in enumerate(b.c.metadata_kv) if kv.key == "a.x")
        return b.patch(b.kv(i)["value_type"], "I", wide)
    b = _with_kv(
        draw, Container(key="a.x", value_type="arr", value=Container(type="u32", len=2, array=np.array([7, 0], "u4"))), versions=(1,)
    )
    i = next(i for i, kv in enumerate(b.c.metadata_kv) if kv.key == "a.x")
    fields, data = b.kv(i), bytearray(b.patch(b.kv(i)["array_type"], "I", wide))
    struct.pack_into(b.count_fmt, data, fields["array_count"], 1)
    return bytes(data)


def _vocab(n: int, scores: Container | None = None, token_type: Container | None = None, bos: int | None = None) -> list[Container]:
    out = [
        Container(key="general.architecture", value_type="str", value="llama"),
        Container(key="tokenizer.ggml.tokens", value_type="arr", value=Container(type="str", len=n, array=[f"t{i}" for i in range(n)])),
    ]
    if scores is not None:
        out.append(Container(key="tokenizer.ggml.scores", value_type="arr", value=scores))
    if token_type is not None:
        out.append(Container(key="tokenizer.ggml.token_type", value_type="arr", value=token_type))
    if bos is not None:
        out.append(Container(key="tokenizer.ggml.bos_token_id", value_type="u32", value=bos))
    return out


def _file(draw: Any, kvs: list[Container], tensors: Sequence[Container] = (), versions: tuple[int, ...] = (2, 3)) -> bytes:
    return GGUF.build(
        Container(
            version=draw(st.sampled_from(versions)),
            byte_order=draw(st.sampled_from(["little", "big"])),
            metadata_kv=kvs,
            tensor_infos=list(tensors),
            tensor_data=None if tensors else b"",  # no tensors: nothing is laid out (so alignment 0 builds)
        )
    )


@breaker("S6.scores_type", "key.type")
def _s6_type(draw: Any) -> bytes:
    n = draw(st.integers(1, 8))
    etype = draw(st.sampled_from(["i8", "u8", "i32", "f64", "u16"]))
    return _file(draw, _vocab(n, Container(type=etype, len=n, array=np.zeros(n, VALUE_TYPES.lookup(etype).numpy))))


@breaker("S6.tokenizer_length", "tokenizer.length")
def _s6_length(draw: Any) -> bytes:
    n = draw(st.integers(1, 8))
    m = draw(st.integers(0, 12).filter(lambda m: m != n))
    if draw(st.booleans()):
        return _file(draw, _vocab(n, scores=Container(type="f32", len=m, array=np.zeros(m, "<f4"))))
    return _file(draw, _vocab(n, token_type=Container(type="i32", len=m, array=np.ones(m, "<i4"))))


@breaker("S6.token_id", "tokenizer.token_id")
def _s6_token_id(draw: Any) -> bytes:
    n = draw(st.integers(1, 8))
    return _file(draw, _vocab(n, bos=draw(st.integers(n, 2**32 - 1))))


def _tensor(name: str = "t0", dims: list[int] | None = None, ggml_type: str = "f32") -> Container:
    dims = dims or [8]
    return Container(
        name=name, dimensions=dims, type=ggml_type, offset=None, data=bytes(GGML_TYPES.lookup(ggml_type).nbytes(int(np.prod(dims))))
    )


@breaker("S7.too_many_dims", "tensor.n_dims")
def _s7_many(draw: Any) -> bytes:
    return _file(draw, [], [_tensor(dims=[8] + [1] * draw(st.integers(4, 12)))], versions=(1, 2, 3))


@breaker("S7.no_dims", "tensor.n_dims")
def _s7_none(draw: Any) -> bytes:
    b = Layout(_file(draw, [], [_tensor()], versions=(1, 2, 3)))
    # n_dims 0 and the one dimension's bytes removed: a well-formed record with no dimensions
    f = b.tensor(0)
    return b.patch(f["n_dims"], "I", 0)[: f["dims"][0]] + b.data[f["dims"][0] + b.width :]


@breaker("S7.huge_n_dims", "tensor.n_dims")
def _s7_huge(draw: Any) -> bytes:
    b = _base(draw, min_tensors=1)
    f = b.tensor(draw(st.integers(0, len(b.c.tensor_infos) - 1)))
    return b.patch(f["n_dims"], "I", draw(st.integers(2**16, 2**32 - 1).filter(lambda n: n * b.width > len(b.data))))


def _patch_dims(b: Layout, i: int, dims: list[int], ggml_type: int | None = None) -> bytes:
    """Tensor ``i`` of ``b`` with new dimensions (as many as it has) and, optionally, a new ggml type."""
    f = b.tensor(i)
    data = bytearray(b.data)
    for at, d in zip(f["dims"], dims):
        data[at : at + b.width] = struct.pack(b.count_fmt, d)
    if ggml_type is not None:
        data[f["type"] : f["type"] + 4] = struct.pack(b.order + "I", ggml_type)
    return bytes(data)


@breaker("S8.zero_dim", "tensor.shape")
def _s8_zero(draw: Any) -> bytes:
    b = _base(draw, min_tensors=1)
    i = draw(st.integers(0, len(b.c.tensor_infos) - 1))
    dims = [int(d) for d in b.c.tensor_infos[i].dimensions]
    dims[draw(st.integers(0, len(dims) - 1))] = 0
    return _patch_dims(b, i, dims)


@breaker("S8.ne_overflow", "tensor.ne_overflow")
def _s8_overflow(draw: Any) -> bytes:
    b = Layout(_file(draw, [], [_tensor(dims=[8, 1, 1])], versions=(1, 2, 3)))
    limit = 2 ** (8 * b.width) - 1
    dims = draw(st.lists(st.integers(2**22, limit), min_size=3, max_size=3).filter(lambda d: d[0] * d[1] * d[2] > 2**63 - 1))
    return _patch_dims(b, 0, dims)


@breaker("S9.nbytes_overflow", "tensor.nbytes_overflow")
def _s9(draw: Any) -> bytes:
    b = Layout(_file(draw, [], [_tensor(dims=[8])]))
    ggml_type = draw(st.sampled_from(["f32", "f64", "i64"]))
    size = GGML_TYPES.lookup(ggml_type).type_size
    n = draw(st.integers((2**63 - 64) // size + 1, (2**63 - 1)))
    return _patch_dims(b, 0, [n], GGML_TYPES.lookup(ggml_type).id)


@breaker("S10.alignment_value", "alignment.value")
def _s10_value(draw: Any) -> bytes:
    a = draw(st.one_of(st.just(0), st.integers(1, 1000).filter(lambda a: a % 8)))
    tensors = [_tensor()] if a and draw(st.booleans()) else []
    return _file(draw, [Container(key="general.alignment", value_type="u32", value=a)], tensors, versions=(1, 2, 3))


@breaker("S10.alignment_zero_with_tensors", "alignment.zero")
def _s10_zero(draw: Any) -> bytes:
    b = Layout(
        _file(draw, [Container(key="general.alignment", value_type="u32", value=DEFAULT_ALIGNMENT)], [_tensor()], versions=(1, 2, 3))
    )
    return b.patch(b.kv(0)["value"], "I", 0)


@breaker("S10.alignment_type", "alignment.type")
def _s10_type(draw: Any) -> bytes:
    vtype = draw(st.sampled_from(["i32", "u16", "u64", "f32", "str", "u8"]))
    value = {"str": "32", "f32": 32.0}.get(vtype, 32)
    return _file(draw, [Container(key="general.alignment", value_type=vtype, value=value)])


@breaker("S11.offset_past_eof", "tensor.bounds")
def _s11_eof(draw: Any) -> bytes:
    b = _base(draw, min_tensors=1)
    i = draw(st.integers(0, len(b.c.tensor_infos) - 1))
    end = align_offset(len(b.data) - b.c.data_offset, b.c.alignment)
    return b.patch(b.tensor(i)["offset"], "Q", end + b.c.alignment * draw(st.integers(0, 2**20)))


@breaker("S11.overlap", "tensor.overlap")
def _s11_overlap(draw: Any) -> bytes:
    b = _base(draw, min_tensors=2)
    i, j = draw(st.permutations(range(len(b.c.tensor_infos))))[:2]
    return b.patch(b.tensor(j)["offset"], "Q", int(b.c.tensor_infos[i].offset))


@breaker("S11.misaligned_offset", "tensor.offset_alignment")
def _s11_misaligned(draw: Any) -> bytes:
    b = _base(draw, min_tensors=1)
    i = draw(st.integers(0, len(b.c.tensor_infos) - 1))
    return b.patch(b.tensor(i)["offset"], "Q", int(b.c.tensor_infos[i].offset) + draw(st.integers(1, b.c.alignment - 1)))


@breaker("S12.tensor_type", "tensor.type")
def _s12(draw: Any) -> bytes:
    b = _base(draw, min_tensors=1)
    removed = [t.id for t in GGML_TYPES.values() if t.removed]
    bad = draw(st.one_of(st.sampled_from(removed), st.integers(max(GGML_TYPES) + 1, 2**32 - 1)))
    return b.patch(b.tensor(draw(st.integers(0, len(b.c.tensor_infos) - 1)))["type"], "I", bad)


@breaker("S13.duplicate_key", "key.duplicate")
def _s13_key(draw: Any) -> bytes:
    kv = Container(key="a.dup", value_type="u8", value=1)
    c = draw(gguf_files(max_kv=3, max_tensors=1, tensor_types=("f32",)))
    c.metadata_kv.insert(draw(st.integers(0, len(c.metadata_kv))), kv)
    c.metadata_kv.insert(draw(st.integers(0, len(c.metadata_kv))), Container(kv, value=draw(st.integers(0, 255))))
    return GGUF.build(c)


@breaker("S13.duplicate_tensor", "tensor.duplicate")
def _s13_tensor(draw: Any) -> bytes:
    return _file(draw, [], [_tensor("w"), _tensor("w", [draw(st.integers(1, 40))])], versions=(1, 2, 3))


@breaker("S13.empty_key", "key.empty")
def _s13_empty(draw: Any) -> bytes:
    return _with_kv(draw, Container(key="", value_type="u8", value=1)).data


@breaker("S13.long_tensor_name", "tensor.name_length")
def _s13_name(draw: Any) -> bytes:
    return _file(draw, [], [_tensor("n" * draw(st.integers(65, 300)))], versions=(1, 2, 3))


TRUNCATION_RULES = (
    "tensor.bounds",
    "header.truncated",
    "header.n_kv",
    "header.n_tensors",
    "string.truncated",
    "string.length",
    "value.truncated",
    "array.truncated",
    "array.length",
    "tensor.n_dims",
    "data.padding",
    "parse.truncated",
)


@breaker("S14.truncation", *TRUNCATION_RULES)
def _s14(draw: Any) -> bytes:
    b = _base(draw)
    ends = [
        b.c.data_offset + int(t.offset) + (GGML_TYPES.lookup(t.type).nbytes(int(np.prod([int(d) for d in t.dimensions]))))
        for t in b.c.tensor_infos
    ]
    complete = max(ends, default=len(b.data))  # trailing padding after the last tensor is not needed
    return b.data[: draw(st.integers(0, complete - 1))]


@breaker("S15.version", "header.version")
def _s15_version(draw: Any) -> bytes:
    b = _base(draw)
    word = draw(st.sampled_from([0, 4, 5, 0xFFFF, 0xFFFFFFFF]))
    return b.patch(b.header("version"), "I", word)


@breaker("S15.magic", "header.magic")
def _s15_magic(draw: Any) -> bytes:
    b = _base(draw)
    return draw(st.sampled_from([b"FUGG", b"GGML", b"lmgg", b"tjgg", b"\0\0\0\0", b"gguf"])) + b.data[4:]


@breaker("S15.v1_in_ggml", "header.version", profile="ggml")
def _s15_v1(draw: Any) -> bytes:
    return _base(draw, versions=(1,), profile="spec").data


@breaker("S16.utf8", "string.utf8")
def _s16_utf8(draw: Any) -> bytes:
    bad = draw(st.sampled_from([b"\xff", b"\xc3(", b"\xed\xa0\x80", b"\xe2\x82", b"\xf8\x88\x80\x80\x80", b"\x80"]))
    where = draw(st.sampled_from(["key", "value", "array", "tensor"]))
    if where == "tensor":
        return _file(draw, [], [Container(_tensor(), name=b"t" + bad)], versions=(1, 2, 3))
    if where == "key":
        kv = Container(key=b"a." + bad, value_type="u8", value=1)
    elif where == "value":
        kv = Container(key="a.s", value_type="str", value=b"ok" + bad)
    else:
        n = draw(st.integers(1, 80))
        items: list[Any] = [f"t{i}" for i in range(n)]
        items[draw(st.integers(0, n - 1))] = b"x" + bad
        kv = Container(key="a.names", value_type="arr", value=Container(type="str", len=n, array=items))
    return _with_kv(draw, kv).data


@breaker("S16.bool", "value.bool")
def _s16_bool(draw: Any) -> bytes:
    byte = draw(st.integers(2, 255))
    if draw(st.booleans()):
        return _with_kv(draw, Container(key="a.flag", value_type="bool", value=byte)).data
    flags = np.zeros(draw(st.integers(1, 10)), np.uint8)
    flags[draw(st.integers(0, len(flags) - 1))] = byte
    return _with_kv(
        draw, Container(key="a.flags", value_type="arr", value=Container(type="bool", len=len(flags), array=flags.view("?")))
    ).data


@breaker("S17.block_index", "tensor.block_index")
def _s17(draw: Any) -> bytes:
    arch = draw(st.sampled_from(ARCHITECTURES))
    count = draw(st.integers(0, 64))
    kvs = [
        Container(key="general.architecture", value_type="str", value=arch),
        Container(key=f"{arch}.block_count", value_type="u32", value=count),
    ]
    return _file(draw, kvs, [_tensor(f"blk.{draw(st.integers(count, count + 1000))}.attn_q.weight")])


@breaker("ggml.nested_array", "array.nested", profile="ggml")
def _ggml_nested(draw: Any) -> bytes:
    inner = Container(type="u8", len=1, array=np.array([1], "u1"))
    return _with_kv(
        draw, Container(key="a.nested", value_type="arr", value=Container(type="arr", len=1, array=[inner])), versions=(2, 3)
    ).data


@breaker("ggml.alignment_not_power_of_two", "alignment.value", profile="ggml")
def _ggml_alignment(draw: Any) -> bytes:
    a = draw(st.integers(3, 128).map(lambda k: 8 * k).filter(lambda a: a & (a - 1)))
    return _file(draw, [Container(key="general.alignment", value_type="u32", value=a)], [_tensor()])


@breaker("ggml.offset_inconsistent", "tensor.offset_inconsistent", profile="ggml")
def _ggml_offsets(draw: Any) -> bytes:
    gap = 32 * draw(st.integers(1, 8))
    c = Container(
        version=3,
        byte_order="little",
        metadata_kv=[],
        tensor_infos=[Container(_tensor("a"), offset=0), Container(_tensor("b"), offset=32 + gap)],
        tensor_data=None,
    )
    return GGUF.build(c)


def invalid_gguf(labels: Any = None) -> st.SearchStrategy[InvalidFile]:
    """A file broken in one labelled way (``labels``: a subset of ``INVALID_CLASSES``, prefixes such as
    ``"S11"`` allowed; default all)."""
    chosen = (
        sorted(BREAKERS)
        if labels is None
        else sorted(k for k in BREAKERS if any(k == p or k.startswith(p + ".") for p in ([labels] if isinstance(labels, str) else labels)))
    )
    if not chosen:
        raise ValueError(f"no invalid-file class matches {labels!r}; known: {sorted(BREAKERS)}")
    return st.sampled_from(chosen).flatmap(_broken)


def _broken(label: str) -> st.SearchStrategy[InvalidFile]:
    rules, profile = INVALID_CLASSES[label]
    return st.composite(lambda draw: InvalidFile(BREAKERS[label](draw), label, rules, profile))()
