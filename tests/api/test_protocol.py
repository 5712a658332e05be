"""The common file protocol (``api.protocol``): every file class is a ``ModelFile``, every tensor a ``Tensor``
and every ``tensor.type`` a ``TensorType``, checked statically (mypy over a snippet, with the lines that must
be rejected) and at runtime on real files of every format, local and remote."""

from __future__ import annotations

import math
import pickle
import re
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pytest
from conftest import ROOT, corpus_file
from http_testserver import TestServer

import gguf_construct as gc
from gguf_construct.api.legacy_file import LegacyFile, LegacyTensorType
from gguf_construct.api.ollama_model import OllamaModel, manifest_path
from gguf_construct.api.openers.over_source import RemoteSafetensorsFile
from gguf_construct.api.protocol import ModelFile, NamedType, Tensor, TensorType
from gguf_construct.api.safetensors_file import OllamaQuantType, QuantizedTensor, SafetensorsDType, SafetensorsFile
from gguf_construct.api.shard_set import ShardedGGUF, split
from gguf_construct.convert import convert
from gguf_construct.core.tables import GGMLType
from gguf_construct.data import example_path
from gguf_construct.errors import UnknownFormatError
from gguf_construct.quants.quantize import quantize
from gguf_construct.sources import configure

# -- static: mypy over a snippet ------------------------------------------------------------------------------
SNIPPET = """
from gguf_construct import load
from gguf_construct.api.gguf_file import GGUFFile
from gguf_construct.api.legacy_file import LegacyFile, LegacyTensor, LegacyTensorType
from gguf_construct.api.ollama_model import OllamaModel
from gguf_construct.api.protocol import ModelFile, Tensor, TensorType
from gguf_construct.api.safetensors_file import OllamaQuantType, QuantizedTensor, SafetensorsDType, SafetensorsFile, SafetensorsTensor
from gguf_construct.api.shard_set import ShardedGGUF
from gguf_construct.api.tensors import TensorInfo
from gguf_construct.api.openers.over_source import RemoteSafetensorsFile
from gguf_construct.core.tables import GGMLType


def files(a: GGUFFile, b: ShardedGGUF, c: LegacyFile, d: SafetensorsFile, e: RemoteSafetensorsFile, f: OllamaModel) -> list[ModelFile]:
    return [a, b, c, d, e, f]


def tensors(a: TensorInfo, b: LegacyTensor, c: SafetensorsTensor, d: QuantizedTensor) -> list[Tensor]:
    return [a, b, c, d]


def types(a: GGMLType, b: LegacyTensorType, c: SafetensorsDType, d: OllamaQuantType) -> list[TensorType]:
    return [a, b, c, d]


def loads() -> str:
    g: GGUFFile = load("m.gguf", format="gguf")
    s: SafetensorsFile = load("m.safetensors", format="safetensors")
    legacy: LegacyFile = load("m.bin", format="ggjt", profile="ggml")
    o: OllamaModel = load("manifest", format="ollama")
    any_file: ModelFile = load("m", byte_order="big")
    return f"{g.version}{s.data_offset}{legacy.version}{o.manifest}" + any_file.tensors["w"].type.name


class NotAFile:
    format = "x"


def wrong() -> None:
    g: GGUFFile = load("m")  # E: load() without format= is only known to be a ModelFile
    load("m", format="onnx")  # E: no such format
    load("m", profile="strict")  # E: no such profile
    load("m", byte_order="middle")  # E: no such byte order
    f: ModelFile = NotAFile()  # E: no path, metadata, tensors, close
"""


def test_every_file_class_satisfies_the_protocols_statically(tmp_path):
    """mypy accepts every file, tensor and type class where the protocol is expected, types ``load(format=)`` by
    format, and rejects exactly the lines marked ``# E:`` (so the check can fail)."""
    from mypy import api

    snippet = tmp_path / "snippet.py"
    snippet.write_text(SNIPPET)
    out, err, _ = api.run(
        [str(snippet), "--config-file", str(ROOT / "pyproject.toml"), "--cache-dir", str(ROOT / ".mypy_cache"), "--no-error-summary"]
    )
    errors = {int(m.group(1)) for m in re.finditer(r"^\S*snippet\.py:(\d+): error:", out, re.M)}
    expected = {i for i, line in enumerate(SNIPPET.splitlines(), 1) if "# E:" in line}
    assert len(expected) == 5
    assert errors == expected, out + err


# -- runtime: real files of every format ---------------------------------------------------------------------
def check_file(f: object, fmt: str) -> int:
    """Every protocol member is there and means what the protocol says; returns the tensors checked."""
    assert isinstance(f, ModelFile)
    assert f.format == fmt and isinstance(f.metadata, Mapping)
    assert f.path is None or isinstance(f.path, str)
    for name, t in f.tensors.items():
        assert isinstance(t, Tensor) and t.name == name
        kind = t.type
        assert isinstance(kind, TensorType) and isinstance(kind.name, str) and str(kind) == kind.name
        assert f"{kind}" == kind.name and kind.sized
        assert t.n_elements == math.prod(t.shape)
        assert t.offset is None or t.offset >= 0
        if isinstance(t, QuantizedTensor):  # a block is a group: codes, scale and bias (a global scale is extra)
            stored = sum(e.nbytes for role, e in t.parts.items() if role != "global_scale")
            assert stored == t.n_elements // kind.block_size * kind.type_size
        else:
            assert t.nbytes == len(t.data) == t.n_elements // kind.block_size * kind.type_size
            assert t.data.dtype == np.uint8
        assert t.to_numpy().shape == tuple(reversed(t.shape))
    return len(f.tensors)


def q4_1_gguf(path: Path) -> Path:
    """A GGUF file with a Q4_1 matrix (it converts to Ollama's int4 combined layout) and an F32 vector."""
    f = gc.new()
    f.metadata["general.architecture"] = "llama"
    rng = np.random.default_rng(1)
    f.tensors.add("blk.0.ffn_up.weight", quantize(rng.standard_normal((4, 64)).astype(np.float32), "q4_1"), ggml_type="q4_1", shape=(64, 4))
    f.tensors.add("blk.0.attn_norm.weight", rng.standard_normal(64).astype(np.float32))
    f.save(path)
    return path


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("protocol")
    gguf = q4_1_gguf(tmp / "q.gguf")
    convert(gguf, tmp / "q.safetensors")
    convert(gguf, str(tmp / "models") + "/", model="q:latest")
    shards = split(gc.load(example_path(), format="gguf"), tmp / "ex", max_tensors=1)
    return {"gguf": gguf, "safetensors": tmp / "q.safetensors", "ollama": manifest_path(tmp / "models", "q:latest"), "shard": shards[0]}


def test_gguf_and_shards(files):
    f = gc.load(example_path())
    assert type(f) is gc.GGUFFile and check_file(f, "gguf") > 0
    assert all(type(t.type) is GGMLType for t in f.tensors.values())
    sharded = gc.load(files["shard"])
    assert type(sharded) is ShardedGGUF and check_file(sharded, "gguf") == len(f.tensors)


@pytest.mark.parametrize(
    "rel", ["legacy-real/ggjt-v3/t256-ggjt-v3-Q4_0.bin", "rwkv/tiny-rwkv-5v2-730K-Q5_1.bin", "rwkv/tiny-rwkv-4v0-660K-FP16.bin"]
)
def test_legacy(rel):
    f = gc.load(corpus_file(rel))
    assert type(f) is LegacyFile and check_file(f, f.format) > 0
    for t in f.tensors.values():
        assert type(t.type) is LegacyTensorType
        assert t.type == t.type.name and t.type.layout == t.layout and t.type.id == t.type_id  # still its ggml name


def test_safetensors_and_ollama(files):
    st = gc.load(files["safetensors"], format="safetensors")
    assert type(st) is SafetensorsFile and check_file(st, "safetensors") == 2
    model = gc.load(files["ollama"], format="ollama")
    assert type(model) is OllamaModel and check_file(model, "ollama") == 2
    q = model.tensors["blk.0.ffn_up.weight"]
    assert isinstance(q, QuantizedTensor) and type(q.type) is OllamaQuantType
    assert (q.type, q.type.mode, q.type.bits, q.type.block_size) == ("int4", "affine", 4, q.params.group_size)
    norm = model.tensors["blk.0.attn_norm.weight"]
    assert (
        type(norm.type) is SafetensorsDType
        and norm.type == "F32"
        and (norm.type.block_size, norm.type.type_size, norm.type.bits) == (1, 4, 32)
    )


def test_remote_files(files):
    from tests.sources.test_remote import FAST, serve_models_root

    previous = configure(**FAST)
    try:
        with TestServer() as server:
            for name in ("gguf", "safetensors"):
                server.add(f"/m.{name}", files[name].read_bytes())
            remote = gc.load(server.url("/m.gguf"))
            assert type(remote) is gc.GGUFFile and check_file(remote, "gguf") == 2
            remote_st = gc.load(server.url("/m.safetensors"))
            assert type(remote_st) is RemoteSafetensorsFile and check_file(remote_st, "safetensors") == 2
            model = gc.load(serve_models_root(server, files["ollama"].parents[4], "q:latest"))
            assert type(model) is OllamaModel and check_file(model, "ollama") == 2
            assert all(type(b) is RemoteSafetensorsFile for b in model.blobs.values())
            with pytest.raises(UnknownFormatError, match="is a gguf file, not safetensors") as e:
                gc.load(server.url("/m.gguf"), format="safetensors")
            assert e.value.rule == "format.expected"
    finally:
        configure(previous)


def test_load_format_is_checked_before_loading(files):
    with pytest.raises(UnknownFormatError, match="is a safetensors file, not gguf") as e:
        gc.load(files["safetensors"], format="gguf")
    assert (e.value.rule, e.value.offset) == ("format.expected", 0)
    assert type(gc.load(files["gguf"], format="gguf")) is gc.GGUFFile


def test_objects_missing_members_are_not_model_files():
    class NoTensors:
        format, path, metadata = "x", None, {}

        def close(self) -> None: ...

    assert not isinstance(NoTensors(), ModelFile) and not isinstance({"format": "gguf"}, ModelFile)
    assert not isinstance("F32", TensorType)  # a bare string has no sizes: it is not a tensor type


def test_named_types_are_their_strings():
    """Safetensors dtypes keep comparing, hashing, printing and serialising as the header's strings, with sizes
    from the table (sub-byte dtypes as the smallest whole-byte block); they survive pickling (process pools)."""
    import json

    f4, bf16 = SafetensorsDType.of("F4"), SafetensorsDType.of("BF16")
    assert (f4.block_size, f4.type_size, bf16.block_size, bf16.type_size) == (2, 1, 1, 2)
    assert (SafetensorsDType.of("F6_E2M3").block_size, SafetensorsDType.of("F6_E2M3").type_size) == (4, 3)
    assert bf16 == "BF16" and {"BF16": 1}[bf16] == 1 and json.dumps([bf16]) == '["BF16"]' and repr(bf16) == "SafetensorsDType('BF16')"
    back = pickle.loads(pickle.dumps(bf16))
    assert type(back) is SafetensorsDType and back == "BF16" and (back.bits, back.numpy) == (16, None)
    unknown = SafetensorsDType.of("F128")
    assert not unknown.sized and isinstance(unknown, NamedType) and unknown.nbytes(4) is None
