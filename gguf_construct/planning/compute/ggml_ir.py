"""A small graph IR for planning llama.cpp's compute buffer: ggml tensors with type, shape, strides and views.

The compute buffer is what ggml-alloc needs to hold the intermediate tensors of the graphs llama.cpp reserves.
That depends only on each tensor's byte size, on which tensors are views of which, on which may be computed in
place, and on the order ggml visits them: so this IR records exactly those, and :mod:`.alloc` replays
ggml-alloc over it.

Writing an architecture's graph
-------------------------------
Mirror llama.cpp's C++ (``src/models/<arch>.cpp`` and the ``build_*`` helpers of ``src/llama-graph.cpp``) call
for call, with a :class:`Ggml` in place of the ``ggml_context``::

    g = Ggml()
    tokens = g.input("i32", n_tokens)                 # ggml_new_tensor_1d + ggml_set_input
    tok_embd = g.weight("f16", n_embd, n_vocab)       # a model tensor: its memory is not in the compute buffer
    cur = g.get_rows(tok_embd, tokens)
    g.expand(cur)                                     # ggml_build_forward_expand
    ...
    g.expand(g.mul_mat(output, cur), output=True)    # result tensors are flagged outputs (never freed)

Every constructor returns a :class:`GgmlTensor` computed as ggml computes it (ggml/src/ggml.c): its result type and
``ne``, contiguous strides for new tensors, the source's strides for views (``view_*``, ``reshape_*``,
``permute``, ``transpose``, ``cpy``, ``set_rows`` and the ``*_inplace`` variants are views and take no memory
of their own). Build the graph in the same order as llama.cpp, including every ``ggml_build_forward_expand``
it makes: the node order decides which freed block a later tensor reuses. Shapes alone need no weight data, so
a weight's type only matters for ``get_rows`` of integer tables; a KV cache tensor is :meth:`Ggml.external`.
:class:`Graph` then holds the nodes and leafs in ggml's order (a depth-first visit of the sources,
``ggml_visit_parents_graph``); compare it with llama.cpp's own graph with :meth:`Graph.summary`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from ...core import rules
from ...core.tables import GGML_TYPES
from ...errors import ShapeError
from ...formats.gguf.offsets import ggml_nbytes

__all__ = ["INPLACE_OPS", "Ggml", "Graph", "GgmlTensor", "refuse", "row_size"]


def refuse(message: str) -> ShapeError:
    """An operation ggml would refuse (its GGML_ASSERT on the sources' shapes fails): the model's tensors and
    hyperparameters do not fit together, and llama.cpp would abort building the graph (rule ``plan.model``)."""
    return ShapeError(rules.PLAN_MODEL.id, message)


# ggml-alloc.c ggml_op_can_inplace: the ops whose result may take a source's memory; GGML_OP_UNARY is every
# unary op, named by ggml_op_desc after the unary op (ggml.c GGML_UNARY_OP_NAME). The list is the llama.cpp build's
# (its libggml-base exports ggml_op_can_inplace: tests compare), which has CLAMP where older ggml did not.
_UNARY_OPS = frozenset(
    [
        "ABS",
        "SGN",
        "NEG",
        "STEP",
        "TANH",
        "ELU",
        "RELU",
        "SIGMOID",
        "GELU",
        "GELU_QUICK",
        "SILU",
        "HARDSWISH",
        "HARDSIGMOID",
        "EXP",
        "EXPM1",
        "SOFTPLUS",
        "GELU_ERF",
        "XIELU",
        "FLOOR",
        "CEIL",
        "ROUND",
        "TRUNC",
    ]
)
INPLACE_OPS = (
    frozenset(
        [
            "FILL",
            "CLAMP",
            "SCALE",
            "DIAG_MASK_ZERO",
            "DIAG_MASK_INF",
            "ADD",
            "ADD_ID",
            "ADD1",
            "SUB",
            "MUL",
            "DIV",
            "SQR",
            "SQRT",
            "LOG",
            "ROPE",
            "ROPE_BACK",
            "SILU_BACK",
            "RMS_NORM",
            "RMS_NORM_BACK",
            "SOFT_MAX",
            "SOFT_MAX_BACK",
        ]
    )
    | _UNARY_OPS
)

Shape = tuple[int, int, int, int]


def row_size(ggml_type: str, ne0: int) -> int:
    """ggml_row_size: the bytes of ``ne0`` values of ``ggml_type`` (whole blocks)."""
    return GGML_TYPES.lookup(ggml_type).nbytes(ne0)


def _contiguous(ggml_type: str, ne: Shape) -> Shape:
    t = GGML_TYPES.lookup(ggml_type)
    nb0, nb1 = t.type_size, row_size(ggml_type, ne[0])
    return (nb0, nb1, nb1 * ne[1], nb1 * ne[1] * ne[2])


def _require(ok: bool, op: str, *tensors: GgmlTensor) -> None:
    if not ok:
        shapes = ", ".join(f"{t.name or t.op}{list(t.ne)}" for t in tensors)
        raise refuse(f"ggml_{op.lower()} refuses these sources: {shapes}")


def _divides(d: int, n: int) -> bool:
    return d > 0 and n % d == 0


def _can_repeat(t0: GgmlTensor, t1: GgmlTensor) -> bool:
    """ggml_can_repeat: ``t0`` tiles ``t1`` (every dimension of t1 a multiple of t0's)."""
    if 0 in t0.ne:
        return 0 in t1.ne
    return all(_divides(a, b) for a, b in zip(t0.ne, t1.ne, strict=True))


def _can_mul_mat(t0: GgmlTensor, t1: GgmlTensor) -> bool:
    return t0.ne[0] == t1.ne[0] and _divides(t0.ne[2], t1.ne[2]) and _divides(t0.ne[3], t1.ne[3])


def _nelements(t: GgmlTensor) -> int:
    return t.ne[0] * t.ne[1] * t.ne[2] * t.ne[3]


def _shape(dims: Sequence[int]) -> Shape:
    if not 1 <= len(dims) <= 4:
        raise refuse(f"a ggml tensor has 1 to 4 dimensions, not {len(dims)}")
    ne = [int(d) for d in dims] + [1] * (4 - len(dims))
    if any(d < 0 for d in ne):
        raise refuse(f"a ggml tensor cannot have a negative dimension: {ne}")
    return (ne[0], ne[1], ne[2], ne[3])


@dataclass(eq=False)
class GgmlTensor:
    """One ggml tensor of a graph: what ggml-alloc reads of it.

    ``op`` is ggml_op_desc's name ("MUL_MAT", "SILU" for a unary op, "SWIGLU" for a glu op, "NONE" for a leaf).
    ``view_src`` is the tensor whose memory a view uses (always the root: ggml resolves views of views) at
    ``view_offs``. ``external``: the memory lives outside the compute buffer (a weight or the KV cache).
    ``norm_of_layer``: the normalisation of layer N's norm weights (llama.cpp's graph callback names it "norm" of
    layer N, and pins it to that layer's device: ``llama_context::graph_get_cb``); None for every other tensor.
    """

    type: str
    ne: Shape
    nb: Shape
    op: str = "NONE"
    src: tuple[GgmlTensor, ...] = ()
    view_src: GgmlTensor | None = None
    view_offs: int = 0
    name: str = ""
    input: bool = False
    output: bool = False
    external: bool = False
    norm_of_layer: int | None = None

    @property
    def is_view(self) -> bool:
        return self.view_src is not None

    @property
    def nbytes(self) -> int:
        """ggml_nbytes of this tensor (for a contiguous one: its row size times the other dimensions)."""
        if self.is_view:  # a view's strides need not be contiguous
            return _strided_nbytes(self.type, self.ne, self.nb)
        return ggml_nbytes(self.ne, self.type)

    @property
    def contiguous(self) -> bool:
        return self.nb == _contiguous(self.type, self.ne)

    def __repr__(self) -> str:  # the default would recurse through every source
        view = f" view of {self.view_src.name or self.view_src.op}" if self.view_src else ""
        return f"<{self.op} {self.name!r} {self.type}{list(self.ne)}{view}>"


def _strided_nbytes(ggml_type: str, ne: Shape, nb: Shape) -> int:
    """ggml_nbytes in general: the bytes from the first element to past the last, for any strides."""
    t = GGML_TYPES.lookup(ggml_type)
    if any(n <= 0 for n in ne):
        return 0
    if t.block_size == 1:
        return t.type_size + sum((n - 1) * b for n, b in zip(ne, nb, strict=True))
    return ne[0] * nb[0] // t.block_size + sum((n - 1) * b for n, b in zip(ne[1:], nb[1:], strict=True))


class _LayoutCopy(GgmlTensor):
    """A tensor with another's strides but memory of its own: its bytes follow the strides."""

    @property
    def nbytes(self) -> int:
        return _strided_nbytes(self.type, self.ne, self.nb)


def dup_tensor_layout(t: GgmlTensor, name: str = "") -> GgmlTensor:
    """ggml_dup_tensor_layout: a new tensor of ``t``'s type, shape and strides (the scheduler's copy of a tensor
    another backend computed)."""
    return _LayoutCopy(t.type, t.ne, t.nb, name=name)


@dataclass
class Graph:
    """A ggml_cgraph: the computed tensors (``nodes``) and the constants and inputs (``leafs``) in ggml's order."""

    nodes: list[GgmlTensor] = field(default_factory=list)
    leafs: list[GgmlTensor] = field(default_factory=list)
    _visited: set[int] = field(default_factory=set, repr=False)

    def expand(self, tensor: GgmlTensor) -> None:
        """ggml_build_forward_expand: add ``tensor`` and every source not yet in the graph, sources first (in
        source order), leafs (op NONE) to ``leafs``; iterative so a deep graph cannot exhaust the stack."""
        stack: list[tuple[GgmlTensor, int]] = [(tensor, 0)]
        if id(tensor) in self._visited:
            return
        self._visited.add(id(tensor))
        while stack:
            t, i = stack.pop()
            if i < len(t.src):
                stack.append((t, i + 1))
                s = t.src[i]
                if id(s) not in self._visited:
                    self._visited.add(id(s))
                    stack.append((s, 0))
                continue
            (self.leafs if t.op == "NONE" else self.nodes).append(t)

    def summary(self) -> list[tuple[str, str, Shape, bool]]:
        """Each node's op, type, shape and whether it is a view: what a planned graph must share with
        llama.cpp's for the allocation to be the same."""
        return [(n.op, n.type, n.ne, n.is_view) for n in self.nodes]


class Ggml:
    """The ggml operations llama.cpp's graphs use, building :class:`GgmlTensor` objects and a :class:`Graph`.

    Method names and argument orders follow ggml.h (``mul_mat(a, b)`` is ``ggml_mul_mat(ctx, a, b)``); operation
    parameters that do not change a shape (eps, scales, rope settings) are left out.
    """

    def __init__(self) -> None:
        self.graph = Graph()

    # -- tensors that are not computed -------------------------------------------------------------------
    def new_tensor(self, ggml_type: str, *dims: int, op: str = "NONE", src: Iterable[GgmlTensor] = (), name: str = "") -> GgmlTensor:
        ne = _shape(dims)
        return GgmlTensor(ggml_type, ne, _contiguous(ggml_type, ne), op, tuple(src), name=name)

    def input(self, ggml_type: str, *dims: int, name: str = "") -> GgmlTensor:
        """ggml_new_tensor_Nd + ggml_set_input: an input llama.cpp fills per batch (in the compute buffer)."""
        t = self.new_tensor(ggml_type, *dims, name=name)
        t.input = True
        return t

    def external(self, ggml_type: str, *dims: int, name: str = "") -> GgmlTensor:
        """A tensor whose memory is outside the compute buffer: a model weight, a KV cache layer."""
        t = self.new_tensor(ggml_type, *dims, name=name)
        t.external = True
        return t

    weight = external

    def expand(self, t: GgmlTensor, *, output: bool = False) -> GgmlTensor:
        """ggml_build_forward_expand; ``output`` also flags it (ggml_set_output: its memory is never reused)."""
        if output:
            t.output = True
        self.graph.expand(t)
        return t

    # -- views -------------------------------------------------------------------------------------------
    def _view(self, a: GgmlTensor, ne: Shape, nb: Shape, offs: int, op: str) -> GgmlTensor:
        root, offs = (a.view_src, offs + a.view_offs) if a.view_src is not None else (a, offs)
        return GgmlTensor(a.type, ne, nb, op, (a,), root, offs, name=a.name)

    def view_tensor(self, a: GgmlTensor, op: str) -> GgmlTensor:
        """ggml_view_tensor: same shape and strides as ``a``, sharing its memory (the result of in-place ops)."""
        return self._view(a, a.ne, a.nb, 0, op)

    def view(self, a: GgmlTensor, *dims: int, nb: Sequence[int] = (), offset: int = 0) -> GgmlTensor:
        """ggml_view_1d..4d: ``dims`` elements with strides ``nb`` (nb1, nb2, nb3 as given, the rest derived)."""
        ne = _shape(dims)
        t = GGML_TYPES.lookup(a.type)
        strides = [t.type_size, *nb]
        for i in range(len(strides), 4):
            strides.append(strides[i - 1] * ne[i - 1])
        if len(dims) == 1:
            strides = list(_contiguous(a.type, ne))
        root_offs = offset + (a.view_offs if a.view_src is not None else 0)
        size = row_size(a.type, ne[0]) * ne[1] * ne[2] * ne[3]
        _require(size == 0 or size + root_offs <= (a.view_src or a).nbytes, "VIEW", a)
        return self._view(a, ne, (strides[0], strides[1], strides[2], strides[3]), offset, "VIEW")

    def reshape(self, a: GgmlTensor, *dims: int) -> GgmlTensor:
        """ggml_reshape_1d..4d (``a`` must be contiguous)."""
        ne = _shape(dims)
        _require(a.contiguous and _nelements(a) == ne[0] * ne[1] * ne[2] * ne[3], "RESHAPE", a)
        return self._view(a, ne, _contiguous(a.type, ne), 0, "RESHAPE")

    def permute(self, a: GgmlTensor, *axes: int) -> GgmlTensor:
        ne, nb = [0] * 4, [0] * 4
        for i, ax in enumerate(axes):
            ne[ax], nb[ax] = a.ne[i], a.nb[i]
        return self._view(a, (ne[0], ne[1], ne[2], ne[3]), (nb[0], nb[1], nb[2], nb[3]), 0, "PERMUTE")

    def transpose(self, a: GgmlTensor) -> GgmlTensor:
        return self._view(a, (a.ne[1], a.ne[0], a.ne[2], a.ne[3]), (a.nb[1], a.nb[0], a.nb[2], a.nb[3]), 0, "TRANSPOSE")

    # -- computed tensors --------------------------------------------------------------------------------
    def _op(self, op: str, ggml_type: str, ne: Sequence[int], *src: GgmlTensor | None) -> GgmlTensor:
        return self.new_tensor(ggml_type, *ne, op=op, src=[s for s in src if s is not None])

    def _unary_like(self, op: str, a: GgmlTensor, *src: GgmlTensor | None, inplace: bool = False) -> GgmlTensor:
        if inplace:
            t = self.view_tensor(a, op)
            t.src = tuple(s for s in (a, *src) if s is not None)
            return t
        return self._op(op, a.type, a.ne, a, *src)

    def dup(self, op: str, a: GgmlTensor, *src: GgmlTensor | None) -> GgmlTensor:
        """An op whose result is ggml_dup_tensor(a) (same type and shape, contiguous): for ops not listed here."""
        return self._op(op, a.type, a.ne, a, *src)

    def _binary(self, op: str, a: GgmlTensor, b: GgmlTensor, inplace: bool) -> GgmlTensor:
        _require(_can_repeat(b, a), op, a, b)  # b is broadcast over a
        return self._unary_like(op, a, b, inplace=inplace)

    def add(self, a: GgmlTensor, b: GgmlTensor, inplace: bool = False) -> GgmlTensor:
        return self._binary("ADD", a, b, inplace)

    def mul(self, a: GgmlTensor, b: GgmlTensor, inplace: bool = False) -> GgmlTensor:
        return self._binary("MUL", a, b, inplace)

    def div(self, a: GgmlTensor, b: GgmlTensor, inplace: bool = False) -> GgmlTensor:
        return self._binary("DIV", a, b, inplace)

    def scale(self, a: GgmlTensor, inplace: bool = False) -> GgmlTensor:
        return self._unary_like("SCALE", a, inplace=inplace)

    def rms_norm(self, a: GgmlTensor, inplace: bool = False) -> GgmlTensor:
        return self._unary_like("RMS_NORM", a, inplace=inplace)

    def norm(self, a: GgmlTensor) -> GgmlTensor:
        return self._op("NORM", a.type, a.ne, a)

    def unary(self, name: str, a: GgmlTensor, inplace: bool = False) -> GgmlTensor:
        """ggml_silu, ggml_gelu, ggml_tanh, ... by their ggml_unary_op name ("SILU", "GELU", "TANH")."""
        return self._unary_like(name, a, inplace=inplace)

    def clamp(self, a: GgmlTensor) -> GgmlTensor:
        """ggml_clamp: a new tensor in the llama.cpp build the plan follows (its reserved graphs have no view
        there), though older ggml.c made it a view of ``a``; ggml-alloc may run it in place (INPLACE_OPS)."""
        return self._op("CLAMP", a.type, a.ne, a)

    def rope(self, a: GgmlTensor, pos: GgmlTensor, freq_factors: GgmlTensor | None = None, inplace: bool = False) -> GgmlTensor:
        """ggml_rope_ext (and ggml_rope_multi): same shape as ``a``; one position per token (four with mrope)."""
        _require(pos.type == "i32" and pos.ne[1:] == (1, 1, 1) and pos.ne[0] in (a.ne[2], 4 * a.ne[2]), "ROPE", a, pos)
        return self._unary_like("ROPE", a, pos, freq_factors, inplace=inplace)

    def soft_max_ext(
        self, a: GgmlTensor, mask: GgmlTensor | None = None, sinks: GgmlTensor | None = None, inplace: bool = False
    ) -> GgmlTensor:
        if mask is not None:
            ok = mask.ne[0] == a.ne[0] and mask.ne[1] >= a.ne[1] and _divides(mask.ne[2], a.ne[2]) and _divides(mask.ne[3], a.ne[3])
            _require(ok, "SOFT_MAX", a, mask)
        return self._unary_like("SOFT_MAX", a, mask, sinks, inplace=inplace)

    def mul_mat(self, a: GgmlTensor, b: GgmlTensor) -> GgmlTensor:
        _require(_can_mul_mat(a, b), "MUL_MAT", a, b)
        return self._op("MUL_MAT", "f32", (a.ne[1], b.ne[1], b.ne[2], b.ne[3]), a, b)

    def mul_mat_id(self, a: GgmlTensor, b: GgmlTensor, ids: GgmlTensor) -> GgmlTensor:
        ok = a.ne[3] == 1 and b.ne[3] == 1 and ids.ne[2:] == (1, 1) and ids.ne[1] == b.ne[2] and a.ne[0] == b.ne[0]
        _require(ok and _divides(b.ne[1], ids.ne[0]), "MUL_MAT_ID", a, b, ids)
        return self._op("MUL_MAT_ID", "f32", (a.ne[1], ids.ne[0], b.ne[2], 1), a, b, ids)

    def get_rows(self, a: GgmlTensor, b: GgmlTensor) -> GgmlTensor:
        _require(a.ne[2] == b.ne[1] and a.ne[3] == b.ne[2] and b.ne[3] == 1 and b.type == "i32", "GET_ROWS", a, b)
        return self._op("GET_ROWS", "i32" if a.type == "i32" else "f32", (a.ne[0], b.ne[0], b.ne[1], b.ne[2]), a, b)

    def set_rows(self, a: GgmlTensor, b: GgmlTensor, c: GgmlTensor) -> GgmlTensor:
        """ggml_set_rows: writes rows of ``b`` into ``a`` at ``c``; the result is a view of ``a``."""
        ok = a.ne[0] == b.ne[0] and a.ne[2] == b.ne[2] and a.ne[3] == b.ne[3] and b.ne[1] == c.ne[0]
        _require(ok and _divides(c.ne[1], b.ne[2]) and _divides(c.ne[2], b.ne[3]) and c.ne[3] == 1, "SET_ROWS", a, b, c)
        t = self.view_tensor(a, "SET_ROWS")
        t.src = (b, c, a)
        return t

    def cpy(self, a: GgmlTensor, b: GgmlTensor) -> GgmlTensor:
        """ggml_cpy: ``a`` copied into ``b``; the result is a view of ``b``."""
        _require(_nelements(a) == _nelements(b), "CPY", a, b)
        t = self.view_tensor(b, "CPY")
        t.src = (a, b)
        return t

    def cont(self, a: GgmlTensor, *dims: int) -> GgmlTensor:
        """ggml_cont / ggml_cont_2d..4d: a contiguous copy (reshaped to ``dims`` when given)."""
        _require(not dims or _nelements(a) == _nelements(self.new_tensor(a.type, *dims)), "CONT", a)
        return self._op("CONT", a.type, dims or a.ne, a)

    def cast(self, a: GgmlTensor, ggml_type: str) -> GgmlTensor:
        """ggml_cast: a CPY into a new tensor that is its own second source (ggml.c)."""
        t = self._op("CPY", ggml_type, a.ne, a)
        t.src = (a, t)
        return t

    def concat(self, a: GgmlTensor, b: GgmlTensor, dim: int) -> GgmlTensor:
        _require(a.type == b.type and all(a.ne[d] == b.ne[d] for d in range(4) if d != dim), "CONCAT", a, b)
        ne = [a.ne[d] + b.ne[d] if d == dim else a.ne[d] for d in range(4)]
        return self._op("CONCAT", a.type, ne, a, b)

    def glu_split(self, name: str, a: GgmlTensor, b: GgmlTensor) -> GgmlTensor:
        """ggml_swiglu_split / ggml_geglu_split / ...: ``name`` is the glu op ("SWIGLU", "GEGLU")."""
        _require(a.ne == b.ne and a.type == b.type, name, a, b)
        return self._op(name, a.type, a.ne, a, b)

    def glu(self, name: str, a: GgmlTensor) -> GgmlTensor:
        """ggml_swiglu / ggml_geglu on one tensor holding both halves: half the first dimension."""
        return self._op(name, a.type, (a.ne[0] // 2, a.ne[1], a.ne[2], a.ne[3]), a)

    def flash_attn_ext(
        self, q: GgmlTensor, k: GgmlTensor, v: GgmlTensor, mask: GgmlTensor | None, sinks: GgmlTensor | None = None
    ) -> GgmlTensor:
        ok = _can_mul_mat(k, q) and q.ne[3] == k.ne[3] == v.ne[3] and k.ne[1] == v.ne[1]
        if mask is not None:
            ok = ok and mask.ne[1] >= q.ne[1] and _divides(mask.ne[2], q.ne[2]) and _divides(mask.ne[3], q.ne[3])
        _require(ok, "FLASH_ATTN_EXT", q, k, v)
        return self._op("FLASH_ATTN_EXT", "f32", (v.ne[0], q.ne[2], q.ne[1], q.ne[3]), q, k, v, mask, sinks)

    def sum_rows(self, a: GgmlTensor) -> GgmlTensor:
        return self._op("SUM_ROWS", a.type, (1, a.ne[1], a.ne[2], a.ne[3]), a)

    def top_k(self, a: GgmlTensor, k: int) -> GgmlTensor:
        """ggml_top_k: the indices of the ``k`` largest values of each row."""
        return self._op("TOP_K", "i32", (k, a.ne[1], a.ne[2], a.ne[3]), a)

    def argsort(self, a: GgmlTensor) -> GgmlTensor:
        return self._op("ARGSORT", "i32", a.ne, a)

    def repeat(self, a: GgmlTensor, b: GgmlTensor) -> GgmlTensor:
        """ggml_repeat: ``a`` tiled to ``b``'s shape; ``b`` only gives the shape (it is not a source)."""
        return self._op("REPEAT", a.type, b.ne, a)

    def pad(self, a: GgmlTensor, p0: int, p1: int = 0, p2: int = 0, p3: int = 0) -> GgmlTensor:
        return self._op("PAD", a.type, (a.ne[0] + p0, a.ne[1] + p1, a.ne[2] + p2, a.ne[3] + p3), a)
