"""The plan's model buffers, KV cache and recurrent state against llama.cpp's own accounting
(``llama_get_memory_breakdown``), byte for byte, for every architecture the plan knows: tiny models of each
(tests/tiny_models.py) loaded by llama.cpp at several contexts, batch sizes, sequence counts, cache types,
weight types (repacked for this CPU or not) and with and without mmap."""

from __future__ import annotations

import pytest

pytest.importorskip("llama_cpp")

from llama_memory import cpu_features, measure  # noqa: E402
from tiny_models import BUILDERS  # noqa: E402

from gguf_construct.planning import PlanError, plan  # noqa: E402

RECURRENT = {"mamba", "mamba2", "rwkv6", "rwkv7"}
SETTINGS = [
    dict(n_ctx=64),
    dict(n_ctx=1000, n_ubatch=128, flash_attn="off"),
    dict(n_ctx=700, n_seq_max=3, type_k="q8_0", type_v="q8_0"),
    dict(n_ctx=512, n_seq_max=2, kv_unified=True, type_k="q4_0", type_v="f16"),
    dict(n_ctx=300, use_mmap=False),
    dict(n_ctx=256, flash_attn="off", type_v="q8_0"),  # refused by llama.cpp: a quantized V needs flash attention
]
SWA_SETTINGS = [dict(n_ctx=2048, n_ubatch=64), dict(n_ctx=2048, swa_full=True), dict(n_ctx=4096, n_seq_max=2, kv_unified=True)]


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
        assert (p.recurrent_bytes > 0) == (p.architecture in RECURRENT)


@pytest.mark.parametrize("arch", BUILDERS)
def test_buffers_match_llama_cpp(arch, tmp_path):
    path = tmp_path / f"{arch}.gguf"
    BUILDERS[arch]().save(path)
    _compare(path, SETTINGS + (SWA_SETTINGS if arch in ("gemma2", "gemma3", "gpt-oss") else []))


@pytest.mark.parametrize("wtype", ["q4_0", "q4_K", "q8_0"])
@pytest.mark.parametrize("arch", ["llama", "qwen3moe", "gemma3", "deepseek2", "rwkv7"])
def test_weight_buffers_of_quantized_models(arch, wtype, tmp_path):
    """Quantized weights: q4_0 and q4_K are copied to the CPU_REPACK buffer on AVX2 and AVX-512 (the mapped span
    shrinks around them), q8_0 is not; a tied output layer adds a repacked copy of token_embd; the experts' 3-D
    stacks are repacked, MLA's 3-D per-head matrices are not."""
    kw = {"n_embd": 256} if arch == "rwkv7" else {}
    path = tmp_path / f"{arch}-{wtype}.gguf"
    BUILDERS[arch](wtype=wtype, **kw).save(path)
    _compare(path, [dict(n_ctx=256), dict(n_ctx=256, use_mmap=False)])
