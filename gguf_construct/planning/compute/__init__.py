"""llama.cpp's CPU compute buffer predicted from a model's shape: the graphs it reserves, built as a small IR
(:mod:`.ggml_ir`) the way llama.cpp builds them (:mod:`.llama_blocks`, one module per architecture family), and
allocated as ggml-alloc allocates them (:mod:`.alloc`).

``compute_bytes(shape, ctx)`` follows ``llama_context::sched_reserve`` (llama.cpp src/llama-context.cpp): it
reserves a prompt batch (``min(n_ctx, n_ubatch)`` tokens over ``n_seq_max`` sequences, every token output up to
``n_outputs_max``), then one token per sequence, then the prompt batch again, with one allocator whose buffer only
grows; the buffer's final size is the result.

Adding an architecture: when llama.cpp builds it like an existing dense one but for a few details, a ``graph``
entry in ``schema/memory.json`` with its :class:`~.dense.Recipe` fields is all it takes. Otherwise write a
function building its graph on a :class:`~.llama_blocks.GraphBuilder` (the ``llm_graph_context`` of one batch:
``b.inp_embd()``, ``b.attn(...)``, ``b.ffn(...)`` and ``b.g``, the :class:`~.ggml_ir.Ggml` operations), calling
ggml's operations in llama.cpp's order, and give its family here. Check it node for node against llama.cpp's
reserved graph (tests/planning/llama_cgraph.py) and byte for byte against its compute buffer.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar

from ...errors import FormatError, ShapeError
from ..shape import memory_table, refused
from .alloc import BufferedGraph, reserve_buffers, reserve_bytes
from .dense import RECIPES, build_dense
from .ggml_ir import Graph
from .hybrid import HYBRID
from .llama_blocks import Batch, ContextLike, GraphBuilder, ShapeLike
from .mla import build_deepseek2
from .moe import MoeRecipe, build_llama_moe, build_moe, has_experts
from .recurrent import RECURRENT
from .splits import Placement, schedule

__all__ = ["ARCHITECTURES", "Placement", "reserved_batches", "build_graph", "compute_buffers", "compute_bytes", "supported"]

_T = TypeVar("_T")


def _llama(b: GraphBuilder, dense: Callable[[GraphBuilder], None]) -> None:
    """llama, or llama with experts (Mixtral): llama.cpp's llama graph takes its MoE branch where a layer has a
    router."""
    (build_llama_moe if has_experts(b) else dense)(b)


def _builder(arch: str, graph: Mapping[str, Any]) -> Callable[[GraphBuilder], None]:
    """The function building ``arch``'s graph, from its family in ``schema/memory.json``."""
    family = graph["family"]
    if family == "dense":
        recipe = RECIPES[arch]
        dense: Callable[[GraphBuilder], None] = lambda b: build_dense(b, recipe)  # noqa: E731
        return (lambda b: _llama(b, dense)) if arch == "llama" else dense
    if family == "moe":
        moe = MoeRecipe(**{k: v for k, v in graph.items() if k not in ("family", "source")})
        return lambda b: build_moe(b, moe)
    if family == "mla":
        return build_deepseek2
    if family == "recurrent":
        return RECURRENT[arch]
    if family == "hybrid":
        return HYBRID[arch]
    raise ValueError(f"schema/memory.json: {arch} has a graph of unknown family {family!r}")


#: architecture name → the function building its graph into a GraphBuilder
ARCHITECTURES: dict[str, Callable[[GraphBuilder], None]] = {
    arch: _builder(arch, entry["graph"])
    for arch, entry in memory_table().architectures.items()
    if isinstance(entry, Mapping) and "graph" in entry
}


def supported(arch: str) -> bool:
    """Whether the compute graph of ``arch`` is modelled."""
    return arch in ARCHITECTURES


def reserved_batches(ctx: ContextLike, n_ctx: int) -> list[Batch]:
    """The batches ``sched_reserve`` reserves graphs for, in order: prompt, one token per sequence, prompt.
    ``n_ctx`` is the context size llama.cpp compares n_ubatch with."""
    n_seqs = ctx.n_seq_max
    n_tokens = min(n_ctx, ctx.n_ubatch)
    n_outputs = min(n_tokens, ctx.n_outputs_max)
    n_tokens = -(-n_tokens // n_seqs) * n_seqs  # graph_reserve: a multiple of n_seqs
    pp = Batch(n_tokens, n_seqs, n_outputs)
    return [pp, Batch(n_seqs, n_seqs, n_seqs), pp]


def build_graph(shape: ShapeLike, ctx: ContextLike, batch: Batch) -> Graph:
    """The graph llama.cpp builds for ``batch`` (``llama_model::build_graph``)."""
    builder = GraphBuilder(shape, ctx, batch)
    ARCHITECTURES[shape.arch](builder)
    return builder.g.graph


def _reserved(shape: ShapeLike, ctx: ContextLike, checkpoint: Callable[[], None]) -> Iterator[tuple[Batch, Graph]]:
    """The reserved batches and their graphs, in order (the same batch again is the same graph)."""
    if not supported(shape.arch):
        raise NotImplementedError(f"no graph of {shape.arch!r} is modelled")
    n_ctx = getattr(ctx, "n_ctx", ctx.n_ctx_seq * ctx.n_stream)
    built: dict[Batch, Graph] = {}
    for batch in reserved_batches(ctx, n_ctx):
        checkpoint()
        if batch not in built:
            built[batch] = build_graph(shape, ctx, batch)
        yield batch, built[batch]


def _planned(shape: ShapeLike, reserve: Callable[[], _T]) -> _T:
    """``reserve()``, with what the graph cannot be refused as llama.cpp refuses the model."""
    try:
        return reserve()
    except ShapeError as e:  # an op ggml refuses, a tensor the graph needs missing
        raise refused("", f"{shape.arch}: {e.message}") from None
    except FormatError:  # a refusal already, or the deadline
        raise
    except (KeyError, ValueError, IndexError, ZeroDivisionError) as e:
        # the header's sizes not fitting the tensors (no heads, no experts): llama.cpp refuses such a model
        raise refused("", f"{shape.arch}: {e}") from None


def compute_bytes(shape: ShapeLike, ctx: ContextLike, checkpoint: Callable[[], None] = lambda: None) -> int:
    """llama.cpp's CPU compute buffer for ``shape`` in context ``ctx``, in bytes. Raises NotImplementedError
    for an architecture whose graph is not modelled (see :func:`supported`), PlanError for a model whose header
    and tensors cannot make the graph (llama.cpp refuses such a file). ``checkpoint`` is called after each graph
    (it raises to stop: a deadline)."""
    graphs = _reserved(shape, ctx, checkpoint)
    return _planned(shape, lambda: reserve_bytes(g for _, g in graphs))


def compute_buffers(
    shape: ShapeLike, ctx: ContextLike, placement: Callable[[Batch], Placement], checkpoint: Callable[[], None] = lambda: None
) -> list[int]:
    """Each backend's compute buffer, the devices' then the CPU's, with the graphs split over backends as
    ggml's scheduler splits them (:mod:`.splits`); ``placement(batch)`` says where the graph's weights and caches
    are. Raises as :func:`compute_bytes`."""
    graphs = _reserved(shape, ctx, checkpoint)
    scheduled: dict[int, BufferedGraph] = {}

    def buffered() -> Iterator[BufferedGraph]:
        for batch, g in graphs:
            if id(g) not in scheduled:
                scheduled[id(g)] = schedule(g, placement(batch))
            yield scheduled[id(g)]

    return _planned(shape, lambda: reserve_buffers(buffered()))
