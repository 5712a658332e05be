"""The compute buffer of deepseek2, planned from the GGUF header and measured by llama.cpp: multi-head latent
attention over a K-only cache (and the older layout with a K/V cache), dense lead layers, routed and shared
experts, expert groups, with and without flash attention."""

from __future__ import annotations

import pytest

pytest.importorskip("llama_cpp")

from gguf_construct.planning.compute import Batch  # noqa: E402
from tests.planning.compute_check import graph_summaries, planned_and_measured  # noqa: E402
from tests.tiny_models import deepseek2  # noqa: E402

SETTINGS = [
    dict(n_ctx=512),
    dict(n_ctx=1024, n_ubatch=128),
    dict(n_ctx=600, n_seq_max=3),
    dict(n_ctx=512, flash_attn="off"),
    dict(n_ctx=2048, n_batch=1024, type_k="q8_0", type_v="q8_0"),
]
VARIANTS = {
    "mla": {},
    "older kv_b layout": dict(mla=False),
    "q lora, no dense lead, bias, sigmoid": dict(q_lora_rank=64, n_layer=3, n_layer_dense_lead=0, probs_bias=True, gating_func=2),
    "expert groups": dict(expert_groups=(4, 2), n_layer=3, wtype="q8_0"),
}


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("mla")
    out = {}
    for name, kw in VARIANTS.items():
        out[name] = tmp / f"{len(out)}.gguf"
        deepseek2(**kw).save(out[name])
    return out


@pytest.mark.parametrize("settings", SETTINGS, ids=lambda s: "-".join(f"{k}={v}" for k, v in s.items()))
@pytest.mark.parametrize("variant", ["mla", "older kv_b layout"])
def test_compute_buffer_is_llama_cpps(variant, settings, models):
    planned, measured = planned_and_measured(models[variant], **settings)
    assert planned == measured


@pytest.mark.parametrize("variant", list(VARIANTS)[2:])
@pytest.mark.parametrize("flash_attn", ["on", "off"])
def test_routing_variants(variant, flash_attn, models):
    planned, measured = planned_and_measured(models[variant], n_ctx=768, n_ubatch=256, n_seq_max=2, flash_attn=flash_attn)
    assert planned == measured


@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize("flash_attn", ["on", "off"])
def test_graph_is_llama_cpps_node_for_node(variant, flash_attn, models):
    planned, ref = graph_summaries(models[variant], Batch(16, 2, 16), n_ctx=256, n_seq_max=2, flash_attn=flash_attn)
    assert planned == ref
