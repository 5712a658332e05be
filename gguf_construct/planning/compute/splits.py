"""ggml's backend scheduler over a planned graph: which backend runs each node, where the graph splits, which
tensors are copied between backends, and the graph the allocator then places in each backend's buffer.

``ggml_backend_sched_split_graph`` (ggml/src/ggml-backend.cpp) assigns every node of a graph to a backend
(devices first, in the model's device order, the CPU last) in passes:

1. pinned nodes keep their backend (llama.cpp pins a layer's "norm" to the layer's device); a tensor in a
   buffer, or a view of one, goes to that buffer's backend; a graph input to the CPU; an op reading a weight to
   the weight's backend (ROPE and FLASH_ATTN_EXT excepted);
2. devices' assignments spread to unassigned neighbours down then up the node list, skipping the CPU's; then
   every backend's, down then up;
3. a node still unassigned goes to the backend holding most of its sources (none is, with these backends);
4. the remaining sources take their view source's or their consumer's backend;
5. the nodes are cut into splits of consecutive nodes on one backend; a source on another backend whose buffer
   this one cannot read becomes a split input, copied into a tensor of the same layout in this backend's buffer
   (``n_copies`` of them with pipeline parallelism, flagged input and output: never freed);
6. with pipeline parallelism every graph input gets ``n_copies`` copies on its backend as well.

The allocator then walks the scheduler's graph copy: per split, each input's dependency and its copy, then the
split's nodes; with several copies, the input copies first as leafs. Every buffer type here is one backend's own
(each device's, the CPU's), no device runs an op in another's memory, and every backend runs every op: true of
the CPU and of RPC devices (an ``rpc-server`` serving the CPU backend), which the tests check against llama.cpp.
A CUDA device's scheduler also offloads large-batch ops whose weights are on the CPU (``offload_op``: the weight
is copied to the device for the batch) and its CPU buffer is pinned host memory: neither is modelled here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from .alloc import BufferedGraph
from .ggml_ir import GgmlTensor, Graph, dup_tensor_layout, refuse

__all__ = ["MAX_COPIES", "Placement", "schedule"]

#: GGML_SCHED_MAX_COPIES: the copies of each input with pipeline parallelism
MAX_COPIES = 4
_VIEW_OPS = frozenset({"VIEW", "RESHAPE", "PERMUTE", "TRANSPOSE"})  # ggml_is_view_op
_WEIGHT_BLIND_OPS = frozenset({"ROPE", "FLASH_ATTN_EXT"})  # their small weights do not choose their backend


@dataclass(frozen=True)
class Placement:
    """Where the graph's external tensors live and how the scheduler is set up.

    ``n_backends``: the devices and the CPU (the last). ``home(t)``: for an external tensor, the backend whose
    buffer holds it and whether it is a weight (a buffer of usage WEIGHTS; a KV cache or recurrent state is not);
    None for a tensor in no buffer. ``pin(layer)``: the backend llama.cpp pins a layer's norm to, or None (it pins
    only for batches under 32 tokens or with every layer offloaded). ``n_copies``: 1, or ``MAX_COPIES`` with
    pipeline parallelism."""

    n_backends: int
    home: Callable[[GgmlTensor], tuple[int, bool] | None]
    pin: Callable[[int], int | None]
    n_copies: int = 1


def schedule(graph: Graph, placement: Placement) -> BufferedGraph:
    """The scheduler's graph copy of ``graph`` with each node's and leaf's backend (its buffer), for the allocator."""
    return _Scheduler(graph, placement).run()


@dataclass
class _Split:
    """ggml_backend_sched_split: nodes ``start`` to ``end`` (views included) on one backend, and the sources from
    other backends it copies in."""

    backend: int
    start: int
    end: int = 0
    inputs: list[GgmlTensor] = field(default_factory=list)


class _Scheduler:
    """One ``ggml_backend_sched_split_graph`` over a graph (its own state: the graph itself is not changed)."""

    def __init__(self, graph: Graph, placement: Placement) -> None:
        self.graph, self.p = graph, placement
        self.cpu = placement.n_backends - 1
        self.ids: dict[int, int] = {}  # hv_tensor_backend_ids: id(tensor) -> backend
        self.copies: dict[tuple[int, int], list[GgmlTensor]] = {}  # (id(tensor), backend) -> its copies there
        self.sources: dict[int, tuple[GgmlTensor, ...]] = {}  # the node's sources after rewiring to copies
        self.kept: set[int] = set()  # tensors the scheduler flags input and output

    # -- ggml_backend_sched helpers ----------------------------------------------------------------------
    def get(self, t: GgmlTensor | None) -> int:
        return -1 if t is None else self.ids.get(id(t), -1)

    def buffer_backend(self, t: GgmlTensor) -> int:
        """ggml_backend_sched_backend_from_buffer: the backend of the buffer ``t`` (or its view source) is in."""
        home = self.p.home(t.view_src if t.view_src is not None else t)
        return -1 if home is None else home[0]

    def is_weight(self, t: GgmlTensor) -> bool:
        """A tensor in a weights buffer (a view of one has no buffer of its own while reserving)."""
        if t.view_src is not None:
            return False
        home = self.p.home(t)
        return home is not None and home[1]

    def buffer_supported(self, t: GgmlTensor, backend: int) -> bool:
        """ggml_backend_sched_buffer_supported: ``backend`` can read ``t`` where it is (or will be) allocated."""
        where = self.buffer_backend(t)
        if where == -1:
            where = self.get(t)
            if where == -1 and t.view_src is not None:
                where = self.get(t.view_src)
        return where == backend

    def from_cur(self, t: GgmlTensor) -> int:
        """ggml_backend_sched_backend_id_from_cur (pass 1)."""
        where = self.buffer_backend(t)
        if where != -1:
            return where
        if t.input:
            return self.cpu
        if t.op not in _WEIGHT_BLIND_OPS:
            for src in t.src:
                if self.is_weight(src):
                    return self.buffer_backend(src)
        return -1

    # -- the passes ----------------------------------------------------------------------------------------
    def assign(self) -> None:
        g, ids = self.graph, self.ids
        for node in g.nodes:  # the graph callback's pins, made while building (user assignments)
            if node.norm_of_layer is not None and (b := self.p.pin(node.norm_of_layer)) is not None:
                ids[id(node)] = b
        for t in (*g.leafs, *g.nodes):  # pass 1
            if id(t) not in ids:
                b = self.from_cur(t)
                if b != -1:
                    ids[id(t)] = b
        computed = [n for n in g.nodes if n.op not in _VIEW_OPS]
        for order, skip_cpu in ((computed, True), (computed[::-1], True), (computed, False), (computed[::-1], False)):  # pass 2
            cur = -1
            for node in order:
                b = ids.get(id(node), -1)
                if b != -1:
                    cur = -1 if skip_cpu and b == self.cpu else b
                elif cur != -1:
                    ids[id(node)] = cur
        for node in computed:  # pass 3: every backend supports every op, so the first with the most readable sources
            if id(node) not in ids:
                best, chosen = -1, -1
                for b in range(self.p.n_backends):
                    n = sum(1 for s in node.src if (self.get(s) != -1 or self.get(s.view_src) != -1) and self.buffer_supported(s, b))
                    if n > best:
                        best, chosen = n, b
                ids[id(node)] = chosen
        for node in g.nodes:  # pass 4
            if node.view_src is not None and id(node) not in ids and self.get(node.view_src) != -1:
                ids[id(node)] = self.get(node.view_src)
            for src in node.src:
                if id(src) not in ids:
                    b = self.get(src.view_src) if src.view_src is not None else self.get(node)
                    if b != -1:
                        ids[id(src)] = b
            if id(node) not in ids:
                ids[id(node)] = 0  # the first backend that supports the op

    def split(self) -> list[_Split]:
        """Pass 5: consecutive nodes on one backend, and the sources each split copies in."""
        nodes, ids = self.graph.nodes, self.ids
        first = next((i for i, n in enumerate(nodes) if n.op not in _VIEW_OPS), len(nodes))
        splits = [_Split(ids[id(nodes[first])] if first < len(nodes) else self.cpu, 0)]
        cur = splits[0].backend
        for i in range(first, len(nodes)):
            node = nodes[i]
            if node.op in _VIEW_OPS:
                continue
            backend = ids[id(node)]
            split = splits[-1]
            new = (
                backend == cur
                and bool(split.inputs)
                and any(self.is_weight(s) and self.get(s) != cur and not self.buffer_supported(s, cur) for s in node.src)
            )
            if backend != cur or new:
                split.end = i
                splits.append(_Split(backend, i))
                cur = backend
                split = splits[-1]
            rewired = list(node.src)
            for j, src in enumerate(node.src):
                src_backend = self.get(src)
                if src_backend == -1:
                    raise refuse(f"the scheduler left a source of {node!r} unassigned")
                if src_backend != cur and not self.buffer_supported(src, cur):
                    key = (id(src), cur)
                    if key not in self.copies:
                        self.copies[key] = [dup_tensor_layout(src, f"{src.name}#{cur}#{c}") for c in range(self.p.n_copies)]
                        if self.p.n_copies > 1:
                            self.kept.update(id(c) for c in self.copies[key])
                        split.inputs.append(src)
                    rewired[j] = self.copies[key][0]
            if rewired != list(node.src):
                self.sources[id(node)] = tuple(rewired)
        splits[-1].end = len(nodes)
        return splits

    def graph_inputs(self) -> list[GgmlTensor]:
        """Pass 6 (pipeline parallelism): every graph input, with ``n_copies`` copies on its backend (the input
        itself the first), all kept."""
        inputs = [leaf for leaf in self.graph.leafs if leaf.input]
        for leaf in inputs:
            key = (id(leaf), self.get(leaf))
            if key not in self.copies:
                self.copies[key] = [leaf] + [dup_tensor_layout(leaf, f"{leaf.name}#{c}") for c in range(1, self.p.n_copies)]
                self.kept.update(id(c) for c in self.copies[key])
        return inputs

    def run(self) -> BufferedGraph:
        self.assign()
        splits = self.split()
        graph_inputs = self.graph_inputs() if self.p.n_copies > 1 else []
        nodes: list[GgmlTensor] = []
        node_ids: list[int] = []
        for split in splits:
            for src in split.inputs:
                dependency = GgmlTensor(src.type, src.ne, src.nb, src=(src,), view_src=src.view_src or src, name=f"{src.name} dep")
                nodes += [dependency, self.copies[(id(src), split.backend)][0]]
                node_ids += [self.get(src), split.backend]
            for i in range(split.start, split.end):
                nodes.append(self.graph.nodes[i])
                node_ids.append(self.ids[id(self.graph.nodes[i])])
        leafs: list[GgmlTensor] = []
        leaf_ids: list[int] = []
        if self.p.n_copies > 1:
            for leaf in graph_inputs:
                leafs += self.copies[(id(leaf), self.get(leaf))]
                leaf_ids += [self.get(leaf)] * self.p.n_copies
            for split in splits:
                for src in split.inputs:
                    leafs += self.copies[(id(src), split.backend)]
                    leaf_ids += [split.backend] * self.p.n_copies
        leafs += self.graph.leafs
        leaf_ids += [self.get(leaf) for leaf in self.graph.leafs]
        for leaf, backend in zip(leafs, leaf_ids, strict=True):
            if backend == -1 and not leaf.external:  # ggml asserts a buffer for every leaf it allocates
                raise refuse(f"the scheduler left {leaf!r} on no backend")
        return BufferedGraph(nodes, leafs, node_ids, leaf_ids, self.p.n_backends, self.sources, frozenset(self.kept))
