"""LoRA adapters in the compute graph: the low-rank products llama.cpp adds beside each adapted weight.

With adapters set on a context (``llama_set_adapters_lora``, a scale other than 0), llama.cpp's graph builders
add, after each ``build_lora_mm(w, cur)`` whose weight an adapter has a pair for, ``scale(B x (A x cur))`` to
the product (``build_lora_mm_id`` does the same with MUL_MAT_ID for the experts' stacks), and ``build_inp_embd``
adds ``scale(B x get_rows(A, tokens))`` to the token rows (src/llama-graph.cpp). A weight multiplied with plain
``ggml_mul_mat`` takes no adapter. The context re-reserves its compute buffer from a new scheduler when its
adapters change (``sched_need_reserve``), so the buffer is that of the graphs with the adapters' nodes.

A weight with a scale tensor is scaled before the adapters' products are added (no tiny model has such a
weight: read from the source, not checked against llama.cpp).

The adapters the graph builders see are those of the plan being made (``applying``), as the llama.cpp build is
(``builds.following``): a context, not a parameter threaded through every graph builder.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

__all__ = ["LoraPair", "active", "applying", "pairs_for"]


@dataclass(frozen=True)
class LoraPair:
    """One adapted weight's A and B matrices: their types and ggml shapes (ne0 first)."""

    a_type: str
    a_shape: tuple[int, ...]
    b_type: str
    b_shape: tuple[int, ...]


#: per adapter applied (in order), its pairs by the base weight's name
_ACTIVE: ContextVar[tuple[Mapping[str, LoraPair], ...]] = ContextVar("lora_adapters", default=())


def active() -> tuple[Mapping[str, LoraPair], ...]:
    """The adapters applied to the graphs being planned, each as its pairs by base weight name."""
    return _ACTIVE.get()


def pairs_for(name: str) -> list[LoraPair]:
    """The pairs the applied adapters have for the base weight ``name``, one per adapter that adapts it."""
    return [pair for adapter in _ACTIVE.get() if (pair := adapter.get(name)) is not None]


@contextmanager
def applying(adapters: Sequence[Mapping[str, LoraPair]]) -> Iterator[None]:
    """Plan the compute graphs with ``adapters`` applied, inside the block (an adapter with scale 0 is not
    applied: llama.cpp leaves it out of the context's set)."""
    token = _ACTIVE.set(tuple(adapters))
    try:
        yield
    finally:
        _ACTIVE.reset(token)
