"""MLX quantization modes dequantized with numpy, compared bit for bit with ``mx.dequantize`` (mlx, CPU build).

Also the helpers other test modules use to make Ollama-style quantized blobs with MLX's own writer.
"""

from __future__ import annotations

import mlx.core as mx
import numpy as np
import pytest

from gguf_construct.api.safetensors_file import from_bytes
from gguf_construct.errors import FormatError
from gguf_construct.quants import mlx as mq

MODES = [("affine", b, g) for b in (2, 3, 4, 5, 6, 8) for g in (32, 64, 128)] + [("nvfp4", 4, 16), ("mxfp4", 4, 32), ("mxfp8", 8, 32)]
FLOATS = {"BF16": mx.bfloat16, "F16": mx.float16, "F32": mx.float32}
QUANT_TYPE = {("affine", 4): "int4", ("affine", 8): "int8", ("nvfp4", 4): "nvfp4", ("mxfp4", 4): "mxfp4", ("mxfp8", 8): "mxfp8"}


def raw(a: mx.array) -> np.ndarray:
    """An MLX array's stored values (BF16 as its uint16 bit patterns)."""
    return np.array(a.view(mx.uint16)) if a.dtype == mx.bfloat16 else np.array(a)


def quantize(w: np.ndarray, mode: str, bits: int, group: int, dtype: str = "BF16", **kw) -> tuple[mx.array, ...]:
    return mx.quantize(mx.array(w).astype(FLOATS[dtype]), group_size=group, bits=bits, mode=mode, **kw)


def blob_tensors(name: str, parts: tuple[mx.array, ...]) -> dict[str, mx.array]:
    """Ollama's combined layout: ``name``, ``name.scale`` and (affine) ``name.bias``."""
    out = {name: parts[0], name + ".scale": parts[1]}
    if len(parts) > 2:
        out[name + ".bias"] = parts[2]
    return out


def mlx_blob(tmp_path, tensors: dict[str, mx.array], metadata: dict[str, str] | None = None, file: str = "blob.safetensors") -> bytes:
    """A blob written by ``mx.save_safetensors`` (MLX's writer: unpadded, keys sorted)."""
    path = tmp_path / file
    mx.save_safetensors(str(path), tensors, metadata=metadata)
    return path.read_bytes()


@pytest.fixture(scope="module")
def weights() -> np.ndarray:
    return np.random.default_rng(5).normal(0, 0.05, (2, 6, 256)).astype(np.float32)


@pytest.mark.parametrize(("mode", "bits", "group"), MODES, ids=[f"{m}-{b}bit-g{g}" for m, b, g in MODES])
@pytest.mark.parametrize("dtype", list(FLOATS))
def test_dequantize_equals_mlx(weights, mode, bits, group, dtype):
    parts = quantize(weights, mode, bits, group, dtype)
    q, s, b = parts[0], parts[1], parts[2] if mode == "affine" else None
    # MLX's own rounding: the scale dtype (affine) or bfloat16 (fp modes), widened to float32
    ours = mq.dequantize_mlx(
        mode, np.array(q), raw(s), None if b is None else raw(b), bits=bits, group_size=group, scale_dtype=dtype, mlx_rounding=True
    )
    theirs = np.array(mx.dequantize(q, s, b, group_size=group, bits=bits, mode=mode).astype(mx.float32))
    assert np.array_equal(ours, theirs, equal_nan=True)
    # float32: exact s*q + b, which mx.dequantize computes when given float32 parameters
    if mode == "affine":
        s, b = s.astype(mx.float32), b.astype(mx.float32)
    exact = mq.dequantize_mlx(mode, np.array(q), raw(s), None if b is None else raw(b), bits=bits, group_size=group, scale_dtype="F32")
    theirs = np.array(mx.dequantize(q, s, b, group_size=group, bits=bits, mode=mode, dtype=mx.float32))
    assert np.array_equal(exact, theirs, equal_nan=True)


def test_bf16_rounding_differs_from_exact_values(weights):
    """The two answers are not the same thing: MLX's CPU rounds BF16 affine results twice."""
    q, s, b = quantize(weights * 40 + 3, "affine", 8, 64, "BF16")
    args = (np.array(q), raw(s), raw(b))
    exact = mq.dequantize_mlx("affine", *args, bits=8, group_size=64, scale_dtype="BF16")
    rounded = mq.dequantize_mlx("affine", *args, bits=8, group_size=64, scale_dtype="BF16", mlx_rounding=True)
    assert not np.array_equal(exact, rounded)
    assert np.array_equal(rounded, mq.round_to_bf16(rounded))


def _codes_words(rows: int, k: int, bits: int, rng) -> mx.array:
    return mx.array(rng.integers(0, 2**32, (rows, k * bits // 32), dtype=np.uint64).astype(np.uint32))


@pytest.mark.parametrize(
    ("mode", "special"),
    [
        ("mxfp4", [0, 1, 2, 126, 127, 128, 254, 255]),
        ("mxfp8", [0, 1, 2, 126, 127, 128, 254, 255]),
        ("nvfp4", [0x00, 0x01, 0x38, 0x7E, 0x7F, 0x80, 0xB8, 0xFF]),
    ],
)
def test_special_scale_bytes_equal_mlx(mode, special):
    """Every code under the scale bytes that matter (subnormal, 1, max, NaN/inf, negative), NaN-aware."""
    bits, group = (8, 32) if mode == "mxfp8" else (4, 16 if mode == "nvfp4" else 32)
    rng = np.random.default_rng(7)
    q = _codes_words(len(special), group * 4, bits, rng)
    s = np.repeat(np.array(special, np.uint8)[:, None], 4, axis=1)
    ours = mq.dequantize_mlx(mode, np.array(q), s, bits=bits, group_size=group)
    theirs = np.array(mx.dequantize(q, mx.array(s), group_size=group, bits=bits, mode=mode, dtype=mx.float32))
    assert np.isnan(theirs).any()  # the NaN / infinite scale bytes are in the sweep
    assert np.array_equal(ours, theirs, equal_nan=True)


def test_every_e4m3_code_as_mxfp8_element():
    q = mx.array(np.arange(256, dtype=np.uint8).view(np.uint32).reshape(2, 32))  # 128 codes per row
    s = np.full((2, 4), 127, np.uint8)
    ours = mq.dequantize_mlx("mxfp8", np.array(q), s, bits=8, group_size=32)
    theirs = np.array(mx.dequantize(q, mx.array(s), mode="mxfp8", dtype=mx.float32))
    assert np.array_equal(ours, theirs, equal_nan=True) and np.isnan(ours).sum() == 2


@pytest.mark.parametrize("rounding", [False, True])
def test_nvfp4_mlx_global_scale(rounding):
    w = np.random.default_rng(3).normal(0, 3, (4, 128)).astype(np.float32)
    gs = mx.array(np.float32(np.abs(w).max()))
    q, s = quantize(w, "nvfp4", 4, 16, "F32", global_scale=gs)
    ours = mq.dequantize_mlx(
        "nvfp4", np.array(q), np.array(s), bits=4, group_size=16, global_scale=float(np.array(gs)), mlx_rounding=rounding
    )
    theirs = mx.dequantize(q, s, mode="nvfp4", global_scale=gs, **({} if rounding else {"dtype": mx.float32}))
    assert np.array_equal(ours, np.array(theirs.astype(mx.float32)))


@pytest.mark.parametrize("per_row", [False, True])
def test_ollama_global_scale_tensor_multiplies_the_output(tmp_path, per_row):
    w = np.random.default_rng(4).normal(0, 1, (4, 64)).astype(np.float32)
    q, s = quantize(w, "nvfp4", 4, 16, "F32")
    g = np.array([0.5, 2.0, 0.25, 3.0], np.float32) if per_row else np.array(0.125, np.float32)
    data = mlx_blob(
        tmp_path, {"w.weight": q, "w.weight.scale": s, "w.weight.global_scale": mx.array(g)}, {"quant_type": "nvfp4", "group_size": "16"}
    )
    t = from_bytes(data).tensors["w.weight"]
    base = np.array(mx.dequantize(q, s, mode="nvfp4", dtype=mx.float32))
    assert np.array_equal(t.to_numpy(), base * (g.reshape(-1, 1) if per_row else g))
    assert t.nbytes == q.nbytes + s.nbytes + g.nbytes


@pytest.mark.parametrize(("mode", "bits", "group"), [m for m in MODES if (m[0], m[1]) in QUANT_TYPE])
def test_blob_tensor_to_numpy_equals_mlx(tmp_path, weights, mode, bits, group):
    parts = quantize(weights, mode, bits, group)
    md = {"quant_type": QUANT_TYPE[(mode, bits)], "group_size": str(group)}
    f = from_bytes(mlx_blob(tmp_path, blob_tensors("m.w", parts), md))
    t = f.tensors["m.w"]
    assert list(f.tensors) == ["m.w"] and t.type == md["quant_type"] and t.shape == (256, 6, 2)
    b = parts[2] if mode == "affine" else None
    assert np.array_equal(
        t.to_numpy(mlx_rounding=True),
        np.array(mx.dequantize(parts[0], parts[1], b, group_size=group, bits=bits, mode=mode).astype(mx.float32)),
        equal_nan=True,
    )


@pytest.mark.parametrize(
    ("mode", "bits", "group", "expected"),
    [
        ("affine", 4, 32, ("int4", 32)),
        ("affine", 4, 64, ("int4", 64)),
        ("nvfp4", 4, 16, ("nvfp4", 16)),
        ("mxfp4", 4, 32, ("mxfp4", 32)),
        ("mxfp8", 8, 32, ("mxfp8", 32)),
    ],
)
def test_quant_params_inferred_from_shapes_without_metadata(tmp_path, weights, mode, bits, group, expected):
    f = from_bytes(mlx_blob(tmp_path, blob_tensors("e.w", quantize(weights, mode, bits, group))))
    p = f.tensors["e.w"].params
    assert (p.quant_type, p.group_size, p.source) == (*expected, "shapes")


def test_affine_tie_broken_by_hint(tmp_path, weights):
    """int8 g64 and int4 g128 have the same shapes: a model-wide hint decides, as in Ollama."""
    data = mlx_blob(tmp_path, blob_tensors("e.w", quantize(weights, "affine", 8, 64)))
    assert from_bytes(data).tensors["e.w"].params.quant_type == "int4"
    t = from_bytes(data, hint="int8").tensors["e.w"]
    assert (t.params.quant_type, t.params.group_size) == ("int8", 64)


def test_per_tensor_metadata_wins_over_blob_metadata(tmp_path, weights):
    tensors = {**blob_tensors("a.w", quantize(weights, "affine", 8, 32)), **blob_tensors("b.w", quantize(weights, "affine", 4, 32))}
    md = {"a.w.quant_type": "int8", "a.w.group_size": "32", "quant_type": "int4", "group_size": "32"}
    f = from_bytes(mlx_blob(tmp_path, tensors, md))
    assert f.tensors["a.w"].params.source == "tensor metadata" and f.tensors["a.w"].type == "int8"
    assert f.tensors["b.w"].params.source == "blob metadata" and f.tensors["b.w"].type == "int4"


def test_inconsistent_companions_are_format_errors(tmp_path, weights):
    q, s, b = quantize(weights, "affine", 4, 64)
    bad = {"w": q, "w.scale": s, "w.bias": b[..., :2]}
    with pytest.raises(FormatError):
        from_bytes(mlx_blob(tmp_path, bad, {"quant_type": "int4", "group_size": "64"}))
    with pytest.raises(FormatError):
        from_bytes(mlx_blob(tmp_path, blob_tensors("w", (q, s, b)), {"quant_type": "int4", "group_size": "32"}))
    with pytest.raises(FormatError):
        from_bytes(mlx_blob(tmp_path, blob_tensors("w", (q, s, b)), {"quant_type": "q9", "group_size": "64"}))


def test_pack_and_unpack_are_inverse():
    rng = np.random.default_rng(0)
    for bits in (1, 2, 3, 4, 5, 6, 8):
        codes = rng.integers(0, 2**bits, (3, 64), dtype=np.uint8)
        assert np.array_equal(mq.unpack_codes(mq.pack_codes(codes, bits), bits), codes)
    assert list(mq.unpack_codes(np.array([0x76543210], np.uint32), 4)) == list(range(8))
    assert list(mq.unpack_codes(np.array([0x03020100], np.uint32), 8)) == [0, 1, 2, 3]
