"""A file tensor llama.cpp's loader never creates for the architecture: llama.cpp refuses the file ("wrong number of
tensors"), and so does the plan, case by case against llama.cpp; tensors it may create (optional ones, weight
scales) are planned as it loads them."""

from __future__ import annotations

import numpy as np
import pytest

from gguf_construct.planning import PlanError, plan
from tests.tiny_models import llama, qwen2, qwen3, qwen3moe

pytest.importorskip("llama_cpp")

N_EMBD = 256
CASES = {
    "a layer tensor llama never loads": ("blk.0.attn_gate.weight", (N_EMBD, N_EMBD), True),
    "a block past the block count": ("blk.2.attn_norm.weight", (N_EMBD,), True),
    "a zero-padded block number": ("blk.01.attn_norm.weight", (N_EMBD,), True),
    "a model tensor llama never loads": ("mystery.weight", (8,), True),
    "rope frequencies": ("rope_freqs.weight", (32,), False),
    "an optional output bias": ("blk.1.attn_output.bias", (N_EMBD,), False),
    "a weight scale": ("blk.0.attn_q.scale", (1,), False),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_tensor_the_loader_never_creates_is_refused_as_llama_cpp_refuses_it(case, tmp_path):
    from tests.llama_memory import measure

    name, shape, refused = CASES[case]
    f = llama(n_layer=2, n_embd=N_EMBD)
    f.tensors.add(name, np.ones(shape[::-1], dtype=np.float32))
    path = tmp_path / "m.gguf"
    f.save(path, keep_valid=False)
    try:
        measure(path, n_ctx=256)
        llama_cpp_refused = False
    except RuntimeError as e:
        assert "wrong number of tensors" in str(e), str(e)[-500:]
        llama_cpp_refused = True
    assert llama_cpp_refused == refused
    if refused:
        with pytest.raises(PlanError, match="never creates") as e:
            plan(path, n_ctx=256)
        assert e.value.rule == "plan.model" and name in str(e.value)
    else:
        assert plan(path, n_ctx=256).total_bytes


OTHERS = {
    "qwen3 rerank head": (lambda: qwen3(n_layer=2), "cls.output.weight", (N_EMBD, 1), False),
    "qwen3 key-norm scale-like name": (lambda: qwen3(n_layer=2), "blk.0.attn_k_norm.scale", (1,), True),
    "qwen3 output-projection bias": (lambda: qwen3(n_layer=2), "blk.1.attn_output.bias", (N_EMBD,), True),
    "qwen3moe expert scale": (lambda: qwen3moe(n_layer=2), "blk.0.ffn_up_exps.scale", (8,), False),
    "qwen3moe dense ffn": (lambda: qwen3moe(n_layer=2), "blk.0.ffn_up.weight", (N_EMBD, 64), True),
}


@pytest.mark.parametrize("case", sorted(OTHERS))
def test_the_qwen3_loaders_tensors_are_llama_cpps(case, tmp_path):
    from tests.llama_memory import measure

    build, name, shape, refused = OTHERS[case]
    f = build()
    f.tensors.add(name, np.ones(shape[::-1], dtype=np.float32))
    path = tmp_path / "m.gguf"
    f.save(path, keep_valid=False)
    try:
        measure(path, n_ctx=256)
        llama_cpp_refused = False
    except RuntimeError as e:
        assert "wrong number of tensors" in str(e), str(e)[-500:]
        llama_cpp_refused = True
    assert llama_cpp_refused == refused
    if refused:
        with pytest.raises(PlanError, match="never creates"):
            plan(path, n_ctx=256)
    else:
        assert plan(path, n_ctx=256).total_bytes


def test_an_architecture_whose_loaded_tensors_are_not_listed_is_planned_whatever_it_adds(tmp_path):
    f = qwen2(n_layer=2)
    f.tensors.add("mystery.weight", np.ones(8, dtype=np.float32))
    f.save(tmp_path / "q.gguf", keep_valid=False)
    assert plan(tmp_path / "q.gguf", n_ctx=256).total_bytes
