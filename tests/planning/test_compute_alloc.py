"""The planning allocator against ggml-alloc: on llama.cpp's own reserved graphs, the same compute buffer."""

from __future__ import annotations

import pytest

from gguf_construct.planning.compute.alloc import DynAllocator, graph_bytes, reserve_bytes
from gguf_construct.planning.compute.ggml_ir import Ggml
from tests.planning.tiny import tiny_llama_path

pytest.importorskip("llama_cpp")


def test_best_fit_reuses_the_smallest_block_that_fits_and_merges_neighbours():
    a = DynAllocator(alignment=32)
    x = a.alloc(100)  # 128 bytes at 0
    y = a.alloc(64)  # at 128
    z = a.alloc(256)  # at 192
    a.alloc(32)  # at 448: keeps z's block from merging with the tail
    a.free(*x, 100)
    a.free(*z, 256)
    assert a.alloc(200)[1] == 192  # the 256-byte block fits better than the tail; the 128-byte one is too small
    a.free(*y, 64)  # merges with the free block at 0: one block of 192
    assert a.chunks[0].blocks[0] == [0, 192]
    assert a.size == 480


def test_in_place_ops_take_their_source_memory_and_views_take_none():
    g = Ggml()
    x = g.input("f32", 8, 4)
    w = g.weight("f16", 8, 8)
    y = g.mul_mat(w, x)  # 128 bytes
    z = g.reshape(g.rms_norm(y), 32)  # in place over y, then a view
    g.expand(g.scale(z), output=True)  # in place again
    assert graph_bytes(g.graph) == [256]  # the input and y; nothing else
    g2 = Ggml()
    x2 = g2.input("f32", 8, 4)
    y2 = g2.mul_mat(g2.weight("f16", 8, 8), x2)
    z2 = g2.add(y2, y2)  # y2 has two consumers: not reused
    g2.expand(g2.add(z2, x2), output=True)  # in place over z2; x2 is alive until here
    assert graph_bytes(g2.graph) == [384]


@pytest.mark.parametrize(
    "settings",
    [
        dict(n_ctx=64),
        dict(n_ctx=1024),
        dict(n_ctx=1024, flash_attn="off"),
        dict(n_ctx=1024, type_k="q8_0", type_v="q8_0"),
        dict(n_ctx=300, n_seq_max=2),
        dict(n_ctx=2048, n_ubatch=128, flash_attn="off"),
    ],
    ids=lambda s: "-".join(f"{k}={v}" for k, v in s.items()),
)
def test_llama_cpp_graphs_allocate_to_llama_cpp_compute_buffer(settings):
    _replayed_equals_measured(tiny_llama_path(), settings)


def _replayed_equals_measured(path, settings):
    from tests.llama_memory import measure
    from tests.planning.llama_cgraph import reserved_graph

    measured = measure(path, **settings).total("compute")
    n_seqs = settings.get("n_seq_max", 1)
    n_tokens = min(settings["n_ctx"], settings.get("n_ubatch", 512))  # n_ubatch, bounded by the n_ctx asked for
    n_tokens = -(-n_tokens // n_seqs) * n_seqs
    pp = reserved_graph(path, n_tokens=n_tokens, n_seqs=n_seqs, **settings)
    tg = reserved_graph(path, n_tokens=n_seqs, n_seqs=n_seqs, **settings)
    assert reserve_bytes([pp, tg, pp]) == measured


@pytest.mark.parametrize("type_v", ["f16", "q8_0"])
def test_llama_cpp_graphs_of_a_mixture_of_experts_allocate_to_its_compute_buffer(type_v, tmp_path):
    """Experts' weights normalised by their clamped sum: ggml-alloc runs CLAMP in place in this build (with a
    quantized V cache and 128-wide heads the buffer's peak depends on it)."""
    from tests.tiny_models import llama

    path = tmp_path / "moe.gguf"
    llama(n_embd=256, n_ff=512, n_head=2, n_head_kv=1, n_expert=2, n_expert_used=2).save(path)
    _replayed_equals_measured(path, dict(n_ctx=1024, n_ubatch=512, type_v=type_v))


def test_in_place_ops_are_the_llama_cpp_builds():
    """INPLACE_OPS against ggml_op_can_inplace of the ggml llama.cpp runs on, op by op (UNARY standing for every
    unary op)."""
    from gguf_construct.planning.compute.ggml_ir import _UNARY_OPS, INPLACE_OPS
    from tests.planning.llama_cgraph import ggml_of_llama

    ggml = ggml_of_llama()
    names = []
    while (name := ggml.ggml_op_name(len(names))) is not None and name.decode() != "GLU":
        names.append(name.decode())
    names.append("GLU")
    in_place = {name for i, name in enumerate(names) if ggml.ggml_op_can_inplace(i)}
    assert "UNARY" in in_place
    assert in_place - {"UNARY"} == INPLACE_OPS - _UNARY_OPS
    assert {ggml.ggml_unary_op_name(i).decode() for i in range(len(_UNARY_OPS))} == _UNARY_OPS


def test_cpu_buffer_type_is_the_llama_cpp_builds():
    """The allocator's alignment and chunk size against the CPU buffer type of the ggml llama.cpp runs on."""
    from gguf_construct.planning.compute.alloc import CPU_ALIGNMENT
    from tests.planning.llama_cgraph import ggml_of_llama

    ggml = ggml_of_llama()
    buft = ggml.ggml_backend_cpu_buffer_type()
    assert ggml.ggml_backend_buft_get_alignment(buft) == CPU_ALIGNMENT
    assert ggml.ggml_backend_buft_get_max_size(buft) == 2**64 - 1  # one chunk: DynAllocator's default
    assert DynAllocator().max_chunk_size == (2**64 - 1) // 2  # ggml_dyn_tallocr_new clamps it to SIZE_MAX / 2
