"""The compute buffer of llama.cpp's hybrid architectures (jamba, granitehybrid, lfm2, lfm2moe, qwen3next,
qwen35, qwen35moe, falcon-h1, nemotron_h, nemotron_h_moe, plamo2), planned from the GGUF header
and measured by llama.cpp itself: the same bytes across batch sizes, contexts, 1 to 4 sequences, cache types and
flash attention on or off; and the same graph, node for node."""

from __future__ import annotations

import pytest

pytest.importorskip("llama_cpp")

from gguf_construct.api.gguf_file import load_gguf  # noqa: E402
from gguf_construct.planning.compute import Batch, build_graph, compute_bytes  # noqa: E402
from gguf_construct.planning.context import ContextRequest, resolve  # noqa: E402
from gguf_construct.planning.shape import ModelShape  # noqa: E402
from tests.llama_memory import measure  # noqa: E402
from tests.planning.llama_cgraph import reserved_graph  # noqa: E402
from tests.planning.tiny_hybrid import HYBRID_BUILDERS  # noqa: E402

ARCHS = [
    "jamba",
    "granitehybrid",
    "lfm2",
    "lfm2moe",
    "qwen3next",
    "qwen35",
    "qwen35moe",
    "falcon-h1",
    "nemotron_h",
    "nemotron_h_moe",
    "plamo2",
]
SETTINGS = [
    dict(n_ctx=512),
    dict(n_ctx=1024, n_ubatch=128),
    dict(n_ctx=600, n_seq_max=3),
    dict(n_ctx=256, n_seq_max=4, n_ubatch=64, type_k="q8_0", type_v="q8_0"),
    dict(n_ctx=2048, n_batch=1024, n_ubatch=1024, flash_attn="off"),
    dict(n_ctx=512, n_seq_max=2, kv_unified=True),
]
# other layer patterns, sizes and weight types than the builders' defaults (granitehybrid also with experts)
VARIANTS = {  # name: (architecture, builder arguments)
    "jamba": ("jamba", dict(n_layer=5, attention=(0, 3), expert_layers=(1, 3), n_embd=256, n_head=8, n_vocab=300, wtype="q4_0")),
    "granitehybrid": ("granitehybrid", dict(n_layer=3, attention=(2,), n_group=2, head_dim=64, scales=False, n_vocab=300, wtype="q8_0")),
    "granitehybrid-moe": (
        "granitehybrid",
        dict(n_layer=3, attention=(1,), n_expert=8, n_expert_used=3, n_ff=64, n_ff_shexp=192, wtype="q4_0"),
    ),
    "lfm2": ("lfm2", dict(n_layer=5, attention=(0, 4), l_cache=4, n_embd=256, n_head=4, n_head_kv=4, n_vocab=300, wtype="q4_0")),
    "lfm2moe": ("lfm2moe", dict(n_layer=5, attention=(2,), n_dense_lead=2, n_expert=8, n_expert_used=3, gating_func=1, wtype="q8_0")),
    "qwen35": ("qwen35", dict(n_layer=6, full_attention_interval=3, n_k_heads=4, n_v_heads=4, head_k_dim=64, n_vocab=300, wtype="q4_0")),
    "qwen35moe": ("qwen35moe", dict(n_layer=4, n_k_heads=1, n_v_heads=4, n_expert=8, n_expert_used=4, wtype="q8_0")),
    "falcon-h1": (
        "falcon-h1",
        dict(n_layer=3, n_embd=256, head_dim=64, n_head=8, n_head_kv=2, d_inner=256, ssm_head_dim=64, n_group=2, wtype="q4_0"),
    ),
    "nemotron_h": ("nemotron_h", dict(n_layer=6, attention=(0, 3), mlp=(2, 5), n_group=1, head_dim=64, n_vocab=300, wtype="q8_0")),
    "nemotron_h_moe": ("nemotron_h_moe", dict(n_layer=4, attention=(1,), mlp=(0, 3), n_expert=8, n_expert_used=3, n_ff=64, wtype="q4_0")),
    "plamo2": (
        "plamo2",
        dict(n_layer=3, attention=(0,), n_embd=256, n_ff=512, head_dim=64, d_inner=512, n_ssm_head=16, n_vocab=300, wtype="q4_0"),
    ),
    "qwen3next": (
        "qwen3next",
        dict(n_layer=6, full_attention_interval=3, n_k_heads=4, n_v_heads=4, head_k_dim=64, n_expert=8, n_vocab=300, wtype="q8_0"),
    ),
}


def _shape(path) -> ModelShape:
    return ModelShape.of(load_gguf(path, strict=False))  # hybrids' per-layer head_count_kv: see tiny_hybrid


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    out = {}
    tmp = tmp_path_factory.mktemp("hybrid")
    for name, (arch, kw) in [(arch, (arch, {})) for arch in ARCHS] + [(f"{v}-variant", spec) for v, spec in VARIANTS.items()]:
        out[name] = tmp / f"{name}.gguf"
        HYBRID_BUILDERS[arch](**kw).save(out[name], keep_valid=False)
    return out


def _planned_and_measured(path, **settings) -> tuple[int, int]:
    shape = _shape(path)
    return compute_bytes(shape, resolve(shape, ContextRequest(**settings))), measure(path, **settings).total("compute")


@pytest.mark.parametrize("settings", SETTINGS, ids=lambda s: "-".join(f"{k}={v}" for k, v in s.items()))
@pytest.mark.parametrize("arch", ARCHS)
def test_compute_buffer_is_llama_cpps(arch, settings, models):
    planned, measured = _planned_and_measured(models[arch], **settings)
    assert planned == measured


@pytest.mark.parametrize("settings", SETTINGS[:3], ids=lambda s: "-".join(f"{k}={v}" for k, v in s.items()))
@pytest.mark.parametrize("name", [f"{v}-variant" for v in VARIANTS])
def test_other_layer_patterns_sizes_and_weight_types(name, settings, models):
    planned, measured = _planned_and_measured(models[name], **settings)
    assert planned == measured


@pytest.mark.parametrize("name", ARCHS + [f"{v}-variant" for v in VARIANTS])
def test_graph_is_llama_cpps_node_for_node(name, models):
    """Two sequences of 8 tokens: every node's op, type, shape, view-ness and output flag as in llama.cpp's reserved
    graph."""
    shape = _shape(models[name])
    settings = dict(n_ctx=256, n_seq_max=2)
    planned = build_graph(shape, resolve(shape, ContextRequest(**settings)), Batch(16, 2, 16))
    ref = reserved_graph(models[name], n_tokens=16, n_seqs=2, n_outputs=16, **settings)
    assert planned.summary() == ref.summary()
    assert [t.output for t in planned.nodes] == [t.output for t in ref.nodes]  # outputs are never freed
