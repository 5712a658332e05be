"""The SAFETENSORS schema: exact round trips of files from all three writers (the safetensors library, MLX,
an Ollama-style Go writer), fresh layouts equal to the writers' own bytes, zero-copy loading, detection, and
validation of malformed headers checked against what the safetensors library and MLX accept."""

from __future__ import annotations

import json
import struct
import tracemalloc

import mlx.core as mx
import numpy as np
import pytest
import safetensors.numpy as stnp
from construct import Container
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gguf_construct as gc
from gguf_construct.api.safetensors_file import SafetensorsFile, from_bytes, save_safetensors
from gguf_construct.formats.safetensors.schema import SAFETENSORS, Header
from gguf_construct.testing.strategies.valid_safetensors import safetensors_bytes, safetensors_containers
from gguf_construct.validation.safetensors_checks import validate_safetensors_bytes
from tests.quants.test_mlx_dequant import blob_tensors, mlx_blob, quantize

ARRAYS = {
    "model.embed.weight": np.arange(24, dtype=np.float32).reshape(4, 6),
    "b.f16": np.linspace(-2, 2, 10, dtype=np.float16),
    "c.i64": np.array([-(2**62), 0, 5], np.int64),
    "d.u8": np.arange(7, dtype=np.uint8),
    "e.bool": np.array([True, False, True]),
    "f.scalar": np.array(3.5, np.float64),
    "g.empty": np.zeros((0, 4), np.int16),
    "h.u64": np.array([2**64 - 1], np.uint64),
    "i.c64": np.array([1 + 2j], np.complex64),
}


def hf_bytes(metadata=None) -> bytes:
    return stnp.save(ARRAYS, metadata=metadata)


def go_blob() -> bytes:
    """An Ollama Go-writer blob: one BF16 tensor, keys sorted, fields dtype/shape/data_offsets, padded to 8."""
    bits = (np.arange(12, dtype=np.float32).view(np.uint32) >> 16).astype(np.uint16)
    return SAFETENSORS.build(
        Container(tensors={"model.layers.0.input_layernorm.weight": {"dtype": "BF16", "shape": [3, 4], "data": bits}}, style="ollama")
    )


# -- round trips ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("metadata", [None, {"format": "np"}, {"quant_type": "int4", "group_size": "64", "note": "<&>é\u2028"}])
def test_safetensors_library_files_round_trip(metadata):
    data = hf_bytes(metadata)
    c = SAFETENSORS.parse(data)
    assert SAFETENSORS.build(c) == data
    assert c.header_size == len(c.header.raw) and c.data_offset == 8 + c.header_size and len(c.header.raw) % 8 == 0
    loaded = stnp.load(data)
    f = from_bytes(data)
    assert f.metadata == (metadata or {})
    for name, arr in loaded.items():
        assert np.array_equal(f.entries[name].array(), arr) and f.entries[name].array().dtype == arr.dtype


def test_mlx_files_round_trip(tmp_path):
    w = np.random.default_rng(0).normal(0, 0.05, (8, 128)).astype(np.float32)
    cases = [
        ({"x": mx.ones((3,), dtype=mx.bfloat16), "y": mx.arange(5, dtype=mx.int32)}, None),
        (blob_tensors("model.layers.0.mlp.up_proj.weight", quantize(w, "affine", 4, 64)), {"quant_type": "int4", "group_size": "64"}),
        (blob_tensors("a.weight", quantize(w, "mxfp4", 4, 32)), {"quant_type": "mxfp4", "group_size": "32"}),
    ]
    for i, (tensors, md) in enumerate(cases):
        data = mlx_blob(tmp_path, tensors, md, f"m{i}.safetensors")
        c = SAFETENSORS.parse(data)
        assert SAFETENSORS.build(c) == data
        assert c.header.padding == b""  # MLX does not pad
        ours = SafetensorsFile(c)
        for name, arr in mx.load(str(tmp_path / f"m{i}.safetensors")).items():
            want = np.array(arr.view(mx.uint16)) if arr.dtype == mx.bfloat16 else np.array(arr)
            assert np.array_equal(ours.entries[name].array(), want)


def test_ollama_style_blobs_round_trip_and_are_read_by_both_libraries(tmp_path):
    data = go_blob()
    assert SAFETENSORS.build(SAFETENSORS.parse(data)) == data
    n = int.from_bytes(data[:8], "little")
    header = data[8 : 8 + n]
    assert n % 8 == 0 and header.endswith(b" ") and b'"__metadata__"' not in header
    assert header.index(b'"dtype"') < header.index(b'"shape"') < header.index(b'"data_offsets"')
    (tmp_path / "go.safetensors").write_bytes(data)
    got = mx.load(str(tmp_path / "go.safetensors"))["model.layers.0.input_layernorm.weight"]
    assert np.array_equal(np.array(got.astype(mx.float32)), np.arange(12, dtype=np.float32).reshape(3, 4))


def test_go_writer_escapes_like_go():
    raw = SAFETENSORS.build(Container(tensors={"a<b>&c": np.zeros(1, np.float32)}, metadata={"k": "\u2028"}, style="ollama"))
    assert b"a\\u003cb\\u003e\\u0026c" in raw and b"\\u2028" in raw
    assert from_bytes(raw).entries["a<b>&c"].array().tolist() == [0.0]


# -- fresh layouts equal the writers' bytes ---------------------------------------------------------------
def test_fresh_build_equals_safetensors_library_bytes():
    """Data sorted by dtype (the library's enum order, descending) then name; __metadata__ first; padded."""
    for md in (None, {"format": "pt"}):
        assert SAFETENSORS.build(Container(tensors=ARRAYS, metadata=md)) == hf_bytes(md)


def test_fresh_build_equals_mlx_bytes(tmp_path):
    arrays = {k: v for k, v in ARRAYS.items() if v.dtype not in (np.float64,)}
    path = tmp_path / "m.safetensors"
    mx.save_safetensors(str(path), {k: mx.array(v) for k, v in arrays.items()}, metadata={"b": "2", "a": "1"})
    data = path.read_bytes()
    # MLX lays data out in hash-map order: take that order from its file, everything else is laid out by us
    order = sorted(SAFETENSORS.parse(data).header.entries.values(), key=lambda e: (e.begin, e.end))
    fresh = SAFETENSORS.build(Container(tensors={e.name: arrays[e.name] for e in order}, metadata={"b": "2", "a": "1"}, style="mlx"))
    assert fresh == data


@pytest.mark.parametrize("style", ["safetensors", "mlx", "ollama"])
def test_our_writer_output_is_read_by_the_safetensors_library_and_mlx(tmp_path, style):
    path = tmp_path / "w.safetensors"
    save_safetensors(path, ARRAYS, {"quant_type": "int8"}, style=style)
    loaded = stnp.load_file(str(path))
    for name, arr in ARRAYS.items():
        assert np.array_equal(loaded[name], arr)
    mlx_arrays = {k: v for k, v in ARRAYS.items() if v.dtype != np.float64}  # MLX has no F64
    save_safetensors(path, mlx_arrays, {"quant_type": "int8"}, style=style)
    mlx_loaded = mx.load(str(path))
    for name, arr in mlx_arrays.items():
        assert np.array_equal(np.array(mlx_loaded[name]), arr)


# -- detection, loading, zero copy --------------------------------------------------------------------------
def test_detect_load_and_common_protocol(tmp_path):
    path = tmp_path / "f.safetensors"
    path.write_bytes(hf_bytes({"k": "v"}))
    assert gc.detect(path) == "safetensors" and gc.schema_for(path.read_bytes()) is gc.SAFETENSORS
    f = gc.load(path)
    assert f.format == "safetensors" and f.path == str(path) and f.metadata == {"k": "v"}
    t = f.tensors["model.embed.weight"]
    assert (t.name, t.shape, t.type, t.nbytes) == ("model.embed.weight", (6, 4), "F32", 96)
    assert t.to_numpy().shape == (4, 6) and np.array_equal(t.to_numpy(), ARRAYS["model.embed.weight"])
    assert t.data.dtype == np.uint8 and not t.data.flags.writeable and not t.data.flags.owndata
    assert gc.validate(path) == []


def test_tensor_views_are_zero_copy(tmp_path):
    path = tmp_path / "big.safetensors"
    save_safetensors(path, {f"t{i}": np.full((1 << 20,), i, np.float32) for i in range(8)}, style="mlx")  # 32 MiB
    tracemalloc.start()
    f = gc.load(path)
    total = sum(int(f.tensors[n].data[-1]) + f.tensors[n].array().shape[0] for n in f.tensors)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert total > 0 and peak < 1 << 20


# -- validation against both readers ------------------------------------------------------------------------
def _file(header: bytes | str, data: bytes = b"", n: int | None = None) -> bytes:
    header = header.encode() if isinstance(header, str) else header
    return struct.pack("<Q", len(header) if n is None else n) + header + data


T = '"t":{"dtype":"F32","shape":[2],"data_offsets":[%d,%d]}'
CASES = {
    "unpadded": (_file("{" + T % (0, 8) + "}", bytes(8)), "ok"),
    "offset order": (
        _file('{"b":{"dtype":"U8","shape":[1],"data_offsets":[1,2]},"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}', b"ab"),
        "ok",
    ),
    "metadata null": (_file('{"__metadata__":null,' + T % (0, 8) + "}", bytes(8)), "ok"),
    "empty": (_file("{}"), "ok"),
    "leading spaces": (_file("  {" + T % (0, 8) + "}", bytes(8)), "ok"),
    "gap": (_file("{" + T % (4, 12) + "}", bytes(12)), "data.gap"),
    "trailing bytes": (_file("{" + T % (0, 8) + "}", bytes(9)), "data.trailing"),
    "stray bytes after {}": (_file("{}", b"x"), "data.trailing"),
    "duplicate key": (_file("{" + T % (0, 8) + "," + T % (0, 8) + "}", bytes(8)), "tensor.duplicate"),
    "duplicate metadata": (_file('{"__metadata__":{"a":"b"},"__metadata__":{"a":"c"}}'), "metadata.duplicate"),
    "NUL padding": (_file("{}\0\0\0\0\0\0"), "header.padding"),
    "overlap": (
        _file('{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},"b":{"dtype":"U8","shape":[2],"data_offsets":[1,3]}}', b"abc"),
        "tensor.overlap",
    ),
    "truncated data": (_file("{" + T % (0, 8) + "}", bytes(4)), "tensor.bounds"),
    "size mismatch": (_file("{" + T % (0, 4) + "}", bytes(4)), "tensor.size"),
    "metadata not string": (_file('{"__metadata__":{"group_size":64}}'), "metadata.value"),
    "unknown dtype": (_file('{"t":{"dtype":"u8","shape":[1],"data_offsets":[0,1]}}', b"a"), "tensor.dtype"),
    "negative dim": (_file('{"t":{"dtype":"U8","shape":[-1],"data_offsets":[0,1]}}', b"a"), "tensor.shape"),
    "end before begin": (_file('{"t":{"dtype":"U8","shape":[1],"data_offsets":[2,1]}}', b"abc"), "tensor.data_offsets"),
    "missing field": (_file('{"t":{"dtype":"U8","shape":[1]}}', b"a"), "header.entry"),
    "array header": (_file("[]"), "header.object"),
    "not json": (_file("{nope}"), "header.json"),
    "not utf-8": (_file(b'{"\xff":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}', b"a"), "header.utf8"),
    "N = 0": (_file(b""), "header.size"),
    "shorter than 8 bytes": (b"\x02\0\0", "header.truncated"),
    "N past the end": (_file("{}", n=50), "header.size"),
    "N above the limit": (_file("{}", n=100_000_001), "limit.header_bytes"),
}
WARNINGS = {"data.gap", "data.trailing", "tensor.duplicate", "metadata.duplicate", "header.padding"}


def _hf_accepts(data: bytes) -> bool:
    try:
        stnp.load(data)
        return True
    except Exception:
        return False


def _mlx_accepts(data: bytes, tmp_path) -> bool:
    path = tmp_path / "case.safetensors"
    path.write_bytes(data)
    try:
        mx.load(str(path))
        return True
    except Exception:
        return False


@pytest.mark.parametrize("case", list(CASES))
def test_malformed_headers_follow_the_readers(case, tmp_path):
    data, expected = CASES[case]
    issues = validate_safetensors_bytes(data)
    errors = [i for i in issues if i.severity == "error"]
    hf_errors = [i for i in validate_safetensors_bytes(data, "hf") if i.severity == "error"]
    rules = {i.rule for i in issues}
    if expected == "ok":
        assert issues == []
    else:
        assert expected in rules, issues
    # what MLX accepts is at most a warning (aliased ranges excepted: the issue rules them out)
    mlx_ok = _mlx_accepts(data, tmp_path)
    assert bool(errors) == (not mlx_ok or expected == "tensor.overlap"), (issues, mlx_ok)
    # the 'hf' profile rejects exactly what the safetensors library rejects
    assert bool(hf_errors) == (not _hf_accepts(data)), hf_errors
    assert all(i.rule in WARNINGS for i in issues if i.severity == "warning")
    if errors:
        with pytest.raises(gc.FormatError) as e:
            from_bytes(data)
        assert e.value.rule == errors[0].rule
    else:
        from_bytes(data)


def test_errors_name_rule_path_and_offset():
    data = _file('{"ok":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"bad":{"dtype":"Q9","shape":[1],"data_offsets":[1,2]}}', b"ab")
    (issue,) = [i for i in validate_safetensors_bytes(data) if i.severity == "error"]
    assert issue.rule == "tensor.dtype" and issue.path == "header['bad']" and data[issue.offset : issue.offset + 5] == b'"bad"'
    with pytest.raises(gc.UnsupportedTypeError):
        from_bytes(data)


def test_duplicate_key_last_one_wins_like_both_readers():
    data = _file('{"t":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"t":{"dtype":"I8","shape":[1],"data_offsets":[0,1]}}', b"\xff")
    assert from_bytes(data).entries["t"].array().tolist() == [-1] == stnp.load(data)["t"].tolist()


def test_header_is_parsed_lazily():
    c = SAFETENSORS.parse(_file("{not json"))
    assert isinstance(c.header, Header) and c.header.raw == b"{not json"
    with pytest.raises(gc.InvalidValueError):
        c.header.entries  # noqa: B018


# -- generated files ----------------------------------------------------------------------------------------
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(safetensors_bytes())
def test_generated_files_round_trip_and_validate(data):
    c = SAFETENSORS.parse(data)
    assert SAFETENSORS.build(c) == data
    assert validate_safetensors_bytes(data) == [] and validate_safetensors_bytes(data, "hf") == []
    header = json.loads(c.header.raw)
    assert set(from_bytes(data).entries) == set(header) - {"__metadata__"}


@settings(max_examples=40, deadline=None)
@given(safetensors_containers())
def test_generated_objects_read_back_by_the_safetensors_library(obj):
    data = SAFETENSORS.build(obj)
    with_bf16 = any(t["dtype"] == "BF16" for t in obj.tensors.values())
    if not with_bf16:  # numpy has no bfloat16
        loaded = stnp.load(data)
        for name, t in obj.tensors.items():
            assert loaded[name].tobytes() == bytes(t["data"]) and list(loaded[name].shape) == t["shape"]
    assert {n: f.array().tobytes() for n, f in from_bytes(data).entries.items()} == {n: bytes(t["data"]) for n, t in obj.tensors.items()}


@settings(max_examples=150, deadline=None)
@given(safetensors_bytes(), st.data())
def test_mutated_files_raise_only_format_errors(data, draw):
    buf = bytearray(data)
    for _ in range(draw.draw(st.integers(1, 4))):
        if not buf:
            break
        i = draw.draw(st.integers(0, len(buf) - 1))
        buf[i] = draw.draw(st.integers(0, 255))
    cut = draw.draw(st.integers(0, len(buf)))
    buf = bytes(buf[:cut])
    validate_safetensors_bytes(buf)
    try:
        f = from_bytes(buf, strict=False)
        for t in f.tensors.values():
            t.to_numpy()
    except gc.FormatError:
        pass
