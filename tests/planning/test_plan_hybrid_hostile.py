"""Hostile hybrid headers: the keys that pick a hybrid's layers (per-layer head counts and feed-forward sizes,
``full_attention_interval``, ``attention.recurrent_layers``, ``shortconv.l_cache``) and the sizes its mixers
divide, at every JSON type and boundary value. A plan is made or refused with a PlanError naming the key, never
another exception, and quickly; what llama.cpp aborts on (an assertion in its loader or graph) is refused."""

from __future__ import annotations

import time

import numpy as np
import pytest

from gguf_construct.api.gguf_file import GGUFFile
from gguf_construct.planning import ContextRequest, ModelShape, PlanError, plan_shape
from gguf_construct.planning.shape import TensorSpan
from tests.planning.tiny_hybrid import HYBRID_BUILDERS

VALUES = ["4", 1.5, True, -1, 0, 1, 2, 2**31, 2**32 - 1, 2**40, [4, 4, 4], [0, 0, 0, 0], [True, False, True, False], ["a"], [[1]]]
KEYS = {
    "jamba": ["attention.head_count_kv", "ssm.inner_size", "ssm.state_size", "ssm.time_step_rank", "ssm.conv_kernel"],
    "granitehybrid": ["attention.head_count_kv", "ssm.group_count", "ssm.time_step_rank", "residual_scale", "rope.scaling.finetuned"],
    "lfm2": ["attention.head_count_kv", "shortconv.l_cache", "attention.sliding_window"],
    "lfm2moe": ["leading_dense_block_count", "expert_gating_func", "expert_used_count", "expert_count"],
    "qwen3next": ["full_attention_interval", "attention.recurrent_layers", "ssm.group_count", "ssm.time_step_rank", "nextn_predict_layers"],
    "qwen35": ["full_attention_interval", "attention.recurrent_layers", "ssm.group_count", "rope.dimension_sections"],
    "falcon-h1": ["attention.head_count_kv", "ssm.inner_size", "ssm.group_count"],
    "nemotron_h": ["feed_forward_length", "attention.head_count_kv", "ssm.group_count"],
    "plamo2": ["attention.head_count_kv", "ssm.time_step_rank", "ssm.inner_size"],
}


def _shape(f: GGUFFile) -> ModelShape:
    """The shape of an unsaved model: its metadata and tensors as the planner reads them."""
    from gguf_construct.formats.gguf.offsets import ggml_nbytes

    spans, offset = [], 0
    for name in f.tensors:
        t = f.tensors[name]
        shape = tuple(int(d) for d in t.shape)
        nbytes = ggml_nbytes(shape, t.type.name)
        spans.append(TensorSpan(name, t.type.name, shape, 0, offset, nbytes))
        offset += (nbytes + 31) // 32 * 32
    md = dict(f.metadata.items())
    return ModelShape.from_metadata(md, spans, str(md["general.architecture"]))


@pytest.fixture(scope="module")
def shapes() -> dict[str, ModelShape]:
    return {arch: _shape(build()) for arch, build in HYBRID_BUILDERS.items()}


def _planned_or_refused(shape: ModelShape, changes: dict) -> PlanError | None:
    md = {**shape.metadata, **changes}
    start = time.monotonic()
    refusal = None
    try:
        plan_shape(ModelShape.from_metadata(md, shape.tensors, shape.arch), ContextRequest(n_ctx=512, n_seq_max=2))
    except PlanError as e:
        refusal = e
    assert time.monotonic() - start < 5, f"a hostile header must not make the plan slow: {changes}"
    return refusal


@pytest.mark.parametrize("arch", KEYS)
def test_layer_picking_keys_of_every_type_and_size(arch, shapes):
    shape = shapes[arch]
    for key in KEYS[arch]:
        for value in VALUES:
            _planned_or_refused(shape, {f"{arch}.{key}": value})
            _planned_or_refused(shape, {f"{arch}.{key}": np.array(value) if isinstance(value, list) else value})


@pytest.mark.parametrize(
    ("arch", "changes", "key"),
    [
        ("qwen3next", {"full_attention_interval": 0}, "qwen3next.full_attention_interval"),  # (il + 1) % 0
        ("qwen3next", {"attention.recurrent_layers": [True, False]}, "qwen3next.attention.recurrent_layers"),
        ("qwen3next", {"attention.recurrent_layers": "yes"}, "qwen3next.attention.recurrent_layers"),
        ("jamba", {"attention.head_count_kv": [0, 2]}, "jamba.attention.head_count_kv"),  # not one per layer
        ("nemotron_h", {"feed_forward_length": [0, 256]}, "nemotron_h.feed_forward_length"),
        ("lfm2", {"shortconv.l_cache": "3"}, "lfm2.shortconv.l_cache"),
    ],
)
def test_keys_llama_cpp_cannot_read_are_refused_by_name(arch, changes, key, shapes):
    refusal = _planned_or_refused(shapes[arch], {f"{arch}.{k}": v for k, v in changes.items()})
    assert refusal is not None and refusal.rule == "plan.model" and key in str(refusal), refusal


@pytest.mark.parametrize(
    ("arch", "changes", "says"),
    [
        ("jamba", {"ssm.inner_size": 200}, "twice embedding_length"),  # load_arch_tensors asserts 2 * n_embd
        ("granitehybrid", {"ssm.inner_size": 512}, "twice embedding_length"),
        ("lfm2", {"shortconv.l_cache": 1}, "not above 1"),  # the graph asserts a window of 2 or more
        ("qwen3next", {"ssm.time_step_rank": 3}, "value heads"),  # value heads not a multiple of the key heads
        ("granitehybrid", {"ssm.group_count": 0}, "groups"),
    ],
)
def test_what_llama_cpp_aborts_on_is_refused(arch, changes, says, shapes):
    refusal = _planned_or_refused(shapes[arch], {f"{arch}.{k}": v for k, v in changes.items()})
    assert refusal is not None and says in str(refusal), refusal


def test_an_older_qwen3next_layout_is_planned_without_a_compute_buffer(shapes):
    """The fused ssm_in of older qwen3next files: weights, KV cache and state planned, the compute buffer said to be
    unknown rather than guessed."""
    shape = shapes["qwen3next"]
    tensors = tuple(
        TensorSpan(t.name.replace("attn_qkv", "ssm_in"), t.type, t.shape, t.file, t.offset, t.nbytes)
        for t in shape.tensors
        if ".attn_gate." not in t.name
    )
    p = plan_shape(ModelShape.from_metadata(shape.metadata, tensors, shape.arch), ContextRequest(n_ctx=512))
    assert p.compute_bytes is None and p.kv_bytes > 0 and p.recurrent_bytes > 0
    assert any("older layout" in note for note in p.notes), p.notes


@pytest.mark.parametrize(
    ("changes", "code"),
    [
        ({"qwen3next.full_attention_interval": 0}, 1),  # a model llama.cpp will not load: exit 1
        ({"qwen3next.attention.recurrent_layers": [True] * 3}, 1),
        ({}, 0),
    ],
)
def test_the_cli_exits_as_grep_on_hybrid_headers(changes, code, tmp_path, capsys):
    """``plan`` on a saved hybrid file: 0 with its KV cache and state in the JSON, 1 for a header llama.cpp refuses,
    naming the key."""
    import json

    from gguf_construct.cli.main import main

    f = HYBRID_BUILDERS["qwen3next"]()
    for key, value in changes.items():
        f.metadata.set(key, value, type="u32" if isinstance(value, int) else "arr[bool]")
    path = tmp_path / "model.gguf"
    f.save(path, keep_valid=False)
    assert main(["plan", str(path), "--ctx", "512", "--json"]) == code
    out, err = capsys.readouterr()
    if code:
        assert next(iter(changes)) in err
    else:
        found = json.loads(out)
        assert [c["layer"] for c in found["kv_layers"]] == [3] and [c["layer"] for c in found["recurrent_layers"]] == [0, 1, 2]


def test_a_hybrid_of_512_layers_plans_in_seconds():
    """llama.cpp's most layers (LLAMA_MAX_LAYERS), every fourth attending: the three reserved graphs of 512 delta-net
    and attention layers are built and allocated in seconds, not minutes (the work grows with the layers)."""
    from tests.tiny_models import zero_filled

    sizes = dict(n_layer=512, n_embd=64, n_head=2, n_head_kv=1, head_dim=32, n_k_heads=1, n_v_heads=2, head_k_dim=16)
    shape = _shape(zero_filled(HYBRID_BUILDERS["qwen3next"], n_expert=2, n_ff_exp=32, n_ff_shexp=32, **sizes))
    start = time.monotonic()
    p = plan_shape(shape, ContextRequest(n_ctx=512, n_seq_max=4))
    assert time.monotonic() - start < 30
    assert (len(p.kv_layers), len(p.recurrent_layers)) == (128, 384) and p.compute_bytes
