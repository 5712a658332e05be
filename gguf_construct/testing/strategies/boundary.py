"""GGUF files with one quantity a reader computes at a boundary of 32/63/64-bit arithmetic
(:mod:`gguf_construct.testing.boundaries`), as a hypothesis strategy.

``boundary_gguf()`` draws a :class:`~gguf_construct.testing.boundaries.BoundaryFile`: ``.data`` the bytes,
``.label`` the target (``tensor.padded_size@2^64+0:at``), ``.rule`` the rule our validator names for it.

``count_overrun_gguf()`` draws a valid file with one count or length set past what it holds, in place
(:mod:`gguf_construct.testing.overruns`): ``(label, bytes)``, the label naming the field and its new value.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from hypothesis import strategies as st

from ..boundaries import DEFAULT_BASE, BoundaryFile, FieldPlan, build_plan, make, targets
from ..overruns import count_overruns

__all__ = ["boundary_gguf", "count_overrun_gguf"]


def boundary_gguf(quantities: Sequence[str] | None = None) -> st.SearchStrategy[BoundaryFile]:
    """A file for a target of ``quantities`` (default: every quantity), the target drawn first so that hypothesis
    shrinks towards the first targets of the list."""
    pool = [t for t in targets(quantities) if make(t, random.Random(0)) is not None]
    return st.tuples(st.sampled_from(pool), st.randoms(use_true_random=False)).map(lambda p: _made(make(p[0], p[1])))


def _made(made: BoundaryFile | None) -> BoundaryFile:
    if made is None:  # pragma: no cover - the pool holds targets with a solution for any draw
        raise ValueError("a target without a solution")
    return made


def count_overrun_gguf(data: bytes | None = None) -> st.SearchStrategy[tuple[str, bytes]]:
    """``data`` (default: a small valid file with a string array, strings and two tensors) with one count or length
    set past what it holds: ``(label, bytes)``."""
    if data is None:
        from construct import Container

        kvs = [
            *DEFAULT_BASE.kvs(),
            Container(key="tokenizer.ggml.tokens", value_type="arr", value=Container(type="str", len=2, array=["a", "b"])),
        ]
        data = build_plan(FieldPlan(kvs, DEFAULT_BASE.tensors(), ""))
    pool = [(f"overrun {f.name} {f.present} -> {v}", patched) for f, v, patched in count_overruns(data)]
    if not pool:
        raise ValueError("count_overrun_gguf: not a GGUF file we parse")
    return st.sampled_from(pool)
