"""Hybrid models (attention and recurrent layers in one stack: tests/planning/tiny_hybrid.py's) planned from
the header and measured by llama.cpp (``llama_get_memory_breakdown``): the model buffers, the KV cache of the
attention layers and the recurrent state of the recurrent layers, byte for byte, across contexts, sequence counts,
cache types, weight types and mmap; the layers llama.cpp gives a KV cache are the plan's, those with a recurrent
mixer hold the state; at released models' widths in the memory benchmark's settings, the compute buffer too."""

from __future__ import annotations

import re

import pytest

pytest.importorskip("llama_cpp")

from llama_memory import cpu_features, measure  # noqa: E402

from gguf_construct.api.gguf_file import load_gguf  # noqa: E402
from gguf_construct.planning import PlanError, plan  # noqa: E402
from tests.planning.tiny_hybrid import HYBRID_BUILDERS, RELEASED_WIDTHS, jamba, lfm2, qwen3next  # noqa: E402

SETTINGS = [
    dict(n_ctx=64),
    dict(n_ctx=1000, n_ubatch=128, flash_attn="off"),
    dict(n_ctx=700, n_seq_max=3, type_k="q8_0", type_v="q8_0"),
    dict(n_ctx=512, n_seq_max=2, kv_unified=True, type_k="q4_0", type_v="f16"),
    dict(n_ctx=300, use_mmap=False),
    dict(n_ctx=256, flash_attn="off", type_v="q8_0"),  # refused by llama.cpp: a quantized V needs flash attention
]
_KV_LAYER = re.compile(r"llama_kv_cache: layer +(\d+): dev = ")


def _save(tmp_path, arch: str, **kw):
    path = tmp_path / f"{arch}-{kw.get('wtype', 'f16')}.gguf"
    # a per-layer head_count_kv array, as llama.cpp's converters write for hybrids (the validator expects a scalar)
    HYBRID_BUILDERS[arch](**kw).save(path, keep_valid=False)
    return path


def _compare(path, settings):
    features = cpu_features()
    for kw in settings:
        try:
            m = measure(path, **kw)
        except RuntimeError as refused:  # the plan refuses what llama.cpp refuses
            assert "refused the context" in str(refused)
            with pytest.raises(PlanError):
                plan(path, features=features, **kw)
            continue
        p = plan(path, features=features, **kw)
        assert p.context.n_ctx == m.n_ctx, kw
        model = {name: b["model"] for name, b in m.buffers.items() if b["model"]}
        assert dict(p.weights.by_buffer) == model, kw
        assert p.kv_bytes + p.recurrent_bytes == m.total("context"), kw
        attending = [int(n) for n in _KV_LAYER.findall("".join(m.log))]
        assert [layer.layer for layer in p.kv_layers] == attending, kw
        mixers = {
            t.name.split(".")[1]
            for t in load_gguf(path, strict=False).tensors.values()
            if ".ssm_conv1d." in t.name or ".shortconv." in t.name
        }
        assert [layer.layer for layer in p.recurrent_layers] == sorted(int(il) for il in mixers), kw
        assert p.kv_bytes > 0 and p.recurrent_bytes > 0, kw


@pytest.mark.parametrize("arch", HYBRID_BUILDERS)
def test_buffers_match_llama_cpp(arch, tmp_path):
    _compare(_save(tmp_path, arch), SETTINGS)


@pytest.mark.parametrize(
    ("arch", "kw"),
    [
        ("jamba", dict(wtype="q4_0", n_layer=5, attention=(1, 4), expert_layers=(1, 3))),
        ("granitehybrid", dict(wtype="q8_0", n_layer=3, attention=(0,), n_group=2, scales=False)),
        ("lfm2", dict(wtype="q4_K", n_embd=256, n_head=8, attention=(0, 2), l_cache=4)),
        ("qwen3next", dict(wtype="q4_0", n_layer=6, full_attention_interval=3)),
        ("falcon-h1", dict(wtype="q8_0", n_layer=3, d_inner=256, ssm_head_dim=64)),
        ("nemotron_h", dict(wtype="q4_0", n_layer=4, attention=(3,), mlp=(0,))),
        ("plamo2", dict(wtype="q8_0", n_layer=3, attention=(2,), d_state=64)),
        ("lfm2moe", dict(wtype="q4_0", n_layer=3, attention=(0,), n_dense_lead=0)),
        ("qwen35", dict(wtype="q8_0", n_layer=5, full_attention_interval=2)),
        ("nemotron_h_moe", dict(wtype="q8_0", n_layer=3, attention=(0,), mlp=(1,))),
        ("qwen35moe", dict(wtype="q4_0", n_layer=3, full_attention_interval=3)),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_other_layer_patterns_and_weight_types(arch, kw, tmp_path):
    """Other layer patterns (attention first or last, experts in some layers), group counts, windows and weight
    types, repacked for this CPU or not."""
    _compare(_save(tmp_path, arch, **kw), [dict(n_ctx=512, n_seq_max=2), dict(n_ctx=256, use_mmap=False)])


#: the memory benchmark's settings (benchmarks/bench_plan.py)
BENCH_SETTINGS = [
    dict(n_ctx=4096),
    dict(n_ctx=4096, flash_attn="off"),
    dict(n_ctx=8192, n_ubatch=2048, n_batch=2048, type_k="q8_0", type_v="q8_0"),
    dict(n_ctx=16384, n_seq_max=4, n_ubatch=256),
]


@pytest.mark.parametrize("name", RELEASED_WIDTHS)
def test_real_widths_are_exact_in_the_benchmark_settings(name, tmp_path):
    """Weights, KV cache, recurrent state and the compute buffer, byte for byte, at released models' widths."""
    path = tmp_path / "model.gguf"
    RELEASED_WIDTHS[name]().save(path, keep_valid=False)
    features = cpu_features()
    for kw in BENCH_SETTINGS:
        p, m = plan(path, features=features, **kw), measure(path, **kw)
        assert (p.model_bytes, p.kv_bytes + p.recurrent_bytes, p.compute_bytes) == (
            m.total("model"),
            m.total("context"),
            m.total("compute"),
        ), kw


EDGES = {
    "jamba, no attention layer": lambda: jamba(attention=()),
    "jamba, no Mamba layer": lambda: jamba(attention=(0, 1, 2, 3)),
    "lfm2, no attention layer": lambda: lfm2(attention=()),
    "qwen3next, every layer attends": lambda: qwen3next(full_attention_interval=1),
    "qwen3next, no attention layer (an interval past the layers)": lambda: qwen3next(full_attention_interval=9),
}


@pytest.mark.parametrize("name", EDGES)
def test_layer_patterns_at_the_edges(name, tmp_path):
    """A hybrid whose layers are all of one kind: the other cache is empty, in llama.cpp and in the plan."""
    path = tmp_path / "model.gguf"
    EDGES[name]().save(path, keep_valid=False)
    p, m = plan(path, features=cpu_features(), n_ctx=512), measure(path, n_ctx=512)
    assert (p.model_bytes, p.kv_bytes + p.recurrent_bytes, p.compute_bytes) == (m.total("model"), m.total("context"), m.total("compute"))
    assert (p.kv_bytes == 0) == ("no attention" in name) and (p.recurrent_bytes == 0) == ("no Mamba" in name or "every layer" in name)


SWA_SETTINGS = [
    dict(n_ctx=2048, n_ubatch=64),
    dict(n_ctx=2048, swa_full=True),
    dict(n_ctx=4096, n_seq_max=2),
    dict(n_ctx=4096, n_seq_max=2, kv_unified=True),
    dict(n_ctx=1024, type_k="q8_0", type_v="q8_0", flash_attn="on"),
    dict(n_ctx=1024, flash_attn="off"),
]


@pytest.mark.parametrize("settings", SWA_SETTINGS, ids=lambda s: "-".join(f"{k}={v}" for k, v in s.items()))
def test_lfm2_with_a_sliding_window(settings, tmp_path):
    """A window on lfm2's attention layers (llama_memory_hybrid_iswa): their cache is the sliding-window cache's
    size, the full cache has no layers; every component as llama.cpp's."""
    path = tmp_path / "lfm2-swa.gguf"
    lfm2(sliding_window=128, n_layer=5, attention=(1, 2, 4)).save(path, keep_valid=False)
    p, m = plan(path, features=cpu_features(), **settings), measure(path, **settings)
    assert (p.model_bytes, p.kv_bytes + p.recurrent_bytes, p.compute_bytes) == (m.total("model"), m.total("context"), m.total("compute"))
    assert {layer.cells for layer in p.kv_layers} == {p.context.n_ctx_swa * p.context.n_stream}
