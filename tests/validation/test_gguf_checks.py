"""Hostile GGUF input: ggml's test-gguf rejection classes, the security classes S1–S17 (known failures of GGUF readers), and a
byte-level robustness sweep.

Every rejection is checked three ways: ``validate_bytes`` reports the exact rule (with a byte offset when the
fault has a position), the strict ``from_bytes`` raises a specific ``FormatError`` subclass for the first error,
and nothing else escapes (no Python exception, no ``internal.*`` rule, which would mean a missing check).
"""

from __future__ import annotations

import re
import struct
import time
import tracemalloc

import pytest
from conftest import corpus_file
from construct import Container

from gguf_construct import GGUF, FormatError, LimitError, TruncatedError, UnknownFormatError, from_bytes
from gguf_construct import validate as validate_bytes
from gguf_construct.errors import DuplicateError, InvalidValueError, LayoutError, UnsupportedTypeError
from gguf_construct.validation import check

# GGUF value type ids and the ggml tensor type ids used below.
U8, I8, U16, I16, U32, I32, F32, BOOL, STR, ARR, U64, I64, F64 = range(13)
T_F32, T_Q4_0, T_I8, T_F64 = 0, 2, 24, 28


# -- hand assembly (little-endian; v1 has u32 counts, lengths and dimensions) ---------------------------------
def u32(v):
    return struct.pack("<I", v)


def u64(v):
    return struct.pack("<Q", v)


def cnt(v, wide=True):
    return u64(v) if wide else u32(v)


def gstr(s, wide=True, length=None):
    """A gguf string; ``length`` overrides the declared length."""
    b = s.encode("utf-8") if isinstance(s, str) else s
    return cnt(len(b) if length is None else length, wide) + b


def kv(key, vtype, payload, wide=True):
    return gstr(key, wide) + u32(vtype) + payload


def arr(etype, n, body=b"", wide=True):
    return u32(etype) + cnt(n, wide) + body


def tinfo(name, dims, ggml_type=T_F32, offset=0, n_dims=None, wide=True):
    n = len(dims) if n_dims is None else n_dims
    return gstr(name, wide) + u32(n) + b"".join(cnt(d, wide) for d in dims) + u32(ggml_type) + u64(offset)


def gguf(kvs=(), tensors=(), data=b"", version=3, n_kv=None, n_tensors=None, alignment=32):
    """A file from raw kv and tensor-info records, padded to ``alignment`` before the data when there are tensors."""
    wide = version != 1
    out = b"GGUF" + u32(version) + cnt(len(tensors) if n_tensors is None else n_tensors, wide)
    out += cnt(len(kvs) if n_kv is None else n_kv, wide) + b"".join(kvs) + b"".join(tensors)
    if tensors:
        out += bytes(-len(out) % alignment)
    return out + data


def align(a, vtype=U32):
    return kv("general.alignment", vtype, struct.pack("<I" if vtype in (U32, I32) else "<Q", a))


ARCH = kv("general.architecture", STR, gstr("llama"))
ONE_TENSOR = [tinfo("t0", [8])]  # one f32 tensor of 32 bytes at offset 0


def one_tensor(kvs=(ARCH,), **ti):
    """A file with a single tensor (f32 [8] at 0 unless overridden) and its 32 bytes of data."""
    args = {"name": "t0", "dims": [8], **ti}
    return gguf(list(kvs), [tinfo(**args)], bytes(range(32)))


def build(kvs, tensors):
    """A file through the builder: ``kvs`` as (key, type, value), ``tensors`` as (name, dims, type, data)."""
    return GGUF.build(
        Container(
            version=3,
            byte_order="little",
            metadata_kv=[Container(key=k, value_type=t, value=v) for k, t, v in kvs],
            tensor_infos=[Container(name=n, dimensions=d, type=t, offset=None, data=b) for n, d, t, b in tensors],
            tensor_data=None,
        )
    )


# A small valid file with arrays and two tensors; the first (q4_0, 18 bytes) is followed by inter-tensor padding,
# the second (f32, 64 bytes) ends on the alignment, so no byte of the file is optional.
VALID = build(
    [
        ("general.architecture", "str", "llama"),
        ("general.alignment", "u32", 32),
        ("llama.block_count", "u32", 2),
        ("a.u32s", "arr", Container(type="u32", len=3, array=[1, 2, 3])),
        ("a.names", "arr", Container(type="str", len=3, array=["a", "bc", ""])),
        ("a.flag", "bool", True),
        ("a.pi", "f64", 3.25),
    ],
    [("blk.0.q", [32], "q4_0", bytes(range(18))), ("blk.1.w", [8, 2], "f32", bytes(range(64)))],
)


# -- verdict helpers ------------------------------------------------------------------------------------------
def errors_of(data, profile="spec"):
    """The error issues of ``data``; fails on any ``internal.*`` rule (a check the schema is missing)."""
    issues = validate_bytes(data, profile)
    assert not [i for i in issues if i.rule.startswith("internal.")], issues
    return [i for i in issues if i.severity == "error"]


def assert_rejected(data, rule, profile="spec", exc=FormatError, positional=True):
    """``rule`` is among the errors (with an offset inside the file when positional); strict parsing raises
    a specific FormatError subclass (an instance of ``exc``) for the first error."""
    errs = errors_of(data, profile)
    hits = [i for i in errs if i.rule == rule]
    assert hits, f"expected {rule}, got {errs}"
    if positional:
        assert hits[0].offset is not None, hits[0]
        assert 0 <= hits[0].offset <= len(data), hits[0]
    with pytest.raises(FormatError) as info:
        from_bytes(data, profile=profile)
    err = info.value
    assert type(err) is not FormatError, f"{err!r} is the bare base class"
    assert err.rule == errs[0].rule, (err, errs)
    if errs[0].rule == rule:
        assert isinstance(err, exc), repr(err)
    return hits[0]


def assert_accepted(data, profile="spec"):
    assert errors_of(data, profile) == []
    from_bytes(data, profile=profile)


def with_version(data, word):
    return data[:4] + word + data[8:]


def v1_file():
    """A GGUF v1 file (u32 counts, lengths and dims) with a key, a string array and one tensor."""
    kvs = [
        kv("general.architecture", STR, gstr("llama", wide=False), wide=False),
        kv("a.names", ARR, arr(STR, 2, gstr("x", False) + gstr("yz", False), wide=False), wide=False),
    ]
    return gguf(kvs, [tinfo("t0", [8], wide=False)], bytes(32), version=1)


def nested(depth):
    """A kv whose value is ``depth`` arrays deep (the innermost one holds one u8, 7)."""
    value = arr(U8, 1, b"\x07")
    for _ in range(depth - 1):
        value = arr(ARR, 1, value)
    return kv("a.deep", ARR, value)


# == 1. ggml's tests/test-gguf.cpp handcrafted classes =========================================================
def test_valid_files_are_accepted_by_both_profiles():
    """HEADER_EMPTY, KV_SUCCESS, TENSORS_SUCCESS, DATA_SUCCESS: the reference files pass both profiles."""
    for data in (gguf(), gguf([ARCH]), one_tensor(), VALID):
        for profile in ("spec", "ggml"):
            assert_accepted(data, profile)
    f = from_bytes(VALID)
    assert [t.name for t in f.tensors.values()] == ["blk.0.q", "blk.1.w"]
    assert f.metadata["a.names"] == ["a", "bc", ""]


@pytest.mark.parametrize("alignment", [64, 256])
def test_custom_alignment_is_accepted_by_both_profiles(alignment):
    """TENSORS_CUSTOM_ALIGN / DATA_CUSTOM_ALIGN: a power-of-two multiple of 8, with offsets padded to it."""
    tis = [tinfo("t0", [8]), tinfo("t1", [4], offset=alignment)]
    data = gguf([align(alignment)], tis, bytes(alignment + 16), alignment=alignment)
    assert GGUF.parse(data).data_offset % alignment == 0
    for profile in ("spec", "ggml"):
        assert_accepted(data, profile)


def test_alignment_1_is_ggml_only():
    """test-gguf's own CUSTOM_ALIGN uses 1: a power of two (ggml), but not a multiple of 8 (spec)."""
    data = gguf([align(1)], [tinfo("t0", [3]), tinfo("t1", [1], offset=12)], bytes(16), alignment=1)
    assert_accepted(data, "ggml")
    assert_rejected(data, "alignment.value", "spec")


GGML_REJECTED = {
    # name: (file, rule, exception class)
    "header_bad_magic": (b"FUGG" + VALID[4:], "header.magic", UnknownFormatError),
    "header_bad_version_0": (with_version(VALID, u32(0)), "header.version", UnsupportedTypeError),
    "header_bad_version_future": (with_version(VALID, u32(4)), "header.version", UnsupportedTypeError),
    "header_bad_n_tensors": (gguf(n_tensors=2**64 - 1), "header.n_tensors", TruncatedError),
    "header_bad_n_kv": (gguf(n_kv=2**64 - 1), "header.n_kv", TruncatedError),
    "kv_bad_key_size": (gguf([gstr("my_key_0", length=2**64 - 1) + u32(U8) + b"\0"]), "string.length", TruncatedError),
    "kv_bad_type": (gguf([kv("my_key_0", 13, b"\0")]), "value.type", UnsupportedTypeError),
    "kv_bad_type_array": (gguf([kv("my_key_0", ARR, arr(13, 1, b"\0"))]), "value.type", UnsupportedTypeError),
    "kv_duplicate_key": (gguf([kv("my_key_0", U8, b"\1"), kv("my_key_0", U8, b"\2")]), "key.duplicate", DuplicateError),
    "kv_bad_align_0": (gguf([align(0)]), "alignment.value", InvalidValueError),
    "kv_bad_align_0_tensors": (one_tensor([align(0)]), "alignment.zero", InvalidValueError),
    "kv_bad_align_13": (gguf([align(13)]), "alignment.value", InvalidValueError),
    "kv_bad_align_3": (gguf([align(3)]), "alignment.value", InvalidValueError),
    "kv_bad_align_i32": (gguf([align(32, I32)]), "alignment.type", UnsupportedTypeError),
    "kv_bad_align_u64": (gguf([align(32, U64)]), "alignment.type", UnsupportedTypeError),
    "tensors_bad_name_size_65": (one_tensor(name="n" * 65), "tensor.name_length", InvalidValueError),
    "tensors_bad_n_dims_5": (one_tensor(dims=[8, 1, 1, 1, 1]), "tensor.n_dims", InvalidValueError),
    "tensors_bad_n_dims_0": (one_tensor(dims=[]), "tensor.n_dims", InvalidValueError),
    "tensors_bad_n_dims_huge": (one_tensor(dims=[8], n_dims=0xFFFFFFFF), "tensor.n_dims", TruncatedError),
    "tensors_bad_shape_zero": (one_tensor(dims=[8, 0]), "tensor.shape", InvalidValueError),
    "tensors_bad_shape_minus_1": (one_tensor(dims=[2**64 - 1]), "tensor.ne_overflow", InvalidValueError),
    "tensors_bad_shape_negative": (one_tensor(dims=[2**63 + 1]), "tensor.ne_overflow", InvalidValueError),
    "tensors_ne_too_big": (one_tensor(dims=[4 * (2**31 - 1)] * 2), "tensor.ne_overflow", InvalidValueError),
    "tensors_ne_too_big_4d": (one_tensor(dims=[2**16] * 4), "tensor.ne_overflow", InvalidValueError),
    "tensors_nbytes_too_big": (one_tensor(dims=[2**31, 2**31]), "tensor.nbytes_overflow", InvalidValueError),
    "tensors_bad_type_4": (one_tensor(ggml_type=4), "tensor.type", UnsupportedTypeError),
    "tensors_bad_type_5": (one_tensor(ggml_type=5), "tensor.type", UnsupportedTypeError),
    "tensors_bad_type_31": (one_tensor(ggml_type=31), "tensor.type", UnsupportedTypeError),
    "tensors_bad_type_count": (one_tensor(ggml_type=43), "tensor.type", UnsupportedTypeError),
    "tensors_bad_type_999": (one_tensor(ggml_type=999), "tensor.type", UnsupportedTypeError),
    "tensors_bad_block": (one_tensor(dims=[16], ggml_type=T_Q4_0), "tensor.block", InvalidValueError),
    "tensors_bad_offset_minus_1": (one_tensor(offset=2**64 - 1), "tensor.offset_alignment", LayoutError),
    "tensors_bad_offset_misaligned": (gguf([], [tinfo("t0", [1], offset=4)], bytes(32)), "tensor.offset_alignment", LayoutError),
    "tensors_bad_offset_past_eof": (one_tensor(offset=4096), "tensor.bounds", LayoutError),
    "tensors_duplicate_name": (
        gguf([], [tinfo("my_tensor", [8]), tinfo("my_tensor", [8], offset=32)], bytes(64)),
        "tensor.duplicate",
        DuplicateError,
    ),
    "tensors_bad_align_13": (gguf([align(13)], [tinfo("t0", [8])], bytes(32), alignment=13), "alignment.value", InvalidValueError),
    # INCONSISTENT_ALIGN: offsets laid out with alignment 1 in a file declaring the default 32.
    "tensors_inconsistent_align": (
        gguf([], [tinfo("t0", [3]), tinfo("t1", [1], offset=12)], bytes(16)),
        "tensor.offset_alignment",
        LayoutError,
    ),
    "data_not_enough_data": (VALID[:-1], "tensor.bounds", LayoutError),
    "data_bad_align_13": (gguf([align(13)], ONE_TENSOR, bytes(32), alignment=13), "alignment.value", InvalidValueError),
    # DATA_MEM_SIZE_OVERFLOW: padded sizes summing past 2**64 (four tensors of 2**62 bytes each).
    "data_mem_size_overflow": (
        gguf([], [tinfo(f"t{i}", [2**30, 2**30], offset=i * 2**62) for i in range(4)], bytes(64)),
        "tensor.bounds",
        LayoutError,
    ),
}


@pytest.mark.parametrize("profile", ["spec", "ggml"])
@pytest.mark.parametrize("name", list(GGML_REJECTED))
def test_ggml_rejection_classes(name, profile):
    """Each of test-gguf's rejection classes is rejected by both profiles with its rule and exception class."""
    data, rule, exc = GGML_REJECTED[name]
    issue = assert_rejected(data, rule, profile, exc)
    if rule == "header.magic":
        assert issue.offset == 0
    if rule == "header.version":
        assert issue.offset == 4


def test_version_1_is_read_by_spec_and_rejected_by_ggml():
    """HEADER_BAD_VERSION_1: the spec profile reads v1 (u32 counts, lengths, dims); ggml no longer does."""
    data = v1_file()
    assert_accepted(data, "spec")
    f = from_bytes(data)
    assert f.version == 1 and f.metadata["a.names"] == ["x", "yz"] and f.tensors["t0"].shape == (8,)
    assert assert_rejected(data, "header.version", "ggml", UnsupportedTypeError).offset == 4


def test_alignment_24_is_spec_only():
    """KV_BAD_ALIGN: 24 is a multiple of 8 (spec) but not a power of two (ggml)."""
    data = gguf([align(24)], [tinfo("t0", [8]), tinfo("t1", [1], offset=48)], bytes(52), alignment=24)
    assert GGUF.parse(data).data_offset % 24 == 0
    assert_accepted(data, "spec")
    assert_rejected(data, "alignment.value", "ggml", InvalidValueError)


def test_tensor_name_of_64_bytes_is_spec_only():
    """TENSORS_BAD_NAME_SIZE: the spec allows 64 bytes; ggml needs names shorter than GGML_MAX_NAME (64)."""
    assert_accepted(one_tensor(name="n" * 63), "ggml")
    data = one_tensor(name="n" * 64)
    assert_accepted(data, "spec")
    assert_rejected(data, "tensor.name_length", "ggml", InvalidValueError)


def test_offsets_not_the_running_sum_are_ggml_only():
    """TENSORS_BAD_ALIGN / INCONSISTENT_ALIGN: aligned, non-overlapping offsets with a gap or out of order are
    fine for the spec; ggml demands each offset be the running sum of the padded sizes before it."""
    gap = gguf([], [tinfo("t0", [8]), tinfo("t1", [8], offset=96)], bytes(128))
    swapped = gguf([], [tinfo("t0", [8], offset=32), tinfo("t1", [8])], bytes(64))
    for data in (gap, swapped):
        assert_accepted(data, "spec")
        assert_rejected(data, "tensor.offset_inconsistent", "ggml", LayoutError)


def test_non_zero_padding_is_only_a_warning():
    """Padding bytes are unspecified by ggml: non-zero padding gives a data.padding warning, never an error."""
    parsed = GGUF.parse(VALID)
    start = parsed.data_offset - len(parsed._padding)
    assert start < parsed.data_offset
    data = VALID[:start] + b"\xff" + VALID[start + 1 :]
    for profile in ("spec", "ggml"):
        issues = validate_bytes(data, profile)
        assert [(i.rule, i.severity, i.offset) for i in issues] == [("data.padding", "warning", start)]
        from_bytes(data, profile=profile)


# == 2. Security classes S1–S17 (strategies.INVALID_CLASSES) ===========================================================
def bounded(action, seconds=1.0, megabytes=10):
    """Run ``action`` under tracemalloc; assert it is fast and allocates little. Returns its result."""
    tracemalloc.start()
    start = time.perf_counter()
    try:
        result = action()
    finally:
        elapsed = time.perf_counter() - start
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert elapsed < seconds, f"took {elapsed:.2f} s"
    assert peak < megabytes * 2**20, f"peak allocation {peak} bytes"
    return result


@pytest.mark.parametrize("field", ["n_kv", "n_tensors"])
@pytest.mark.parametrize("count", [2**64 - 1, 2**63, 2**32 + 1, 10**9])
def test_s1_huge_counts_in_a_44_byte_file(field, count):
    """S1: a huge n_kv / n_tensors in a 44-byte file is rejected at once, before any allocation."""
    data = gguf(**{field: count}) + bytes(20)
    assert len(data) == 44
    rule = f"header.{field}"
    issue = bounded(lambda: assert_rejected(data, rule, exc=TruncatedError))
    assert issue.offset == 24  # where the records would start


@pytest.mark.parametrize("field", ["n_kv", "n_tensors"])
def test_s1_huge_counts_in_v1(field):
    """S1 through the v1 code path: u32 counts of 0xFFFFFFFF."""
    data = gguf(version=1, **{field: 0xFFFFFFFF}) + bytes(28)
    bounded(lambda: assert_rejected(data, f"header.{field}", exc=TruncatedError))


@pytest.mark.parametrize(
    ("length", "where"),
    [(2**64 - 1, "key"), (2**63, "key"), (2**40, "value"), (2**64 - 1, "value"), (100, "value"), (5, "value"), (2**64 - 1, "tensor")],
)
def test_s2_string_length_huge_wrapping_or_past_eof(length, where):
    """S2: a string length that is huge, wraps with +1 (2**64-1) or ends one byte past EOF is rejected."""
    if where == "key":
        data = gguf([gstr("k", length=length) + u32(U8) + b"\0"])
    elif where == "value":
        data = gguf([kv("a.s", STR, gstr("abcd", length=length))])  # 4 bytes follow the length
    else:
        data = gguf([], [gstr("t0", length=length) + u32(1) + u64(8) + u32(T_F32) + u64(0)], bytes(32))
    issue = bounded(lambda: assert_rejected(data, "string.length", exc=TruncatedError))
    assert issue.path.startswith({"key": "metadata_kv[0].key", "value": "metadata_kv[0].value", "tensor": "tensor_infos[0].name"}[where])


def test_s2_string_length_field_cut_off_and_v1():
    """S2: a file ending inside a string's length field; the v1 string reader with a u32 length of 0xFFFFFFFF."""
    assert_rejected(gguf([kv("a.s", STR, u32(3))]), "string.truncated", exc=TruncatedError)
    v1 = gguf([kv("a.s", STR, gstr("abc", wide=False, length=0xFFFFFFFF), wide=False)], version=1)
    assert_rejected(v1, "string.length", exc=TruncatedError)


def test_s3_u8_array_count_2_40_is_rejected_fast():
    """S3: a u8 array claiming 2**40 elements in a 50-byte file (gguf-py hangs on it) fails in well under a second."""
    data = gguf([kv("x", ARR, arr(U8, 2**40, b"\0"))])
    assert len(data) == 50
    issue = bounded(lambda: assert_rejected(data, "array.length", exc=TruncatedError), seconds=0.5)
    assert issue.path == "metadata_kv[0].value"


@pytest.mark.parametrize(
    ("etype", "count"),
    [(STR, 10**9), (STR, 2**64 - 1), (U32, 2**62), (U64, 2**61 + 1), (ARR, 10**9)],
)
def test_s3_array_count_times_size_past_eof(etype, count):
    """S3: count × element size beyond the bytes left (including counts whose product wraps in 64 bits)."""
    data = gguf([kv("a.b", ARR, arr(etype, count, bytes(24)))])
    bounded(lambda: assert_rejected(data, "array.length", exc=TruncatedError))


def test_s3_string_array_element_past_eof():
    """S3: a plausible string-array count whose last element's length runs past EOF (element path reported)."""
    body = gstr("a") + gstr("bb") + gstr("c", length=1000)
    issue = assert_rejected(gguf([kv("a.s", ARR, arr(STR, 3, body))]), "string.length", exc=TruncatedError)
    assert issue.path == "metadata_kv[0].value.array"
    many = gguf([kv("a.s", ARR, arr(STR, 100, b"".join(gstr("tok") for _ in range(99)) + gstr("x", length=50)))])
    assert_rejected(many, "string.length", exc=TruncatedError)  # the vectorised scan path (more than 64 strings)


def test_s4_arrays_nested_5000_deep():
    """S4: 5000 nested arrays give array.depth (a LimitError), never a RecursionError."""
    data = gguf([nested(5000)])
    issue = assert_rejected(data, "limit.nesting", exc=LimitError)
    assert 24 < issue.offset < len(data)


def test_s4_nesting_16_is_spec_only_and_17_is_too_deep():
    """S4: 16 levels are read by the spec profile; ggml reads no nested arrays at all; 17 levels exceed the cap."""
    data = gguf([nested(16)])
    assert_accepted(data, "spec")
    inner = from_bytes(data).container.metadata_kv[0].value
    for _ in range(15):
        inner = inner.array[0]
    assert list(inner.array) == [7]
    assert_rejected(data, "array.nested", "ggml", UnsupportedTypeError)
    assert_accepted(gguf([nested(1)]), "ggml")
    assert_rejected(gguf([nested(17)]), "limit.nesting", exc=LimitError)


@pytest.mark.parametrize(
    "record",
    [
        kv("a.x", 13, b"\0" * 8),
        kv("a.x", 0xFFFFFFFF, b"\0" * 8),
        kv("a.x", 0x80000000, b"\0" * 8),
        kv("a.x", ARR, arr(13, 2, b"\0" * 8)),
        kv("a.x", ARR, arr(0xFFFFFFFF, 2, b"\0" * 8)),
        kv("a.x", ARR, arr(ARR, 1, arr(99, 1, b"\0" * 8))),
    ],
    ids=["value_13", "value_ffffffff", "value_negative", "element_13", "element_ffffffff", "inner_element_99"],
)
def test_s5_unknown_value_or_element_type(record):
    """S5: an unknown value type or array element type stops the parse (no silent desync of later records)."""
    data = gguf([ARCH, record, kv("a.after", U8, b"\1")])
    issue = assert_rejected(data, "value.type", exc=UnsupportedTypeError)
    assert issue.path.startswith("metadata_kv[1].value")
    assert issue.offset > len(gguf([ARCH]))


def test_s5_64_bit_value_type_in_v1():
    """S5: u64 (type 10) arrived with v2. Its size is unambiguous, so a v1 file holding one is read (lenient
    loading shows it); the spec profile reports it (tests/api/test_forward_compat.py has the arrays)."""
    data = gguf([kv("a.x", U64, u64(1), wide=False)], version=1)
    issue = assert_rejected(data, "value.type_v1", exc=UnsupportedTypeError)
    assert issue.path == "metadata_kv[0].value_type"
    assert from_bytes(data, strict=False).metadata["a.x"] == 1


def tokenizer(n_tokens, scores):
    tokens = kv("tokenizer.ggml.tokens", ARR, arr(STR, n_tokens, b"".join(gstr(f"t{i}") for i in range(n_tokens))))
    return gguf([ARCH, kv("tokenizer.ggml.model", STR, gstr("llama")), tokens, scores])


def test_s6_tokenizer_scores_type_and_length():
    """S6: scores declared arr[i8] (a consumer reads them as f32: OOB) → key.type; len(scores) != len(tokens)
    → tokenizer.length; the well-formed vocabulary passes."""
    assert_accepted(tokenizer(4, kv("tokenizer.ggml.scores", ARR, arr(F32, 4, bytes(16)))), "ggml")
    issue = assert_rejected(tokenizer(4, kv("tokenizer.ggml.scores", ARR, arr(I8, 4, bytes(4)))), "key.type", exc=UnsupportedTypeError)
    assert issue.path == "metadata_kv[3].value_type"
    assert_rejected(tokenizer(4, kv("tokenizer.ggml.scores", ARR, arr(F32, 3, bytes(12)))), "tokenizer.length")
    assert_rejected(tokenizer(4, kv("tokenizer.ggml.token_type", ARR, arr(I32, 5, bytes(20)))), "tokenizer.length")
    assert_rejected(tokenizer(4, kv("tokenizer.ggml.bos_token_id", U32, u32(4))), "tokenizer.token_id")


@pytest.mark.parametrize(
    ("n_dims", "dims", "exc"),
    [(5, [8, 1, 1, 1, 1], InvalidValueError), (0xFFFFFFFF, [8], TruncatedError), (8, [8] + [1] * 7, InvalidValueError)],
)
def test_s7_bad_n_dims(n_dims, dims, exc):
    """S7: more than 4 dimensions (a fixed dim[4] buffer in C readers), or a count that cannot fit the file."""
    data = one_tensor(dims=dims, n_dims=n_dims)
    issue = bounded(lambda: assert_rejected(data, "tensor.n_dims", exc=exc))
    assert issue.path.startswith("tensor_infos[0]")


@pytest.mark.parametrize(
    ("dims", "rule"),
    [
        ([8, 0], "tensor.shape"),
        ([0], "tensor.shape"),
        ([2**63 + 1], "tensor.ne_overflow"),
        ([2**62, 2], "tensor.ne_overflow"),
        ([2**32, 2**31], "tensor.ne_overflow"),
        ([3, 2**62], "tensor.ne_overflow"),
    ],
)
def test_s8_dimension_product_overflow_and_zero_dims(dims, rule):
    """S8: a zero dimension (INT64_MAX/ne[1] with ne[1]=0 is a SIGFPE in ggml), a 'negative' dimension, and
    products beyond int64 are all rejected before any size arithmetic."""
    assert_rejected(one_tensor(dims=dims), rule, exc=InvalidValueError)


@pytest.mark.parametrize(
    ("dims", "ggml_type"),
    [([2**31, 2**31], T_F32), ([2**63 - 8], T_I8), ([2**61], T_F32), ([2**62 - 32], T_I8), ([2**60], T_F64)],
)
def test_s9_nbytes_and_padding_wraparound(dims, ggml_type):
    """S9: element counts that fit int64 but whose byte size (plus alignment padding) reaches 2**63 or 2**64."""
    data = one_tensor(dims=dims, ggml_type=ggml_type)
    if dims == [2**62 - 32]:  # 2**62 - 32 bytes: representable, padded without wrapping, just not in the file
        assert_rejected(data, "tensor.bounds", exc=LayoutError)
    else:
        assert_rejected(data, "tensor.nbytes_overflow", exc=InvalidValueError)


def test_s10_alignment_zero_three_and_wrong_types():
    """S10: alignment 0 (a modulo by zero), 3, and types other than u32 (an assert in ggml) are rejected."""
    for profile in ("spec", "ggml"):
        assert_rejected(gguf([align(0)]), "alignment.value", profile)
        assert_rejected(one_tensor([align(0)]), "alignment.zero", profile)
        assert_rejected(one_tensor([align(3)]), "alignment.value", profile)
        for vtype in (I32, U64, F32):
            assert_rejected(gguf([align(64, vtype)]), "alignment.type", profile, UnsupportedTypeError)
        assert_rejected(gguf([kv("general.alignment", STR, gstr("32"))]), "alignment.type", profile, UnsupportedTypeError)


def test_s10_alignment_2_31():
    """S10: 2**31 is a power of two and a multiple of 8, so a file without tensors is fine for both profiles.
    With a tensor, the data must start at a multiple of 2**31: a small file lacks that padding, and the parser
    must say so (data.padding) without seeking or allocating 2 GiB."""
    for profile in ("spec", "ggml"):
        assert_accepted(gguf([align(2**31)]), profile)
        data = one_tensor([align(2**31)])
        issue = bounded(lambda data=data, profile=profile: assert_rejected(data, "data.padding", profile, TruncatedError))
        assert issue.offset == len(gguf([align(2**31)], ONE_TENSOR, alignment=1))


def test_s11_tensor_data_outside_the_file():
    """S11 ("Bleeding Llama"): a tensor whose data starts or ends past EOF is rejected, so no read leaks memory."""
    assert_rejected(one_tensor(offset=2**40), "tensor.bounds", exc=LayoutError)
    assert_rejected(one_tensor(dims=[16]), "tensor.bounds", exc=LayoutError)  # 64 bytes of data, 32 present
    assert_rejected(one_tensor(offset=2**64 - 32), "tensor.bounds", exc=LayoutError)


def test_s11_overlapping_tensors():
    """S11: two tensors sharing bytes (aligned, in bounds) are rejected by both profiles, at the later tensor."""
    data = gguf([], [tinfo("t0", [16]), tinfo("t1", [8], offset=32)], bytes(64))
    for profile in ("spec", "ggml"):
        issue = assert_rejected(data, "tensor.overlap", profile, LayoutError)
        assert issue.path == "tensor_infos[1].offset"


def test_s11_misaligned_offset():
    """S11: a tensor offset that is not a multiple of the alignment."""
    data = gguf([], [tinfo("t0", [8]), tinfo("t1", [1], offset=40)], bytes(64))
    for profile in ("spec", "ggml"):
        issue = assert_rejected(data, "tensor.offset_alignment", profile, LayoutError)
        assert issue.path == "tensor_infos[1].offset"


@pytest.mark.parametrize("ggml_type", [0xFFFFFFFF, 0x80000000, 43, 1000, 4, 5, 31, 36])
def test_s12_bad_ggml_type(ggml_type):
    """S12: a negative, out-of-range or removed (block size 0) ggml type never reaches a traits lookup."""
    issue = assert_rejected(one_tensor(ggml_type=ggml_type), "tensor.type", exc=UnsupportedTypeError)
    assert issue.path == "tensor_infos[0].type"


def test_s13_duplicates_empty_key_and_long_names():
    """S13: duplicate keys and tensor names, an empty key, and a tensor name of 64+ bytes."""
    dup = assert_rejected(gguf([ARCH, kv("a.x", U8, b"\1"), kv("a.x", U8, b"\1")]), "key.duplicate", exc=DuplicateError)
    assert dup.path == "metadata_kv[2].key"
    dup = assert_rejected(gguf([], [tinfo("w", [8]), tinfo("w", [8], offset=32)], bytes(64)), "tensor.duplicate", exc=DuplicateError)
    assert dup.path == "tensor_infos[1].name"
    for profile in ("spec", "ggml"):
        assert_rejected(gguf([kv("", U8, b"\1")]), "key.empty", profile)
        assert_rejected(one_tensor(name="n" * 1000), "tensor.name_length", profile)
    assert_rejected(one_tensor(name="n" * 64), "tensor.name_length", "ggml")
    # Keys must be ASCII, dotted lower_snake_case.
    assert_rejected(gguf([kv("a.\u00e9", U8, b"\1")]), "key.ascii")
    assert_rejected(gguf([kv("General..Name", U8, b"\1")]), "key.syntax")


def test_s14_truncation_at_every_byte():
    """S14: every proper prefix of a file with two tensors and arrays fails strict parsing with a FormatError
    (a file with tensors is only complete when all tensor data is there)."""
    assert_accepted(VALID)
    rules = set()
    for n in range(len(VALID)):
        prefix = VALID[:n]
        with pytest.raises(FormatError) as info:
            from_bytes(prefix)
        assert not info.value.rule.startswith("internal."), (n, info.value)
        assert type(info.value) is not FormatError, (n, info.value)
        errs = errors_of(prefix)
        assert errs and errs[0].rule == info.value.rule, (n, errs)
        rules.add(info.value.rule)
    assert {"header.truncated", "header.n_kv", "string.truncated", "tensor.bounds"} <= rules, rules


def record_start(path, parsed):
    """The first byte of the record an issue path names (in the intact file): its fault cannot lie before it."""
    m = re.match(r"(metadata_kv|tensor_infos)\[(\d+)\]", path)
    if m:
        return parsed[m.group(1)][int(m.group(2))]._offset
    return {"version": 4, "tensor_count": 8, "metadata_kv_count": 16}.get(path, 0)


def test_s14_truncation_offsets_point_at_the_cut():
    """S14: the offset of a truncation error lies between the start of the record it names and the end of the
    data (a file cut inside tensor_infos[1] is not reported at offset 0)."""
    parsed = GGUF.parse(VALID)
    wrong = []
    for n in range(len(VALID)):
        issue = errors_of(VALID[:n])[0]
        if issue.offset is None or not record_start(issue.path, parsed) <= issue.offset <= n:
            wrong.append((n, issue.rule, issue.path, issue.offset))
    assert not wrong, f"{len(wrong)} prefixes report an offset outside the cut record, e.g. {wrong[:3]}"


@pytest.mark.parametrize(
    ("word", "rule", "exc"),
    [
        (u32(0), "header.version", UnsupportedTypeError),
        (u32(4), "header.version", UnsupportedTypeError),
        (u32(0xFFFFFFFF), "header.version", UnsupportedTypeError),
        (struct.pack(">I", 4), "header.version", UnsupportedTypeError),
        # A big-endian version 3 in a little-endian file: read as big-endian, its kv count is 7 << 56.
        (struct.pack(">I", 3), "header.n_kv", TruncatedError),
    ],
    ids=["v0", "v4", "vffffffff", "swapped_v4", "swapped_v3"],
)
def test_s15_bad_versions(word, rule, exc):
    """S15: version 0, future versions and a byte-swapped version word fail cleanly."""
    assert_rejected(with_version(VALID, word), rule, exc=exc)


def test_s15_version_1_and_bad_magic():
    """S15: v1 only under the ggml profile; bad magic (including the byte-swapped 'FUGG' and GGML's 'lmgg')."""
    assert_rejected(v1_file(), "header.version", "ggml", UnsupportedTypeError)
    for magic in (b"FUGG", b"GGML", b"lmgg", b"\0\0\0\0"):
        assert assert_rejected(magic + VALID[4:], "header.magic", exc=UnknownFormatError).offset == 0
    assert_rejected(b"GGU", "header.truncated", exc=TruncatedError)
    assert_rejected(b"", "header.truncated", exc=TruncatedError)


def test_s16_invalid_utf8_in_keys_and_values():
    """S16: invalid UTF-8 in a key, a string value, a tensor name: string.utf8 at the offending byte."""
    key = gguf([ARCH, kv(b"a.\xffx", U8, b"\1")])
    assert assert_rejected(key, "string.utf8", exc=InvalidValueError).offset == key.index(b"\xff")
    value = gguf([ARCH, kv("a.s", STR, gstr(b"ok\xc3("))])
    assert assert_rejected(value, "string.utf8", exc=InvalidValueError).offset == value.index(b"\xc3(")
    name = gguf([], [tinfo(b"t\xe2\x82", [8])], bytes(32))
    assert assert_rejected(name, "string.utf8", exc=InvalidValueError).path == "tensor_infos[0].name"


@pytest.mark.parametrize("n", [3, 100])
def test_s16_invalid_utf8_in_a_string_array_element(n):
    """S16: string arrays decode lazily; validation still finds a bad element and names it (short arrays and
    the vectorised scan of long ones)."""
    items = [gstr(f"tok{i}") for i in range(n)]
    items[n - 2] = gstr(b"\xed\xa0\x80")  # an encoded surrogate: not UTF-8
    data = gguf([ARCH, kv("tokenizer.ggml.tokens", ARR, arr(STR, n, b"".join(items)))])
    assert GGUF.parse(data).metadata_kv[1].value.len == n  # the structure itself is fine
    issue = assert_rejected(data, "string.utf8", exc=InvalidValueError)
    assert issue.path == f"metadata_kv[1].value.array[{n - 2}]"
    assert issue.offset == data.index(b"\xed\xa0\x80")


def test_s16_mojibake_corpus_file():
    """S16: the corpus GPT-2 vocabulary mangled by a bad re-encoding (its f32 epsilon became U+FFFD characters,
    which shifts every later record) is rejected at the first length the shift makes impossible."""
    data = corpus_file("corrupt/damaged-gpt-2-vocab-head.gguf").read_bytes()
    issue = assert_rejected(data, "string.length", exc=TruncatedError)
    damage = data.index("\ufffd".encode())
    assert damage < issue.offset < damage + 16 and issue.path == "metadata_kv[8].key"


def test_s16_bool_bytes_other_than_0_and_1():
    """S16: a bool byte of 2 (scalar or array element) is invalid, with the element's path."""
    scalar = gguf([ARCH, kv("a.flag", BOOL, b"\2")])
    assert assert_rejected(scalar, "value.bool", exc=InvalidValueError).path == "metadata_kv[1].value"
    array = gguf([ARCH, kv("a.flags", ARR, arr(BOOL, 4, b"\0\1\2\1"))])
    assert assert_rejected(array, "value.bool", exc=InvalidValueError).path == "metadata_kv[1].value.array[2]"
    assert_accepted(gguf([ARCH, kv("a.flags", ARR, arr(BOOL, 4, b"\0\1\1\0"))]))


def test_s17_block_index_beyond_block_count():
    """S17: a blk.40.* tensor with llama.block_count = 32 would index past per-layer arrays sized by the count."""
    kvs = [ARCH, kv("llama.block_count", U32, u32(32))]
    assert_accepted(gguf(kvs, [tinfo("blk.31.attn_q.weight", [8])], bytes(32)), "ggml")
    data = gguf(kvs, [tinfo("blk.0.attn_q.weight", [8]), tinfo("blk.40.attn_q.weight", [8], offset=32)], bytes(64))
    for profile in ("spec", "ggml"):
        issue = assert_rejected(data, "tensor.block_index", profile)
        assert issue.path == "tensor_infos[1].name"


# == 3. Robustness sweep =========================================================================================
# VALID plus a 70-string array, so the sweep also runs the vectorised string scan (used above 64 strings).
SWEEP = build(
    [
        ("general.architecture", "str", "llama"),
        ("a.u16s", "arr", Container(type="u16", len=2, array=[1, 2])),
        ("a.names", "arr", Container(type="str", len=70, array=[f"t{i}" for i in range(70)])),
        ("a.flag", "bool", False),
        ("general.alignment", "u32", 32),
    ],
    [("blk.0.q", [32], "q4_0", bytes(range(18))), ("w", [4, 2], "f32", bytes(range(32)))],
)


def reference_strings(data, kv_record):
    """(offsets, lengths) of a top-level string array walked naively from its kv record's start."""
    pos = kv_record._offset + 8 + len(kv_record.key.encode("utf-8")) + 4 + 4 + 8
    offsets, lengths = [], []
    for _ in range(int(kv_record.value.len)):
        (n,) = struct.unpack_from("<Q", data, pos)
        offsets.append(pos + 8)
        lengths.append(n)
        pos += 8 + n
    return offsets, lengths


def test_every_single_byte_mutation_fails_cleanly():
    """Each byte of a valid file replaced by 0x00, 0xFF, 0x80 and itself ^ 0x01: every result parses and
    validates, or raises a FormatError; never another exception or an internal.* rule. When it parses, the
    strict verdict agrees with validation and string arrays sit exactly where a naive walk puts them."""
    assert_accepted(SWEEP)
    outcomes = {"parsed": 0, "rejected": 0}
    for i, original in enumerate(SWEEP):
        for b in {0x00, 0xFF, 0x80, original ^ 0x01} - {original}:
            data = SWEEP[:i] + bytes([b]) + SWEEP[i + 1 :]
            where = f"byte {i}: {original:#04x} -> {b:#04x}"
            try:
                container = GGUF.parse(data)
            except FormatError as e:
                assert not e.rule.startswith("internal."), (where, e)
                assert e.offset is not None, (where, e)
                outcomes["rejected"] += 1
                continue
            outcomes["parsed"] += 1
            for profile in ("spec", "ggml"):
                issues = check(container, len(data), profile)
                assert not [x for x in issues if x.rule.startswith("internal.")], (where, issues)
            errs = [x for x in check(container, len(data), "spec") if x.severity == "error"]
            try:
                from_bytes(data)
            except FormatError as e:
                assert errs and e.rule == errs[0].rule, (where, e, errs)
            else:
                assert not errs, (where, errs)
            for record in container.metadata_kv:
                if int(record.value_type) == ARR and int(record.value.type) == STR:
                    offsets, lengths = reference_strings(data, record)
                    assert record.value.array.offsets().tolist() == offsets, where
                    assert record.value.array.lengths().tolist() == lengths, where
    assert outcomes["parsed"] > 100 and outcomes["rejected"] > 100, outcomes
