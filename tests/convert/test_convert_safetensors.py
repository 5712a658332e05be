"""Conversion between Ollama/MLX blobs and GGUF: the lossless mappings (mxfp4 → MXFP4, nvfp4 → NVFP4, int4 →
Q4_1), the per-group checks and their fallbacks, the way back, the CLI, and value verification against MLX's
and ggml's decoders."""

from __future__ import annotations

import mlx.core as mx
import numpy as np
import pytest
from conftest import corpus_file

import gguf_construct as gc
from gguf_construct.api.safetensors_file import from_bytes
from gguf_construct.cli.main import main
from gguf_construct.convert import convert, to_gguf
from gguf_construct.convert import encode as enc
from gguf_construct.errors import VerificationError
from gguf_construct.quants import dequantize
from tests.quants.test_mlx_dequant import blob_tensors, mlx_blob, quantize

RNG = np.random.default_rng(11)
W = RNG.normal(0, 0.05, (6, 256)).astype(np.float32)


def _blob(tmp_path, mode, bits, group, w=W, dtype="BF16", name="blk.w", extra=None, md=None, **kw):
    parts = quantize(w, mode, bits, group, dtype, **kw)
    qt = {("affine", 4): "int4", ("affine", 8): "int8"}.get((mode, bits), mode)
    tensors = {**blob_tensors(name, parts), **(extra or {})}
    path = tmp_path / f"{name}.{mode}{bits}.safetensors"
    path.write_bytes(mlx_blob(tmp_path, tensors, md or {"quant_type": qt, "group_size": str(group)}))
    return path, parts


def _mlx_values(parts, mode, bits, group):
    b = parts[2] if mode == "affine" else None
    s, b = (parts[1].astype(mx.float32), b.astype(mx.float32)) if mode == "affine" else (parts[1], None)
    return np.array(mx.dequantize(parts[0], s, b, group_size=group, bits=bits, mode=mode, dtype=mx.float32))


@pytest.mark.parametrize(
    ("mode", "bits", "group", "ggml_type"),
    [
        ("mxfp4", 4, 32, "mxfp4"),
        ("nvfp4", 4, 16, "nvfp4"),
        ("affine", 4, 32, "q4_1"),
        ("affine", 4, 64, "q4_1"),
        ("affine", 4, 128, "q4_1"),
        ("affine", 8, 64, "f32"),
        ("mxfp8", 8, 32, "bf16"),
    ],
)
@pytest.mark.parametrize("dtype", ["BF16", "F16", "F32"])
def test_blob_to_gguf_lossless_or_exact_fallback(tmp_path, mode, bits, group, ggml_type, dtype):
    src, parts = _blob(tmp_path, mode, bits, group, dtype=dtype)
    out = tmp_path / "out.gguf"
    report = convert(src, out)
    g = gc.load(out)
    t = g.tensors["blk.w"]
    if mode == "affine" and dtype == "F32":
        ggml_type = "f32"  # float32 scales are almost never F16 values: the per-group check sends them to F32
    assert t.type.name == ggml_type, report.notices
    assert t.shape == (256, 6) and report.verified == 1
    # ggml's decoder on the GGUF tensor gives exactly what MLX's decoder gives on the blob
    assert np.array_equal(t.to_numpy(), _mlx_values(parts, mode, bits, group), equal_nan=True)
    assert bool(report.notices) == (ggml_type in ("f32", "bf16"))


def test_int4_with_tiny_scales_falls_back(tmp_path):
    """Scales below F16's normal range lose bits in Q4_1: the converter sees it group by group."""
    src, parts = _blob(tmp_path, "affine", 4, 64, w=W * 1e-5, dtype="F32")
    report = convert(src, tmp_path / "o.gguf")
    t = gc.load(tmp_path / "o.gguf").tensors["blk.w"]
    assert t.type.name in ("bf16", "f32") and "not exact F16" in report.notices[0]
    assert np.array_equal(t.to_numpy(), _mlx_values(parts, "affine", 4, 64))


def test_nvfp4_rows_not_multiple_of_64_and_global_scale_fall_back(tmp_path):
    src, _ = _blob(tmp_path, "nvfp4", 4, 16, w=W[:, :48], name="short")
    report = convert(src, tmp_path / "a.gguf")
    assert gc.load(tmp_path / "a.gguf").tensors["short"].type.name == "bf16" and "64-value" in report.notices[0]
    gs = mx.array(np.float32(0.75))
    src, parts = _blob(tmp_path, "nvfp4", 4, 16, name="g", extra={"g.global_scale": gs})
    report = convert(src, tmp_path / "b.gguf")
    t = gc.load(tmp_path / "b.gguf").tensors["g"]
    assert t.type.name in ("bf16", "f32") and "global scale" in report.notices[0]
    assert np.array_equal(t.to_numpy(), _mlx_values(parts, "nvfp4", 4, 16) * np.float32(0.75))


def test_mxfp4_scale_byte_255_falls_back(tmp_path):
    q, s = quantize(W, "mxfp4", 4, 32)
    s = np.array(s)
    s[0, 0] = 255
    path = tmp_path / "inf.safetensors"
    path.write_bytes(mlx_blob(tmp_path, {"w": q, "w.scale": mx.array(s)}, {"quant_type": "mxfp4", "group_size": "32"}))
    report = convert(path, tmp_path / "o.gguf")
    t = gc.load(tmp_path / "o.gguf").tensors["w"]
    assert t.type.name in ("bf16", "f32") and "255" in report.notices[0]
    want = np.array(mx.dequantize(q, mx.array(s), mode="mxfp4", dtype=mx.float32))
    assert np.array_equal(t.to_numpy(), want, equal_nan=True)


def test_plain_tensors_keep_their_type(tmp_path):
    arrays = {
        "a": mx.arange(12, dtype=mx.float32).reshape(3, 4),
        "b": mx.ones((2, 8), dtype=mx.bfloat16),
        "c": mx.arange(5, dtype=mx.int32),
        "d": mx.arange(4, dtype=mx.uint8),
    }
    path = tmp_path / "plain.safetensors"
    path.write_bytes(mlx_blob(tmp_path, arrays))
    report = convert(path, tmp_path / "p.gguf")
    g = gc.load(tmp_path / "p.gguf")
    assert {n: g.tensors[n].type.name for n in g.tensors} == {"a": "f32", "b": "bf16", "c": "i32", "d": "bf16"}
    assert g.tensors["a"].shape == (4, 3) and len(report.notices) == 1  # U8 has no GGUF type


def test_verification_catches_a_wrong_encoding(tmp_path, monkeypatch):
    src, _ = _blob(tmp_path, "mxfp4", 4, 32)
    original = enc.mxfp4_to_ggml

    def broken(codes, scales):
        blocks = original(codes, scales)
        blocks["qs"][0, 0] ^= 0x11
        return blocks

    monkeypatch.setattr(enc, "mxfp4_to_ggml", broken)
    with pytest.raises(VerificationError):
        to_gguf(from_bytes(src.read_bytes()).tensors)


# -- GGUF → blobs -------------------------------------------------------------------------------------------
def test_gguf_to_safetensors_round_trip_through_mlx(tmp_path):
    src, parts = _blob(tmp_path, "affine", 4, 64)
    convert(src, tmp_path / "m.gguf")
    report = convert(tmp_path / "m.gguf", tmp_path / "back.safetensors")
    assert report.targets == {"blk.w": "int4"} and report.verified == 1
    back = from_bytes((tmp_path / "back.safetensors").read_bytes()).tensors["blk.w"]
    assert (back.params.group_size, back.parts["scale"].dtype) == (64, "F16")  # groups recovered from repeated (d, m)
    loaded = mx.load(str(tmp_path / "back.safetensors"))
    got = mx.dequantize(
        loaded["blk.w"],
        loaded["blk.w.scale"].astype(mx.float32),
        loaded["blk.w.bias"].astype(mx.float32),
        group_size=64,
        bits=4,
        dtype=mx.float32,
    )
    assert np.array_equal(np.array(got), _mlx_values(parts, "affine", 4, 64))


def test_every_ggml_type_to_safetensors_verified(tmp_path):
    src = corpus_file("generated/ggml-writer-all-types.gguf")
    out = tmp_path / "all.safetensors"
    assert main(["convert", str(src), str(out)]) == 0
    f, g = from_bytes(out.read_bytes()), gc.load(src)
    assert set(f.tensors) == set(g.tensors)
    for name in g.tensors:
        assert np.array_equal(f.tensors[name].to_numpy().reshape(-1), g.tensors[name].to_numpy().reshape(-1), equal_nan=True), name
    # the mapped types, decoded by MLX itself
    loaded = mx.load(str(out))
    for name, mode, group in (("blk.24.mxfp4.weight", "mxfp4", 32), ("blk.25.nvfp4.weight", "nvfp4", 16)):
        if f.tensors[name].type == mode:
            got = mx.dequantize(loaded[name], loaded[name + ".scale"], mode=mode, group_size=group, dtype=mx.float32)
            assert np.array_equal(np.array(got), g.tensors[name].to_numpy(), equal_nan=True), name
    assert f.tensors["blk.3.q4_1.weight"].type == "int4" and f.tensors["test.i8_odd"].type == "I8"
    assert f.metadata.get("blk.3.q4_1.weight.quant_type") == "int4"  # mixed types: per-tensor metadata


def test_ggml_block_repacking_is_inverse():
    codes = RNG.integers(0, 16, (4, 128), dtype=np.uint8)
    e = RNG.integers(0, 255, (4, 4), dtype=np.uint8)
    blocks = enc.mxfp4_to_ggml(codes, e)
    packed, scales = enc.ggml_mxfp4_to_mlx(blocks, 4)
    assert np.array_equal(packed, gc.quants.mlx.pack_codes(codes, 4)) and np.array_equal(scales, e)
    d = RNG.integers(0, 0x7F, (4, 8), dtype=np.uint8)
    blocks = enc.nvfp4_to_ggml(codes, d, False)
    packed, scales = enc.ggml_nvfp4_to_mlx(blocks, 4)
    assert np.array_equal(packed, gc.quants.mlx.pack_codes(codes, 4)) and np.array_equal(scales, d)
    vals = dequantize(blocks.view(np.uint8), "nvfp4").reshape(4, 128)
    assert np.array_equal(vals, gc.quants.mlx.dequantize_mlx("nvfp4", gc.quants.mlx.pack_codes(codes, 4), d, bits=4, group_size=16))


def test_cli_convert_kinds_and_exit_codes(tmp_path, capsys):
    src, _ = _blob(tmp_path, "mxfp8", 8, 32)
    assert main(["convert", str(src), str(tmp_path / "o.gguf")]) == 0
    captured = capsys.readouterr()
    assert "notice:" in captured.err and "1 verified" in captured.out
    assert main(["convert", str(src), str(tmp_path / "o.txt")]) == 2
    assert main(["convert", str(tmp_path / "o.gguf"), str(tmp_path / "o2.gguf")]) == 2  # GGUF → GGUF needs an option
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(src.read_bytes()[:40])
    assert main(["convert", str(bad), str(tmp_path / "x.gguf")]) == 1
    assert not (tmp_path / "x.gguf").exists()
