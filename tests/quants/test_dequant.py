"""The numpy dequantization backend against ggml's own C code, gguf-py, and the schema tables.

Oracles: the vectors in tests/data/vectors/ggml (ggml's quantizer output and random block bytes, dequantized by
ggml's ``to_float``), ggml's C library through ggml-python (``to_float`` on fresh random bytes, and
``dequantize_row_q8_K``, which ggml-python does not wrap), gguf-py's ``gguf.quants`` and its endianness
converter's output in the corpus (files found through conftest's corpus_file).
"""

from __future__ import annotations

import ctypes
import tracemalloc

import construct
import numpy as np
import pytest
from conftest import VECTORS, corpus_file
from hypothesis import given, settings
from hypothesis import strategies as st

import gguf_construct as gc
from gguf_construct import GGUF
from gguf_construct.core.tables import GGML_TYPES
from gguf_construct.errors import FormatError, TruncatedError, UnsupportedTypeError
from gguf_construct.quants import SUPPORTED, block_dtype, block_struct, dequantize, grids, swap_byte_order
from gguf_construct.quants import dequant as dequant_module
from gguf_construct.quants import kernel_parts as common_module
from gguf_construct.quants.blocks import block_elements

# every type ggml's C code can dequantize, as the vectors README lists them
VECTOR_TYPES = [
    "f16",
    "bf16",
    "q4_0",
    "q4_1",
    "q5_0",
    "q5_1",
    "q8_0",
    "q2_K",
    "q3_K",
    "q4_K",
    "q5_K",
    "q6_K",
    "iq2_xxs",
    "iq2_xs",
    "iq3_xxs",
    "iq1_s",
    "iq4_nl",
    "iq3_s",
    "iq2_s",
    "iq4_xs",
    "iq1_m",
    "tq1_0",
    "tq2_0",
    "mxfp4",
    "nvfp4",
    "q1_0",
    "q2_0",
]
ALL_TYPES = [
    "f32",
    "f16",
    "bf16",
    "f64",
    "i8",
    "i16",
    "i32",
    "i64",
    "q4_0",
    "q4_1",
    "q5_0",
    "q5_1",
    "q8_0",
    "q8_1",
    "q2_K",
    "q3_K",
    "q4_K",
    "q5_K",
    "q6_K",
    "q8_K",
    "iq2_xxs",
    "iq2_xs",
    "iq3_xxs",
    "iq1_s",
    "iq4_nl",
    "iq3_s",
    "iq2_s",
    "iq4_xs",
    "iq1_m",
    "tq1_0",
    "tq2_0",
    "mxfp4",
    "nvfp4",
    "q1_0",
    "q2_0",
]
REMOVED = [t for t in GGML_TYPES.values() if t.removed]
INTEGER_LIKE = {"i8": np.int8, "i16": np.int16, "i32": np.int32, "i64": np.int64, "f64": np.float64}


def bits_equal(a: np.ndarray, b: np.ndarray) -> bool:
    """Equal as float32 bit patterns (stronger than array_equal with equal_nan: NaN payloads too)."""
    return a.shape == b.shape and np.array_equal(a.view(np.uint32), b.view(np.uint32))


def exact(a: np.ndarray, b: np.ndarray) -> bool:
    """The vectors README's definition of exact."""
    return a.shape == b.shape and np.array_equal(a, b, equal_nan=True)


def random_blocks(name: str, n_blocks: int, seed: int) -> np.ndarray:
    """Random block bytes, plus blocks whose half/float scale fields are NaN, ±Inf, subnormal and -0."""
    t = GGML_TYPES.lookup(name)
    rng = np.random.default_rng(seed)
    raw = rng.integers(0, 256, n_blocks * t.type_size, dtype=np.uint8)
    blocks = raw.view(block_dtype(t))
    specials = {
        2: [0x7E00, 0x7C01, 0xFE00, 0x7C00, 0xFC00, 0x0001, 0x8000, 0x03FF],
        4: [0x7FC00000, 0x7F800001, 0xFF800000, 0x00000001, 0x80000000],
    }
    for field, (dt, _) in blocks.dtype.fields.items():
        if dt.base.kind == "f" and dt.base.itemsize in specials:
            patterns = np.array(specials[dt.base.itemsize], dtype=f"<u{dt.base.itemsize}")
            view = blocks[field].view(patterns.dtype)
            view[: len(patterns)] = patterns[: len(view)]
    return raw


# -- ggml through ggml-python ------------------------------------------------------------------------


def ggml_lib():
    import ggml  # ggml-python: a declared test dependency

    return ggml


def ggml_to_float(type_id: int, raw: np.ndarray, n_values: int) -> np.ndarray:
    ggml = ggml_lib()
    traits = ggml.ggml_get_type_traits(type_id).contents
    assert traits.to_float, f"ggml has no to_float for type {type_id}"
    out = np.empty(n_values, np.float32)
    data = np.ascontiguousarray(raw)
    traits.to_float(data.ctypes.data_as(ctypes.c_void_p), out.ctypes.data_as(ctypes.POINTER(ctypes.c_float)), n_values)
    return out


def ggml_c_function(name: str):
    fn = getattr(ggml_lib().ggml.lib, name)
    fn.restype = None
    return fn


# -- ggml's vectors ----------------------------------------------------------------------------------


def test_vectors_are_present():
    assert sorted(p.stem for p in VECTORS.glob("*.npz")) == sorted(VECTOR_TYPES)


@pytest.mark.parametrize("name", VECTOR_TYPES)
def test_vectors_exact(name):
    """quant → deq and raw → raw_deq are exact (and even equal bit for bit, NaN payloads included)."""
    z = np.load(VECTORS / f"{name}.npz")
    t = GGML_TYPES.lookup(name)
    assert (int(z["type_id"]), str(z["name"]), int(z["block_size"]), int(z["type_size"])) == (t.id, t.name, t.block_size, t.type_size)
    for key, expected in (("quant", "deq"), ("raw", "raw_deq")):
        ours = dequantize(z[key], name)
        ref = z[expected].reshape(-1)
        assert exact(ours, ref), f"{name} {key}: {np.count_nonzero(~((ours == ref) | np.isnan(ref)))} values differ"
        assert bits_equal(ours, ref), f"{name} {key}: NaN payloads differ"


# -- ggml's C code on fresh bytes ----------------------------------------------------------------------


C_TYPES = [
    t.name
    for t in GGML_TYPES.values()
    if t.id <= 41 and not t.removed and t.name not in ("f32", "q8_1", "q8_K") and t.name not in INTEGER_LIKE
]


@pytest.mark.parametrize("name", C_TYPES)
def test_ggml_to_float_on_random_bytes(name):
    t = GGML_TYPES.lookup(name)
    raw = random_blocks(name, 700, seed=t.id)
    ref = ggml_to_float(t.id, raw, 700 * t.block_size)
    assert bits_equal(dequantize(raw, name), ref)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(C_TYPES), st.integers(1, 9), st.randoms(use_true_random=False))
def test_ggml_to_float_property(name, n_blocks, rnd):
    t = GGML_TYPES.lookup(name)
    raw = np.frombuffer(rnd.randbytes(n_blocks * t.type_size), np.uint8)
    assert bits_equal(dequantize(raw, t), ggml_to_float(t.id, raw, n_blocks * t.block_size))


def test_every_fp4_scale_byte():
    """All 256 E8M0 (MXFP4) and UE4M3 (NVFP4) scale bytes, against ggml; E8M0 is 2**(e - 128) for the doubled
    E2M1 values (never NaN or Inf, e = 0 and 1 are float32 subnormals), UE4M3 0x00 and 0x7F are zero."""
    mx = np.zeros((256, 17), np.uint8)
    mx[:, 0] = np.arange(256)
    mx[:, 1:] = 0x71  # values 1 and 12 (kvalues_fp4[7])
    ours = dequantize(mx, "mxfp4").reshape(256, 32)
    assert bits_equal(ours.ravel(), ggml_to_float(39, mx, 256 * 32))
    assert np.array_equal(ours[:, 0], np.ldexp(np.float32(1), np.arange(256) - 128).astype(np.float32))
    nv = np.zeros((64, 36), np.uint8)
    nv[:, :4] = np.arange(256).reshape(64, 4)
    nv[:, 4:] = 0x22  # value 2 everywhere
    ours = dequantize(nv, "nvfp4")
    assert bits_equal(ours, ggml_to_float(40, nv, 64 * 64))
    per_scale = ours.reshape(256, 16)[:, 0]
    assert per_scale[0] == per_scale[0x7F] == 0 and per_scale[0x38] == 1.0  # 0x38: exponent 7, i.e. 1.0 * 0.5 * 2
    assert np.all(np.isfinite(per_scale))


def test_q8_K_matches_ggml_c():
    """ggml's traits give Q8_K no to_float, but libggml-base exports dequantize_row_q8_K: call it directly."""
    fn = ggml_c_function("dequantize_row_q8_K")
    fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
    raw = random_blocks("q8_K", 300, seed=15)
    ref = np.empty(300 * 256, np.float32)
    fn(raw.ctypes.data, ref.ctypes.data, ref.size)
    assert np.isnan(ref).any() and np.isinf(ref).any()
    assert bits_equal(dequantize(raw, "q8_K"), ref)


def test_q8_1_follows_its_block_definition():
    """ggml cannot dequantize Q8_1; by block_q8_1 = {d, s, qs[32]}, a value is d * q (s = d * sum(q) is for dot
    products). Blocks made by ggml's quantize_row_q8_1_ref, compared with ggml's Q8_0 to_float of {d, qs}."""
    ggml = ggml_lib()
    traits = ggml.ggml_get_type_traits(9).contents
    assert traits.type_size == 36 == GGML_TYPES.lookup("q8_1").type_size
    src = np.random.default_rng(9).normal(size=32 * 200).astype(np.float32)
    q8_1 = np.empty(200 * 36, np.uint8)
    traits.from_float_ref(src.ctypes.data_as(ctypes.POINTER(ctypes.c_float)), q8_1.ctypes.data_as(ctypes.c_void_p), src.size)
    blocks = q8_1.reshape(200, 36)
    as_q8_0 = np.concatenate([blocks[:, 0:2], blocks[:, 4:]], axis=1)
    ours = dequantize(q8_1, "q8_1")
    assert bits_equal(ours, ggml_to_float(8, as_q8_0, src.size))
    assert np.allclose(ours, src, atol=np.abs(src).max() / 100)
    blocks[:, 2:4] = 0xFF  # s does not take part
    assert bits_equal(dequantize(q8_1, "q8_1"), ours)


def test_every_tensor_of_ggml_writer_all_types():
    """The corpus file ggml's writer made with every quantizable type, dequantized as ggml does."""
    c = GGUF.parse_file(corpus_file("generated/ggml-writer-all-types.gguf"))
    seen = set()
    for info in c.tensor_infos:
        t = GGML_TYPES.lookup(info.type)
        n = int(np.prod([int(d) for d in info.dimensions]))
        data = np.frombuffer(c.tensor_data[info.offset : info.offset + t.nbytes(n)], np.uint8)
        ours = dequantize(data, t)
        assert ours.shape == (n,)
        if t.name in C_TYPES:
            assert bits_equal(ours, ggml_to_float(t.id, data, n)), info.name
        seen.add(t.name)
    assert len(seen) >= 20


# -- gguf-py ------------------------------------------------------------------------------------------


def gguf_py_types() -> dict[str, object]:
    from gguf import GGMLQuantizationType
    from gguf.quants import _type_traits

    names = {m.name.lower() for m in _type_traits} | {"f16"}
    return {m.name.lower(): m for m in GGMLQuantizationType if m.name.lower() in names}


@pytest.mark.parametrize("name", [n for n in VECTOR_TYPES if n.lower() in gguf_py_types()])
def test_gguf_py_agrees(name):
    """gguf-py's numpy dequantizer gives the same values on ggml's quantizer output and on random bytes."""
    import gguf.quants

    qtype = gguf_py_types()[name.lower()]
    t = GGML_TYPES.lookup(name)
    z = np.load(VECTORS / f"{name}.npz")
    for raw in (z["quant"], z["raw"], random_blocks(name, 64, seed=100 + t.id)):
        with np.errstate(all="ignore"):
            theirs = gguf.quants.dequantize(raw.reshape(-1, t.type_size), qtype).reshape(-1)
        assert exact(dequantize(raw, name), theirs.astype(np.float32))


# -- the lookup tables -----------------------------------------------------------------------------------


def test_grids_match_gguf_py():
    from gguf import quants as q

    for cls in (q.IQ2_XXS, q.IQ2_XS, q.IQ2_S, q.IQ3_XXS, q.IQ3_S, q.IQ1_S):
        cls.init_grid()
    pairs = [
        (grids.IQ2XXS_GRID, 8, q.IQ2_XXS),
        (grids.IQ2XS_GRID, 8, q.IQ2_XS),
        (grids.IQ2S_GRID, 8, q.IQ2_S),
        (grids.IQ3XXS_GRID, 4, q.IQ3_XXS),
        (grids.IQ3S_GRID, 4, q.IQ3_S),
    ]
    for table, width, cls in pairs:
        ours = grids.grid_bytes(table, width)
        assert ours.shape == cls.grid_shape
        assert np.array_equal(ours.astype(np.float32), cls.grid.reshape(cls.grid_shape)), cls.__name__
    iq1 = grids.grid_bytes(grids.IQ1S_GRID, 8).view(np.int8)
    assert np.array_equal(iq1.astype(np.float32), q.IQ1_S.grid.reshape(q.IQ1_S.grid_shape))
    assert bytes(grids.KSIGNS_IQ2XS) == q.IQ2_XXS.ksigns
    assert tuple(grids.KVALUES_IQ4NL) == tuple(q.IQ4_NL.kvalues)
    assert tuple(grids.KVALUES_FP4) == tuple(q.MXFP4.kvalues) == tuple(q.NVFP4.kvalues)
    assert np.float32(grids.IQ1S_DELTA) == q.IQ1_S.delta == q.IQ1_M.delta
    # ksigns_iq2xs: 7 sign bits plus a parity bit making the count of negatives even
    k = np.array(grids.KSIGNS_IQ2XS)
    assert np.array_equal(k & 127, np.arange(128)) and not np.any(np.unpackbits(k.astype(np.uint8)).reshape(128, 8).sum(1) % 2)


# -- declarations and the schema table ------------------------------------------------------------------


def test_every_type_declared_once_and_supported():
    active = {t.name for t in GGML_TYPES.values() if not t.removed}
    assert set(ALL_TYPES) == active == SUPPORTED


@pytest.mark.parametrize("name", ALL_TYPES)
@pytest.mark.parametrize("order", ["little", "big"])
def test_layout_matches_schema_table(name, order):
    t = GGML_TYPES.lookup(name)
    s = block_struct(name, order)
    dt = block_dtype(name, order)
    assert isinstance(s, construct.Struct)
    assert s.sizeof() == dt.itemsize == t.type_size
    assert block_elements(name) == t.block_size
    assert list(dt.names) == [sub.name for sub in s.subcons]
    for field in dt.names:
        assert dt.fields[field][0].base.str[0] in ("|", "<" if order == "little" else ">"), field


@pytest.mark.parametrize("name", ALL_TYPES)
def test_struct_and_dtype_read_a_block_alike(name):
    """construct parsing one block and numpy viewing it with the derived dtype agree, field by field, and
    building with the big-endian declaration gives what swap_byte_order gives."""
    t = GGML_TYPES.lookup(name)
    raw = np.random.default_rng(t.id).integers(0, 256, 3 * t.type_size, dtype=np.uint8)
    for field, (dt, _) in block_dtype(name).fields.items():
        if dt.base.kind == "f":  # finite values, so that parse → build keeps the bits
            raw.view(block_dtype(name))[field] = np.random.default_rng(1).uniform(-2, 2, raw.view(block_dtype(name))[field].shape)
    little, big = block_struct(name, "little"), block_struct(name, "big")
    viewed = raw.view(block_dtype(name))
    swapped = swap_byte_order(raw, name, "little", "big")
    for i in range(3):
        block = raw[i * t.type_size : (i + 1) * t.type_size].tobytes()
        parsed = little.parse(block)
        for field in block_dtype(name).names:
            assert np.array_equal(np.asarray(parsed[field], dtype=viewed[field].dtype), viewed[field][i]), field
        assert big.build(parsed) == swapped[i * t.type_size : (i + 1) * t.type_size]


def test_only_multibyte_fields_are_swapped():
    """As ggml declares them: Q4_K swaps d and dmin only, Q6_K d only, MXFP4 and NVFP4 nothing, IQ2_XXS its
    uint16 qs, IQ1_S its uint16 qh, IQ4_XS scales_h, Q8_K d and the int16 bsums; byte arrays stay."""
    expectations = {
        "q4_K": [(0, 2), (2, 2)],
        "q6_K": [(208, 2)],
        "mxfp4": [],
        "nvfp4": [],
        "q5_0": [(0, 2)],
        "iq2_xxs": [(0, 2)] + [(2 + 2 * i, 2) for i in range(32)],
        "iq1_s": [(0, 2)] + [(34 + 2 * i, 2) for i in range(8)],
        "iq4_xs": [(0, 2), (2, 2)],
        "q8_K": [(0, 4)] + [(260 + 2 * i, 2) for i in range(16)],
        "iq1_m": [],
        "f64": [(0, 8)],
    }
    for name, spans in expectations.items():
        t = GGML_TYPES.lookup(name)
        block = np.arange(t.type_size, dtype=np.uint8)
        expected = block.copy()
        for start, size in spans:
            expected[start : start + size] = block[start : start + size][::-1]
        assert swap_byte_order(block, name, "little", "big") == expected.tobytes(), name


# -- byte order --------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ALL_TYPES)
def test_big_endian_round_trip(name):
    raw = random_blocks(name, 40, seed=7)
    big = swap_byte_order(raw, name, "little", "big")
    assert swap_byte_order(big, name, "big", "little") == raw.tobytes()
    assert swap_byte_order(raw, name, "little", "little") == raw.tobytes()
    little_values = dequantize(raw, name, dtype=None)
    big_values = dequantize(big, name, byte_order="big", dtype=None)
    assert little_values.dtype == big_values.dtype and little_values.dtype.isnative
    assert np.array_equal(little_values.view(np.uint8), big_values.view(np.uint8))


def test_gguf_py_endian_converter_corpus():
    """Every tensor of gguf-py-le.gguf, converted, is byte for byte the same tensor of gguf-py-be.gguf (made by
    gguf-py's gguf_convert_endian), and both dequantize to the same values."""
    le = GGUF.parse_file(corpus_file("generated/gguf-py-le.gguf"))
    be = GGUF.parse_file(corpus_file("generated/gguf-py-be.gguf"))
    assert (le.byte_order, be.byte_order) == ("little", "big")
    assert len(le.tensor_infos) == len(be.tensor_infos) >= 8
    for a, b in zip(le.tensor_infos, be.tensor_infos):
        assert a.name == b.name and a.type == b.type
        t = GGML_TYPES.lookup(a.type)
        nbytes = t.nbytes(int(np.prod([int(d) for d in a.dimensions])))
        data_le = le.tensor_data[a.offset : a.offset + nbytes]
        data_be = be.tensor_data[b.offset : b.offset + nbytes]
        assert swap_byte_order(data_le, t, "little", "big") == bytes(data_be), a.name
        assert swap_byte_order(data_be, t, "big", "little") == bytes(data_le), a.name
        assert bits_equal(dequantize(data_le, t), dequantize(data_be, t, byte_order="big")), a.name


# -- the API ------------------------------------------------------------------------------------------


def test_type_spellings_and_input_kinds():
    raw = random_blocks("q4_K", 3, seed=1)
    expected = dequantize(raw, 12)
    assert expected.dtype == np.float32 and expected.shape == (768,)
    for spelling in ("q4_K", "Q4_K", "q4_k", GGML_TYPES[12]):
        assert bits_equal(dequantize(raw, spelling), expected)
    for data in (raw.tobytes(), bytearray(raw.tobytes()), memoryview(raw.tobytes()), raw.reshape(3, -1), raw[::1]):
        assert bits_equal(dequantize(data, "q4_K"), expected)
    assert dequantize(b"", "q4_K").shape == (0,)
    assert dequantize(raw, "q4_K", dtype=np.float64).dtype == np.float64


@pytest.mark.parametrize("name", sorted(INTEGER_LIKE))
def test_integer_and_f64_types_keep_their_dtype_on_request(name):
    native = np.dtype(INTEGER_LIKE[name])
    values = np.array([0, 1, -1, 100, -100, 127], dtype=native)
    for order, code in (("little", "<"), ("big", ">")):
        data = values.astype(native.newbyteorder(code)).tobytes()
        kept = dequantize(data, name, byte_order=order, dtype=None)
        assert kept.dtype == native and np.array_equal(kept, values)
        converted = dequantize(data, name, byte_order=order)
        assert converted.dtype == np.float32 and np.array_equal(converted, values.astype(np.float32))
    big = np.array([2**62 + 1], np.int64)
    assert dequantize(big.tobytes(), "i64")[0] == np.float32(2**62)


def test_float_types_and_nan_patterns():
    f16 = np.array([0x7C01, 0x7E00, 0xFC00, 0x0001, 0x8000, 0x3C00], np.uint16)
    out = dequantize(f16.tobytes(), "f16").view(np.uint32)
    assert [hex(v) for v in out] == ["0x7fc02000", "0x7fc00000", "0xff800000", "0x33800000", "0x80000000", "0x3f800000"]
    bf16 = np.array([0x7F81, 0x3F80], np.uint16)  # a signalling NaN stays as it is, as in ggml
    assert [hex(v) for v in dequantize(bf16.tobytes(), "bf16").view(np.uint32)] == ["0x7f810000", "0x3f800000"]
    f32 = np.array([1.5, -0.0, np.inf], np.float32)
    assert bits_equal(dequantize(f32.astype(">f4").tobytes(), "f32", byte_order="big"), f32)


def test_scale_halves_convert_as_ggml_does():
    """Block scales come from the 65536-entry table built with ggml's formula: every half as ggml's F16 to_float
    gives it (signalling NaNs quiet), read from a strided block field too."""
    from gguf_construct.quants.floats import half_table, half_to_float

    halves = np.arange(1 << 16, dtype=np.uint16)
    ref = ggml_to_float(GGML_TYPES.lookup("f16").id, halves.view(np.uint8), halves.size)
    assert bits_equal(half_to_float(halves), ref)
    assert bits_equal(half_table(), ref)
    strided = np.zeros(halves.size, [("d", "<u2"), ("qs", "u1", (3,))])
    strided["d"] = halves
    assert bits_equal(half_to_float(strided["d"]), ref)


@pytest.mark.parametrize("bad", [r.id for r in REMOVED] + [r.name for r in REMOVED] + [43, 99, -1, "q9_9", "", 3.5])
def test_removed_and_unknown_types_are_rejected(bad):
    for call in (
        lambda: dequantize(b"", bad),
        lambda: block_struct(bad, "little"),
        lambda: block_dtype(bad, "big"),
        lambda: swap_byte_order(b"", bad, "little", "big"),
    ):
        with pytest.raises(UnsupportedTypeError) as info:
            call()
        assert info.value.rule == "tensor.type"
        assert str(bad) in str(info.value) or (isinstance(bad, int) and GGML_TYPES.get(bad) and GGML_TYPES[bad].name in str(info.value))


def test_removed_type_error_names_the_type():
    with pytest.raises(UnsupportedTypeError, match="q4_0_4_4"):
        dequantize(b"", 31)


def test_partial_block_and_bad_arguments():
    with pytest.raises(TruncatedError) as info:
        dequantize(bytes(145), "q4_K")
    assert isinstance(info.value, FormatError) and info.value.rule == "tensor.partial_block"
    with pytest.raises(FormatError, match="partial_block"):
        swap_byte_order(bytes(19), "q4_0", "little", "big")
    with pytest.raises(FormatError, match="partial_block"):
        dequantize(bytes(3), "f32")
    with pytest.raises(FormatError, match="byte_order"):
        dequantize(bytes(18), "q4_0", byte_order="middle")
    with pytest.raises(FormatError, match="tensor.data"):
        dequantize(np.zeros(9, np.float16), "f16")
    with pytest.raises(FormatError, match="tensor.data"):
        dequantize("text", "f16")


# -- chunks, threads, memory --------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["q4_0", "q6_K", "iq2_xxs", "f16", "nvfp4"])
def test_chunking_does_not_change_results(name, monkeypatch):
    raw = random_blocks(name, 333, seed=3)
    whole = dequantize(raw, name)
    monkeypatch.setattr(dequant_module, "CHUNK_VALUES", 1000)  # many uneven chunks over the thread pool
    assert bits_equal(dequantize(raw, name), whole)
    assert bits_equal(dequantize(swap_byte_order(raw, name, "little", "big"), name, byte_order="big"), whole)


@pytest.mark.parametrize("name", ["q8_0", "q4_1", "q4_K", "q5_K", "q2_K", "tq2_0", "iq1_s", "iq1_m", "q8_K"])
def test_finish_slices_do_not_change_results(name, monkeypatch):
    """The float passes run slice by slice; slices that end inside a block's groups, or hold one row, agree."""
    t = GGML_TYPES.lookup(name)
    raw = random_blocks(name, 97, seed=11)
    whole = dequantize(raw, name)
    for values in (1, 300, 4096):
        monkeypatch.setattr(common_module, "FINISH_VALUES", values)
        assert bits_equal(dequantize(raw, name), whole)
    if name != "q8_K":
        assert bits_equal(whole, ggml_to_float(t.id, raw, 97 * t.block_size))


@pytest.mark.parametrize("name", C_TYPES)
def test_unaligned_data_is_exact(name):
    """Kernels read fields as 64-bit words where they can: data at an odd address gives the same values."""
    t = GGML_TYPES.lookup(name)
    raw = random_blocks(name, 40, seed=t.id + 1)
    shifted = np.empty(raw.size + 1, np.uint8)[1:]
    shifted[:] = raw
    assert shifted.ctypes.data % 2 == 1
    assert bits_equal(dequantize(shifted, name), ggml_to_float(t.id, raw, 40 * t.block_size))


def test_peak_memory_is_bounded():
    """Extra memory during a 4 Mi-value dequantization stays under 3x the output (chunked temporaries)."""
    raw = random_blocks("q4_K", (1 << 22) // 256, seed=5)
    dequantize(raw, "q4_K")  # build the lookup tables first
    tracemalloc.start()
    try:
        out = dequantize(raw, "q4_K")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert (peak - out.nbytes) < 3 * out.nbytes


def test_shape_gives_the_rows():
    rows = np.random.default_rng(3).standard_normal((3, 64)).astype(np.float32)
    blob = gc.quantize(rows, "q8_0")
    flat = gc.dequantize(blob, "q8_0")
    assert flat.shape == (192,)
    shaped = gc.dequantize(blob, "q8_0", shape=rows.shape)
    assert shaped.shape == (3, 64) and np.array_equal(shaped.reshape(-1), flat)
    assert np.allclose(shaped, rows, atol=0.05)
    assert gc.dequantize(blob, "q8_0", shape=(-1, 64)).shape == (3, 64)
    for wrong in [(3, 63), (4, 64), (-1, 7), (-1, -1), (0, -1), (-2, -96)]:
        with pytest.raises(ValueError, match="does not"):
            gc.dequantize(blob, "q8_0", shape=wrong)
