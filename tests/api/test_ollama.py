"""Ollama manifests: paths, parsing, sha256 verification of every blob, the three historical expert-group
layouts opened as one set of tensors, and a manifest converted to GGUF."""

from __future__ import annotations

import json

import mlx.core as mx
import numpy as np
import pytest

import gguf_construct as gc
from gguf_construct.api import ollama_model as ollama
from gguf_construct.convert import convert
from gguf_construct.formats.ollama.schema import MEDIA_JSON, MEDIA_TENSOR, OLLAMA_MANIFEST, parse_manifest
from gguf_construct.formats.safetensors.schema import SAFETENSORS
from gguf_construct.quants.mlx import round_to_bf16
from gguf_construct.validation.ollama_checks import validate_manifest_bytes
from tests.quants.test_mlx_dequant import blob_tensors, quantize

RNG = np.random.default_rng(2)


def mlx_bytes(tmp_path, tensors, metadata=None) -> bytes:
    p = tmp_path / "tmp.safetensors"
    mx.save_safetensors(str(p), tensors, metadata=metadata)
    return p.read_bytes()


def w(*shape):
    return RNG.normal(0, 0.05, shape).astype(np.float32)


def go_blob(name, arr) -> bytes:
    bits = (round_to_bf16(arr).view(np.uint32) >> 16).astype(np.uint16)
    return SAFETENSORS.build({"tensors": {name: {"dtype": "BF16", "shape": list(arr.shape), "data": bits}}, "style": "ollama"})


def test_paths():
    assert ollama.manifest_path("/m", "foo:q4").as_posix() == "/m/manifests/registry.ollama.ai/library/foo/q4"
    assert ollama.manifest_path("/m", "me/bar").as_posix() == "/m/manifests/registry.ollama.ai/me/bar/latest"
    assert ollama.manifest_path("/m", "h.io/me/bar:t").as_posix() == "/m/manifests/h.io/me/bar/t"
    assert ollama.blob_path("/m", "sha256:" + "ab" * 32).as_posix() == "/m/blobs/sha256-" + "ab" * 32
    with pytest.raises(gc.FormatError):
        ollama.blob_path("/m", "sha256:xyz")


def _model(tmp_path, blobs, name="m:latest", config=None):
    root = tmp_path / "models"
    path = ollama.write_model(
        root, name, blobs, config or {"model_format": "safetensors", "file_type": "int4"}, {"config.json": {"architectures": ["X"]}}
    )
    return root, path


def test_manifest_round_trip_and_detection(tmp_path):
    root, path = _model(tmp_path, [("a.weight", go_blob("a.weight", w(4, 8)))])
    data = path.read_bytes()
    m = OLLAMA_MANIFEST.parse(data)
    assert OLLAMA_MANIFEST.build(m) == data and data.endswith(b"}\n")
    assert [x.media_type for x in m.layers] == [MEDIA_TENSOR, MEDIA_JSON]
    assert gc.detect(path) == "ollama"
    assert gc.validate(path) == []
    model = gc.load(path)
    assert model.format == "ollama" and model.metadata["file_type"] == "int4" and model.json_files["config.json"]["architectures"] == ["X"]
    assert list(model.tensors) == ["a.weight"] and model.tensors["a.weight"].to_numpy().shape == (4, 8)


def test_digest_and_size_are_verified(tmp_path):
    root, path = _model(tmp_path, [("a.weight", go_blob("a.weight", w(4, 8)))])
    layer = OLLAMA_MANIFEST.parse(path.read_bytes()).layers[0]
    blob = ollama.blob_path(root, layer.digest)
    data = bytearray(blob.read_bytes())
    data[-1] ^= 1
    blob.write_bytes(bytes(data))
    with pytest.raises(gc.FormatError) as e:
        ollama.open_model(path)
    assert e.value.rule == "blob.digest"
    ollama.open_model(path, verify=False)  # the bytes are still a valid blob
    blob.write_bytes(bytes(data[:-1]))
    with pytest.raises(gc.FormatError) as e:
        ollama.open_model(path)
    assert e.value.rule == "blob.size"
    blob.unlink()
    with pytest.raises(gc.FormatError) as e:
        ollama.open_model(path)
    assert e.value.rule == "blob.missing"


@pytest.mark.parametrize(
    "text",
    [
        b"[]",
        b'{"schemaVersion":1,"layers":[]}',
        b'{"schemaVersion":2}',
        b'{"schemaVersion":2,"config":{"mediaType":"x","digest":"sha256:1","size":1},"layers":[]}',
        b'{"schemaVersion":2,"config":{"mediaType":"x","digest":"sha256:' + b"0" * 64 + b'","size":"1"},"layers":[]}',
        b"{nope",
    ],
)
def test_bad_manifests_are_format_errors(text):
    with pytest.raises(gc.FormatError):
        parse_manifest(text)
    assert validate_manifest_bytes(text)


def test_three_expert_generations_open_as_one_tensor_set(tmp_path):
    e0, e1 = w(2, 64), w(2, 64)
    # Feb 2026: per-expert 2-D tensors, int4 g32, no metadata; the group prefix names the layer
    gen1 = {}
    for i, x in enumerate((e0, e1)):
        gen1.update(blob_tensors(f"model.layers.1.mlp.experts.{i}.down_proj.weight", quantize(x, "affine", 4, 32)))
    # Mar 2026: stacked [E, out, in] as switch_mlp.<proj> (no .weight), blob metadata
    stacked = np.stack([e0, e1])
    gen2 = blob_tensors("model.layers.2.mlp.switch_mlp.down_proj", quantize(stacked, "affine", 4, 64))
    # Jul 2026: {prefix}.{proj}.weight stacked; all projections in one blob named by the prefix
    gen3 = {
        **blob_tensors("model.layers.3.mlp.experts.gate_proj.weight", quantize(stacked, "mxfp4", 4, 32)),
        **blob_tensors("model.layers.3.mlp.experts.up_proj.weight", quantize(stacked, "mxfp4", 4, 32)),
    }
    # and a projection blob of its own type, named by its tensor
    gen3b = blob_tensors("model.layers.3.mlp.experts.down_proj.weight", quantize(stacked, "mxfp8", 8, 32))
    norm = go_blob("model.norm.weight", w(64))
    blobs = [
        ("model.norm.weight", norm),
        ("model.layers.1.mlp.experts", mlx_bytes(tmp_path, gen1)),
        ("model.layers.2.mlp.switch_mlp", mlx_bytes(tmp_path, gen2, {"quant_type": "int4", "group_size": "64"})),
        ("model.layers.3.mlp.experts", mlx_bytes(tmp_path, gen3, {"quant_type": "mxfp4", "group_size": "32"})),
        ("model.layers.3.mlp.experts.down_proj.weight", mlx_bytes(tmp_path, gen3b, {"quant_type": "mxfp8", "group_size": "32"})),
        ("model.norm.weight", norm),  # the same blob twice: loaded once
    ]
    root, path = _model(tmp_path, blobs)
    model = ollama.open_model(path)
    assert len(model.blobs) == 5
    t = model.tensors
    assert sorted(t) == sorted(
        [
            "model.norm.weight",
            "model.layers.1.mlp.experts.0.down_proj.weight",
            "model.layers.1.mlp.experts.1.down_proj.weight",
            "model.layers.2.mlp.switch_mlp.down_proj",
            "model.layers.3.mlp.experts.gate_proj.weight",
            "model.layers.3.mlp.experts.up_proj.weight",
            "model.layers.3.mlp.experts.down_proj.weight",
        ]
    )
    first = t["model.layers.1.mlp.experts.0.down_proj.weight"]
    assert (first.type, first.params.group_size, first.params.source) == ("int4", 32, "shapes")
    assert t["model.layers.2.mlp.switch_mlp.down_proj"].shape == (64, 2, 2)
    assert t["model.layers.3.mlp.experts.down_proj.weight"].type == "mxfp8"
    for name, parts, mode, bits, group in (
        ("model.layers.1.mlp.experts.1.down_proj.weight", quantize(e1, "affine", 4, 32), "affine", 4, 32),
        ("model.layers.3.mlp.experts.up_proj.weight", quantize(stacked, "mxfp4", 4, 32), "mxfp4", 4, 32),
    ):
        b = parts[2] if mode == "affine" else None
        want = mx.dequantize(parts[0], parts[1], b, group_size=group, bits=bits, mode=mode)
        assert np.array_equal(t[name].to_numpy(mlx_rounding=True), np.array(want.astype(mx.float32)))

    out = tmp_path / "model.gguf"
    report = convert(path, out)
    g = gc.load(out)
    assert g.tensors["model.layers.3.mlp.experts.gate_proj.weight"].type.name == "mxfp4"
    assert g.tensors["model.layers.3.mlp.experts.gate_proj.weight"].shape == (64, 2, 2)
    assert report.verified == len(t)


def test_a_tensor_in_two_blobs_is_a_duplicate(tmp_path):
    root, path = _model(tmp_path, [("a", go_blob("a.weight", w(2, 8))), ("b", go_blob("a.weight", w(2, 8)))])
    with pytest.raises(gc.DuplicateError):
        ollama.open_model(path)


def test_gguf_to_ollama_store_and_back(tmp_path):
    src, parts = tmp_path / "s.safetensors", quantize(w(4, 128), "nvfp4", 4, 16)
    src.write_bytes(mlx_bytes(tmp_path, blob_tensors("x.weight", parts), {"quant_type": "nvfp4", "group_size": "16"}))
    convert(src, tmp_path / "x.gguf")
    convert(tmp_path / "x.gguf", f"{tmp_path / 'store'}/", model="x:nv")
    manifest = ollama.manifest_path(tmp_path / "store", "x:nv")
    model = ollama.open_model(manifest)
    (layer,) = model.manifest.tensor_layers
    blob = ollama.blob_path(tmp_path / "store", layer.digest).read_bytes()
    n = int.from_bytes(blob[:8], "little")
    assert n % 8 == 0 and json.loads(blob[8 : 8 + n])["__metadata__"] == {"group_size": "16", "quant_type": "nvfp4"}
    want = np.array(mx.dequantize(parts[0], parts[1], mode="nvfp4", dtype=mx.float32))
    assert np.array_equal(model.tensors["x.weight"].to_numpy(), want)
