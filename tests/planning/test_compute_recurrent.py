"""The compute buffer of llama.cpp's recurrent architectures (mamba, mamba2, rwkv6, rwkv7), planned from the GGUF header
and measured by llama.cpp itself: the same bytes, across batch sizes, contexts and 1 to 4 sequences."""

from __future__ import annotations

import pytest

pytest.importorskip("llama_cpp")

from gguf_construct.planning.compute import Batch  # noqa: E402
from tests.planning.compute_check import graph_summaries, planned_and_measured  # noqa: E402
from tests.tiny_models import BUILDERS  # noqa: E402

SETTINGS = [
    dict(n_ctx=512),
    dict(n_ctx=1024, n_ubatch=128),
    dict(n_ctx=600, n_seq_max=3),
    dict(n_ctx=256, n_seq_max=4, n_ubatch=64),
    dict(n_ctx=2048, n_batch=1024, n_ubatch=1024, flash_attn="off"),
]
# other sizes and weight types than the builders' defaults
VARIANTS = {
    "mamba": dict(n_layer=3, n_embd=64, d_state=8, d_conv=3, dt_rank=4, n_vocab=300, wtype="q8_0"),
    "mamba2": dict(n_layer=3, n_embd=256, d_state=64, head_dim=64, n_group=1, n_vocab=300, wtype="q4_0"),
    "rwkv6": dict(n_layer=3, n_embd=96, head_size=16, n_ff=320, time_mix_extra_dim=16, n_vocab=300, wtype="f32"),
    "rwkv7": dict(n_layer=3, n_embd=192, head_size=64, n_ff=384, gate_lora_rank=32, n_vocab=300, wtype="q4_0"),
}


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    out = {}
    tmp = tmp_path_factory.mktemp("recurrent")
    for arch, variant in VARIANTS.items():
        for name, kw in ((arch, {}), (f"{arch}-variant", variant)):
            out[name] = tmp / f"{name}.gguf"
            BUILDERS[arch](**kw).save(out[name])
    return out


@pytest.mark.parametrize("settings", SETTINGS, ids=lambda s: "-".join(f"{k}={v}" for k, v in s.items()))
@pytest.mark.parametrize("arch", list(VARIANTS))
def test_compute_buffer_is_llama_cpps(arch, settings, models):
    planned, measured = planned_and_measured(models[arch], **settings)
    assert planned == measured


@pytest.mark.parametrize("name", [f"{a}-variant" for a in VARIANTS])
def test_other_sizes_and_weight_types(name, models):
    settings = dict(n_ctx=512, n_seq_max=2, n_ubatch=256)
    planned, measured = planned_and_measured(models[name], **settings)
    assert planned == measured


@pytest.mark.parametrize("arch", list(VARIANTS))
def test_graph_is_llama_cpps_node_for_node(arch, models):
    """Two sequences of 8 tokens: every node's op, type, shape and view-ness as in llama.cpp's reserved graph."""
    planned, ref = graph_summaries(models[arch], Batch(16, 2, 16), n_ctx=256, n_seq_max=2)
    assert planned == ref
