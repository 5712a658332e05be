"""The compute buffer of mixture-of-experts models (qwen3moe, qwen2moe with its gated shared expert, gpt-oss
with its sliding-window layers and expert biases, llama with experts as Mixtral is), planned from the GGUF header
and measured by llama.cpp: the same bytes, with and without flash attention, several batch sizes, sequences and
cache types."""

from __future__ import annotations

import pytest

pytest.importorskip("llama_cpp")

from gguf_construct.planning.compute import Batch  # noqa: E402
from tests.planning.compute_check import graph_summaries, planned_and_measured  # noqa: E402
from tests.tiny_models import glm4moe, gpt_oss, llama, qwen2moe, qwen3moe  # noqa: E402

SETTINGS = [
    dict(n_ctx=512),
    dict(n_ctx=1024, n_ubatch=128),
    dict(n_ctx=600, n_seq_max=3),
    dict(n_ctx=512, flash_attn="off"),
    dict(n_ctx=2048, n_batch=1024, type_k="q8_0", type_v="q8_0"),
    dict(n_ctx=512, n_seq_max=2, kv_unified=True),
    dict(n_ctx=1024, n_seq_max=2, swa_full=True),
]
VARIANTS = {
    "default": {},
    "qwen2moe": dict(builder=qwen2moe),
    "qwen2moe q4_0, 3 of 6": dict(builder=qwen2moe, n_layer=3, n_expert=6, n_expert_used=3, n_ff_shexp=192, wtype="q4_0"),
    "llama with 4 experts": dict(builder=llama, n_expert=4, n_expert_used=2, n_ff=256),
    "gpt-oss": dict(builder=gpt_oss),
    "glm4moe": dict(builder=glm4moe),
    "glm4moe with a next-token-prediction block, q4_0": dict(builder=glm4moe, n_layer=4, n_nextn=1, wtype="q4_0"),
    "gpt-oss q4_0, window 300, 3 layers": dict(builder=gpt_oss, n_layer=3, sliding_window=300, n_expert=4, wtype="q4_0"),
    "llama with 8 experts, f32": dict(builder=llama, n_layer=3, n_expert=8, n_expert_used=2, n_ff=128, n_head_kv=2, wtype="f32"),
    "one expert of 16, wider heads": dict(n_expert=16, n_expert_used=1, n_ff_exp=96, head_dim=128, n_head=2, n_head_kv=1, wtype="q4_0"),
    "every expert used": dict(n_expert=2, n_expert_used=2),
    "four of 4, 3 layers": dict(n_layer=3, n_expert=4, n_expert_used=4, n_embd=128, n_vocab=500, wtype="f32"),
}


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("moe")
    out = {}
    for name, kw in VARIANTS.items():
        kw = dict(kw)
        out[name] = tmp / f"{len(out)}.gguf"
        kw.pop("builder", qwen3moe)(**kw).save(out[name])
    return out


@pytest.mark.parametrize("settings", SETTINGS, ids=lambda s: "-".join(f"{k}={v}" for k, v in s.items()))
@pytest.mark.parametrize("variant", ["default", "gpt-oss"])
def test_compute_buffer_is_llama_cpps(variant, settings, models):
    planned, measured = planned_and_measured(models[variant], **settings)
    assert planned == measured


@pytest.mark.parametrize("variant", [v for v in VARIANTS if v != "default"])
@pytest.mark.parametrize("flash_attn", ["on", "off"])
def test_other_expert_counts_and_sizes(variant, flash_attn, models):
    planned, measured = planned_and_measured(models[variant], n_ctx=768, n_ubatch=256, n_seq_max=2, flash_attn=flash_attn)
    assert planned == measured


@pytest.mark.parametrize("variant", ["default", "qwen2moe", "llama with 4 experts", "gpt-oss", "glm4moe"])
@pytest.mark.parametrize("flash_attn", ["on", "off"])
def test_graph_is_llama_cpps_node_for_node(variant, flash_attn, models):
    planned, ref = graph_summaries(models[variant], Batch(16, 2, 16), n_ctx=256, n_seq_max=2, flash_attn=flash_attn)
    assert planned == ref


def test_next_token_prediction_blocks_have_no_cache_and_no_graph(models):
    """glm4moe's last nextn_predict_layers blocks are loaded (their bytes are in the model buffer) but llama.cpp
    neither caches nor computes them: the whole plan equals llama.cpp's breakdown."""
    from gguf_construct.planning import plan
    from tests.llama_memory import measure

    path = models["glm4moe with a next-token-prediction block, q4_0"]
    for settings in (dict(n_ctx=1024, n_seq_max=2), dict(n_ctx=2048, flash_attn="off")):
        p, m = plan(path, **settings), measure(path, **settings)
        assert (p.model_bytes, p.kv_bytes, p.compute_bytes) == (m.total("model"), m.total("context"), m.total("compute"))
        assert len(p.kv_layers) == 3


@pytest.mark.parametrize("type_v", ["f16", "q8_0"])
def test_every_expert_used_with_a_quantized_v_cache(type_v, models):
    """All experts chosen (the top-k view covers the whole argsort) and the V rotation of a quantized cache: the
    buffer's peak then depends on the clamp of the weight sum being computed in place."""
    planned, measured = planned_and_measured(models["every expert used"], n_ctx=4096, n_ubatch=1024, n_batch=1024, type_v=type_v)
    assert planned == measured
