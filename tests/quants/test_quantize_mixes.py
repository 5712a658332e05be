"""llama-quantize's mixes (Q4_K_M, Q3_K_S, IQ4_XS...): our per-tensor type choices against llama.cpp's own,
through llama-cpp-python's ``llama_model_quantize`` on tiny llama models; and the rules' shape without it."""

from __future__ import annotations

import pytest
from tiny_llama import llama_model

from gguf_construct.api.gguf_file import load_gguf
from gguf_construct.quants.quantize import policy

#: (n_layer, n_head, n_head_kv): 16 layers make n/8 and n/16 differ; 4 heads per KV head turn on the n_gqa() >= 4 rules
MODELS = [(16, 4, 4), (8, 4, 1)]
#: (mix, model) pairs llama.cpp quantizes without an importance matrix (the other mixes need one for some tensors):
#: every K-quant mix on the 16-layer model, and the mixes with n_gqa rules on the grouped one
CASES = [
    (mix, MODELS[0]) for mix in ("Q2_K", "Q3_K_S", "Q3_K_M", "Q3_K_L", "Q4_K_S", "Q4_K_M", "Q5_K_S", "Q5_K_M", "Q6_K", "IQ4_XS", "IQ3_M")
] + [(mix, MODELS[1]) for mix in ("Q2_K", "Q4_K_M", "IQ4_NL", "IQ3_S")]


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("mixes")
    out = {}
    for n_layer, n_head, n_head_kv in MODELS:
        path = d / f"m{n_layer}-{n_head_kv}.gguf"
        llama_model(n_layer=n_layer, n_embd=256, n_ff=256, n_head=n_head, n_head_kv=n_head_kv).save(path)
        out[(n_layer, n_head, n_head_kv)] = path
    return out


def ours(path, mix: str) -> dict[str, str]:
    f = load_gguf(path)
    shapes = [(n, tuple(int(x) for x in f.tensors[n].shape)) for n in f.tensors]
    chosen = policy.plan(shapes, mix, policy.ModelFacts.from_metadata(f.metadata))
    return {n: t or f.tensors[n].type.name for n, t in chosen.items()}


@pytest.mark.parametrize(("mix", "model"), CASES, ids=[f"{m}-{n}layers-gqa{h // kv}" for m, (n, h, kv) in CASES])
def test_mix_types_match_llama_cpp(mix, model, models, tmp_path):
    llama_cpp = pytest.importorskip("llama_cpp", reason="llama-cpp-python is the oracle for llama-quantize's choices")
    src = models[model]
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = policy.file_type_of(mix)
    params.nthread = 1
    out = tmp_path / "q.gguf"
    assert llama_cpp.llama_model_quantize(str(src).encode(), str(out).encode(), params) == 0
    theirs = load_gguf(out)
    got = {n: theirs.tensors[n].type.name for n in theirs.tensors}
    assert ours(src, mix) == got
    assert theirs.metadata["general.file_type"] == policy.file_type_of(mix)
    assert theirs.metadata["general.quantization_version"] == policy.quantization_version()


def test_mix_names_and_rules():
    """Every mix has a llama_ftype and a default type; Q4_K_M gives more bits to the layers use_more_bits names."""
    mixes = policy.mixes()
    assert mixes["Q4_K"] == mixes["Q4_K_M"] and mixes["Q4_K_M"].default_type == "q4_K"
    assert policy.file_type_of("Q4_K_M") == 15 and policy.file_type_of("Q2_K") == 10 and policy.file_type_of("IQ2_M") == 29
    assert not policy.is_mix("q4_K")  # the ggml type's own spelling is the plain type
    names = [f"blk.{i}.{k}.weight" for i in range(8) for k in ("attn_v", "ffn_down", "attn_q")] + ["output.weight", "token_embd.weight"]
    chosen = policy.plan([(n, (256, 256)) for n in names], "Q4_K_M", policy.ModelFacts("llama", 8, 4, 4, 0))
    more = {i for i in range(8) if chosen[f"blk.{i}.ffn_down.weight"] == "q6_K"}
    assert more == {0, 3, 6, 7}  # i < 1, i >= 7, (i - 1) % 3 == 2
    assert {chosen[f"blk.{i}.attn_q.weight"] for i in range(8)} == {"q4_K"}
    assert chosen["output.weight"] == "q6_K" and chosen["token_embd.weight"] == "q4_K"
