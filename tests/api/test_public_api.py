"""The package root names what its functions return: each class ``load`` gives back, ``Plan``; ``validate`` takes
``limits`` as ``load`` does."""

from __future__ import annotations

import numpy as np
import pytest
import tiny_models

import gguf_construct as gc
from gguf_construct.api import ollama_model
from gguf_construct.api.shard_set import split
from gguf_construct.data import example_path
from gguf_construct.formats.safetensors.schema import SAFETENSORS
from gguf_construct.testing.strategies.hostile import ggjt_raw, gguf_raw, kv_str, safetensors_raw


def _safetensors(name: str) -> bytes:
    return SAFETENSORS.build({"tensors": {name: {"dtype": "F32", "shape": [2, 3], "data": np.arange(6, dtype=np.float32)}}})


def test_load_returns_the_classes_the_package_exports(tmp_path):
    st = tmp_path / "a.safetensors"
    st.write_bytes(_safetensors("a"))
    legacy = tmp_path / "a.bin"
    legacy.write_bytes(ggjt_raw(tensors=[(b"a", [1], 0, b"\0" * 4)]))
    shards = split(gc.load(example_path()), tmp_path / "ex", max_tensors=4)
    manifest = ollama_model.write_model(tmp_path / "models", "m:latest", [("a", _safetensors("a"))], {"model_format": "safetensors"})
    loaded = {
        gc.GGUFFile: gc.load(example_path()),
        gc.SafetensorsFile: gc.load(st),
        gc.LegacyFile: gc.load(legacy, strict=False),
        gc.ShardedGGUF: gc.load(shards[0]),
        gc.OllamaModel: gc.load(manifest),
    }
    assert len(shards) > 1
    for cls, f in loaded.items():
        assert type(f) is cls, (cls, type(f))
        f.close()
    assert isinstance(loaded[gc.ShardedGGUF], gc.GGUFFile)  # a split set reads as one GGUF model


def test_plan_returns_a_plan():
    assert isinstance(gc.plan(tiny_models.llama(n_embd=64, n_ff=128), n_ctx=64, features=()), gc.Plan)


def test_validate_takes_limits_for_one_call(tmp_path):
    path = tmp_path / "s.gguf"
    data = gguf_raw([kv_str("general.name", "x" * 100)])
    path.write_bytes(data)
    for source in (path, data):
        assert gc.validate(source) == []
        issues = gc.validate(source, "spec", limits={"string_length": 50})
        assert [i.rule for i in issues] == ["limit.string_length"], issues
        assert gc.validate(source) == []  # the limit held for that call only
    for wrong in ({"no_such_limit": 1}, {"string_length": -1}, {"string_length": True}, {"string_length": 1.5}):
        with pytest.raises(ValueError):
            gc.validate(path, limits=wrong)
    with pytest.raises(TypeError, match="mapping"):
        gc.validate(path, limits=[("string_length", 1)])  # type: ignore[arg-type]


def test_safetensors_raw_header_checks_still_run_under_limits(tmp_path):
    """A limit that is not reached changes nothing: the file's own faults are still reported."""
    data = safetensors_raw('{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}}', b"\0" * 4)
    assert gc.validate(data, limits={"string_length": 1 << 20}) == gc.validate(data) != []
