"""``validate --profile ggml`` refuses a hyperparameter array llama.cpp's ``get_key_or_arr`` refuses: one entry per
layer for the per-layer ones, four sections for the multi-section rope of the architectures that read it;
checked against llama.cpp itself (``key ... has wrong array length``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import gguf_construct as gc
from tests.planning.tiny_hybrid import HYBRID_BUILDERS
from tests.validation.test_arch_tensors import llama_cpp_loads


def _with(arch: str, key: str, values: list[int], tmp_path: Path) -> Path:
    """A tiny model of ``arch`` with ``key`` set to ``values`` (as the builder typed it), saved."""
    path = tmp_path / f"{arch}.gguf"
    HYBRID_BUILDERS[arch]().save(path, keep_valid=False)
    f = gc.load(path, strict=False)
    out = gc.new()
    for k in f.metadata:
        if k == key:
            out.metadata.set(k, np.asarray(values, dtype=np.asarray(f.metadata[k]).dtype), type=f.metadata.type_of(k))
        else:
            out.metadata.set(k, f.metadata[k], type=f.metadata.type_of(k))
    for t in f.tensors.values():
        out.tensors.add(t.name, t.data, t.type.name, t.shape)
    edited = tmp_path / f"{arch}-edited.gguf"
    out.save(edited, keep_valid=False)
    return edited


def issues(path: Path, profile: str = "ggml") -> list[str]:
    return [i.message for i in gc.validate(path, profile) if i.rule == "key.array_length"]


def test_a_per_layer_array_one_short_is_refused_as_llama_cpp_refuses_it(tmp_path):
    original = tmp_path / "jamba-original.gguf"
    HYBRID_BUILDERS["jamba"]().save(original, keep_valid=False)
    f = gc.load(original, strict=False)
    n_layer, heads = f.metadata["jamba.block_count"], list(f.metadata["jamba.attention.head_count_kv"])
    assert len(heads) == n_layer and issues(original) == [] and llama_cpp_loads(original)
    path = _with("jamba", "jamba.attention.head_count_kv", heads[:-1], tmp_path)
    assert issues(path) == [
        f"jamba.attention.head_count_kv has {n_layer - 1} entries, llama.cpp's loader expects {n_layer} (the block count)"
    ]
    assert issues(path, "spec") == []  # the spec knows nothing of llama.cpp's loader
    assert not llama_cpp_loads(path)


@pytest.mark.parametrize(("sections", "refused"), [([4, 2, 2, 0], False), ([4, 2, 2], True)])
def test_three_rope_sections_are_refused_where_llama_cpp_reads_four(sections, refused, tmp_path):
    path = _with("qwen35", "qwen35.rope.dimension_sections", sections, tmp_path)
    assert bool(issues(path)) == refused
    assert llama_cpp_loads(path) != refused
