"""A model whose tensors and hyperparameters do not make a graph is refused with PlanError, as llama.cpp
refuses it: never another exception, whatever the header says."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gguf_construct.planning import PlanError
from gguf_construct.planning.compute import compute_bytes
from gguf_construct.planning.context import ContextRequest, resolve
from gguf_construct.planning.shape import ModelShape, TensorSpan


def _llama(n_layer=2, n_embd=64, n_head=4, n_head_kv=2, n_ff=128, n_vocab=32, head=None, widths=None, drop=(), arch="llama"):
    """A llama-layout header (metadata and tensor shapes, no data): ``widths`` overrides tensor shapes by name,
    ``drop`` removes tensors."""
    md = {
        "general.architecture": arch,
        f"{arch}.block_count": n_layer,
        f"{arch}.embedding_length": n_embd,
        f"{arch}.feed_forward_length": n_ff,
        f"{arch}.attention.head_count": n_head,
        f"{arch}.attention.head_count_kv": n_head_kv,
        f"{arch}.context_length": 256,
        f"{arch}.vocab_size": n_vocab,
    }
    if head is not None:
        md[f"{arch}.attention.key_length"] = md[f"{arch}.attention.value_length"] = head
    hd = head if head is not None else (n_embd // n_head if n_head else 0)
    shapes = {"token_embd.weight": (n_embd, n_vocab), "output_norm.weight": (n_embd,), "output.weight": (n_embd, n_vocab)}
    for il in range(n_layer):
        for name, ne in (
            ("attn_norm", (n_embd,)),
            ("attn_q", (n_embd, hd * n_head)),
            ("attn_k", (n_embd, hd * n_head_kv)),
            ("attn_v", (n_embd, hd * n_head_kv)),
            ("attn_output", (hd * n_head, n_embd)),
            ("ffn_norm", (n_embd,)),
            ("ffn_gate", (n_embd, n_ff)),
            ("ffn_up", (n_embd, n_ff)),
            ("ffn_down", (n_ff, n_embd)),
        ):
            shapes[f"blk.{il}.{name}.weight"] = ne
    shapes.update(widths or {})
    spans = [TensorSpan(name, "f32" if len(ne) == 1 else "f16", tuple(ne), 0, 0, 0) for name, ne in shapes.items() if name not in drop]
    return ModelShape.from_metadata(md, spans, arch)


def _plan(shape, **req):
    return compute_bytes(shape, resolve(shape, ContextRequest(n_ctx=256, **req)))


def test_a_consistent_header_plans():
    assert _plan(_llama()) > 0


@pytest.mark.parametrize(
    "shape",
    [
        _llama(drop=("blk.1.ffn_up.weight",)),  # a layer without its tensor
        _llama(widths={"blk.0.attn_q.weight": (64, 96)}),  # Q not n_head heads wide
        _llama(widths={"blk.1.ffn_down.weight": (100, 64)}),  # ffn_down reads another width
        _llama(widths={"token_embd.weight": (48, 32)}),  # embeddings of another width
        # eight heads that do not divide a width of 60, with the projections 60 wide
        _llama(n_embd=60, n_head=8, widths={"blk.0.attn_q.weight": (60, 60), "blk.0.attn_output.weight": (60, 60)}),
        _llama(n_layer=3, drop=tuple(f"blk.2.{n}.weight" for n in ("attn_q", "attn_k", "attn_v"))),  # block_count too high
    ],
    ids=["missing", "q-width", "down-width", "embd-width", "heads", "layers"],
)
def test_an_inconsistent_header_is_refused(shape):
    with pytest.raises(PlanError):
        _plan(shape)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    n_layer=st.integers(0, 3),
    n_embd=st.integers(0, 96),
    n_head=st.integers(0, 9),
    n_head_kv=st.integers(0, 9),
    n_ff=st.integers(0, 96),
    head=st.one_of(st.none(), st.integers(0, 40)),
    n_vocab=st.integers(0, 40),
    widths=st.dictionaries(
        st.sampled_from(["blk.0.attn_q.weight", "blk.0.attn_k.weight", "blk.1.ffn_gate.weight", "output.weight", "token_embd.weight"]),
        st.tuples(st.integers(0, 96), st.integers(0, 96)),
        max_size=2,
    ),
    flash_attn=st.sampled_from(["on", "off"]),
    arch=st.sampled_from(["llama", "qwen3", "gemma2", "gemma3", "phi3", "cohere2", "olmo2", "starcoder2", "granite", "qwen2vl"]),
)
def test_any_header_plans_or_is_refused(n_layer, n_embd, n_head, n_head_kv, n_ff, head, n_vocab, widths, flash_attn, arch):
    try:
        shape = _llama(n_layer, n_embd, n_head, n_head_kv, n_ff, n_vocab, head, widths, arch=arch)
    except ValueError:  # the shape reader's own refusal, before any graph
        return
    with contextlib.suppress(PlanError):
        assert _plan(shape, flash_attn=flash_attn) >= 0


def test_a_dense_architecture_with_experts_is_not_modelled():
    """A router in a dense architecture's layers (a mixture of experts llama.cpp's graph for it would take):
    not planned rather than planned as dense."""
    shape = _llama(arch="qwen2", widths={"blk.0.ffn_gate_inp.weight": (64, 4)})
    with pytest.raises(NotImplementedError, match="experts"):
        _plan(shape)
