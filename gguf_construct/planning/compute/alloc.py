"""ggml-alloc's graph allocator replayed over a planned :class:`~.graph.Graph`: the bytes its buffer needs.

ggml_gallocr (ggml/src/ggml-alloc.c) gives every tensor of a graph an offset in a buffer (one per backend when
the scheduler has split the graph over devices: :class:`BufferedGraph`), walking the nodes in order: it
allocates each node (reusing a source's memory for ops that may run in place), then frees every source whose
last consumer this was. A dynamic allocator (ggml_dyn_tallocr) per buffer hands out the best-fitting free block
and records the highest offset reached: the buffer's size. The scheduler (ggml-backend.cpp) reserves several
graphs with the same allocator and grows each buffer to the largest it needed. This module repeats all of that,
decision for decision, so the size is exact and not an estimate: a re-implementation (ggml-alloc is C code
inside the llama.cpp build, with no Python binding that takes a graph that was never built).

The CPU buffer type (ggml-backend.cpp): alignment TENSOR_ALIGNMENT (``schema/memory.json``'s buffer alignment),
no maximum size, and the allocation size of a tensor is ggml_nbytes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field

from ..shape import memory_table
from .ggml_ir import INPLACE_OPS, GgmlTensor, Graph, refuse

__all__ = ["CPU_ALIGNMENT", "BufferedGraph", "DynAllocator", "buffer_chunks", "graph_bytes", "reserve_buffers", "reserve_bytes"]

CPU_ALIGNMENT = int(memory_table().buffer["alignment"])  # TENSOR_ALIGNMENT: the CPU buffer type's get_alignment
_SIZE_MAX = 2**64 - 1
_MAX_CHUNKS = 16  # GGML_VBUFFER_MAX_CHUNKS


def _align(n: int, alignment: int) -> int:
    return n + (-n % alignment)


@dataclass
class _Chunk:
    """A tallocr_chunk: free blocks as [offset, size], sorted by offset; the last one is the chunk's tail."""

    blocks: list[list[int]]
    max_size: int = 0


@dataclass
class DynAllocator:
    """ggml_dyn_tallocr: best fit among free blocks, growing the chunk's tail when none fits."""

    alignment: int = CPU_ALIGNMENT
    max_chunk_size: int = _SIZE_MAX // 2
    chunks: list[_Chunk] = field(default_factory=list)

    def _new_chunk(self, min_size: int) -> int:
        if len(self.chunks) >= _MAX_CHUNKS:
            raise refuse(f"ggml-alloc cannot place {min_size} bytes: its {_MAX_CHUNKS} buffers are full")
        size = max(min_size, self.max_chunk_size)
        if len(self.chunks) == _MAX_CHUNKS - 1:
            size = _SIZE_MAX // 2
        self.chunks.append(_Chunk([[0, size]]))
        return len(self.chunks) - 1

    def alloc(self, size: int) -> tuple[int, int]:
        """ggml_dyn_tallocr_alloc: (chunk, offset) for ``size`` bytes (rounded up to the alignment)."""
        size = _align(size, self.alignment)
        best_chunk = best_block = -1
        for c, chunk in enumerate(self.chunks):  # the best fit among the blocks before each chunk's tail
            best_size = _SIZE_MAX
            for i, (_, bsize) in enumerate(chunk.blocks[:-1]):
                if bsize >= size and bsize <= best_size:
                    best_chunk, best_block, best_size = c, i, bsize
        if best_block == -1:  # the tail of the chunk that grows least (or wastes least)
            best_reuse = -(2**63)
            for c, chunk in enumerate(self.chunks):
                if chunk.blocks:
                    offset, bsize = chunk.blocks[-1]
                    reuse = chunk.max_size - offset - size
                    better_reuse = best_reuse < 0 and reuse > best_reuse
                    better_fit = reuse >= 0 and reuse < best_reuse
                    if bsize >= size and (better_reuse or better_fit):
                        best_chunk, best_block, best_reuse = c, len(chunk.blocks) - 1, reuse
        if best_block == -1:
            best_chunk, best_block = self._new_chunk(size), 0
        chunk = self.chunks[best_chunk]
        block = chunk.blocks[best_block]
        offset = block[0]
        block[0] += size
        block[1] -= size
        if block[1] == 0:
            del chunk.blocks[best_block]
        chunk.max_size = max(chunk.max_size, offset + size)
        return best_chunk, offset

    def free(self, chunk_id: int, offset: int, size: int) -> None:
        """ggml_dyn_tallocr_free_bytes: return a block, merged with the free blocks it touches."""
        size = _align(size, self.alignment)
        blocks = self.chunks[chunk_id].blocks
        for i, block in enumerate(blocks):
            if block[0] + block[1] == offset:  # the freed bytes follow this block
                block[1] += size
                if i < len(blocks) - 1 and block[0] + block[1] == blocks[i + 1][0]:
                    block[1] += blocks[i + 1][1]
                    del blocks[i + 1]
                return
            if offset + size == block[0]:  # the freed bytes precede this block
                block[0] = offset
                block[1] += size
                if i > 0 and blocks[i - 1][0] + blocks[i - 1][1] == block[0]:
                    blocks[i - 1][1] += block[1]
                    del blocks[i]
                return
        pos = 0
        while pos < len(blocks) and blocks[pos][0] < offset:
            pos += 1
        blocks.insert(pos, [offset, size])

    @property
    def size(self) -> int:
        """The bytes the buffer needs: the sum of each chunk's highest offset."""
        return sum(c.max_size for c in self.chunks)

    @property
    def chunk_sizes(self) -> list[int]:
        return [c.max_size for c in self.chunks]


@dataclass
class _State:
    """ggml-alloc's hash_node for one tensor."""

    n_children: int = 0
    n_views: int = 0
    allocated: bool = False
    buffer: int = 0
    addr: tuple[int, int] = (0, 0)


def _same_layout(a: GgmlTensor, b: GgmlTensor) -> bool:
    return a.type == b.type and a.ne == b.ne and a.nb == b.nb


@dataclass
class BufferedGraph:
    """A graph as ggml_gallocr_reserve_n takes it from the scheduler (ggml-backend.cpp): its nodes and leafs, the
    buffer of each (one per backend), the sources the scheduler rewired to copies of tensors from another backend
    (by ``id`` of the node), and the tensors it flagged input and output (by ``id``: allocated first, never freed).
    The buffers have distinct buffer types (each device its own, the CPU its own), so none shares an allocator."""

    nodes: Sequence[GgmlTensor]
    leafs: Sequence[GgmlTensor]
    node_buffers: Sequence[int]
    leaf_buffers: Sequence[int]
    n_buffers: int = 1
    sources: Mapping[int, tuple[GgmlTensor, ...]] = field(default_factory=dict)
    kept: AbstractSet[int] = frozenset()

    @classmethod
    def of(cls, graph: Graph) -> BufferedGraph:
        """A graph whose every tensor is in one buffer (the CPU alone)."""
        return cls(graph.nodes, graph.leafs, [0] * len(graph.nodes), [0] * len(graph.leafs))


class _GraphAllocator:
    """ggml_gallocr_alloc_graph_impl: one dynamic allocator per buffer."""

    def __init__(self, allocs: Sequence[DynAllocator], graph: BufferedGraph) -> None:
        self.allocs = allocs
        self.state: dict[int, _State] = {}
        self.graph = graph
        self.sources = graph.sources
        self.kept = graph.kept

    def hn(self, t: GgmlTensor) -> _State:
        s = self.state.get(id(t))
        if s is None:
            s = self.state[id(t)] = _State()
        return s

    def src(self, t: GgmlTensor) -> tuple[GgmlTensor, ...]:
        return self.sources.get(id(t), t.src)

    def is_input(self, t: GgmlTensor) -> bool:
        return t.input or id(t) in self.kept

    def is_output(self, t: GgmlTensor) -> bool:
        return t.output or id(t) in self.kept

    def is_own(self, t: GgmlTensor) -> bool:
        return self.hn(t).allocated

    def is_allocated(self, t: GgmlTensor) -> bool:
        return t.external or self.is_own(t)

    def free_extra_space(self, node: GgmlTensor, parent: GgmlTensor) -> None:
        """The bytes a smaller in-place result leaves free at the end of its parent's block."""
        p = self.hn(parent)
        alloc = self.allocs[p.buffer]
        parent_size = _align(parent.nbytes, alloc.alignment)
        node_size = _align(node.nbytes, alloc.alignment)
        if parent_size > node_size:
            alloc.free(p.addr[0], p.addr[1] + node_size, parent_size - node_size)

    def allocate_node(self, node: GgmlTensor, buffer: int) -> None:
        hn = self.hn(node)
        if self.is_allocated(node) or node.is_view:
            return
        hn.allocated = True
        if node.op in INPLACE_OPS:
            for parent in self.src(node):
                if not self.is_own(parent):
                    continue  # external data cannot be reused
                if self.is_output(parent) or (parent.view_src is not None and self.is_output(parent.view_src)):
                    continue
                if not _same_layout(node, parent):
                    continue
                p = self.hn(parent)
                if p.n_children == 1 and p.n_views == 0:
                    if parent.view_src is not None:
                        root = parent.view_src
                        r = self.hn(root)
                        # (ggml also compares the data pointers, both unset while reserving)
                        if r.n_views == 1 and r.n_children == 0:
                            hn.buffer, hn.addr = p.buffer, p.addr
                            p.allocated = False
                            r.allocated = False
                            self.free_extra_space(node, root)
                            return
                    else:
                        hn.buffer, hn.addr = p.buffer, p.addr
                        p.allocated = False
                        self.free_extra_space(node, parent)
                        return
        hn.buffer = buffer
        hn.addr = self.allocs[buffer].alloc(node.nbytes)

    def free_node(self, node: GgmlTensor) -> None:
        if self.is_output(node):
            return
        hn = self.hn(node)
        self.allocs[hn.buffer].free(hn.addr[0], hn.addr[1], node.nbytes)
        hn.allocated = False

    def run(self) -> None:
        g = self.graph
        for leaf, buffer in zip(g.leafs, g.leaf_buffers, strict=True):
            self.allocate_node(leaf, buffer)
        for node, buffer in zip(g.nodes, g.node_buffers, strict=True):  # count children and views; inputs first
            if node.view_src is not None and node.op != "NONE":
                self.hn(node.view_src).n_views += 1
            if self.is_input(node):
                self.allocate_node(node, buffer)
            for src in self.src(node):
                self.hn(src).n_children += 1
                if self.is_input(src):
                    self.allocate_node(src, buffer)
        for node, buffer in zip(g.nodes, g.node_buffers, strict=True):
            sources = self.src(node)
            for parent in sources:
                self.allocate_node(parent, buffer)
            self.allocate_node(node, buffer)
            for parent in sources:
                p = self.hn(parent)
                p.n_children -= 1
                if p.n_children == 0 and p.n_views == 0:
                    if parent.view_src is not None:
                        root = parent.view_src
                        r = self.hn(root)
                        r.n_views -= 1
                        if r.n_views == 0 and r.n_children == 0 and r.allocated:
                            self.free_node(root)
                    elif p.allocated:
                        self.free_node(parent)


def buffer_chunks(graph: BufferedGraph, alignment: int = CPU_ALIGNMENT) -> list[list[int]]:
    """The chunk sizes ggml-alloc reserves in each buffer for ``graph`` alone."""
    allocs = [DynAllocator(alignment) for _ in range(graph.n_buffers)]
    _GraphAllocator(allocs, graph).run()
    return [a.chunk_sizes for a in allocs]


def graph_bytes(graph: Graph, alignment: int = CPU_ALIGNMENT) -> list[int]:
    """The chunk sizes ggml-alloc reserves for ``graph`` alone (one chunk on the CPU)."""
    return buffer_chunks(BufferedGraph.of(graph), alignment)[0]


def reserve_buffers(graphs: Iterable[BufferedGraph], alignment: int = CPU_ALIGNMENT) -> list[int]:
    """Each buffer's size after reserving ``graphs`` in turn (ggml_gallocr_reserve_n): a buffer is reallocated to
    the new chunk sizes when it has none yet or the new graph needs more in some chunk, so each buffer's result is
    the size of its last reallocation."""
    current: list[list[int] | None] = []
    seen: dict[int, list[list[int]]] = {}  # a graph reserved again (the prompt batch after the token batch) is sized once
    for graph in graphs:
        sizes = seen.get(id(graph)) or seen.setdefault(id(graph), buffer_chunks(graph, alignment))
        current += [None] * (len(sizes) - len(current))
        for b, new in enumerate(sizes):
            old = current[b]
            if old is None or any(n > (old[c] if c < len(old) else 0) for c, n in enumerate(new)):
                current[b] = new
    return [sum(c or ()) for c in current]


def reserve_bytes(graphs: Iterable[Graph], alignment: int = CPU_ALIGNMENT) -> int:
    """The CPU compute buffer after reserving ``graphs`` in turn, every tensor in one buffer."""
    buffered: dict[int, BufferedGraph] = {}
    return reserve_buffers((buffered.setdefault(id(g), BufferedGraph.of(g)) for g in graphs), alignment)[0]
