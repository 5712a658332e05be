"""Hybrid models (attention and recurrent layers in one stack: jamba, granitehybrid, lfm2, qwen3next) planned from
the header and measured by llama.cpp (``llama_get_memory_breakdown``): the model buffers, the KV cache of the
attention layers and the recurrent state of the recurrent layers, byte for byte, across contexts, sequence counts,
cache types, weight types and mmap; the layers llama.cpp gives a KV cache are the plan's."""

from __future__ import annotations

import re

import pytest

pytest.importorskip("llama_cpp")

from llama_memory import cpu_features, measure  # noqa: E402

from gguf_construct.planning import PlanError, plan  # noqa: E402
from tests.planning.tiny_hybrid import HYBRID_BUILDERS  # noqa: E402

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
        assert sorted(layer.layer for layer in p.kv_layers + p.recurrent_layers) == list(range(p.n_layer)), kw
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
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_other_layer_patterns_and_weight_types(arch, kw, tmp_path):
    """Other layer patterns (attention first or last, experts in some layers), group counts, windows and weight
    types, repacked for this CPU or not."""
    _compare(_save(tmp_path, arch, **kw), [dict(n_ctx=512, n_seq_max=2), dict(n_ctx=256, use_mmap=False)])
