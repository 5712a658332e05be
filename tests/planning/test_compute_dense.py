"""The planned compute buffer of the dense llama-family architectures against llama.cpp's own.

llama.cpp is the oracle: ``llama_get_memory_breakdown``'s compute bytes for a context (tests/llama_memory.py)
and the graph it reserves, node by node (tests/planning/llama_cgraph.py). The planner is a replay of llama.cpp's
graph building and of ggml-alloc, so it is asserted exact, not within a tolerance.
"""

from __future__ import annotations

import itertools
from functools import cache
from pathlib import Path

import pytest

import tests.tiny_models as tm
from gguf_construct.planning.compute import build_graph, compute_bytes, reserved_batches
from tests.planning.plan_inputs import context_of, shape_of
from tests.planning.tiny import tmp_dir

pytest.importorskip("llama_cpp")

ARCHS = ("llama", "qwen2", "qwen3", "phi3", "gemma2", "gemma3")
#: more architectures of the llama layout, written by :func:`_dense`
OTHER_LAYOUTS = (
    "gemma", "mistral3", "mistral3-temperature", "smollm3", "exaone", "ernie4_5", "xverse", "seed_oss", "qwen2vl", "glm4",
    "starcoder2", "command-r", "cohere2", "granite", "granite-unscaled", "olmo2", "olmo2-window",
)  # fmt: skip


@cache
def model(name: str) -> Path:
    """A tiny model of each kind: the architectures' defaults, and variants that change the graph's shapes."""
    variants = {
        "llama-gqa": lambda: tm.llama(n_embd=512, n_ff=1024, n_head=8, n_head_kv=2, wtype="q4_0"),
        "qwen3-head128": lambda: tm.qwen3(head_dim=128, n_layer=3, wtype="q8_0"),
        "gemma3-period3": lambda: tm.gemma3(n_layer=5, swa_period=3, sliding_window=256),
        "gemma2-window512": lambda: tm.gemma2(n_layer=3, sliding_window=512, wtype="q4_K"),
        "gemma3-nowindow": lambda: tm.gemma3(),
        "gemma": lambda: _dense("gemma", output=False),
        "mistral3": lambda: _dense("mistral3"),
        "mistral3-temperature": lambda: _dense("mistral3", temperature=0.1),
        "smollm3": lambda: _dense("smollm3", n_layer=5),
        "exaone": lambda: _dense("exaone"),
        "ernie4_5": lambda: _dense("ernie4_5"),
        "xverse": lambda: _dense("xverse"),
        # seed_oss names the norm before its feed-forward post_attention_norm
        "seed_oss": lambda: _dense("seed_oss", rename=("ffn_norm.weight", "post_attention_norm.weight")),
        "qwen2vl": lambda: _dense("qwen2vl", qkv_bias=True, arrays={"rope.dimension_sections": [8, 12, 12, 0]}),
        "glm4": lambda: _glm4(),
        "starcoder2": lambda: _starcoder2(),
        "command-r": lambda: _cohere("command-r"),
        "granite": lambda: _granite(scales=True),
        "granite-unscaled": lambda: _granite(scales=False),
        "cohere2": lambda: _cohere("cohere2"),
        "olmo2": lambda: _olmo2(),
        "olmo2-window": lambda: _olmo2(window=128),
    }
    f = variants[name]() if name in variants else tm.BUILDERS[name]()
    if name == "gemma3-nowindow":  # gemma3 without the key: no sliding window, one cache
        del f.metadata["gemma3.attention.sliding_window"]
    path = tmp_dir() / f"{name}.gguf"
    f.save(path)
    return path


def _dense(arch: str, n_layer: int = 2, output: bool = True, temperature: float = 0.0, qkv_bias: bool = False,
           rename: tuple[str, str] | None = None, arrays: dict | None = None):  # fmt: skip
    """A llama-layout model of another architecture name (tests/tiny_models.py's shared writer): ``rename`` a
    per-layer tensor, set ``arrays`` keys."""
    m = tm._dense(
        arch, n_layer=n_layer, n_embd=256, n_ff=512, n_head=4, n_head_kv=2, n_vocab=64, head_dim=None, wtype="f16",
        seed=0, context_length=4096, output=output, qkv_bias=qkv_bias,
    )  # fmt: skip
    if temperature:  # Llama-4-style attention temperature (mistral3): a per-token scale of Q
        m.key("attention.temperature_scale", temperature, "f32")
        m.key("rope.scaling.original_context_length", 4096)
    for key, value in (arrays or {}).items():
        m.f.metadata[f"{arch}.{key}"] = value
    if rename:
        for il in range(n_layer):
            m.f.tensors.rename(f"blk.{il}.{rename[0]}", f"blk.{il}.{rename[1]}")
    return m.f


def _glm4():
    """glm4: post-norms, one fused up projection holding gate and up, rope over half of each head."""
    m = tm._dense(
        "glm4", n_layer=2, n_embd=256, n_ff=512, n_head=4, n_head_kv=2, n_vocab=64, head_dim=None, wtype="f16",
        seed=0, context_length=4096, post_norms=True,
    )  # fmt: skip
    for il in range(2):
        del m.f.tensors[f"blk.{il}.ffn_gate.weight"]
        del m.f.tensors[f"blk.{il}.ffn_up.weight"]
        m.weight(f"blk.{il}.ffn_up.weight", 256, 1024)
    m.key("rope.dimension_count", 32)
    return m.f


def _starcoder2():
    """starcoder2: LayerNorms with biases, a GELU feed-forward without gate, biases on every projection."""
    m = tm._dense(
        "starcoder2", n_layer=2, n_embd=256, n_ff=512, n_head=4, n_head_kv=2, n_vocab=64, head_dim=None, wtype="f16",
        seed=0, context_length=4096, qkv_bias=True,
    )  # fmt: skip
    m.key("attention.layer_norm_epsilon", 1e-5, "f32")
    for il in range(2):
        del m.f.tensors[f"blk.{il}.ffn_gate.weight"]
        for name, n in (("attn_norm", 256), ("ffn_norm", 256), ("attn_output", 256), ("ffn_up", 512), ("ffn_down", 256)):
            m.f32(f"blk.{il}.{name}.bias", n)
    m.f32("output_norm.bias", 256)
    return m.f


def _granite(scales: bool):
    """granite: scaled logits; with ``scales``, scaled embeddings and block outputs too."""
    m = tm._dense(
        "granite", n_layer=2, n_embd=256, n_ff=512, n_head=4, n_head_kv=2, n_vocab=64, head_dim=None, wtype="f16",
        seed=0, context_length=4096,
    )  # fmt: skip
    m.key("logit_scale", 8.0, "f32")
    if scales:
        m.key("residual_scale", 0.22, "f32")
        m.key("embedding_scale", 12.0, "f32")
    return m.f


def _cohere(arch: str):
    """command-r and cohere2: attention and feed-forward in parallel from one LayerNorm, scaled logits, the
    output tied to token_embd; cohere2 with a sliding window in three of every four layers (rope only there)."""
    n_layer = 4
    m = tm._dense(
        arch, n_layer=n_layer, n_embd=256, n_ff=512, n_head=4, n_head_kv=2, n_vocab=64, head_dim=None, wtype="f16",
        seed=0, context_length=4096, output=False,
    )  # fmt: skip
    m.key("attention.layer_norm_epsilon", 1e-5, "f32")
    m.key("logit_scale", 0.0625, "f32")
    for il in range(n_layer):
        del m.f.tensors[f"blk.{il}.ffn_norm.weight"]
    if arch == "cohere2":
        m.key("attention.sliding_window", 128)
    return m.f


def _olmo2(window: int = 0):
    """olmo2: no norms before attention and feed-forward, norms after both, q/k norms over all heads; a
    sliding window in three of every four layers when the key is set (OLMo 3)."""
    n_layer = 4
    m = tm._dense(
        "olmo2", n_layer=n_layer, n_embd=256, n_ff=512, n_head=4, n_head_kv=2, n_vocab=64, head_dim=None, wtype="f16",
        seed=0, context_length=4096, post_norms=True,
    )  # fmt: skip
    for il in range(n_layer):
        del m.f.tensors[f"blk.{il}.attn_norm.weight"]
        del m.f.tensors[f"blk.{il}.ffn_norm.weight"]
        m.norm(f"blk.{il}.attn_q_norm", 256)
        m.norm(f"blk.{il}.attn_k_norm", 128)
    if window:
        m.key("attention.sliding_window", window)
    return m.f


def _settings() -> list[dict]:
    """n_ctx (padded to 256 by llama.cpp, and bounding the batch), n_ubatch, sequences, cache types, flash
    attention: a quantized V cache needs flash attention, so without it only K is quantized."""
    out = []
    for n_ctx, n_ubatch, n_seq, cache_type, fa in itertools.product(
        (64, 300, 4096), (32, 512), (1, 2), ("f16", "q8_0", "q4_0"), ("on", "off")
    ):
        type_v = cache_type if fa == "on" else "f16"
        out.append(dict(n_ctx=n_ctx, n_ubatch=n_ubatch, n_seq_max=n_seq, type_k=cache_type, type_v=type_v, flash_attn=fa))
    return out


def _planned(path: Path, settings: dict) -> int:
    shape = shape_of(path)
    return compute_bytes(shape, context_of(shape, **settings))


@pytest.mark.parametrize("arch", ARCHS)
def test_compute_buffer_is_llama_cpps_for_every_setting(arch):
    from tests.llama_memory import measure

    path = model(arch)
    wrong = []
    for settings in _settings():
        measured = measure(path, **settings).total("compute")
        planned = _planned(path, settings)
        assert abs(planned - measured) <= 0.05 * measured, (settings, planned, measured)
        if planned != measured:
            wrong.append((settings, planned, measured))
    assert not wrong  # exact: the plan replays llama.cpp's graph and allocator


@pytest.mark.parametrize(
    "name, settings",
    [
        ("llama-gqa", dict(n_ctx=4096, flash_attn="off")),
        ("llama-gqa", dict(n_ctx=4096, n_seq_max=2, kv_unified=True)),
        ("qwen3-head128", dict(n_ctx=2048, type_k="q8_0", type_v="q8_0")),
        ("qwen3-head128", dict(n_ctx=3000, n_seq_max=3, flash_attn="off")),
        ("gemma3-period3", dict(n_ctx=4096)),
        ("gemma3-period3", dict(n_ctx=4096, swa_full=True, n_seq_max=2, flash_attn="off")),
        ("gemma2-window512", dict(n_ctx=8192, n_ubatch=128, type_k="q8_0", type_v="q4_0")),
        ("gemma3-nowindow", dict(n_ctx=1024)),
        ("llama", dict(n_ctx=2048, n_batch=2048, n_ubatch=2048)),
        ("qwen2", dict(n_ctx=1000, n_batch=256, n_ubatch=512)),
        ("phi3", dict(n_ctx=512, n_batch=1, n_ubatch=1)),
        ("llama", dict(n_ctx=1024, type_k="f32", type_v="f32")),  # flash attention casts an f32 cache to f16
        ("gemma2", dict(n_ctx=1024, type_k="f32", type_v="f32", flash_attn="off")),
        ("gemma3", dict(n_ctx=1024, type_k="bf16", type_v="bf16")),
        ("qwen3", dict(n_ctx=1024, type_k="q5_0", type_v="q5_1")),
        ("llama", dict(n_ctx=1024, type_k="iq4_nl", type_v="q4_1")),
        ("gemma3", dict(n_ctx=1024, n_seq_max=4, n_ubatch=3)),  # 3 tokens rounded up to one per sequence
        ("phi3", dict(n_ctx=2000, n_seq_max=7, flash_attn="off", n_ubatch=77)),
    ],
)
def test_compute_buffer_of_other_shapes_and_contexts(name, settings):
    from tests.llama_memory import measure

    path = model(name)
    assert _planned(path, settings) == measure(path, **settings).total("compute")


@pytest.mark.parametrize("arch", [*ARCHS, *OTHER_LAYOUTS])
@pytest.mark.parametrize("flash_attn", ["on", "off"])
def test_planned_graph_is_llama_cpps_node_for_node(arch, flash_attn):
    """The same nodes (op, type, shape, strides of views) in the same order, and the same inputs: what the
    allocation depends on."""
    from tests.planning.llama_cgraph import reserved_graph

    path = model(arch)
    settings = dict(n_ctx=1024, n_seq_max=2, flash_attn=flash_attn)
    shape = shape_of(path)
    ctx = context_of(shape, **settings)
    for batch in reserved_batches(ctx, ctx.n_ctx)[:2]:
        planned = build_graph(shape, ctx, batch)
        actual = reserved_graph(path, n_tokens=batch.n_tokens, n_seqs=batch.n_seqs, n_outputs=batch.n_outputs, **settings)

        def nodes(g):
            return [(n.op, n.type, n.ne, n.nb if n.is_view else None, [s.op for s in n.src], n.output) for n in g.nodes]

        def inputs(g):
            return [(t.type, t.ne) for t in g.leafs if not t.external]

        assert nodes(planned) == nodes(actual)
        assert inputs(planned) == inputs(actual)


@pytest.mark.parametrize("arch", ARCHS)
def test_plan_has_llama_cpps_batch_sizes_and_compute_buffer(arch):
    """Through ``plan()``: llama.cpp bounds n_batch by the n_ctx asked for, before padding it to 256 (so 64
    gives batches of 64 in a context of 256), and the compute buffer follows."""
    import re

    from gguf_construct.planning import plan
    from tests.llama_memory import cpu_features, measure

    path = model(arch)
    for settings in (dict(n_ctx=64), dict(n_ctx=300, n_seq_max=2), dict(n_ctx=1000, n_ubatch=128, flash_attn="off")):
        m = measure(path, **settings)
        logged = {k: int(v) for k, v in re.findall(r"llama_context: (n_batch|n_ubatch) += (\d+)", "".join(m.log))}
        p = plan(path, features=cpu_features(), **settings)
        assert (p.context.n_batch, p.context.n_ubatch) == (logged["n_batch"], logged["n_ubatch"]), settings
        assert p.compute_bytes == m.total("compute"), settings


def test_more_sequences_than_the_batch_is_refused():
    """llama.cpp aborts the process (GGML_ASSERT in llama_context::output_reserve) when n_seq_max exceeds
    n_batch: the plan refuses the request instead."""
    from gguf_construct.planning import PlanError

    shape = shape_of(model("llama"))
    with pytest.raises(PlanError, match="sequences"):
        context_of(shape, n_ctx=1024, n_seq_max=4, n_batch=2, n_ubatch=2)


@pytest.mark.parametrize("name", OTHER_LAYOUTS)
def test_plan_of_other_llama_layouts_is_llama_cpps(name):
    """gemma (scaled embeddings and queries, GELU), mistral3 (with and without its attention temperature),
    smollm3 (every fourth layer without rope), exaone, ernie4_5, xverse (llama's graph), seed_oss (its
    feed-forward norm named post_attention_norm), qwen2vl (four positions per token), glm4 (post-norms, a fused
    gate and up), starcoder2 (LayerNorm, biases, GELU without gate), command-r and cohere2 (attention and
    feed-forward in parallel; cohere2's rope only in its sliding-window layers), granite (scaled embeddings,
    residuals and logits), olmo2 (norms after, not
    before; with and without a sliding window): weights, KV cache and compute buffer through ``plan()``."""
    from gguf_construct.planning import plan
    from tests.llama_memory import cpu_features, measure

    path = model(name)
    for settings in (dict(n_ctx=1024), dict(n_ctx=1024, flash_attn="off"), dict(n_ctx=300, n_seq_max=2, type_k="q8_0", type_v="q8_0")):
        m = measure(path, **settings)
        p = plan(path, features=cpu_features(), **settings)
        assert dict(p.weights.by_buffer) == {k: b["model"] for k, b in m.buffers.items() if b["model"]}, settings
        assert p.kv_bytes == m.total("context"), settings
        assert p.compute_bytes == m.total("compute"), settings
